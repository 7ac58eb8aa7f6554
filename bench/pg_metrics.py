"""The metrics chain on PostgreSQL: one append of a restore's events, under the tenant's lock.

Run: ``.venv/bin/python bench/pg_metrics.py [--runs 200] [--url postgresql://...] [--json]``

A restore that inherits 15 pins appends 16 events (a ``confidence_decay_applied`` per pin, a
``session_restored``) while it holds its tenant's chain lock, so every other start of that
tenant waits for this append. It runs on a scratch database (created, then dropped) of the
local server; the floor is a whole ``python -c "import sqlite3"`` process timed in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from compare import floor_ms  # noqa: E402 - bench/compare.py, the shared floor
from cortex.services.metrics import MetricsWriter  # noqa: E402
from cortex.store import open_store  # noqa: E402

EVENTS = [
    (
        "confidence_decay_applied",
        "s1",
        {
            "memory_id": f"pin-{i}",
            "original_confidence": 0.9,
            "decayed_confidence": 0.8,
            "hours_elapsed": 12.0,
            "excluded": False,
        },
    )
    for i in range(15)
] + [("session_restored", "s1", {"from_session_ids": ["s0"], "pins_inherited": 15})]


def measure(url: str, runs: int) -> dict[str, float]:
    """Median and p95 of ``runs`` appends of ``EVENTS`` on a scratch database at ``url``."""
    import psycopg

    name = f"cortex_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        store = open_store(f"{url.rsplit('/', 1)[0]}/{name}")
        writer = MetricsWriter(store, b"k" * 32)
        for _ in range(20):  # warm: pool, prepared plans
            writer.append(EVENTS, "2026-02-16T09:00:00Z")
        samples = []
        for _ in range(runs):
            started = time.perf_counter()
            writer.append(EVENTS, "2026-02-16T09:00:00Z")
            samples.append((time.perf_counter() - started) * 1000)
        store.close()
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
    samples.sort()
    return {
        "median_ms": round(statistics.median(samples), 3),
        "p95_ms": round(samples[int(len(samples) * 0.95) - 1], 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1/postgres")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    floor = floor_ms()
    result = {**measure(args.url, args.runs), "floor_ms": round(floor, 2)}
    result["median_x_floor"] = round(result["median_ms"] / floor, 3)
    result["load"] = round(os.getloadavg()[0], 2)
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"{len(EVENTS)} events per append: median {result['median_ms']:.2f} ms "
            f"({result['median_x_floor']:.3f} floors), p95 {result['p95_ms']:.2f} ms; "
            f"floor {floor:.1f} ms, load {result['load']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
