"""Retrieval quality of Cortex search vs plain BM25 on LoCoMo and LongMemEval (dev splits).

    .venv/bin/python bench/retrieval/run.py            # full dev splits, a few minutes on 2 cores
    .venv/bin/python bench/retrieval/run.py --quick    # 2 conversations, 20 questions
    .venv/bin/python bench/retrieval/run.py --embeddings minilm   # + hybrid (needs the extra)

The hybrid's vectors are kept in ``bench/results/embeddings-<model>.db`` (``CachedEmbedder``):
the first run embeds every unit and question (about nine minutes here), a rerun only what
changed (``--no-embedding-cache``: embed all again).

Systems, each indexing the same units per haystack:

- ``bm25``: plain SQLite FTS5 (default ``unicode61`` tokenizer), the OR of the question's
  words, ranked by ``bm25()``;
- ``bm25-porter``: the same with the ``porter`` stemmer (the research note's baseline);
- ``cortex-flat``: ``MemoryService.search`` over memories that name no session (stop words,
  porter, BM25 re-ranked, fit to the whole question, graph expansion): no session votes;
- ``cortex``: the same with each memory captured in its conversation's session, in order, so
  that a session's other candidates vote for it (``cortex.core.retrieval.session_votes``) and
  so do the turns next to it (``neighbour_votes``, ``context_neighbours``);
- ``cortex+<embedder>``: the same service with an embedder (hybrid: the question widened
  with the closest memories' words, ``core.expansion``, then the lexical ranking plus a bonus
  for meaning, ``core.retrieval.dense_bonus``).

Writes ``bench/results/retrieval.json`` (with, per system, every question's ``answers``: the
rank of each gold unit, None when outside the ranking, and its scores: what a miss analysis
reads) and prints markdown tables, with the ceiling of each recall_all@k (a question with more
gold units than k can never score).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import itertools
import json
import lzma
import re
import sqlite3
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from metrics import (  # noqa: E402
    Corpus,
    distinct_in_order,
    locomo_corpora,
    longmemeval_corpora,
    ndcg,
    recall_all,
    recall_any,
    recall_fraction,
)

from cortex.clock import FixedClock, parse_time  # noqa: E402
from cortex.config import load_config  # noqa: E402
from cortex.services.embeddings import from_blob, shared_embedder, to_blob  # noqa: E402
from cortex.services.memory import MemoryService, NewMemory  # noqa: E402
from cortex.services.sessions.manager import SessionPersistenceManager  # noqa: E402
from cortex.store import open_store  # noqa: E402
from cortex.store.vector_file import VectorFile  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
RESULTS = ROOT / "bench" / "results"
Search = Callable[[str, int], list[str]]


# -- systems ---------------------------------------------------------------------------------
def plain_bm25(tokenizer: str) -> Callable[[Corpus], Search]:
    """A fresh FTS5 table over the corpus; query = OR of the question's words, bm25 order."""

    def build(corpus: Corpus) -> Search:
        conn = sqlite3.connect(":memory:")
        conn.execute(f"CREATE VIRTUAL TABLE docs USING fts5(text, tokenize='{tokenizer}')")
        conn.executemany("INSERT INTO docs(rowid, text) VALUES (?, ?)",
                         [(i, u.text) for i, u in enumerate(corpus.units)])  # fmt: skip
        ids = [u.id for u in corpus.units]

        def search(query: str, k: int) -> list[str]:
            words = dict.fromkeys(re.findall(r"\w+", query.lower()))
            match = " OR ".join(f'"{w}"' for w in words)
            if not match:
                return []
            rows = conn.execute(
                "SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT ?", (match, k)
            ).fetchall()
            return [ids[r[0]] for r in rows]

        return search

    return build


class CachedEmbedder:
    """An embedder whose vectors are kept in a file by the text's digest
    (``cortex.store.vector_file``), so that a rerun of the benchmark (a change to the ranking,
    not to the model) embeds nothing it embedded before: the model's vectors of a text never
    change, and embedding LongMemEval's turns is nearly all of a hybrid run's time. The file
    is named after the model."""

    def __init__(self, inner: Any, folder: Path) -> None:
        self.inner, self.model, self.dim = inner, inner.model, inner.dim
        self.query_prefix, self.document_prefix = inner.query_prefix, inner.document_prefix
        self.file = VectorFile(folder / f"embeddings-{inner.model}.db")

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        digests = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        text_of = dict(zip(digests, texts, strict=True))  # (each text once)
        found = self.file.get(self.model, list(text_of))
        missing = [d for d in text_of if d not in found]
        if missing:
            vectors = self.inner.embed([text_of[d] for d in missing])
            blobs = dict(zip(missing, map(to_blob, vectors), strict=True))
            self.file.put(self.model, blobs)
            found |= blobs  # as stored (float32): a first run gives what a rerun does
        return [list(from_blob(found[d])) for d in digests]


@functools.cache
def cached_embedder(name: str, folder: Path) -> CachedEmbedder:
    """The process's one ``CachedEmbedder`` of ``name``'s model over the cache in ``folder``."""
    return CachedEmbedder(shared_embedder(name), folder)


def cortex_search(
    embedder_name: str | None = None, sessions: bool = True, cache: Path | None = None
) -> Callable[[Corpus], Search]:
    """``MemoryService`` over an in-memory store holding the corpus's units as memories, each
    captured in its conversation's session (``sessions``; without, no session votes). With
    ``cache``, the embedder's vectors are kept in a file there (``CachedEmbedder``). One
    embedder serves every corpus (``shared_embedder``): the model loads once, at its first
    text to embed."""

    def build(corpus: Corpus) -> Search:
        embedder = None
        if embedder_name:
            embedder = (
                shared_embedder(embedder_name)
                if cache is None
                else cached_embedder(embedder_name, cache)
            )
        config = load_config(ROOT / "bench" / "results" / "home", {})
        store, clock = open_store(":memory:"), FixedClock("2026-02-16T09:00:00Z")
        start = clock.at
        service = MemoryService(store, config, clock, embedder)
        units = [u for u in corpus.units if u.text.strip()]  # an empty memory is refused
        manager = SessionPersistenceManager(store, config, clock)
        session_ids = {u.session: f"s{i}" for i, u in enumerate(units)} if sessions else {}
        for sid in dict.fromkeys(session_ids.values()):  # each turn was captured in its session
            manager.on_session_start(sid, "bench")
        added = []
        for at, group in itertools.groupby(units, key=lambda u: u.at):
            clock.at = parse_time(at) if at else start  # each turn made when its session was
            added += service.add_many(
                [NewMemory(u.text, session_id=session_ids.get(u.session)) for u in group],
                actor="bench",
            )
        clock.at = parse_time(corpus.now) if corpus.now else start  # asked then
        unit_of = {r.memory.id: u.id for r, u in zip(added, units, strict=True)}
        return CortexSearch(service, unit_of)

    return build


class CortexSearch:
    """A ``Search`` over one corpus's ``MemoryService``; ``unit_of`` maps its memory ids to
    the corpus's unit ids (``fusion.py`` reads it)."""

    def __init__(self, service: MemoryService, unit_of: dict[str, str]) -> None:
        self.service, self.unit_of = service, unit_of

    def __call__(self, query: str, k: int) -> list[str]:
        return [self.unit_of[h.memory.id] for h in self.service.search(query, limit=k)]


# -- evaluation ------------------------------------------------------------------------------
Table = dict[str, dict[str, float]]


def _table(sums: dict[str, dict[str, float]], counts: dict[str, int]) -> Table:
    table = {cat: {m: 100 * v / counts[cat] for m, v in ms.items()} for cat, ms in sums.items()}
    for cat in table:
        table[cat]["n"] = counts[cat]
    return table


def evaluate(
    corpora: Sequence[Corpus],
    build: Callable[[Corpus], Search],
    depth: int,
    score: Callable[[list[str], Any], dict[str, float]],
    per_corpus: dict[str, Table] | None = None,
    build_seconds: list[float] | None = None,
    answers: list[dict[str, Any]] | None = None,
) -> tuple[Table, list[float]]:
    """Per-category means of ``score(ranked, question)``, and per-query latencies (ms).

    ``per_corpus`` (when given) receives each corpus's own table, ``build_seconds`` the time
    each index took to build, ``answers`` each question's ranking, gold and scores.
    """
    sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    counts: dict[str, int] = defaultdict(int)
    latencies: list[float] = []
    for corpus in corpora:
        started = time.perf_counter()
        search = build(corpus)
        if build_seconds is not None:
            build_seconds.append(time.perf_counter() - started)
        own: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        own_counts: dict[str, int] = defaultdict(int)
        for question in corpus.questions:
            started = time.perf_counter()
            ranked = search(question.text, depth)
            latencies.append((time.perf_counter() - started) * 1000)
            scores = score(ranked, question)
            for name, value in scores.items():
                sums[question.category][name] += value
                own[question.category][name] += value
            if answers is not None:
                answers.append(_answer(corpus, question, ranked, scores))
            counts[question.category] += 1
            own_counts[question.category] += 1
        if per_corpus is not None:
            per_corpus[corpus.name] = _table(own, own_counts)
    return _table(sums, counts), latencies


def _answer(
    corpus: Corpus, question: Any, ranked: list[str], scores: dict[str, float]
) -> dict[str, Any]:
    """One question's record for ``--answers``: where each gold unit ranked (None: not in the
    ranking's depth) and its scores."""
    return {
        "corpus": corpus.name,
        "category": question.category,
        "question": question.text,
        "gold_ranks": {
            g: ranked.index(g) + 1 if g in ranked else None for g in sorted(question.gold)
        },
        "scores": scores,
    }


def ceilings(answers: Sequence[dict[str, Any]]) -> dict[str, float]:
    """The best a perfect ranking could score on each recall_all@k metric: a question with
    more gold units than k can never have them all in its top k."""
    out: dict[str, float] = {}
    for name in answers[0]["scores"] if answers else ():
        if name.startswith("R_all@"):
            k = int(name.split("@")[1])
            out[name] = 100 * sum(len(a["gold_ranks"]) <= k for a in answers) / len(answers)
    return out


def overall(
    table: dict[str, dict[str, float]], cats: Sequence[str] | None = None
) -> dict[str, float]:
    """Question-weighted mean over categories (all, or ``cats``)."""
    chosen = [c for c in table if cats is None or c in cats]
    n = sum(table[c]["n"] for c in chosen)
    metrics = [m for m in table[chosen[0]] if m != "n"] if chosen else []
    out = {m: sum(table[c][m] * table[c]["n"] for c in chosen) / n for m in metrics}
    out["n"] = n
    return out


def locomo_score(ranked: list[str], q: Any) -> dict[str, float]:
    sessions = distinct_in_order(r.split(":")[0] for r in ranked)
    gold_sessions = {g.split(":")[0] for g in q.gold}
    return {
        "R@5": recall_fraction(ranked, set(q.gold), 5),
        "R@10": recall_fraction(ranked, set(q.gold), 10),
        "nDCG@10": ndcg(ranked, set(q.gold), 10),
        "sess R@5": recall_fraction(sessions, gold_sessions, 5),
    }


# LongMemEval metrics per retrieval level: name -> (metric, k).
LME_METRICS: dict[str, dict[str, tuple[Callable[[Sequence[str], set[str], int], float], int]]] = {
    "session": {
        "R_all@5": (recall_all, 5),
        "R_any@1": (recall_any, 1),
        "R_any@5": (recall_any, 5),
        "nDCG@10": (ndcg, 10),
    },
    "turn": {"R_all@10": (recall_all, 10), "R_any@5": (recall_any, 5), "nDCG@10": (ndcg, 10)},
}


def lme_score(level: str) -> Callable[[list[str], Any], dict[str, float]]:
    """The scorer of one LongMemEval level (``session`` or ``turn``)."""

    def score(ranked: list[str], q: Any) -> dict[str, float]:
        gold = set(q.gold)
        return {name: metric(ranked, gold, k) for name, (metric, k) in LME_METRICS[level].items()}

    return score


# -- reporting -------------------------------------------------------------------------------
def latency(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "mean_ms": statistics.fmean(ordered),
        "p50_ms": ordered[len(ordered) // 2],
        "p95_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))],
    }


def markdown(title: str, results: dict[str, Any], cats: Sequence[str], headline: str) -> str:
    systems = list(results)
    metrics = [m for m in next(iter(results.values()))["overall"] if m != "n"]
    lines = [f"### {title}", "", "| category | n | " + " | ".join(
        f"{s} {m}" for m in metrics for s in systems) + " |"]  # fmt: skip
    lines.append("| --- | ---: | " + " | ".join("---:" for _ in metrics for _ in systems) + " |")
    rows = [(c, results[systems[0]]["table"][c]) for c in cats if c in results[systems[0]]["table"]]
    rows.append((headline, results[systems[0]]["overall"]))
    for name, base in rows:
        cells = []
        for m in metrics:
            for s in systems:
                src = results[s]["overall"] if name == headline else results[s]["table"][name]
                cells.append(f"{src[m]:.1f}")
        lines.append(f"| {name} | {int(base['n'])} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("latency per query (mean / p95 ms): " + ", ".join(
        f"{s} {results[s]['latency']['mean_ms']:.2f} / {results[s]['latency']['p95_ms']:.2f}"
        for s in systems))  # fmt: skip
    ceiling = results[systems[0]].get("ceilings")
    if ceiling:
        bests = ", ".join(f"{m} {v:.1f}" for m, v in ceiling.items())
        lines.append(f"a perfect ranking's ceiling (more gold units than k never score): {bests}")
    return "\n".join(lines)


def per_conversation(results: dict[str, Any], metric: str = "R@10") -> str:
    """One row per LoCoMo conversation: ``metric`` (categories 1-4) of every system."""
    systems = list(results)
    lines = [f"#### LoCoMo per conversation, {metric} (categories 1-4)", "",
             "| conversation | n | " + " | ".join(systems) + " |",
             "| --- | ---: | " + " | ".join("---:" for _ in systems) + " |"]  # fmt: skip
    for name, row in results[systems[0]]["per_corpus"].items():
        cells = " | ".join(f"{results[s]['per_corpus'][name][metric]:.1f}" for s in systems)
        lines.append(f"| {name} | {int(row['n'])} | {cells} |")
    lines.append("")
    lines.append("index build per conversation (mean s): " + ", ".join(
        f"{s} {results[s]['build_seconds_mean']:.2f}" for s in systems))  # fmt: skip
    return "\n".join(lines)


def run_suite(
    name: str,
    corpora: Sequence[Corpus],
    systems: dict[str, Callable[[Corpus], Search]],
    depth: int,
    score: Callable[[list[str], Any], dict[str, float]],
    headline_cats: Sequence[str] | None,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for system, build in systems.items():
        started = time.perf_counter()
        per_corpus: dict[str, Table] = {}
        builds: list[float] = []
        answers: list[dict[str, Any]] = []
        table, lat = evaluate(corpora, build, depth, score, per_corpus, builds, answers)
        out[system] = {
            "table": table,
            "overall": overall(table, headline_cats),
            "latency": latency(lat),
            "seconds": time.perf_counter() - started,
            "build_seconds_mean": statistics.fmean(builds) if builds else 0.0,
            "per_corpus": {c: overall(t, headline_cats) for c, t in per_corpus.items()},
            "ceilings": ceilings(answers),
            "answers": answers,
        }
        print(f"  {name} / {system}: {out[system]['seconds']:.1f} s", file=sys.stderr)
    return out


LOCOMO_HEADLINE = ["multi-hop", "temporal", "open-domain", "single-hop"]
"""LoCoMo's categories in its headline figure (adversarial questions are reported apart)."""
SUITES = (("locomo", 50), ("lme_session", 10), ("lme_turn", 10))
"""Each set and the depth a system is asked to rank it to (LoCoMo's session recall reads the
sessions of a deep ranking). Cortex's first ten results are those of a search of ten at any
depth (``cortex.services.search.FIRST_PLACES``), so every figure that reads ten or fewer
places is what a default search gives."""


def corpora_of(
    data: Path, quick: bool = False, locomo_only: bool = False
) -> dict[str, list[Corpus]]:
    """The sets of ``SUITES`` from the dev data in ``data`` (``quick``: 2 conversations and
    20 questions; ``locomo_only``: no LongMemEval)."""
    locomo = json.loads((data / "locomo-dev.json").read_text())
    with lzma.open(data / "longmemeval-s-dev.json.xz") as fh:
        lme = json.load(fh)
    if quick:
        locomo, lme = locomo[:2], lme[:20]
    sets = {"locomo": locomo_corpora(locomo)}
    if not locomo_only:
        sets |= {f"lme_{level}": longmemeval_corpora(lme, level) for level in LME_METRICS}
    return sets


def run_suites(
    sets: dict[str, list[Corpus]], systems: dict[str, Callable[[Corpus], Search]]
) -> dict[str, dict[str, Any]]:
    """``run_suite`` of each of ``sets`` (in ``SUITES``' order) for ``systems``."""
    report = {}
    for suite, depth in SUITES:
        if suite in sets:
            locomo = suite == "locomo"
            score = locomo_score if locomo else lme_score(suite.removeprefix("lme_"))
            cats = LOCOMO_HEADLINE if locomo else None
            name = suite.replace("_", " ")
            report[suite] = run_suite(name, sets[suite], systems, depth, score, cats)
    return report


def report_markdown(report: dict[str, dict[str, Any]]) -> str:
    """The tables of ``run_suites``' report: LoCoMo's, per conversation, LongMemEval's."""
    headline = [*LOCOMO_HEADLINE, "adversarial"]
    parts = [
        markdown("LoCoMo, turn level (overall = categories 1-4)", report["locomo"], headline,
                 "overall 1-4"),
        per_conversation(report["locomo"]),
    ]  # fmt: skip
    if "lme_session" in report:
        kinds = sorted(next(iter(report["lme_session"].values()))["table"])
        for suite, level in (("lme_session", "session"), ("lme_turn", "turn")):
            parts.append(markdown(f"LongMemEval_S, {level} level", report[suite], kinds, "overall"))
    return "\n\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 conversations, 20 questions")
    parser.add_argument(
        "--embeddings",
        help="also run hybrid search with this embedder: minilm, or a model directory's path",
    )
    parser.add_argument(
        "--no-embedding-cache",
        action="store_true",
        help="embed every text again instead of reusing bench/results/embeddings-<model>.db",
    )
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--locomo-only", action="store_true", help="skip LongMemEval")
    parser.add_argument(
        "--systems", help="comma-separated systems to run (default: all), e.g. bm25,cortex"
    )
    args = parser.parse_args(argv)
    sets = corpora_of(args.data, args.quick, args.locomo_only)
    systems: dict[str, Callable[[Corpus], Search]] = {
        "bm25": plain_bm25("unicode61"),
        "bm25-porter": plain_bm25("porter unicode61"),
        "cortex-flat": cortex_search(sessions=False),
        "cortex": cortex_search(),
    }
    if args.embeddings:
        cache = None if args.no_embedding_cache else RESULTS
        label = Path(args.embeddings).name  # (a model directory's path: its name)
        systems[f"cortex+{label}"] = cortex_search(args.embeddings, cache=cache)
    if args.systems:
        chosen = args.systems.split(",")
        unknown = sorted(set(chosen) - set(systems))
        if unknown:
            parser.error(f"unknown systems {unknown}; choose from {sorted(systems)}")
        systems = {name: systems[name] for name in chosen}
    report = run_suites(sets, systems)
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "retrieval-locomo.json" if args.locomo_only else "retrieval.json"
    (RESULTS / name).write_text(json.dumps(report, indent=2))
    print(report_markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
