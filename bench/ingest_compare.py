"""Batch ingest before and after, interleaved in one run: ``add_many`` of 1,000 memories, half
of them replacing a live memory by key (``bench/memory.py``'s ``write_rate``), on a copy of a
cached corpus, with an older commit's sources and with this checkout's (both timed by this
checkout's ``write_rates``, so that only the sources differ).

Run: ``.venv/bin/python bench/ingest_compare.py --rev HEAD~3 --count 100000``
(``--rounds N``, ``--batches N``). The corpus is ``bench/results/memory-COUNT.db`` (built by
``bench/memory.py --count COUNT`` if missing). Each sample is a whole process running that
``write_rate`` on one tree's sources (``PYTHONPATH``); the floor (a whole
``python -c "import sqlite3"`` process) is timed before each round, and the time of 1,000
memories is given as a ratio to it. Beside it, the rate per second of the sample's CPU time
(``write_rates``), which a machine shared with other work inflates least.

With ``--pages`` (``.venv/bin/python bench/ingest_compare.py --rev HEAD~3 --count 1000000
--batches 4 --pages``) it times nothing: it counts, for each tree, the pages a replacing batch
writes to the write-ahead log, by b-tree (``memory.write_pages``), averaged over ``--batches``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from compare import extract, floor_ms, for_tree
from memory import corpus

ROOT = Path(__file__).resolve().parents[1]
# ``cortex`` is imported from the tree's sources before ``memory`` (which puts this checkout's
# ``src`` first on the path): its submodules then load from the tree's package directory.
SAMPLE = (
    "import random, sys; from pathlib import Path; sys.path[:0] = sys.argv[1:3]; import cortex; "
    "assert cortex.__file__.startswith(sys.argv[1]), cortex.__file__; import memory; "
    "print(*memory.write_rates(Path(sys.argv[3]), int(sys.argv[4]), random.Random(7), "
    "replacing=sys.argv[5] == 'live'))"
)
PAGES = SAMPLE.split("print(")[0] + (
    "import json; print(json.dumps(memory.write_pages(Path(sys.argv[3]), int(sys.argv[4]), "
    "random.Random(7))))"
)


def sample(code: str, tree: Path, db: Path, batches: int, keys: str) -> str:
    """What ``code`` prints, run with this checkout's harness on ``tree``'s sources."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    args = [str(tree / "src"), str(ROOT / "bench"), str(db), str(batches), keys]
    out = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout


def rate(tree: Path, db: Path, batches: int, keys: str) -> tuple[float, float]:
    """Memories per second of ``write_rates`` (this checkout's, the same harness for both
    trees) on ``tree``'s sources, on a copy of ``db``: of wall-clock time, and of the sample's
    CPU time."""
    wall, cpu = sample(SAMPLE, tree, db, batches, keys).split()[-2:]
    return float(wall), float(cpu)


def print_pages(trees: dict[str, Path], dbs: dict[str, Path], batches: int) -> None:
    """Each tree's pages a replacing batch writes (on its copy in ``dbs``), by b-tree, side by
    side."""
    found = {
        label: json.loads(sample(PAGES, tree, dbs[label], batches, "live").splitlines()[-1])
        for label, tree in trees.items()
    }
    names = sorted({n for pages in found.values() for n in pages}, key=str.lower)
    print(f"{'pages a batch writes':<36}" + "".join(f"{label:>10}" for label in found))
    for name in ["total", *names]:
        counts = [sum(p.values()) if name == "total" else p.get(name, 0.0) for p in found.values()]
        print(f"{name:<36}" + "".join(f"{n:>10,.0f}" for n in counts))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rev", required=True, help="the older commit, e.g. HEAD~3")
    parser.add_argument("--count", type=int, default=100_000, help="memories in the corpus")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument(
        "--keys",
        choices=("live", "random"),
        default="live",
        help="the upserts' keys: live memories' (each replaces one; the default) or drawn at "
        "random (most name no live memory)",
    )
    parser.add_argument(
        "--pages",
        action="store_true",
        help="count each tree's pages a replacing batch writes, by b-tree, instead of timing",
    )
    args = parser.parse_args()
    db, _ = corpus(args.count)
    samples: dict[str, list[tuple[float, float, float]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory(prefix="cortex-ingest-") as tmp:
        trees = {"before": extract(args.rev, Path(tmp)), "after": ROOT}
        dbs = {"before": Path(tmp) / db.name, "after": db}
        shutil.copyfile(db, dbs["before"])
        for_tree(dbs["before"], trees["before"])  # (a corpus this tree migrated past it)
        if args.pages:
            print_pages(trees, dbs, args.batches)
            return
        for n in range(args.rounds):
            floor = floor_ms()
            for label, tree in trees.items():
                per_second, per_cpu_second = rate(tree, dbs[label], args.batches, args.keys)
                samples[label].append((per_second, 1e6 / per_second / floor, per_cpu_second))
                print(
                    f"round {n + 1}: {label} {per_second:,.0f}/s "
                    f"({per_cpu_second:,.0f} per CPU second), floor {floor:.1f} ms"
                )
    load = os.getloadavg()
    print(
        f"\n{args.count:,} memories stored, upsert keys {args.keys}; "
        f"before = {args.rev}, after = this checkout"
    )
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for label, rows in samples.items():
        per_second, ratio, per_cpu_second = (
            statistics.median(col) for col in zip(*rows, strict=True)
        )
        print(
            f"{label:<7} {per_second:>9,.0f} memories/s   1,000 memories = {ratio:.2f}x floor   "
            f"{per_cpu_second:>9,.0f} per CPU second"
        )


if __name__ == "__main__":
    main()
