"""Before and after, round by round: in-process memory search over the 1,000,000-memory
corpus on an older commit and on this tree, interleaved with the floor.

    .venv/bin/python bench/search_compare.py --rev 6b3bee6 --rounds 4
    .venv/bin/python bench/search_compare.py --rev 66b6b71 --count 100000 --limit 20

Each round times the floor (a whole ``python -c "import sqlite3"`` process, median of 5),
then for the old tree and for this one a child process that opens the cached corpus
(``bench/memory.py``'s, read-only: no migration), runs the 500 bench queries through
``MemoryService.search`` (``--limit`` results, 10 by default, after 50 warm-up queries) and
reports the p50 / p95 of the wall time and of its own CPU time per query. The old tree is
``git archive REV`` in a temporary directory, first on ``PYTHONPATH``. Reported: the medians
over the rounds, and the p95 as a ratio to the floor of its round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from compare import compare_parser, extract, floor_ms  # noqa: E402 - next to this file

ROOT = BENCH.parent
CHILD = """
import json, random, sys, time
sys.path.insert(0, sys.argv[1] + "/bench")
import memory
from pathlib import Path
from cortex.config import load_config
from cortex.services.memory import MemoryService
from cortex.clock import FixedClock
from cortex.store import SQLiteStore
store = SQLiteStore(Path(sys.argv[2]), migrate=False)
config = load_config(memory.RESULTS / "home", {})
service = MemoryService(store, config, FixedClock("2026-02-16T09:00:00Z"))
calls = memory.queries(service, int(sys.argv[3]), random.Random(memory.SEED + 1))
limit = int(sys.argv[4])
for query, project, _ in calls[:50]:
    service.search(query, project=project, limit=limit)
wall, cpu = [], []
for query, project, _ in calls:
    started, cpu_started = time.perf_counter(), time.process_time()
    service.search(query, project=project, limit=limit)
    wall.append((time.perf_counter() - started) * 1000)
    cpu.append((time.process_time() - cpu_started) * 1000)
wall.sort(), cpu.sort()
n = len(wall)
print(json.dumps({"p50_ms": wall[n // 2], "p95_ms": wall[int(n * 0.95)],
                  "cpu_p50_ms": cpu[n // 2], "cpu_p95_ms": cpu[int(n * 0.95)]}))
"""


def search_figures(
    tree: Path, src: Path, corpus: Path, queries: int, limit: int = 10
) -> dict[str, float]:
    """One child process's search figures (``CHILD``, each search asking for ``limit``
    results) with ``src`` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tree), str(corpus), str(queries), str(limit)],
        env=env,
        capture_output=True,
        check=True,
    )
    figures: dict[str, float] = json.loads(done.stdout)
    return figures


def with_corpus(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser`` with ``--queries`` (a round's), ``--count`` (the cached corpus's size) and
    ``--limit`` (the results each search asks for)."""
    parser.add_argument("--queries", type=int, default=500, help="queries per round")
    parser.add_argument("--limit", type=int, default=10, help="results a search asks for")
    parser.add_argument("--count", type=int, default=1_000_000, help="the cached corpus")
    return parser


def cached_corpus(count: int) -> Path:
    """``bench/memory.py``'s corpus of ``count`` memories, which must be built already."""
    corpus = BENCH / "results" / f"memory-{count}.db"
    if not corpus.exists():
        raise SystemExit(f"{corpus} is missing: build it with bench/memory.py --count {count}")
    return corpus


def search_rounds(
    targets: dict[str, tuple[Path, Path, Path]], rounds: int, queries: int, limit: int = 10
) -> dict[str, list[dict[str, float]]]:
    """Each label's ``search_figures`` (its tree, its source folder, its corpus), one child per
    label a round after the round's floor, with the p95 as a ratio to that floor."""
    out: dict[str, list[dict[str, float]]] = {label: [] for label in targets}
    for n in range(rounds):
        floor = floor_ms(5)
        for label, (tree, src, corpus) in targets.items():
            figures = search_figures(tree, src, corpus, queries, limit)
            figures["p95_x_floor"] = figures["p95_ms"] / floor
            figures["floor_ms"] = floor
            out[label].append(figures)
        print(f"  round {n + 1}/{rounds} done", file=sys.stderr)
    return out


def print_table(first: str, rounds: dict[str, list[dict[str, float]]]) -> None:
    """The medians over the rounds of each label's figures, a markdown row each."""
    print(f"| {first} | p50 ms | p95 ms | p95 x floor | CPU p50 ms | CPU p95 ms | floor ms |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for label, samples in rounds.items():
        cells = [
            statistics.median(s[key] for s in samples)
            for key in ("p50_ms", "p95_ms", "p95_x_floor", "cpu_p50_ms", "cpu_p95_ms", "floor_ms")
        ]
        print(f"| {label} | " + " | ".join(f"{c:.2f}" for c in cells) + " |")


def main() -> None:
    args = with_corpus(compare_parser(__doc__, rounds=4)).parse_args()
    corpus = cached_corpus(args.count)
    with tempfile.TemporaryDirectory(prefix="cortex-search-compare-") as tmp:
        old = extract(args.rev, Path(tmp))
        targets = {"before": (old, old / "src", corpus), "after": (ROOT, ROOT / "src", corpus)}
        rounds = search_rounds(targets, args.rounds, args.queries, args.limit)
    print(f"rev {args.rev}, {args.rounds} rounds, limit {args.limit}; load {os.getloadavg()}")
    print_table("tree", rounds)


if __name__ == "__main__":
    main()
