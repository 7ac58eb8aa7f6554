"""Query expansion by meaning, its settings and its vocabulary, against the hybrid without it.

    .venv/bin/python bench/retrieval/expansion.py                  # as shipped, and without
    .venv/bin/python bench/retrieval/expansion.py --memories 100 --weight 0.2
    .venv/bin/python bench/retrieval/expansion.py --haystack       # every word of the haystack
    .venv/bin/python bench/retrieval/expansion.py --haystack --show 20   # the words added
    .venv/bin/python bench/retrieval/expansion.py --embeddings DIR   # a model directory

With the embeddings extra, Cortex's search widens a question with the words that the
memories closest to it in meaning use for its words (``cortex.core.expansion``). This runs
``run.py``'s hybrid (``cortex+minilm``, or ``--embeddings``' model) on the dev sets twice in
one process, first with the widening off (``EXPANSION_MEMORIES`` 0), then on with the
settings given (the module's constants set for the run), and prints ``run.py``'s tables for
both (``off`` and ``on``). ``--haystack`` draws the words from the whole haystack (every
unit's) instead of the closest memories: what a vocabulary of the whole store would give.
Needs the extra; about a minute with ``run.py``'s embeddings cache. Figures:
``docs/benchmarks-history.md`` (the twentieth and twenty-sixth sittings).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run  # noqa: E402 - next to this file
from metrics import Corpus  # noqa: E402

import cortex.core.expansion as expansion  # noqa: E402
import cortex.services.embeddings as meaning  # noqa: E402

SETTINGS = {
    "memories": "EXPANSION_MEMORIES",
    "weight": "EXPANSION_WEIGHT",
    "min_cosine": "EXPANSION_MIN_COSINE",
    "per_term": "EXPANSION_PER_TERM",
}
"""Command-line option -> the ``cortex.core.expansion`` constant it sets."""


@contextlib.contextmanager
def settings(values: dict[str, Any]) -> Iterator[None]:
    """``cortex.core.expansion``'s constants set to ``values`` (by option name) inside."""
    before = {SETTINGS[k]: getattr(expansion, SETTINGS[k]) for k in values}
    for option, value in values.items():
        setattr(expansion, SETTINGS[option], value)
    try:
        yield
    finally:
        for name, value in before.items():
            setattr(expansion, name, value)


def haystack_words(sets: dict[str, list[Corpus]], model: str) -> dict[str, list[str]]:
    """Each question's widening words drawn from every unit of its haystack."""
    embedder = run.cached_embedder(model, run.RESULTS)
    out: dict[str, list[str]] = {}
    for corpora in sets.values():
        for corpus in corpora:
            texts = [u.text for u in corpus.units]
            for question in corpus.questions:
                out[question.text] = meaning.widening_words(embedder, question.text, texts)
    return out


@contextlib.contextmanager
def from_haystack(words: dict[str, list[str]]) -> Iterator[None]:
    """The search's widening words taken from ``words`` (by question) inside."""
    shipped = meaning.widening_words

    def planned(embedder: Any, question: str, texts: Sequence[str], file: Any = None) -> list[str]:
        return words.get(question, [])

    meaning.widening_words = planned  # the search imports it per call
    try:
        yield
    finally:
        meaning.widening_words = shipped


def measure(sets: dict[str, list[Corpus]], model: str) -> dict[str, Any]:
    """``run.py``'s report of the hybrid with ``model`` on every set, as things stand."""
    build: Callable[[Corpus], run.Search] = run.cortex_search(model, cache=run.RESULTS)
    return {suite: systems["x"] for suite, systems in run.run_suites(sets, {"x": build}).items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--memories", type=int, help="the closest memories whose words widen")
    parser.add_argument("--weight", type=float, help="a joiner's share of the best score")
    parser.add_argument("--min-cosine", type=float, help="least cosine of an added word")
    parser.add_argument("--per-term", type=int, help="most words added per term")
    parser.add_argument("--haystack", action="store_true", help="words of the whole haystack")
    parser.add_argument(
        "--show", type=int, default=0, help="with --haystack: print N questions' added words"
    )
    parser.add_argument(
        "--embeddings", default="minilm", help="minilm (default), or a model directory's path"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    values = {k: getattr(args, k) for k in SETTINGS if getattr(args, k) is not None}
    if any(v < 0 for v in values.values()) or values.get("min_cosine", 0) > 1:
        parser.error("--memories, --weight and --per-term take 0 or more, --min-cosine 0 to 1")
    sets = run.corpora_of(run.DATA)
    with settings({"memories": 0}):
        off = measure(sets, args.embeddings)
    with settings(values):
        words = haystack_words(sets, args.embeddings) if args.haystack else None
        with from_haystack(words) if words is not None else contextlib.nullcontext():
            on = measure(sets, args.embeddings)
    for question in list(words or {})[: args.show]:
        print(f"{question}  +{(words or {})[question]}")
    report = {suite: {"off": off[suite], "on": on[suite]} for suite in off}
    if args.json:
        print(json.dumps({s: {k: v["overall"] for k, v in r.items()} for s, r in report.items()}))
    else:
        print(run.report_markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
