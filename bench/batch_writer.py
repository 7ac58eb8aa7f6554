"""The team server's turn batch writer alone: ``write_batch`` called in this process's main
thread, one captured turn a batch (as a server's writer thread writes them one request at a
time), on a scratch PostgreSQL database; the thread's CPU time a turn, or a profile of it.

    .venv/bin/python bench/batch_writer.py                      # CPU a turn, 3 passes
    .venv/bin/python bench/batch_writer.py --profile            # cProfile on the thread's CPU
    PYTHONPATH=OTHER_TREE/src .venv/bin/python bench/batch_writer.py   # another tree

Instructions a turn, which a busy host disturbs least (``valgrind --tool=callgrind``; the
difference of a run of 300 turns and a run of none, both past the same warm-up)::

    valgrind --tool=callgrind --callgrind-out-file=cg.0 .venv/bin/python \
        bench/batch_writer.py --turns 0 --passes 1
    valgrind --tool=callgrind --callgrind-out-file=cg.300 .venv/bin/python \
        bench/batch_writer.py --turns 300 --passes 1

Each turn goes to the next of 100 open sessions of one tenant with a fresh request id and
the body the load test's agents send (``server_cpu._turn``). Needs PostgreSQL at
``CORTEX_TEST_POSTGRES_URL`` (or 127.0.0.1:5432); the scratch database is dropped at the end.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import secrets
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cortex.services.hosting import ServiceHost
from cortex.services.turn_batch import Turn, write_batch
from server_path import scratch_database

SESSIONS = 100
WARM_UP = 200
"""Turns written before anything is measured: every statement prepared, every cache full."""


def writer(url: str) -> tuple[ServiceHost, Callable[[int], None]]:
    """A host on ``url`` with a new tenant, a key and ``SESSIONS`` open sessions, and what
    writes turn ``i`` as a batch of its own."""
    host = ServiceHost(url, Path(tempfile.mkdtemp(prefix="cortex-bench-")), pool_size=4)
    tenant = f"bench-{secrets.token_hex(4)}"
    with host.registry() as app:
        app.tenants.create_tenant(tenant)
        key = app.tenants.create_key(tenant, "write")[1]
    with host.open(tenant) as app:
        ids = [app.sessions.on_session_start(project="api").session_id for _ in range(SESSIONS)]

    def turn(i: int) -> None:
        body = {"text": f"auth refactor turn {i}: rotate tokens", "categories": ["code"]}
        sent = Turn(key, ids[i % SESSIONS], f"turn-{i}-{time.time_ns()}", body)
        [(_, outcome)] = write_batch(host, [sent], lambda *_: None).settled()
        if isinstance(outcome, Exception):
            raise outcome

    return host, turn


def measure(url: str, turns: int, passes: int, profile: int) -> list[float]:
    """The thread's CPU ms a turn of each pass (with ``profile``, the profiler's included,
    and its ``profile`` top lines printed)."""
    host, turn = writer(url)
    try:
        for i in range(WARM_UP):
            turn(i)
        spent: list[float] = []
        profiler = cProfile.Profile(time.thread_time) if profile else None
        for n in range(passes):
            started = time.thread_time()
            if profiler is not None:
                profiler.enable()
            for i in range(turns):
                turn(WARM_UP + n * turns + i)
            if profiler is not None:
                profiler.disable()
            if turns:
                spent.append(round((time.thread_time() - started) * 1000 / turns, 3))
        if profiler is not None:
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(profile)
        return spent
    finally:
        host.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000, help="turns a pass (default 2000)")
    parser.add_argument("--passes", type=int, default=3, help="passes (default 3)")
    parser.add_argument(
        "--profile", type=int, nargs="?", const=50, default=0, help="print the N top lines"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    with scratch_database() as url:
        spent = measure(url, args.turns, args.passes, args.profile)
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"cpu_ms_a_turn": spent, "loadavg_1m": load}))
        return
    for figure in spent:
        print(f"the writer's CPU a turn: {figure:.3f} ms")
    print(f"load {load:.2f}")


if __name__ == "__main__":
    main()
