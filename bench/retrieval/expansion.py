"""Query expansion by meaning, measured before it is built: the question's words widened with
the haystack's own words that the embedding model puts closest to them.

    .venv/bin/python bench/retrieval/expansion.py                    # the measured setting
    .venv/bin/python bench/retrieval/expansion.py --weight 0.2 --boost
    .venv/bin/python bench/retrieval/expansion.py --show 20          # the words it adds

This is a measurement, not a feature: Cortex's search does not expand queries. The idea is for
the paraphrases lexical search misses ("weddings" against "bride", "gardening" against
"planted"), and it needs a vector per word, which the embeddings extra's model gives. Per
haystack (a LoCoMo conversation, a LongMemEval question's sessions) the vocabulary is its units'
words (``query_terms``: stop words dropped; letters only, three or more); each word and each
question term is embedded once (``run.py``'s embeddings cache keeps them). For each term of a
question, except the names it capitalizes and the words of ``GENERIC`` (times, counts and
verbs too common to widen), at most ``--per-term`` vocabulary words with a cosine of at least
``--min-cosine`` are added, leaving out the question's own words and those sharing the term's
first four letters (the porter stemmer matches those already).

The added words are searched on their own (``store.search_memories``, the question's pool),
after the question's lexical ranking: each memory found that the question did not find joins
the candidates at ``--weight`` times the best candidate's score times its relevance to the
added words (with ``--boost``, a candidate found again gains as much). The session votes,
neighbours and meaning then apply as they do. It runs ``cortex`` and ``cortex+minilm`` of
``run.py`` with ``MemoryReader._lexical`` wrapped (as ``hybrid_compare.py`` wraps the meaning
side), and prints ``run.py``'s tables. Figures and what they mean: ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run  # noqa: E402 - next to this file
from fusion import LOCOMO_HEADLINE, corpora_of  # noqa: E402
from metrics import Corpus  # noqa: E402

import cortex.services.search as search  # noqa: E402
from cortex.core.memory_models import MemoryFilter, ScoredMemory  # noqa: E402
from cortex.core.retrieval import query_terms  # noqa: E402

WORD = re.compile(r"[a-z]{3,}")
NAME = re.compile(r"(?<!^)(?<![.?!] )\b[A-Z][a-z]+")
"""A capitalized word that does not open the question or a sentence: a name, not widened."""
NEIGHBOURS = 8
"""The nearest words of the vocabulary looked at per term (the term itself among them)."""
GENERIC = frozenset(
    "many much one two three four five six seven eight nine ten first last next year years "
    "month months week weeks day days time times ago today recently past different type kind "
    "thing things something make made get got like likely".split()
)


def vocabulary(corpus: Corpus) -> list[str]:
    """The haystack's words that may be added."""
    words = {w for u in corpus.units for w in query_terms(u.text) if WORD.fullmatch(w)}
    return sorted(words)


def expansions(
    question: str,
    vocab: Sequence[str],
    vectors: dict[str, Any],
    min_cosine: float,
    per_term: int,
) -> list[str]:
    """The words added to ``question`` (see the module docstring)."""
    import numpy as np

    names = {w.lower() for w in NAME.findall(question)}
    terms = query_terms(question)
    matrix = np.stack([vectors[w] for w in vocab]) if vocab else None
    added: list[str] = []
    for term in terms:
        if matrix is None or term in names or term in GENERIC or term not in vectors:
            continue
        cosines = matrix @ vectors[term]
        kept = 0
        for index in np.argsort(-cosines)[:NEIGHBOURS]:
            word = vocab[index]
            if cosines[index] < min_cosine or kept == per_term:
                break
            if word in terms or word[:4] == term[:4] or word in added:
                continue
            added.append(word)
            kept += 1
    return added


def plan(sets: dict[str, list[Corpus]], min_cosine: float, per_term: int) -> dict[str, list[str]]:
    """Every question's added words, by question text."""
    import numpy as np

    embedder = run.cached_embedder("minilm", run.RESULTS)
    vocabs = {c.name: vocabulary(c) for corpus_set in sets.values() for c in corpus_set}
    terms = {
        t for cs in sets.values() for c in cs for q in c.questions for t in query_terms(q.text)
    }
    words = sorted(set().union(*vocabs.values()) | {t for t in terms if WORD.fullmatch(t)})
    vectors = dict(zip(words, np.asarray(embedder.embed(words), dtype=np.float32), strict=True))
    out: dict[str, list[str]] = {}
    for corpus_set in sets.values():
        for corpus in corpus_set:
            for q in corpus.questions:
                out[q.text] = expansions(q.text, vocabs[corpus.name], vectors, min_cosine, per_term)
    return out


@contextlib.contextmanager
def expanded(added: dict[str, list[str]], weight: float, boost: bool) -> Iterator[None]:
    """Searches inside add the planned words' candidates to the question's lexical ones."""
    lexical = search.MemoryReader._lexical

    def widened(
        self: search.MemoryReader, query: str, flt: MemoryFilter, pool: int
    ) -> list[ScoredMemory]:
        ranked = lexical(self, query, flt, pool)
        words = added.get(query)
        if not words:
            return ranked
        best = ranked[0].score if ranked else 1.0
        held = {h.memory.id: h for h in ranked}
        for memory, relevance in self.store.search_memories(words, flt, self.now_iso(), limit=pool):
            hit, gain = held.get(memory.id), weight * best * relevance
            if hit is None and relevance > 0:
                held[memory.id] = ScoredMemory(memory, gain, f"close in meaning to {words[:3]}")
            elif hit is not None and boost:
                held[memory.id] = replace(hit, score=hit.score + gain)
        return sorted(held.values(), key=lambda h: -h.score)[:pool]

    search.MemoryReader._lexical = widened  # type: ignore[method-assign]
    try:
        yield
    finally:
        search.MemoryReader._lexical = lexical  # type: ignore[method-assign]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--min-cosine", type=float, default=0.6, help="default 0.6")
    parser.add_argument("--per-term", type=int, default=3, help="words added per term (3)")
    parser.add_argument("--weight", type=float, default=0.15, help="a joiner's share (0.15)")
    parser.add_argument("--boost", action="store_true", help="candidates found again gain too")
    parser.add_argument("--show", type=int, default=0, help="print N questions' added words")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    sets = corpora_of(run.DATA)
    added = plan(sets, args.min_cosine, args.per_term)
    for question in list(added)[: args.show]:
        print(f"{question}  +{added[question]}")
    systems = {
        "cortex": run.cortex_search(),
        "cortex+minilm": run.cortex_search("minilm", cache=run.RESULTS),
    }
    suites = (("locomo", 50, run.locomo_score, list(LOCOMO_HEADLINE)),
              ("lme_session", 10, run.lme_score("session"), None),
              ("lme_turn", 10, run.lme_score("turn"), None))  # fmt: skip
    report = {}
    with expanded(added, args.weight, args.boost):
        for name, depth, score, cats in suites:
            report[name] = run.run_suite(name, sets[name], systems, depth, score, cats)
    if args.json:
        print(json.dumps({k: {s: r["overall"] for s, r in v.items()} for k, v in report.items()}))
        return 0
    print(run.markdown("LoCoMo, turn level (overall = categories 1-4)", report["locomo"],
                       [*LOCOMO_HEADLINE, "adversarial"], "overall 1-4"))  # fmt: skip
    print()
    print(run.per_conversation(report["locomo"]))
    for name, title in (("lme_session", "session"), ("lme_turn", "turn")):
        kinds = sorted(next(iter(report[name].values()))["table"])
        print()
        print(run.markdown(f"LongMemEval_S, {title} level", report[name], kinds, "overall"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
