"""Memory search over SQLite: FTS5 candidates by ``bm25``, planned to stay fast at scale.

One call, ``search_memories(terms, ...)``, picks the cheapest way to good candidates:

- FTS5 ranks the OR of the terms by ``bm25`` (an ``ORDER BY rank LIMIT k`` inside the FTS
  table, so no join runs per match), then the best ``k`` are filtered by scope, layer and
  liveness through the primary key; ``k`` grows only when the filter leaves too few.
- On a large store (``LARGE_STORE``) the rare terms are ranked and the common ones only
  counted (``plan_terms``): ranking every match of a common term costs milliseconds per query
  at a million memories. When every term is common, the newest matches come back unranked.
- When FTS5 finds nothing, or this SQLite has no FTS5, a ``LIKE`` over the newest
  ``LIKE_SCAN_ROWS`` memories finds substrings (word fragments) instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from cortex.core.memory_models import Memory, MemoryFilter
from cortex.store.records import memories_from_rows
from cortex.store.sqlite.db import Database
from cortex.store.sqlite.memories import COLUMNS, filter_sql, marks

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

MAX_CANDIDATES = 1 << 12
"""Deepest full-text candidate list filtered by scope: bounds the cost of a narrow filter."""
LIKE_SCAN_ROWS = 10_000
"""The LIKE fallback reads at most the newest this many memories (a full scan of a million
rows would cost half a second)."""
_PAGE = 500


class MemorySearch:
    """The ``search_memories`` part of the protocol, and its SQLite building blocks.

    The methods that rank or plan import ``core.retrieval`` when first called: every store
    has this repository, and a session start or a hook event never searches (~1 ms of their
    imports).
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        self._fts: bool | None = None

    def schema_changed(self) -> None:
        """Forget what is known of the schema (a migration may have made the FTS index)."""
        self._fts = None

    def has_fts(self) -> bool:
        """Whether the FTS5 index exists (it does not on a SQLite built without FTS5)."""
        if self._fts is None:
            rows = self._db.rows("SELECT 1 FROM sqlite_master WHERE name = 'memories_fts'")
            self._fts = bool(rows)
        return self._fts

    def search_memories(
        self, terms: Sequence[str], flt: MemoryFilter, now: str, *, limit: int
    ) -> list[tuple[Memory, float]]:
        """Candidates for ``terms`` with their relevance (see the module docstring and
        ``MemoryStore.search_memories``)."""
        if not terms:
            return []
        if not self.has_fts():
            return self._substring(terms, flt, now, limit)
        from cortex.core.retrieval import (
            FREQUENT_DOCS,
            LARGE_STORE,
            fts_query,
            plan_terms,
            pruned_relevance,
            relevances,
        )

        chosen, by_recency = list(terms), False
        if self.memory_count_estimate() > LARGE_STORE:
            chosen, by_recency = plan_terms(terms, self.term_doc_counts(terms, FREQUENT_DOCS))
        if by_recency:  # bounded work: no bm25 pass, and no AND of common terms either
            newest = self.full_text(fts_query(terms), flt, now, limit=limit * 2, by_recency=True)
            return [(m, 0.0) for m, _ in newest]
        pruned = len(chosen) < len(terms)
        found = self.full_text(fts_query(chosen), flt, now, limit=limit * 2 if pruned else limit)
        if not found:
            return self._substring(terms, flt, now, limit)
        scored = zip((m for m, _ in found), relevances([bm25 for _, bm25 in found]), strict=True)
        if pruned:  # the common terms left out of bm25 still count, by overlap
            return [(m, pruned_relevance(r, terms, m)) for m, r in scored]
        return list(scored)

    def _substring(
        self, terms: Sequence[str], flt: MemoryFilter, now: str, limit: int
    ) -> list[tuple[Memory, float]]:
        from cortex.core.retrieval import like_patterns

        patterns = like_patterns(terms)
        found = self.like_memories(patterns, flt, now, limit=limit, newest=LIKE_SCAN_ROWS)
        return [(m, 0.0) for m in found]

    def full_text(
        self, match: str, flt: MemoryFilter, now: str, *, limit: int, by_recency: bool = False
    ) -> list[tuple[Memory, float]]:
        """FTS5 candidates for ``match`` (an FTS5 expression) that ``flt`` sees, best ``bm25``
        first (lower is better; empty without FTS5). ``by_recency``: the newest matches
        instead, with score 0 (no ``bm25`` pass)."""
        if not self.has_fts() or not match:
            return []
        where, params = filter_sql(flt, now)
        order = "rowid DESC" if by_recency else "rank"
        score = "0.0" if by_recency else "rank"
        k = max(limit * 8, 64)
        while True:
            candidates = self._db.rows(
                f"SELECT rowid, {score} FROM memories_fts WHERE memories_fts MATCH ? "
                f"ORDER BY {order} LIMIT ?",
                (match, k),
            )
            found, passed = self._memories_by_seq(candidates, where, params, limit)
            if passed >= limit or len(candidates) < k or k >= MAX_CANDIDATES:
                return found
            k *= 8

    def term_doc_counts(self, terms: Sequence[str], cap: int) -> dict[str, int]:
        """How many memories hold each term (FTS tokens), counted up to ``cap + 1`` only: a
        capped count stops early, so asking costs little even for very common terms."""
        if not self.has_fts():
            return {}
        from cortex.core.retrieval import fts_query

        sql = (
            "SELECT count(*) FROM (SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? "
            "LIMIT ?)"
        )
        return {t: int(self._db.rows(sql, (fts_query([t]), cap + 1))[0][0]) for t in terms}

    def memory_count_estimate(self) -> int:
        """The highest memory ``seq``: an upper bound of the row count, read from the index."""
        return int(self._db.rows("SELECT COALESCE(max(seq), 0) FROM memories")[0][0])

    def _memories_by_seq(
        self, candidates: list[tuple[Any, ...]], where: str, params: list[Any], limit: int
    ) -> tuple[list[tuple[Memory, float]], int]:
        """The best ``limit`` candidates that pass ``where``, and how many passed: filtered
        by seq first, so only the best are read whole."""
        scores = {int(seq): float(score) for seq, score in candidates}
        passed: list[int] = []
        seqs = list(scores)
        for start in range(0, len(seqs), _PAGE):
            chunk = seqs[start : start + _PAGE]
            # NOT INDEXED: look rows up by primary key; with a long IN list the planner would
            # otherwise walk the layer index (10x slower at 100k memories).
            passed += [
                int(r[0])
                for r in self._db.rows(
                    f"SELECT m.seq FROM memories AS m NOT INDEXED "
                    f"WHERE m.seq IN ({marks(chunk)}) AND {where}",
                    (*chunk, *params),
                )
            ]
        best = sorted(passed, key=lambda seq: (scores[seq], -seq))[:limit]  # ties: newest
        if not best:
            return [], 0
        rows = self._db.rows(
            f"SELECT {COLUMNS}, m.seq FROM memories m WHERE m.seq IN ({marks(best)})", best
        )
        order = {seq: index for index, seq in enumerate(best)}
        rows.sort(key=lambda r: order[int(r[-1])])
        memories = memories_from_rows(rows)
        return [(m, scores[int(r[-1])]) for m, r in zip(memories, rows, strict=True)], len(passed)

    def like_memories(
        self,
        patterns: Sequence[str],
        flt: MemoryFilter,
        now: str,
        *,
        limit: int,
        newest: int | None = None,
    ) -> list[Memory]:
        """Memories whose content or tags contain any escaped ``LIKE`` pattern, newest first
        (among the ``newest`` memories only, if given: a LIKE reads every row it considers)."""
        if not patterns:
            return []
        where, params = filter_sql(flt, now)
        if newest is not None:
            where += " AND m.seq > (SELECT COALESCE(max(seq), 0) FROM memories) - ?"
            params.append(newest)
        likes = " OR ".join(
            "m.content LIKE ? ESCAPE '\\' OR m.tags LIKE ? ESCAPE '\\'" for _ in patterns
        )
        rows = self._db.rows(
            f"SELECT {COLUMNS} FROM memories m WHERE {where} AND ({likes}) "
            "ORDER BY m.seq DESC LIMIT ?",
            (*params, *[p for p in patterns for _ in (0, 1)], limit),
        )
        return memories_from_rows(rows)
