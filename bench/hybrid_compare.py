"""Before and after, round by round: the hybrid search query (MiniLM embeddings) on the first
LoCoMo conversation, on an older commit and on this tree, interleaved.

    .venv/bin/python bench/hybrid_compare.py --rev bb44735 --rounds 3

Each round runs, for each tree (the old one first in even rounds, this one first in odd
ones: a process timed right after another runs slower), a floor process (``python -c
"import sqlite3"``) and then a child process with that tree's ``src`` first on the path that
builds that tree's own ``cortex+minilm`` searcher (``bench/retrieval/run.py``:
``cortex_search``) over the conversation's turns, asks 5 of its questions to warm up, then
times the next 80 (depth 50, as the retrieval benchmark asks LoCoMo's). The old tree is ``git
archive REV`` in a temporary directory. Needs the ``[embeddings]`` extra. Reported
(``FIGURES``): each round's mean and p95 wall time and mean CPU time per query (the process's
own, less moved by other work than the wall time), and the mean wall time of the meaning side
(the cosine ranking, the question's widening where the tree has it, the re-ranking) without
the model's embedding calls, and of those calls; their medians over the rounds, the
mean and p95 also as ratios to the median of the floor processes timed in the same rounds; the
load average before and after.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from compare import DATA, compare_parser, extract, interleaved, medians, p95  # noqa: E402 - next to this file

ROOT = BENCH.parent
FIGURES = ("mean", "p95", "CPU mean", "meaning", "embedding")
"""Per round and tree, in ms per query: the wall time's mean and p95, the CPU time's mean,
and the mean wall time of the meaning side (``dense_ranking``, the question's widening where
the tree has it, ``hybrid_rerank``) without the model's embedding calls (the question's, and
the widening's words), and of those calls."""
CHILD = """
import json, sys, time
from pathlib import Path
tree, data, warm, timed = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
sys.path.insert(0, str(tree / "bench" / "retrieval"))
import run  # puts the tree's src first on the path
import cortex
import cortex.services.embeddings as dense
from metrics import locomo_corpora
assert Path(cortex.__file__).is_relative_to(tree), cortex.__file__
import cortex.services.search as reader
spent = {"meaning": 0.0, "embedding": 0.0}
inside = {"meaning": 0, "embedding": 0}

def timed_as(name, call):
    def timed_call(*args):
        if inside[name]:  # called from a call timed already (an older hybrid_rerank's ranking)
            return call(*args)
        inside[name] += 1
        started = time.perf_counter()
        try:
            return call(*args)
        finally:
            inside[name] -= 1
            spent[name] += (time.perf_counter() - started) * 1000
    return timed_call

# the meaning side: the cosine ranking, the question's widening (trees that have it) and the
# re-ranking; search imports the first and the last per call
dense.hybrid_rerank = timed_as("meaning", dense.hybrid_rerank)
dense.dense_ranking = timed_as("meaning", dense.dense_ranking)
if hasattr(reader.MemoryReader, "_widened"):
    reader.MemoryReader._widened = timed_as("meaning", reader.MemoryReader._widened)
dense.MiniLMEmbedder.embed = timed_as("embedding", dense.MiniLMEmbedder.embed)
corpus = locomo_corpora(json.loads(data.read_text())[:1])[0]
search = run.cortex_search("minilm")(corpus)
questions = [q.text for q in corpus.questions]
for text in questions[:warm]:
    search(text, 50)
spent.update(meaning=0.0, embedding=0.0)
wall, cpu = [], []
for text in questions[warm : warm + timed]:
    started, cpu_started = time.perf_counter(), time.process_time()
    search(text, 50)
    wall.append((time.perf_counter() - started) * 1000)
    cpu.append((time.process_time() - cpu_started) * 1000)
print(json.dumps({"wall": wall, "cpu": cpu, **spent}))
"""


def query_ms(tree: Path, data: Path, warm: int, timed: int) -> list[float]:
    """One child process's ``FIGURES`` (``CHILD``, on ``tree``'s sources)."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tree), str(data), str(warm), str(timed)],
        env={**os.environ, "PYTHONPATH": str(tree / "src"), "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        check=True,
    )
    times: dict[str, Any] = json.loads(done.stdout)
    wall, count = times["wall"], len(times["wall"])
    meaning, embedding = times["meaning"] / count, times["embedding"] / count
    return [
        statistics.fmean(wall),
        p95(wall),
        statistics.fmean(times["cpu"]),
        meaning - embedding,
        embedding,
    ]


def main() -> None:
    parser = compare_parser(__doc__, rounds=3)
    parser.add_argument("--warm", type=int, default=5, help="warm-up questions")
    parser.add_argument("--questions", type=int, default=80, help="timed questions")
    parser.add_argument("--data", type=Path, default=DATA, help="the benchmark data's folder")
    args = parser.parse_args()
    data = args.data / "locomo-dev.json"
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="cortex-hybrid-compare-") as tmp:
        trees = {"before": extract(args.rev, Path(tmp)), "after": ROOT}

        def sample(label: str) -> list[float]:
            return query_ms(trees[label], data, args.warm, args.questions)

        rounds, floors = interleaved(trees, args.rounds, sample, FIGURES)
    floor = statistics.median(floors)
    print(f"rev {args.rev}, {args.rounds} rounds of {args.questions} questions after "
          f"{args.warm}; floor {floor:.2f} ms (median of {len(floors)}); load average "
          f"{load_before} before, {os.getloadavg()} after")  # fmt: skip
    print("medians of the rounds, ms per query; mean and p95 also as ratios to the floor")
    print("| tree | " + " | ".join(FIGURES) + " | mean x floor | p95 x floor |")
    print("| --- |" + " ---: |" * (len(FIGURES) + 2))
    for label, samples in rounds.items():
        middle = medians(samples)
        ratios = f"{middle[0] / floor:.3f} | {middle[1] / floor:.3f}"
        print(f"| {label} | " + " | ".join(f"{v:.2f}" for v in middle) + f" | {ratios} |")


if __name__ == "__main__":
    main()
