"""Document-side expansion: each memory indexed with general words close to it in meaning.

    .venv/bin/pip install wordfreq          # the vocabulary's frequency list (this script's only)
    .venv/bin/python bench/retrieval/related.py --data DIR
    .venv/bin/python bench/retrieval/diff.py /tmp/before.json bench/results/retrieval-related.json \
        --system cortex+minilm --against cortex+minilm+related
    .venv/bin/python bench/retrieval/related.py --check     # the held-out pairs alone

The shipped hybrid widens the question with words the memories closest to it in meaning use
(``cortex.core.expansion``). This measures the other side: at index time each memory gets up
to ``--per-memory`` words of a fixed English vocabulary (the ``--words`` most frequent words
of ``wordfreq``'s English list: letters only, three or more, not stop words), those whose
vectors are closest to the memory's own vector with a cosine of ``--min-cosine`` or more,
leaving out words sharing their first four letters with a word of the memory (the stemmer
matches those already). The words go in a third column of the full-text index weighted
``--weight`` (content 1.0, tags 0.5), so that "pets" in a question finds a memory about
turtles. Nothing else of the search changes: ``run.py``'s hybrid with that index.

The defaults were fixed before the dev data were run, from ``PAIRS`` (sentences written for
the check, none from LoCoMo or LongMemEval, each with the general words a question about it
would use): ``--check`` prints, for each vocabulary size, words a memory and least cosine,
how many sentences get one of their words and how many words a sentence gets. The weight is
half the tags': a tag is a person's hint, a related word a model's guess at one. Figures:
``docs/benchmarks-history.md`` (the thirty-first sitting).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent))

import expansion  # noqa: E402 - next to this file
import run  # noqa: E402
from metrics import Corpus  # noqa: E402

from cortex.core.retrieval import STOPWORDS  # noqa: E402

WORDS = 10_000
PER_MEMORY = 8
MIN_COSINE = 0.30
WEIGHT = 0.25
PAIRS = [
    ("I repotted the basil and the chilli plants on the balcony this morning",
     ["gardening", "plants", "herbs"]),
    ("We adopted a rescue greyhound last month and he sleeps all day",
     ["dog", "pets", "adoption"]),
    ("My daughter started violin lessons at school", ["music", "instrument", "lessons"]),
    ("Went to that new ramen place downtown, the broth was amazing",
     ["restaurant", "food", "japanese"]),
    ("I ran my first half marathon on Sunday in two hours", ["running", "race", "fitness"]),
    ("Spent the weekend at my cousin's wedding in the countryside",
     ["wedding", "family", "ceremony"]),
    ("I finished knitting a scarf for my grandmother", ["knitting", "crafts", "gift"]),
    ("We booked flights to Lisbon for the spring break", ["travel", "vacation", "trip"]),
    ("I have been volunteering at the food bank every Thursday",
     ["volunteering", "charity", "community"]),
    ("Just got promoted to senior engineer at work", ["career", "job", "promotion"]),
    ("The kids built a sandcastle and we swam until sunset", ["beach", "vacation", "children"]),
    ("I started taking pottery classes at the community centre", ["pottery", "art", "crafts"]),
    ("My doctor told me to cut back on sugar after my blood test",
     ["health", "diet", "medical"]),
    ("We went camping by the lake and saw a bear", ["camping", "outdoors", "wildlife"]),
    ("I am reading a novel about a detective in Victorian London",
     ["book", "reading", "fiction"]),
    ("Our cat knocked the Christmas tree over again", ["pets", "cat", "holiday"]),
    ("I baked sourdough bread for the first time", ["baking", "bread", "cooking"]),
    ("Signed up for an evening course in Spanish", ["language", "learning", "class"]),
    ("We painted the nursery pale yellow before the baby arrives",
     ["baby", "painting", "home"]),
    ("I sold my old car and bought an electric bike", ["bike", "transportation", "vehicle"]),
]  # fmt: skip
"""Held-out pairs: a sentence and the general words a question about it would use."""
_WORD = re.compile(r"[a-z]+")
_VOCABULARY_WORD = re.compile(r"[a-z]{3,}")


def vocabulary(size: int) -> list[str]:
    """The ``size`` most frequent English words of ``wordfreq`` that may be added."""
    try:
        import wordfreq  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise SystemExit("related.py needs wordfreq; run: .venv/bin/pip install wordfreq") from None
    listed = wordfreq.top_n_list("en", 3 * size)
    return [w for w in listed if _VOCABULARY_WORD.fullmatch(w) and w not in STOPWORDS][:size]


class Related:
    """A memory's related words: the vocabulary's words closest to its vector."""

    def __init__(
        self, embedder: Any, words: Sequence[str], per_memory: int, min_cosine: float
    ) -> None:
        import numpy as np  # the extra's

        self.embedder, self.words = embedder, list(words)
        self.per_memory, self.min_cosine = per_memory, min_cosine
        self.matrix = np.asarray(embedder.embed(self.words), dtype=np.float32)

    def __call__(self, text: str) -> list[str]:
        import numpy as np

        vector = np.asarray(self.embedder.embed([self.embedder.document_prefix + text])[0])
        similarity = self.matrix @ vector.astype(np.float32)
        own = {w[:4] for w in _WORD.findall(text.lower())}
        depth = min(len(self.words), 4 * self.per_memory + len(own))
        best = np.argpartition(-similarity, depth - 1)[:depth]
        kept: list[str] = []
        for index in sorted(best, key=lambda i: -similarity[i]):
            if similarity[index] < self.min_cosine or len(kept) == self.per_memory:
                break
            if self.words[index][:4] not in own:
                kept.append(self.words[index])
        return kept


def with_related_column(conn: sqlite3.Connection, related: Related, weight: float) -> None:
    """The store's full-text index made again with a third column, ``related``, which each
    new memory fills with its related words (a SQL function the insert trigger calls)."""
    conn.create_function("related_words", 1, lambda text: " ".join(related(text or "")))
    for name in ("ai", "ad", "au"):
        conn.execute(f"DROP TRIGGER memories_fts_{name}")
    conn.execute("DROP TABLE memories_fts")
    conn.execute(
        "CREATE VIRTUAL TABLE memories_fts USING fts5(content, tags, related, "
        "content='', tokenize='porter unicode61 remove_diacritics 2')"
    )
    conn.execute(f"INSERT INTO memories_fts(memories_fts, rank) VALUES ('rank', "
                 f"'bm25(1.0, 0.5, {weight})')")  # fmt: skip
    conn.execute(
        "CREATE TRIGGER memories_fts_ai AFTER INSERT ON memories BEGIN "
        "INSERT INTO memories_fts(rowid, content, tags, related) "
        "VALUES (new.seq, new.content, new.tags, related_words(new.content)); END"
    )


def related_stores(related: Related, weight: float) -> contextlib.AbstractContextManager[Any]:
    """``run.py``'s stores (``run.open_store``) opened with the related column, inside."""
    shipped = run.open_store

    def opened(path: str) -> Any:
        store = shipped(path)
        with_related_column(store.connection, related, weight)
        return store

    return mock.patch.object(run, "open_store", opened)


def measure(sets: dict[str, list[Corpus]], model: str, lexical: bool) -> dict[str, Any]:
    """``run.py``'s report of the hybrid with ``model`` (``expansion.measure``), the system
    named ``cortex+MODEL+related``; ``lexical``: of the lexical search (``cortex+related``:
    the model gives the related words at index time only, a question is not embedded)."""
    if lexical:
        return run.run_suites(sets, {"cortex+related": run.cortex_search()})
    return {
        suite: {f"cortex+{model}+related": r} for suite, r in expansion.measure(sets, model).items()
    }


def check(embedder: Any) -> None:
    """The held-out pairs (``PAIRS``) under each setting of the grid."""
    for size in (10_000, 20_000):
        words = vocabulary(size)
        for per_memory in (3, 5, 8, 10):
            for min_cosine in (0.30, 0.35, 0.40):
                related = Related(embedder, words, per_memory, min_cosine)
                got = [related(sentence) for sentence, _ in PAIRS]
                wanted = [len(set(g) & set(w)) for g, (_, w) in zip(got, PAIRS, strict=True)]
                print(
                    f"words {size:,}, per memory {per_memory}, least cosine {min_cosine:.2f}: "
                    f"{sum(n > 0 for n in wanted)}/{len(PAIRS)} sentences get a wanted word "
                    f"({sum(wanted)} in all), {sum(map(len, got)) / len(PAIRS):.1f} words each"
                )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=run.DATA)
    parser.add_argument("--embeddings", default="minilm", help="minilm, or a model directory")
    parser.add_argument("--words", type=int, default=WORDS, help="the vocabulary's size")
    parser.add_argument("--per-memory", type=int, default=PER_MEMORY, help="most words a memory")
    parser.add_argument("--min-cosine", type=float, default=MIN_COSINE, help="least cosine")
    parser.add_argument("--weight", type=float, default=WEIGHT, help="the column's bm25 weight")
    parser.add_argument("--check", action="store_true", help="the held-out pairs alone")
    parser.add_argument(
        "--lexical", action="store_true", help="the lexical search (no question embedded)"
    )
    parser.add_argument("--quick", action="store_true", help="2 conversations, 20 questions")
    parser.add_argument("--show", type=int, default=0, help="print N units' words (LoCoMo)")
    args = parser.parse_args(argv)
    embedder = run.cached_embedder(args.embeddings, run.RESULTS)
    if args.check:
        check(embedder)
        return 0
    related = Related(embedder, vocabulary(args.words), args.per_memory, args.min_cosine)
    sets = run.corpora_of(args.data, args.quick)
    for unit in sets["locomo"][0].units[: args.show]:
        print(f"{unit.text[:70]!r}: {' '.join(related(unit.text))}")
    with related_stores(related, args.weight):
        report = measure(sets, Path(args.embeddings).name, args.lexical)
    (run.RESULTS / "retrieval-related.json").write_text(json.dumps(report, indent=2))
    print(run.report_markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
