"""Memory search over SQLite: FTS5 candidates by ``bm25``, planned to stay fast at scale.

One call, ``search_memories(terms, ...)``, picks the cheapest way to good candidates:

- FTS5 ranks the OR of the terms by ``bm25`` (an ``ORDER BY rank LIMIT k`` inside the FTS
  table, so no join runs per match), then the best ``k`` are filtered by scope, layer and
  liveness through the primary key; ``k`` grows only when the filter leaves too few.
- On a large store (``LARGE_STORE``) ranking every match of a common term would cost tens
  of milliseconds per query at a million memories. There a bounded pool of candidates (the
  rare terms' best, the newest memories holding common terms: ``_pooled``) is scored by
  FTS5's ``bm25`` formula over every query term (``bm25.PoolScorer``), so each term weighs
  in every candidate's score as it would in a full ranking.
- When FTS5 finds nothing, or this SQLite has no FTS5, a ``LIKE`` over the newest
  ``LIKE_SCAN_ROWS`` memories finds substrings (word fragments) instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from cortex.core.memory_models import Memory, MemoryFilter
from cortex.store.filters import LIKE_SCAN_ROWS
from cortex.store.records import memories_from_rows
from cortex.store.sqlite.bm25 import PoolScorer
from cortex.store.sqlite.db import Database
from cortex.store.sqlite.memories import COLUMNS, filter_sql, marks

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

MAX_CANDIDATES = 1 << 12
"""Deepest full-text candidate list filtered by scope: bounds the cost of a narrow filter."""
ANCHOR_DOCS = 10_000
"""A common term in at most this many memories also anchors a pass of its own: memories
holding it and another common term (FTS5 reads its matches, ~0.3 ms)."""
ANCHORED = 3
"""An anchored pass brings this many times the limit: the exact scores then prefer the
shorter memories holding the same terms, and those holding a term twice."""
COMMON_SCAN = 1000
"""A large store looks for the memories holding several common terms among the newest
memories only, as many as hold about this many matches of the terms together (~1 ms)."""
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
        self._scorer = PoolScorer(db)

    def schema_changed(self) -> None:
        """Forget what is known of the schema (a migration may have made the FTS index)."""
        self._fts = None

    def has_fts(self) -> bool:
        """Whether the FTS5 index exists (it does not on a SQLite built without FTS5)."""
        if self._fts is None:
            rows = self._db.rows("SELECT 1 FROM sqlite_master WHERE name = 'memories_fts'")
            self._fts = bool(rows)
        return self._fts

    def merge_index(self) -> None:
        """Merge the full-text index's segments into one (FTS5's ``optimize``), if there is
        an index. Each commit adds a segment, and FTS5 merges them only by fours of a size,
        so an index built by ingest holds a dozen or more; a search looks up each of its
        terms in every one. At 1,000,000 memories (15 segments) a merged index answered the
        speed benchmark's questions 12 % faster at the p50 and the p95, with the same
        results; merging took under a second."""
        if self.has_fts():
            with self._db.transaction():
                self._db.run("INSERT INTO memories_fts(memories_fts) VALUES ('optimize')")

    def index_segments(self) -> int:
        """The full-text index's segments (0 without an index): what ``merge_index`` makes
        one."""
        if not self.has_fts():
            return 0
        return int(self._db.rows("SELECT count(DISTINCT segid) FROM memories_fts_idx")[0][0])

    def search_memories(
        self, terms: Sequence[str], flt: MemoryFilter, now: str, *, limit: int
    ) -> list[tuple[Memory, float]]:
        """Candidates for ``terms`` with their relevance (see the module docstring and
        ``MemoryStore.search_memories``)."""
        if not terms:
            return []
        if not self.has_fts():
            return self._substring(terms, flt, now, limit)
        from cortex.core.retrieval import LARGE_STORE, fts_query, relevances

        top = self.memory_count_estimate()
        if top > LARGE_STORE:
            found = self._pooled(terms, flt, now, limit, top)
        else:
            found = self.full_text(fts_query(terms), flt, now, limit=limit)
        if not found:
            return self._substring(terms, flt, now, limit)
        scores = relevances([bm25 for _, bm25 in found])
        return list(zip((m for m, _ in found), scores, strict=True))

    def _pooled(
        self, terms: Sequence[str], flt: MemoryFilter, now: str, limit: int, top: int
    ) -> list[tuple[Memory, float]]:
        """A large store's search (``top``: its highest memory seq): a bounded pool of
        candidates, each scored by ``bm25`` over every term that some memory holds
        (``PoolScorer``), the best ``limit`` first.

        The pool holds memories ``flt`` sees: the best ``limit`` by the rare terms' own
        ``bm25`` (``rare_terms``); the first ``ANCHORED * limit`` holding a rare term (or
        the least common one, in at most ``ANCHOR_DOCS`` memories) and another term, oldest
        first (FTS5 reads an AND forwards in half the time it takes backwards); then, unless
        ``limit`` candidates score at least the common terms' summed IDF, the best of the
        newest memories by the common terms they hold (``_by_sets``). A memory outside the
        pool that holds a rare term and no common one scores below the pool's rare ones."""
        from cortex.core.retrieval import (
            FREQUENT_DOCS,
            bm25_idf,
            fts_query,
            rare_terms,
        )

        rows, tokens = self._scorer.totals()
        known = {t: self._scorer.counted(t, rows) for t in dict.fromkeys(terms)}
        counts = self.term_doc_counts([t for t, n in known.items() if n is None], FREQUENT_DOCS)
        counts.update((t, n) for t, n in known.items() if n is not None)  # common ones
        present = [t for t in known if counts.get(t, 0) > 0]
        if not present:
            return []
        rare = rare_terms(present, counts)
        where, params = filter_sql(flt, now)
        if len(present) > 1:
            docs = self._scorer.doc_counts(present, counts, FREQUENT_DOCS, rows)
        else:  # a lone term's weight scales every score alike: relevances need no full count
            docs = {present[0]: counts[present[0]]}
        common = sorted((t for t in present if t not in rare), key=lambda t: docs[t])
        pool: dict[int, float] = {}
        if rare:
            pool.update(self._passing(fts_query(rare), "rank", where, params, limit))
        anchors = [rare] if rare and common else []
        anchors += [[t] for t in common[:1] if docs[t] <= ANCHOR_DOCS and len(common) > 1]
        for anchor in anchors:  # a rare (or the least common) term's matches, read in full
            rest = fts_query([t for t in common if t not in anchor])
            both = f"({fts_query(anchor)}) AND ({rest})"
            pool.update(self._passing(both, "rowid", where, params, ANCHORED * limit))
        scores = self._scorer.scores(list(pool), docs, rows, tokens)
        idf = {t: bm25_idf(rows, docs[t]) for t in common}
        heaviest = sum(idf.values())
        if common and sum(1 for score in scores.values() if -score >= heaviest) < limit:
            found = self._by_sets(common, idf, docs, rows, top, where, params, limit)
            new = [seq for seq in found if seq not in scores]
            scores.update(self._scorer.scores(new, docs, rows, tokens))
        best = sorted(scores, key=lambda seq: (scores[seq], -seq))[:limit]  # ties: newest
        return self._read(best, scores)

    def _substring(
        self, terms: Sequence[str], flt: MemoryFilter, now: str, limit: int
    ) -> list[tuple[Memory, float]]:
        from cortex.core.retrieval import like_patterns

        patterns = like_patterns(terms)
        found = self.like_memories(patterns, flt, now, limit=limit, newest=LIKE_SCAN_ROWS)
        return [(m, 0.0) for m in found]

    def full_text(
        self, match: str, flt: MemoryFilter, now: str, *, limit: int
    ) -> list[tuple[Memory, float]]:
        """FTS5 candidates for ``match`` (an FTS5 expression) that ``flt`` sees, best ``bm25``
        first (lower is better; empty without FTS5): FTS5 ranks every match."""
        if not self.has_fts() or not match:
            return []
        where, params = filter_sql(flt, now)
        scores = dict(self._passing(match, "rank", where, params, limit))
        return self._read(list(scores), scores)

    def _by_sets(
        self,
        common: list[str],
        idf: dict[str, float],
        docs: dict[str, int],
        rows: int,
        top: int,
        where: str,
        params: list[Any],
        limit: int,
    ) -> list[int]:
        """The first ``2 * limit`` memories that pass ``where`` among the newest ones holding a
        common term, the heaviest set of terms first (``common_sets``), newest first within a
        set (twice the limit: the exact scores then prefer the shorter memories of a set, and
        those of a lighter set with a better score). "Newest": the latest memories holding
        about ``COMMON_SCAN`` matches of the terms together (FTS5 reads a term's matches in a
        range of rowids quickly; an AND of common terms reads all their matches, ~3 ms for
        two terms in 80,000 memories each)."""
        from cortex.core.retrieval import common_sets, fts_query

        if len(common) == 1:  # one set: the term's newest matches
            newest = self._passing(fts_query(common), "rowid DESC", where, params, 2 * limit)
            return [seq for seq, _ in newest]
        window = rows * COMMON_SCAN // max(1, sum(docs[t] for t in common))
        since = top - window
        sql = "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? AND rowid > ?"
        held = {t: {int(r[0]) for r in self._db.rows(sql, (fts_query([t]), since))} for t in common}
        ordered: list[int] = []
        seen: set[int] = set()
        for terms_set in common_sets(common, idf):
            found = set.intersection(*(held[t] for t in terms_set)) - seen
            ordered += sorted(found, reverse=True)
            seen |= found
            if len(ordered) >= MAX_CANDIDATES:
                break
        out: list[int] = []
        for start in range(0, len(ordered), limit * 8):
            page = ordered[start : start + limit * 8]
            passed = self._filtered(page, where, params)
            out += [seq for seq in page if seq in passed]
            if len(out) >= 2 * limit:
                break
        return out[: 2 * limit]

    def _passing(
        self,
        match: str,
        order: str,
        where: str,
        params: list[Any],
        limit: int,
    ) -> list[tuple[int, float]]:
        """The first ``limit`` matches of ``match`` in ``order`` (``rank``: best ``bm25``
        first; ``rowid DESC``: newest first, score 0; ``rowid``: oldest first, score 0) that
        pass ``where``, as (seq, score). Reads ``k`` matches at a time, up to
        ``MAX_CANDIDATES``: by ``rank`` again from the best with ``k`` grown when the filter
        left too few, by ``rowid`` on from the last one read."""
        ranked, newest = order == "rank", order == "rowid DESC"
        score = "rank" if ranked else "0.0"
        k, read, before = max(limit * 8, 64), 0, None
        found: list[tuple[int, float]] = []
        while True:
            after = "" if before is None else " AND rowid < ?" if newest else " AND rowid > ?"
            candidates = self._db.rows(
                f"SELECT rowid, {score} FROM memories_fts WHERE memories_fts MATCH ?{after} "
                f"ORDER BY {order} LIMIT ?",
                (match, *(() if before is None else (before,)), k),
            )
            read += len(candidates)
            passed = self._filtered([int(seq) for seq, _ in candidates], where, params)
            found = [] if ranked else found
            found += [(int(seq), float(s)) for seq, s in candidates if int(seq) in passed]
            if len(found) >= limit or len(candidates) < k or read >= MAX_CANDIDATES:
                return sorted(found, key=lambda f: (f[1], -f[0]))[:limit]  # ties: newest
            if ranked:
                k *= 8
            else:
                before = int(candidates[-1][0])

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

    def _filtered(self, seqs: list[int], where: str, params: list[Any]) -> set[int]:
        """Those of ``seqs`` whose memories pass ``where``, looked up by primary key."""
        passed: set[int] = set()
        for start in range(0, len(seqs), _PAGE):
            chunk = seqs[start : start + _PAGE]
            # NOT INDEXED: look rows up by primary key; with a long IN list the planner would
            # otherwise walk the layer index (10x slower at 100k memories).
            passed.update(
                int(r[0])
                for r in self._db.rows(
                    f"SELECT m.seq FROM memories AS m NOT INDEXED "
                    f"WHERE m.seq IN ({marks(chunk)}) AND {where}",
                    (*chunk, *params),
                )
            )
        return passed

    def _read(self, best: list[int], scores: dict[int, float]) -> list[tuple[Memory, float]]:
        """The memories ``best`` (seqs), in that order, each with its score in ``scores``."""
        if not best:
            return []
        rows = self._db.rows(
            f"SELECT {COLUMNS}, m.seq FROM memories m WHERE m.seq IN ({marks(best)})", best
        )
        order = {seq: index for index, seq in enumerate(best)}
        rows.sort(key=lambda r: order[int(r[-1])])
        memories = memories_from_rows(rows)
        return [(m, scores[int(r[-1])]) for m, r in zip(memories, rows, strict=True)]

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
