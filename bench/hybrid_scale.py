"""Before and after, round by round: the meaning side of hybrid search at scale (the store's
read of every vector in scope and their scoring) over 100,000 memories with a vector each, on
an older commit and on this tree, interleaved.

    .venv/bin/python bench/hybrid_scale.py --rev 423bfe0 --rounds 3
    .venv/bin/python bench/hybrid_scale.py --rev 423bfe0 --vectors 10000 --queries 50

Each tree first gets its own copy of ``bench/memory.py``'s corpus of 100,000 memories (built
on first use), opened by that tree's store (so that its migrations run), and the first
``--vectors`` memories by ``seq`` get a random unit vector of 384 dimensions (MiniLM's), the
same ones for both trees (seeded), stored through the tree's ``Store.save_embeddings``. The
table's pages and bytes (``dbstat``) are reported. Then each round runs, for each tree (the old
one first in even rounds, this one first in odd ones), a floor process (``python -c "import
sqlite3"``) and a child process with that tree's ``src`` first on the path that asks
``cortex.services.embeddings.dense_ranking`` ``--queries`` times, each with a seeded random
question vector (no model: the question's embedding is not timed) and the scope a search of
one of the corpus's projects has (its memories and the global ones), after two unmeasured
warm-up queries. Reported: the medians over the rounds of each round's mean and p95 wall time
and mean CPU time per query, the mean and p95 also as ratios to the median floor. Needs
numpy (the ``dev`` or ``embeddings`` extra).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import memory  # noqa: E402 - next to this file
from compare import compare_parser, extract, for_tree, interleaved, medians, p95  # noqa: E402

ROOT = BENCH.parent
DIM = 384
MEMORIES = 100_000
BUILD = """
import json, sqlite3, sys
import numpy as np
from pathlib import Path
from cortex.store import SQLiteStore
path, count, dim = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(7)
with SQLiteStore(path) as store:
    ids = [row[0] for row in store.connection.execute(
        "SELECT id FROM memories ORDER BY seq LIMIT ?", (count,))]
    for start in range(0, len(ids), 5000):
        chunk = ids[start : start + 5000]
        vectors = rng.standard_normal((len(chunk), dim)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        store.save_embeddings("bench", [(i, dim, v.tobytes()) for i, v in zip(chunk, vectors)])
    store.checkpoint()
    try:  # (SQLite builds without the dbstat table: no page count)
        pages, size = store.connection.execute(
            "SELECT count(*), sum(pgsize) FROM dbstat WHERE name = 'memory_embeddings' "
            "OR name IN (SELECT name FROM sqlite_master WHERE type = 'index' "
            "AND tbl_name = 'memory_embeddings')").fetchone()
    except sqlite3.OperationalError:  # no such table: dbstat
        pages, size = None, None
print(json.dumps({"vectors": len(ids), "pages": pages, "bytes": size}))
"""
CHILD = """
import json, sys, time
import numpy as np
from pathlib import Path
import cortex
import cortex.services.embeddings as dense
from cortex.core.memory_models import MemoryFilter
from cortex.store import SQLiteStore
tree, path, queries, dim = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
assert Path(cortex.__file__).is_relative_to(tree), cortex.__file__
rng = np.random.default_rng(11)

class Question:
    model, dim = "bench", dim

    def embed(self, texts):
        vector = rng.standard_normal(dim)
        return [list(vector / np.linalg.norm(vector))]

store = SQLiteStore(path)
projects = [row[0] for row in store.connection.execute(
    "SELECT DISTINCT project_id FROM memories WHERE project_id IS NOT NULL ORDER BY 1")]
now = "2026-02-16T09:00:00.000000Z"
wall, cpu, seen = [], [], []
for number in range(queries + 2):
    flt = MemoryFilter(project=projects[number % len(projects)])
    started, cpu_started = time.perf_counter(), time.process_time()
    ranked = dense.dense_ranking(store, Question(), "question", flt, now)
    if number >= 2:
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - cpu_started) * 1000)
        seen.append(len(ranked))
store.close()
print(json.dumps({"wall": wall, "cpu": cpu, "seen": seen}))
"""
FIGURES = ("mean", "p95", "CPU mean")


def build(tree: Path, path: Path, vectors: int) -> dict[str, Any]:
    """``tree``'s store over a copy of the corpus at ``path``, ``vectors`` of them embedded."""
    corpus, _ = memory.corpus(MEMORIES)
    shutil.copyfile(corpus, path)
    for_tree(path, tree)  # (a corpus this tree migrated past an older one)
    done = subprocess.run(
        [sys.executable, "-c", BUILD, str(path), str(vectors), str(DIM)],
        env={**os.environ, "PYTHONPATH": str(tree / "src")},
        capture_output=True,
        check=True,
    )
    built: dict[str, Any] = json.loads(done.stdout)
    return built


def query_ms(tree: Path, path: Path, queries: int) -> tuple[list[float], float]:
    """One child's ``FIGURES`` (``CHILD`` on ``tree``'s sources) and the mean memories seen."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tree), str(path), str(queries), str(DIM)],
        env={**os.environ, "PYTHONPATH": str(tree / "src")},
        capture_output=True,
        check=True,
    )
    times: dict[str, Any] = json.loads(done.stdout)
    wall = times["wall"]
    figures = [statistics.fmean(wall), p95(wall), statistics.fmean(times["cpu"])]
    return figures, statistics.fmean(times["seen"])


def main() -> None:
    parser = compare_parser(__doc__, rounds=3)
    parser.add_argument("--vectors", type=int, default=MEMORIES, help="memories with a vector")
    parser.add_argument("--queries", type=int, default=20, help="timed questions per round")
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="cortex-hybrid-scale-") as tmp:
        trees = {"before": extract(args.rev, Path(tmp)), "after": ROOT}
        paths = {label: Path(tmp) / f"{label}.db" for label in trees}
        stored = {}
        for label, tree in trees.items():
            stored[label] = build(tree, paths[label], args.vectors)
            print(f"{label}: {stored[label]}", file=sys.stderr)
        seen: dict[str, float] = {}

        def sample(label: str) -> list[float]:
            figures, seen[label] = query_ms(trees[label], paths[label], args.queries)
            return figures

        rounds, floors = interleaved(trees, args.rounds, sample, FIGURES)
    floor = statistics.median(floors)
    print(f"rev {args.rev}, {args.rounds} rounds of {args.queries} questions, "
          f"{args.vectors:,} of {MEMORIES:,} memories with a vector; floor {floor:.2f} ms "
          f"(median of {len(floors)}); load average {load_before} before, "
          f"{os.getloadavg()} after")  # fmt: skip
    print("medians of the rounds, ms per query; mean and p95 also as ratios to the floor")
    print("| tree | vectors' pages | MB | memories in scope | " + " | ".join(FIGURES)
          + " | mean x floor | p95 x floor |")  # fmt: skip
    print("| --- |" + " ---: |" * (len(FIGURES) + 5))
    for label, samples in rounds.items():
        middle = medians(samples)
        ratios = f"{middle[0] / floor:.3f} | {middle[1] / floor:.3f}"
        built = stored[label]
        size = "n/a | n/a"
        if built["pages"] is not None:
            size = f"{built['pages']:,} | {built['bytes'] / 1e6:.0f}"
        print(f"| {label} | {size} | {seen[label]:,.0f} | "
              + " | ".join(f"{v:.2f}" for v in middle) + f" | {ratios} |")  # fmt: skip


if __name__ == "__main__":
    main()
