"""Before and after, round by round: how fast an embedder embeds a batch of real memories (what
``cortex memory embed`` and every add with an embedder pay), on an older commit and on this
tree, interleaved.

    .venv/bin/python bench/embedding_rate.py --rev HEAD~1 --rounds 3
    .venv/bin/python bench/embedding_rate.py --rev HEAD~1 --embedder ~/models/nomic --texts 300

The texts are the first ``--texts`` distinct turns of LongMemEval's first haystacks (chat
lines and long answers mixed, as a person's memories are), in a fixed order. Each round runs,
for each tree (the order alternating), a floor process and a child process with that tree's
``src`` first on the path that loads the embedder, embeds one text to load the model, then
embeds all the texts in one call, timed in wall and CPU time, then LongMemEval's first 30
questions one at a time (what a search pays for its question). Reported: the medians over the
rounds of milliseconds per text (wall, CPU), texts per second and the median milliseconds per
question. Needs the embeddings extra.
"""

from __future__ import annotations

import json
import lzma
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from compare import DATA, ROOT, compare_parser, extract, interleaved, medians  # noqa: E402

CHILD = """
import json, statistics, sys, time
from cortex.services.embeddings import load_embedder
texts, questions = json.load(open(sys.argv[2]))
embedder = load_embedder(sys.argv[1])
embedder.embed(["load the model"])
wall, cpu = time.perf_counter(), time.process_time()
embedder.embed(texts)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
asked = []
for question in questions:
    started = time.perf_counter()
    embedder.embed([question])
    asked.append(time.perf_counter() - started)
rate = [1000 * wall / len(texts), 1000 * cpu / len(texts), len(texts) / wall]
print(json.dumps([*rate, 1000 * statistics.median(asked)]))
"""
FIGURES = ("ms/text wall", "ms/text CPU", "texts/s", "ms/question")


def texts(count: int, data: Path) -> tuple[list[str], list[str]]:
    """The first ``count`` distinct turns of LongMemEval's haystacks, in their order, and its
    first 30 questions."""
    with lzma.open(data / "longmemeval-s-dev.json.xz") as fh:
        questions = json.load(fh)
    turns = (t["content"].strip() for q in questions for s in q["haystack_sessions"] for t in s)
    found: dict[str, None] = {}
    for text in filter(None, turns):
        found[text] = None
        if len(found) == count:
            break
    return list(found), [q["question"] for q in questions[:30]]


def main() -> None:
    parser = compare_parser(__doc__, rounds=3)
    parser.add_argument("--embedder", default="minilm", help="minilm or a model directory")
    parser.add_argument("--texts", type=int, default=1000, help="texts embedded a round")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cortex-embedding-rate-") as tmp:
        corpus = Path(tmp) / "texts.json"
        corpus.write_text(json.dumps(texts(args.texts, args.data)))
        trees = {args.rev: extract(args.rev, Path(tmp)) / "src", "this": ROOT / "src"}

        def sample(label: str) -> list[float]:
            env = {**os.environ, "PYTHONPATH": str(trees[label])}
            command = [sys.executable, "-c", CHILD, args.embedder, str(corpus)]
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            return [float(v) for v in json.loads(done.stdout.strip().splitlines()[-1])]

        samples, floors = interleaved(trees, args.rounds, sample, FIGURES)
    floor = statistics.median(floors)
    print(
        f"{args.embedder}, {args.texts} texts, {args.rounds} rounds; load {os.getloadavg()}; "
        f"floor process {floor:.1f} ms"
    )
    print("| tree | " + " | ".join(FIGURES) + " |")
    print("| --- | " + " | ".join("---:" for _ in FIGURES) + " |")
    for label, rows in samples.items():
        print(f"| {label} | " + " | ".join(f"{v:.2f}" for v in medians(rows)) + " |")


if __name__ == "__main__":
    main()
