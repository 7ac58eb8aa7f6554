"""Ways of fusing meaning with the lexical ranking, measured in seconds from recorded pools.

    .venv/bin/python bench/retrieval/fusion.py           # the shipped formula and a few others
    .venv/bin/python bench/retrieval/fusion.py --sweep   # the grid of docs/benchmarks-history.md
    .venv/bin/python bench/retrieval/fusion.py --variant "bonus:weight=2,full_words=100" --json
    .venv/bin/python bench/retrieval/fusion.py --record        # record the pools again

A first run records, for every question of the LoCoMo and LongMemEval_S dev sets (asked for
its first ten results, ``DEPTH``, through the real ``MemoryService`` with the embeddings
extra), what the meaning side of the search is given: the lexical hits with their scores, the
cosine of every unit in the haystack to the question, the share of meaning's bonus each unit
keeps (less for one made outside the days a relative date of the question names), and the
service's own ranking. The recording goes to ``bench/results/fusion-<model>.json``; with
``run.py``'s embeddings cache it takes about 30 s.
Each variant then ranks those inputs again, which takes a second or two, and is scored as
``run.py`` scores a system.

The ``service`` variant ranks with the shipped formula (``core.retrieval.dense_pool`` and
``dense_scores``). It must give the service's ranking for every question; the run stops
when it does not (a change to the search since the recording: ``--record``). A variant
"keeps every split" when none of the headline figures nor any LoCoMo conversation's R@10 is
below the service's: the benchmark's rule for keeping an idea.

Families (``family:key=value,...``; every key has a default, the shipped one where it
applies):

- ``service``: the shipped formula.
- ``lexical``: no meaning at all (the lexical hits in their order).
- ``bonus``: the shipped formula with other constants: ``weight``, ``full_words``,
  ``power`` (of ``closer``), ``pool``, ``join``.
- ``scaled``: meaning multiplies a hit's score by ``1 + weight * length * closer ** power``
  instead of adding to it (``length`` as in the shipped formula, with ``full_words``);
  memories no word found join as in the shipped formula when ``join`` close.
- ``rrf``: reciprocal rank fusion of the lexical ranking and the first ``depth`` of the
  cosine ranking, the latter at ``weight``: ``1 / (k + rank)`` summed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run  # noqa: E402 - next to this file
from metrics import COLUMNS, Corpus, figures, keeps_every_split  # noqa: E402
from run import SUITES  # noqa: E402

import cortex.services.embeddings as meaning  # noqa: E402
from cortex.core.retrieval import (  # noqa: E402
    DENSE_FULL_WORDS,
    DENSE_JOIN,
    DENSE_POOL,
    DENSE_WEIGHT,
    dense_bonus,
    dense_pool,
    dense_scores,
)
from cortex.services.search import FIRST_PLACES  # noqa: E402

DEPTH = FIRST_PLACES
"""How many results each question is asked for when recording: the places every search ranks
with one pool (``cortex.services.search.FIRST_PLACES``; a longer list goes on with another
pool's ranking, which one recording cannot replay). Every figure of ``COLUMNS`` reads the
first ten."""
DEFAULT_VARIANTS = (
    "service",
    "lexical",
    "bonus:power=1",
    "bonus:full_words=100",
    "bonus:weight=1.5,full_words=200",
    "scaled:weight=2,full_words=100",
    "rrf:k=5,weight=0.5,depth=20",
)


# -- recording -------------------------------------------------------------------------------
@dataclass
class Pools:
    """What one question's meaning side was given, and what the service answered (unit ids)."""

    lexical: list[tuple[str, float]]
    similar: list[tuple[str, float]]
    ranked: list[str]
    shares: dict[str, float] = field(default_factory=dict)
    """The units whose share of meaning's bonus is not whole (``core.retrieval.meaning_share``)."""


@dataclass
class Recording:
    """Every question's ``Pools`` by set, corpus and question text, and each unit's words."""

    model: str
    pools: dict[str, dict[str, dict[str, Pools]]] = field(default_factory=dict)
    words: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "words": self.words,
            "pools": {
                suite: {c: {q: vars(p) for q, p in qs.items()} for c, qs in corpora.items()}
                for suite, corpora in self.pools.items()
            },
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Recording:
        pools = {
            suite: {
                c: {q: Pools(**{k: _pairs(v) for k, v in p.items()}) for q, p in qs.items()}
                for c, qs in corpora.items()
            }
            for suite, corpora in data["pools"].items()
        }
        return cls(data["model"], pools, data["words"])


def _pairs(value: Any) -> Any:
    if isinstance(value, dict):
        return value
    return [tuple(v) if isinstance(v, list) else v for v in value]


@contextlib.contextmanager
def captured() -> Iterator[dict[str, Any]]:
    """The meaning side's inputs of the searches run inside (``hybrid_rerank``,
    ``dense_ranking`` and ``dense_scores`` wrapped, as ``bench/hybrid_compare.py`` wraps the
    first two to time them)."""
    seen: dict[str, Any] = {}
    rerank, ranking, scores = meaning.hybrid_rerank, meaning.dense_ranking, meaning.dense_scores

    def record_ranking(*args: Any) -> list[tuple[str, float]]:
        seen["similar"] = ranking(*args)
        return seen["similar"]  # type: ignore[no-any-return]

    def record_rerank(*args: Any) -> Any:
        seen["lexical"] = [(h.memory.id, h.score) for h in args[5]]  # (store, ..., lexical)
        return rerank(*args)

    def record_scores(*args: Any, **kwargs: Any) -> dict[str, float]:
        seen["shares"] = kwargs.get("shares") or {}
        return scores(*args, **kwargs)

    meaning.hybrid_rerank, meaning.dense_ranking = record_rerank, record_ranking
    meaning.dense_scores = record_scores  # type: ignore[assignment]
    try:
        yield seen
    finally:
        meaning.hybrid_rerank, meaning.dense_ranking = rerank, ranking
        meaning.dense_scores = scores


def record(sets: dict[str, list[Corpus]], model: str, cache: Path | None) -> Recording:
    """Ask every question through the real service with ``model``'s embeddings."""
    recording = Recording(model)
    build = run.cortex_search(model, cache=cache)
    for suite, _ in SUITES:
        recording.pools[suite] = pools = {}
        for corpus in sets[suite]:
            search = build(corpus)
            unit = search.unit_of
            pools[corpus.name] = asked = {}
            recording.words[f"{suite}/{corpus.name}"] = {
                u.id: len(u.text.split()) for u in corpus.units
            }
            for question in corpus.questions:
                with captured() as seen:
                    ranked = search(question.text, DEPTH)
                asked[question.text] = Pools(
                    [(unit[m], s) for m, s in seen.get("lexical", [])],
                    [(unit[m], c) for m, c in seen.get("similar", [])],
                    ranked,
                    {unit[m]: share for m, share in seen.get("shares", {}).items() if share < 1},
                )
        print(f"  recorded {suite}", file=sys.stderr)
    return recording


# -- variants --------------------------------------------------------------------------------
Fuse = Callable[[Pools, dict[str, int]], list[str]]


def _sorted(scores: dict[str, float]) -> list[str]:
    return sorted(scores, key=lambda unit: -scores[unit])  # (stable: lexical order first)


def service(pools: Pools, words: dict[str, int]) -> list[str]:
    """The shipped formula, as ``services.embeddings.hybrid_rerank`` applies it."""
    chosen = dense_pool(pools.similar, {unit for unit, _ in pools.lexical})
    if not chosen:
        return lexical(pools, words)
    return _sorted(dense_scores(pools.lexical, chosen, words, shares=pools.shares))


def lexical(pools: Pools, words: dict[str, int]) -> list[str]:
    return [unit for unit, _ in pools.lexical]


def bonus(
    pools: Pools,
    words: dict[str, int],
    weight: float = DENSE_WEIGHT,
    full_words: float = DENSE_FULL_WORDS,
    power: float = 2.0,
    pool: float = DENSE_POOL,
    join: float = DENSE_JOIN,
) -> list[str]:
    hits = {unit for unit, _ in pools.lexical}
    chosen = dense_pool(pools.similar, hits, int(pool), join)
    if not chosen:
        return lexical(pools, words)
    add = partial(dense_bonus, weight=weight, full_words=int(full_words), power=power)
    return _sorted(dense_scores(pools.lexical, chosen, words, add, pools.shares))


def scaled(
    pools: Pools,
    words: dict[str, int],
    weight: float = 2.0,
    power: float = 1.0,
    full_words: float = 100,
    join: float = DENSE_JOIN,
) -> list[str]:
    hits = {unit for unit, _ in pools.lexical}
    chosen = dense_pool(pools.similar, hits, DENSE_POOL, join)
    scores = dense_scores(pools.lexical, [], words)
    for unit, _, closer in chosen:
        if unit in scores:
            length = min(1.0, words[unit] / full_words)
            scores[unit] *= 1 + weight * length * closer**power
        else:
            scores[unit] = dense_bonus(closer, words[unit])
    return _sorted(scores)


def rrf(
    pools: Pools, words: dict[str, int], k: float = 60, weight: float = 1.0, depth: float = 20
) -> list[str]:
    scores: dict[str, float] = {}
    for rank, (unit, _) in enumerate(pools.lexical, 1):
        scores[unit] = 1 / (k + rank)
    for rank, (unit, _) in enumerate(pools.similar[: int(depth)], 1):
        scores[unit] = scores.get(unit, 0.0) + weight / (k + rank)
    return _sorted(scores)


FAMILIES: dict[str, Callable[..., list[str]]] = {
    "service": service,
    "lexical": lexical,
    "bonus": bonus,
    "scaled": scaled,
    "rrf": rrf,
}


def parse_variant(text: str) -> Fuse:
    """``family:key=value,...`` as a ranking function; ValueError names what is wrong."""
    family, _, rest = text.partition(":")
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; choose from {', '.join(FAMILIES)}")
    params: dict[str, float] = {}
    for item in filter(None, rest.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"{item!r} in {text!r} is not key=value")
        params[key.strip()] = float(value)
    fuse = FAMILIES[family]
    fuse(Pools([], [], []), {}, **params)  # an unknown key fails here, not mid-run
    return partial(fuse, **params)


def sweep() -> list[str]:
    """The grid measured in docs/benchmarks-history.md (the twentieth sitting)."""
    out = ["service", "lexical"]
    grid = itertools.product((1, 1.5, 2, 3), (50, 100, 150, 200, 300, 400), (1, 2))
    out += [f"bonus:weight={w},full_words={f},power={p}" for w, f, p in grid]
    grid2 = itertools.product((0.5, 1, 2, 4), (1, 2), (0.5, 9), (1, 100))
    out += [f"scaled:weight={w},power={p},join={j},full_words={f}" for w, p, j, f in grid2]
    grid3 = itertools.product((5, 20, 60), (0.3, 0.5, 1), (20, 50))
    out += [f"rrf:k={k},weight={w},depth={d}" for k, w, d in grid3]
    return out


# -- scoring ---------------------------------------------------------------------------------
def score_variant(
    recording: Recording, sets: dict[str, list[Corpus]], fuse: Fuse
) -> dict[str, Any]:
    """``run.py``'s report of one variant (per set: the table, the headline mean, each
    corpus's), ranking from the recording."""
    report = {}
    for suite, _ in SUITES:
        build = partial(_replay, recording, suite, fuse)
        with contextlib.redirect_stderr(io.StringIO()):
            result = run.run_suites({suite: sets[suite]}, {"v": build})[suite]["v"]
        report[suite] = {k: result[k] for k in ("table", "overall", "per_corpus", "answers")}
    return report


def _replay(recording: Recording, suite: str, fuse: Fuse, corpus: Corpus) -> run.Search:
    """A ``Search`` over one corpus that ranks its recorded pools with ``fuse``."""
    asked, words = recording.pools[suite][corpus.name], recording.words[f"{suite}/{corpus.name}"]
    return lambda query, limit: fuse(asked[query], words)[:limit]


def check_service(recording: Recording, sets: dict[str, list[Corpus]]) -> None:
    """Stop when the shipped formula on the recorded inputs is not the service's ranking."""
    for suite, _ in SUITES:
        for corpus in sets[suite]:
            words = recording.words[f"{suite}/{corpus.name}"]
            for question in corpus.questions:
                pools = recording.pools[suite][corpus.name][question.text]
                if service(pools, words)[:DEPTH] != pools.ranked:
                    raise SystemExit(
                        f"the recording does not give the service's ranking ({suite}, "
                        f"{corpus.name}: {question.text!r}); record again with --record"
                    )


def table(rows: Sequence[tuple[str, dict[str, float], bool]]) -> str:
    names = [k for k in rows[0][1] if k not in dict((c[0], 0) for c in COLUMNS)]
    labels = [c[0] for c in COLUMNS]
    head = ["variant", *labels, "LoCoMo per conversation, R@10", "keeps every split"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for variant, row, keeps in rows:
        cells = [f"{row[k]:.1f}" for k in labels]
        per = " ".join(f"{row[n]:.1f}" for n in names)
        lines.append(f"| `{variant}` | " + " | ".join(cells) + f" | {per} | {'yes' * keeps} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--variant", action="append", help="family:key=value,... (repeatable)")
    parser.add_argument("--sweep", action="store_true", help="every variant of the grid")
    parser.add_argument("--record", action="store_true", help="record the pools again")
    parser.add_argument("--embeddings", default="minilm", help="the embedder (default minilm)")
    parser.add_argument("--data", type=Path, default=run.DATA, help="the dev sets' folder")
    parser.add_argument(
        "--results", type=Path, default=run.RESULTS, help="the recording and embeddings cache"
    )
    parser.add_argument(
        "--no-embedding-cache", action="store_true", help="embed again while recording"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    names = args.variant or (sweep() if args.sweep else list(DEFAULT_VARIANTS))
    try:
        variants = {name: parse_variant(name) for name in names}
    except (ValueError, TypeError) as exc:
        parser.error(str(exc))
    sets = run.corpora_of(args.data)
    path = args.results / f"fusion-{args.embeddings}.json"
    if args.record or not path.exists():
        cache = None if args.no_embedding_cache else args.results
        recording = record(sets, args.embeddings, cache)
        args.results.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(recording.to_json()))
    recording = Recording.from_json(json.loads(path.read_text()))
    check_service(recording, sets)
    base = figures(score_variant(recording, sets, service))
    rows = []
    for number, (name, fuse) in enumerate(variants.items(), 1):
        row = figures(score_variant(recording, sets, fuse))
        rows.append((name, row, keeps_every_split(row, base)))
        print(f"[{number}/{len(variants)}] {name}", file=sys.stderr)
    if args.json:
        print(json.dumps([{"variant": n, "figures": r, "keeps_every_split": k}
                          for n, r, k in rows], indent=2))  # fmt: skip
    else:
        print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
