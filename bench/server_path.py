"""The team server's own cost per request, without HTTP: authenticate a key, open the tenant's
services, apply one idempotent turn (the work every captured turn does on a server), and a
session start the same way (key, request id, restore); and, where the tree has group commit,
turns captured in batches of ``--batch`` (each turn of another session, key and request id
checked as the server does), per turn.

Run: ``.venv/bin/python bench/server_path.py`` (``--runs N``; needs PostgreSQL at
``CORTEX_TEST_POSTGRES_URL`` or 127.0.0.1:5432). A scratch database is created and dropped.
Prints medians against a floor (a whole ``python -c "import sqlite3"`` process) timed in the
same run, so a figure can be compared across machines and loads, and the CPU per turn and
per start of this process and of the PostgreSQL backends serving it (read from ``/proc``:
the server must run on this machine), the figure a busy machine disturbs least. Run it with
``PYTHONPATH`` at another tree's ``src`` to measure that tree.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg

from compare import floor_ms  # bench/compare.py, the shared floor
from cortex.services.hosting import ServiceHost, apply_once

ADMIN_URL = os.environ.get(
    "CORTEX_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)

AHEAD: dict[str, Any] = (
    {"ahead": True} if "ahead" in inspect.signature(apply_once).parameters else {}
)
"""As the server's start and turn routes call it, in a tree whose claim can go ahead."""


def median_ms(action: Callable[[int], object], runs: int) -> float:
    samples = []
    for i in range(runs):
        started = time.perf_counter()
        action(i)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def measure(url: str, runs: int, batch: int) -> dict[str, float]:
    host = ServiceHost(
        url, Path(tempfile.mkdtemp(prefix="cortex-bench-")), pool_size=4, secret="bench-" + "0" * 32
    )
    try:
        with host.registry() as app:
            app.tenants.create_tenant("bench")
            key = app.tenants.create_key("bench", "write")[1]
        with host.open("bench") as app:
            sid = app.sessions.on_session_start(project="api").session_id

        def authorized() -> tuple[str, dict[str, Any]]:
            """The tenant, and ``apply_once``'s options, as the server's direct routes have
            them: where the tree can, a known key is checked with the first statement."""
            check = host.key_check(key, lambda _: None) if AHEAD else None
            if check is not None:
                return check.known[0], AHEAD | {"key": check}
            return host.authenticate(key)[0], AHEAD

        def turn(i: int) -> None:
            tenant, options = authorized()
            with host.open(tenant) as app:
                record = lambda: app.sessions.record(sid, text=f"auth refactor step {i}")  # noqa: E731
                apply_once(app, f"turn-{i}-{time.time_ns()}", record, **options)

        def start(i: int) -> None:
            tenant, options = authorized()
            with host.open(tenant) as app:
                begin = lambda: app.sessions.on_session_start(project="api")  # noqa: E731
                apply_once(app, f"start-{i}-{time.time_ns()}", begin, **options)

        for i in range(20):  # warm the pool and the code paths
            turn(i)
        figures = {
            "authenticate_ms": median_ms(lambda _: host.authenticate(key), runs),
            "turn_ms": median_ms(turn, runs),
            "start_ms": median_ms(start, max(20, runs // 4)),
        }
        for name, action, count in (("turn", turn, runs), ("start", start, max(20, runs // 4))):
            mine, database = cpu_ms(url, action, count)
            figures[f"{name}_cpu_ms"], figures[f"{name}_postgres_cpu_ms"] = mine, database
        figures["turn_round_trips"] = round_trips(turn, 20)
        figures["start_round_trips"] = round_trips(start, 20)
        figures |= batched(host, key, batch, max(5, runs // batch)) if batch > 1 else {}
        return figures
    finally:
        host.close()


def batched(host: ServiceHost, key: str, size: int, runs: int) -> dict[str, float]:
    """A batch of ``size`` turns (one per session), per turn: wall median, CPU here and in
    PostgreSQL; nothing when this tree has no group commit."""
    try:
        from cortex.services.turn_batch import Turn, capture_turns
    except ImportError:
        return {}
    with host.open("bench") as app:
        sessions = [app.sessions.on_session_start(project="api").session_id for _ in range(size)]

    def batch(i: int) -> None:
        turns = [
            Turn(key, sid, f"batch-{i}-{n}-{time.time_ns()}", {"text": f"auth refactor {i}"})
            for n, sid in enumerate(sessions)
        ]
        capture_turns(host, turns, lambda *_: None)

    batch(0)
    wall = median_ms(batch, runs) / size
    mine, database = cpu_ms(host.url, batch, runs)
    return {
        "batched_turn_ms": wall,
        "batched_turn_cpu_ms": mine / size,
        "batched_turn_postgres_cpu_ms": database / size,
    }


def round_trips(action: Callable[[int], object], runs: int) -> float:
    """Round trips to PostgreSQL per call of ``action`` (median), counted on its own pass,
    after the timed ones (see ``counted_round_trips``)."""
    counts: list[int] = []
    for i in range(runs):
        with counted_round_trips() as counted:
            action(10_000 + i)
        counts.append(counted[0])
    return statistics.median(counts)


@contextlib.contextmanager
def counted_round_trips() -> Iterator[list[int]]:
    """Round trips to PostgreSQL made in the block, in its list's one item: a statement run
    outside a pipeline is one, a pipeline (however many statements it sends) is one, and
    so is each sync of a pipeline before its end."""
    counted = [0]
    execute, pipeline = psycopg.Connection.execute, psycopg.Connection.pipeline
    sync = psycopg.Pipeline.sync

    def counted_sync(open_pipeline: Any) -> None:
        counted[0] += 1
        sync(open_pipeline)

    def counted_execute(conn: Any, *args: Any, **kwargs: Any) -> Any:
        counted[0] += getattr(conn, "_pipeline", None) is None
        return execute(conn, *args, **kwargs)

    @contextlib.contextmanager
    def counted_pipeline(conn: Any) -> Iterator[Any]:
        outermost = getattr(conn, "_pipeline", None) is None
        with pipeline(conn) as open_pipeline:
            yield open_pipeline
        counted[0] += outermost

    psycopg.Connection.execute = counted_execute  # type: ignore[method-assign,assignment]
    psycopg.Connection.pipeline = counted_pipeline  # type: ignore[method-assign,assignment]
    psycopg.Pipeline.sync = counted_sync  # type: ignore[method-assign]
    try:
        yield counted
    finally:
        psycopg.Connection.execute = execute  # type: ignore[method-assign]
        psycopg.Connection.pipeline = pipeline  # type: ignore[method-assign]
        psycopg.Pipeline.sync = sync  # type: ignore[method-assign]


def backends_cpu_s(url: str) -> float:
    """CPU seconds so far of the PostgreSQL backends connected to ``url``'s database."""
    tick = os.sysconf("SC_CLK_TCK")
    with psycopg.connect(url, autocommit=True) as conn:
        pids = [
            row[0]
            for row in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid()"
            )
        ]
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone, or a server on another machine: not counted
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def cpu_ms(url: str, action: Callable[[int], object], runs: int) -> tuple[float, float]:
    """CPU of ``action`` per call: this process's, and its database backends' (ms)."""
    database, mine = backends_cpu_s(url), time.process_time()
    for i in range(runs):
        action(i)
    mine, database = time.process_time() - mine, backends_cpu_s(url) - database
    return mine * 1000 / runs, database * 1000 / runs


@contextlib.contextmanager
def scratch_database() -> Iterator[str]:
    """The URL of a new database on ``ADMIN_URL``'s server, dropped when the block ends."""
    name = f"cortex_bench_{secrets.token_hex(4)}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
        try:
            yield ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
        finally:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--batch", type=int, default=20, help="turns per batch (1: none)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    with scratch_database() as url:
        figures = measure(url, args.runs, args.batch)
    figures["floor_ms"] = floor_ms(15)
    figures["loadavg_1m"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps({k: round(v, 3) for k, v in figures.items()}, indent=2))
        return
    floor = figures["floor_ms"]
    print(f"floor (python -c 'import sqlite3'): {floor:.1f} ms; load {figures['loadavg_1m']:.2f}")
    for label in ("authenticate_ms", "turn_ms", "start_ms"):
        value = figures[label]
        print(f"{label[:-3]:<13} median {value:6.2f} ms  ({value / floor:.3f} floors)")
    if "batched_turn_ms" in figures:
        value = figures["batched_turn_ms"]
        print(f"batched turn  median {value:6.2f} ms  ({value / floor:.3f} floors, per turn)")
    print(
        f"round trips: {figures['turn_round_trips']:g} per turn, "
        f"{figures['start_round_trips']:g} per start (key check included)"
    )
    for name in ("turn", "start", "batched_turn"):
        if f"{name}_cpu_ms" not in figures:
            continue
        mine, database = figures[f"{name}_cpu_ms"], figures[f"{name}_postgres_cpu_ms"]
        print(f"{name:<13} CPU {mine:6.2f} ms here, {database:6.2f} ms in PostgreSQL's backends")


if __name__ == "__main__":
    main()
