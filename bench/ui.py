"""The web dashboard's server time per page with 10,000 sessions and 100,000 memories stored.

    .venv/bin/python bench/ui.py                  # builds bench/results/ui-home/ once
    .venv/bin/python bench/ui.py --runs 30 --rebuild

The home is populated through the store and the services' batch paths (``save_session`` in
one transaction, ``MemoryService.add_many`` in batches of 1,000): 10,000 sessions over 50
projects and 90 days (each with 5 pins, 20 hot topics, 2 tasks, 3 events, chained to the one
before in its project, one in 200 crash-recovered), 100,000 memories. Each page is then
requested in-process through the dashboard's ASGI application (Starlette's test client, so a
figure includes the request's own handling but no network) ``--runs`` times; medians and p95
are printed and written to ``bench/results/ui.json`` with each median's ratio to the 200 ms
budget and to the floor (a whole ``python -c "import sqlite3"`` process, the median of seven
timed before the pages and seven after), with the load average. ``/health?check=1`` (the
integrity check and ``metrics verify``, which read the whole database) is measured too but is
an explicit button, not a page load.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from starlette.testclient import TestClient  # noqa: E402

from compare import floor_sample  # noqa: E402 - bench/compare.py: one floor process
from core import make_session  # noqa: E402 - bench/core.py: the realistic session record
from cortex.adapters.server.ui.local import COOKIE, install_token, local_app  # noqa: E402
from cortex.clock import FixedClock, to_iso  # noqa: E402
from cortex.config import load_config  # noqa: E402
from cortex.core.history_models import SessionEvent  # noqa: E402
from cortex.services.app import Services  # noqa: E402
from cortex.services.memory import NewMemory  # noqa: E402

RESULTS = ROOT / "bench" / "results"
NOW = "2026-03-01T09:00:00Z"
PROJECTS = [f"proj-{i:02d}" for i in range(50)]
BUDGET_MS = 200.0
WORDS = "deploy region cache queue auth token schema index shard replica backup".split()


def populate(home: Path, sessions: int, memories: int) -> None:
    clock = FixedClock(NOW)
    now = clock.now()
    rng = random.Random(20261123)
    with Services.open(load_config(home, {}), clock) as app:
        store = app.store
        last: dict[str, str] = {}
        with store.transaction():
            for i in range(sessions):
                project = PROJECTS[i % len(PROJECTS)]
                end = now - timedelta(hours=(sessions - i) * 90 * 24 / sessions)
                state = make_session(i, to_iso(end), project)
                state = replace(
                    state,
                    start_time=to_iso(end - timedelta(minutes=40)),
                    previous_session_id=last.get(project),
                    crash_recovered=i % 200 == 0,
                )
                store.save_session(state)
                if project in last:
                    store.mark_continued([last[project]], state.session_id, state.end_time or "")
                last[project] = state.session_id
                for k in range(3):
                    store.append_session_event(
                        SessionEvent(
                            f"e{i}-{k}",
                            state.session_id,
                            "user",
                            "message",
                            f"turn {k} about {rng.choice(WORDS)}",
                            12,
                            k,
                            True,
                            to_iso(end - timedelta(minutes=30 - k)),
                        )  # fmt: skip
                    )
        for start in range(0, memories, 1000):
            app.memory.add_many(
                NewMemory(
                    f"{rng.choice(WORDS)} note {n}: {rng.choice(WORDS)} uses {rng.choice(WORDS)}",
                    project=PROJECTS[n % len(PROJECTS)],
                )
                for n in range(start, min(start + 1000, memories))
            )


def measure(home: Path, runs: int) -> dict[str, dict[str, float]]:
    app = local_app(load_config(home, {}), FixedClock(NOW))
    client = TestClient(app, base_url="http://127.0.0.1")
    client.cookies.set(COOKIE, install_token(home))  # as the address `cortex ui` prints does
    with Services.open(load_config(home, {}), FixedClock(NOW)) as services:
        newest = services.sessions.list_sessions(limit=1)[0].session_id
        memory = services.memory.list(limit=1, all_projects=True)[0].id
    pages = {
        "sessions": "/sessions",
        "sessions, one project": f"/sessions?project={PROJECTS[7]}",
        "sessions, crashed": "/sessions?status=crashed",
        "session": f"/sessions/{newest}",
        "next start": f"/next?project={PROJECTS[3]}&keywords=deploy+cache",
        "memory list": "/memory",
        "memory search": "/memory?q=deploy+cache",
        "memory item": f"/memory/{memory}",
        "health": "/health",
        "health + verify (button)": "/health?check=1",
    }
    out = {}
    for name, path in pages.items():
        assert client.get(path).status_code == 200, path  # warm, and check it renders
        samples = []
        for _ in range(runs):
            started = time.perf_counter()
            response = client.get(path)
            samples.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200
        samples.sort()
        median = statistics.median(samples)
        out[name] = {
            "median_ms": round(median, 1),
            "p95_ms": round(samples[min(runs - 1, int(runs * 0.95))], 1),
            "ratio_to_budget": round(median / BUDGET_MS, 2),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args()
    home = RESULTS / f"ui-home-{args.sessions}-{args.memories}"
    if args.rebuild and home.exists():
        shutil.rmtree(home)
    if not (home / "brain.db").exists():
        started = time.perf_counter()
        populate(home, args.sessions, args.memories)
        print(f"populated {home} in {time.perf_counter() - started:.0f} s")
    load_before = os.getloadavg()
    floors = [floor_sample() for _ in range(7)]
    figures = measure(home, args.runs)
    floors += [floor_sample() for _ in range(7)]
    floor = statistics.median(floors)
    for row in figures.values():
        row["x_floor"] = round(row["median_ms"] / floor, 2)
    load = (load_before, os.getloadavg())
    print(
        f"floor (python -c 'import sqlite3'): {floor:.1f} ms; "
        f"load average {load[0][0]:.2f} -> {load[1][0]:.2f}"
    )
    print(f"{'page':28} {'median ms':>10} {'p95 ms':>8} {'/200 ms':>8} {'x floor':>8}")
    for name, row in figures.items():
        print(
            f"{name:28} {row['median_ms']:>10} {row['p95_ms']:>8} "
            f"{row['ratio_to_budget']:>8} {row['x_floor']:>8}"
        )
    RESULTS.mkdir(exist_ok=True)
    report = {
        "sessions": args.sessions,
        "memories": args.memories,
        "runs": args.runs,
        "floor_ms": round(floor, 2),
        "loadavg_before": load[0],
        "loadavg_after": load[1],
    }
    (RESULTS / "ui.json").write_text(json.dumps(report | {"pages": figures}, indent=2) + "\n")


if __name__ == "__main__":
    main()
