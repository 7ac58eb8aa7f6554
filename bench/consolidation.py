"""Consolidation at scale: one run over a full batch of memories in a SQLite file on disk.

    .venv/bin/python bench/consolidation.py                 # 20,000 memories, batch 2,000
    .venv/bin/python bench/consolidation.py --count 100000 --batch 5000

Builds ``--count`` synthetic memories (seeded) in one project: a third are near-duplicates of
another memory (case, punctuation and a word changed), a tenth restate a fact with another
number (a changed value), some explicit. Measures, in-process, a shadow run and then an applied
run over the newest ``--batch`` memories (extraction off), and reports each as milliseconds and
as a ratio to the floor timed in the same run (``python -c "import sqlite3"``), with the run's
counts. Writes ``bench/results/consolidation.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from compare import floor_ms  # noqa: E402 - bench/compare.py, the shared floor
from cortex.clock import FixedClock  # noqa: E402
from cortex.config import load_config  # noqa: E402
from cortex.services.app import Services  # noqa: E402
from cortex.services.memory import NewMemory  # noqa: E402

SEED = 20261123
SUBJECTS = "api web worker cache queue auth billing search deploy metrics".split()
TOPICS = "timeout retries port region pool size version owner schedule limit".split()


def corpus(count: int) -> list[NewMemory]:
    rng = random.Random(SEED)
    items: list[NewMemory] = []
    for n in range(count):
        roll = rng.random()
        if items and roll < 0.33:  # a near duplicate of an earlier memory
            base = rng.choice(items).content
            text = base.upper() + "!" if rng.random() < 0.5 else f"The {base.lower()}."
        elif items and roll < 0.43:  # the same fact with another number
            base = rng.choice(items).content
            text = " ".join(w if not w.isdigit() else str(int(w) + 1) for w in base.split())
        else:
            s, t, u = rng.choice(SUBJECTS), rng.choice(TOPICS), rng.choice(TOPICS)
            text = f"The {s} {t} for {u} {n} is {rng.randint(1, 500)}"
        intent = "explicit" if rng.random() < 0.1 else "implicit"
        items.append(NewMemory(text, project="bench", remember_intent=intent))
    return items


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=2_000)
    args = parser.parse_args()
    floor = floor_ms(10)
    results: dict[str, object] = {"count": args.count, "batch": args.batch,
                                  "floor_ms": round(floor, 2)}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        config = load_config(Path(tmp), {}, {"consolidation_batch": args.batch})
        clock = FixedClock("2026-03-01T00:00:00Z")
        with Services.open(config, clock) as app:
            items = corpus(args.count)
            for start in range(0, len(items), 1000):
                app.memory.add_many(items[start : start + 1000])
                clock.advance(seconds=1)
            for mode, dry in (("shadow", True), ("apply", False)):
                started = time.perf_counter()
                report = app.consolidation.run(dry_run=dry, project="bench", extract=False)
                ms = (time.perf_counter() - started) * 1000
                counts = {k: v for k, v in report.run.to_dict().items() if k.endswith("_count")}
                results[mode] = {"ms": round(ms, 1), "ratio_to_floor": round(ms / floor, 2),
                                 **counts}  # fmt: skip
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "consolidation.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
