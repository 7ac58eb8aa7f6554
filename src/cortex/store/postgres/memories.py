"""Memories of one tenant: rows, supersession by upsert key, full-text search and links.

Full text is the generated ``search_vector`` (content weighted A, tags B) with a GIN index;
a search ORs its terms (each through ``plainto_tsquery``, so no term is syntax) and ranks by
``ts_rank``: higher is better. Supersession is SQLite's: a memory with an ``upsert_key``
supersedes the live memory with the same scope, project, user, type and key, which gets
``superseded_by``/``superseded_at`` while the new one names it in ``supersedes``: their link,
held by the two rows (``cortex.store.links``), not a link row. Two servers
upserting the same key serialize on an advisory lock, so the second supersedes the first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cortex.core.memory_models import Memory, MemoryFilter, MemoryLink
from cortex.core.retrieval import like_patterns
from cortex.store.filters import LIKE_SCAN_ROWS, adjacent_sql, memory_filter_sql
from cortex.store.links import supersedes_from, supersedes_to
from cortex.store.postgres.db import LOCK_UPSERT_KEY, Runner
from cortex.store.records import (
    MEMORY_COLUMNS,
    MEMORY_EDITABLE,
    memory_edit_values,
    memory_from_row,
    memory_values,
)

SELECT = ", ".join(f"m.{c}" for c in MEMORY_COLUMNS)
# A new row names the memory it supersedes in its own ``supersedes`` column (m024).
_INSERT = (
    f"INSERT INTO memories (tenant_id, {', '.join(MEMORY_COLUMNS)}, supersedes) "
    f"VALUES (%s, {', '.join('%s' for _ in MEMORY_COLUMNS)}, %s)"
)
_UPDATE = (
    f"UPDATE memories SET {', '.join(f'{c} = %s' for c in MEMORY_EDITABLE)} "
    "WHERE tenant_id = %s AND id = %s"
)
# The same expressions as idx_memories_upsert_live, so the lookup is served by that index.
_LIVE_KEY = (
    "SELECT id FROM memories WHERE tenant_id = %s AND scope = %s "
    "AND COALESCE(project_id, '') = COALESCE(%s, '') AND COALESCE(user_id, '') = "
    "COALESCE(%s, '') AND type = %s AND upsert_key = %s "
    "AND deleted_at IS NULL AND superseded_at IS NULL FOR UPDATE"
)
_LINK = (
    "INSERT INTO memory_links (tenant_id, from_id, to_id, kind, created_at) "
    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"
)
# ts_rank weights {D, C, B, A}: content (A) counts fully, tags (B) half, as in SQLite's bm25.
_WEIGHTS = "'{0.1, 0.2, 0.5, 1.0}'"
_MAX_PROBLEMS = 50


def filter_sql(flt: MemoryFilter, now: str) -> tuple[str, list[Any]]:
    """The WHERE clause (over alias ``m``, tenant excluded) of what ``flt`` sees at ``now``."""
    return memory_filter_sql(flt, now, mark="%s", find="strpos")


def search_sql(
    tenant: str, terms: Sequence[str], flt: MemoryFilter, now: str, limit: int
) -> tuple[str, tuple[Any, ...]]:
    """The full-text query: memories holding any term (the OR of one ``plainto_tsquery`` per
    term, served by the GIN index), ``flt``'s filter, best first."""
    query = " || ".join("plainto_tsquery('english', %s)" for _ in terms)
    where, params = filter_sql(flt, now)
    score = f"ts_rank({_WEIGHTS}, m.search_vector, q.query, 1)"
    order = "score DESC, m.seq DESC"
    sql = (
        f"SELECT {SELECT}, {score} AS score FROM memories m "
        f"CROSS JOIN (SELECT {query}) AS q(query) "
        f"WHERE m.tenant_id = %s AND m.search_vector @@ q.query AND {where} "
        f"ORDER BY {order} LIMIT %s"
    )
    return sql, (*terms, tenant, *params, limit)


class MemoryRepository:
    """The memories and memory links of one tenant."""

    def __init__(self, db: Runner) -> None:
        self.db = db

    def add(self, memories: Sequence[Memory]) -> list[str | None]:
        """Insert in one transaction; per memory, the id of the live one its key superseded."""
        superseded: list[str | None] = [None] * len(memories)
        tenant = self.db.tenant
        with self.db.transaction():
            plain = [(tenant, *memory_values(m), None) for m in memories if m.upsert_key is None]
            if plain:
                self.db.executemany(_INSERT, plain)
            for index, m in enumerate(memories):
                if m.upsert_key is not None:
                    superseded[index] = self._upsert_one(m)
        return superseded

    def _upsert_one(self, m: Memory) -> str | None:
        key = (m.scope, m.project, m.user_id, m.type, m.upsert_key)
        # Held to commit: a racing upsert of the same key waits, then supersedes this one.
        self.db.lock(LOCK_UPSERT_KEY, "\x1f".join([self.db.tenant, *(k or "" for k in key)]))
        found = self.db.one(_LIVE_KEY, (self.db.tenant, *key))
        old_id = str(found[0]) if found else None
        if old_id is not None:
            self.db.execute(
                "UPDATE memories SET superseded_by = %s, superseded_at = %s, updated_at = %s "
                "WHERE tenant_id = %s AND id = %s",
                (m.id, m.created_at, m.created_at, self.db.tenant, old_id),
            )
        self.db.execute(_INSERT, (self.db.tenant, *memory_values(m), old_id))
        return old_id

    def get(self, memory_id: str) -> Memory | None:
        row = self.db.one(
            f"SELECT {SELECT} FROM memories m WHERE m.tenant_id = %s AND m.id = %s",
            (self.db.tenant, memory_id),
        )
        return memory_from_row(row) if row else None

    def update(self, memory: Memory) -> None:
        """Rewrite the editable columns (the search vector follows: it is generated)."""
        self.db.execute(_UPDATE, (*memory_edit_values(memory), self.db.tenant, memory.id))

    def delete(self, memory_id: str, at: str) -> bool:
        """Soft delete: set ``deleted_at``; False if there is no such undeleted memory."""
        changed = self.db.execute(
            "UPDATE memories SET deleted_at = %s, updated_at = %s "
            "WHERE tenant_id = %s AND id = %s AND deleted_at IS NULL",
            (at, at, self.db.tenant, memory_id),
        )
        return changed > 0

    def listing(self, flt: MemoryFilter, now: str, *, limit: int, offset: int) -> list[Memory]:
        """Memories ``flt`` sees at ``now``, newest first."""
        rows = self.db.rows(*self.listing_query(flt, now, limit=limit, offset=offset))
        return [memory_from_row(r) for r in rows]

    def listing_query(
        self, flt: MemoryFilter, now: str, *, limit: int, offset: int
    ) -> tuple[str, tuple[Any, ...]]:
        """The SELECT of ``listing`` (a store may send it ahead of the call)."""
        where, params = filter_sql(flt, now)
        return (
            f"SELECT {SELECT} FROM memories m WHERE m.tenant_id = %s AND {where} "
            "ORDER BY m.seq DESC LIMIT %s OFFSET %s",
            (self.db.tenant, *params, limit, offset),
        )

    def by_id(self, memory_ids: Sequence[str], flt: MemoryFilter, now: str) -> list[Memory]:
        """Those of ``memory_ids`` that ``flt`` sees at ``now``, by ``seq``."""
        if not memory_ids:
            return []
        where, params = filter_sql(flt, now)
        rows = self.db.rows(
            f"SELECT {SELECT} FROM memories m WHERE m.tenant_id = %s AND m.id = ANY(%s) "
            f"AND {where} ORDER BY m.seq",
            (self.db.tenant, list(memory_ids), *params),
        )
        return [memory_from_row(r) for r in rows]

    def count(self, flt: MemoryFilter, now: str) -> int:
        where, params = filter_sql(flt, now)
        row = self.db.one(
            f"SELECT count(*) FROM memories m WHERE m.tenant_id = %s AND {where}",
            (self.db.tenant, *params),
        )
        return int(row[0]) if row else 0

    def search(
        self, terms: Sequence[str], flt: MemoryFilter, now: str, *, limit: int
    ) -> list[tuple[Memory, float]]:
        """Memories ``flt`` sees that hold any of ``terms``, best ``ts_rank`` first (ties:
        newest), as relevances relative to the best one; when no word matches, substring
        matches with relevance 0 (the service ranks those by term overlap)."""
        words = [t for t in terms if t.strip()]
        if not words or limit <= 0:
            return []
        sql, params = search_sql(self.db.tenant, words, flt, now, limit)
        found = [(memory_from_row(r), float(r[-1])) for r in self.db.rows(sql, params)]
        if not found:
            return [(m, 0.0) for m in self._substring(words, flt, now, limit)]
        best = max(score for _, score in found)
        return [(m, score / best if best > 0 else 1.0) for m, score in found]

    def _substring(
        self, terms: Sequence[str], flt: MemoryFilter, now: str, limit: int
    ) -> list[Memory]:
        """Memories whose content or tags contain any term literally, newest first, among
        the tenant's newest ``LIKE_SCAN_ROWS`` live memories (``ILIKE`` reads every row it
        considers: a term no memory holds read the whole tenant)."""
        where, params = filter_sql(flt, now)
        patterns = like_patterns(terms)
        sql = (
            f"SELECT {SELECT} FROM memories m WHERE m.tenant_id = %s AND {where} "
            "AND m.seq >= COALESCE((SELECT seq FROM memories WHERE tenant_id = %s "
            "AND deleted_at IS NULL AND superseded_at IS NULL ORDER BY seq DESC "
            "OFFSET %s LIMIT 1), 0) "
            "AND (m.content ILIKE ANY(%s) OR m.tags ILIKE ANY(%s)) ORDER BY m.seq DESC LIMIT %s"
        )
        tenant = self.db.tenant
        rows = self.db.rows(
            sql,
            (tenant, *params, tenant, LIKE_SCAN_ROWS - 1, patterns, patterns, limit),
        )
        return [memory_from_row(r) for r in rows]

    # -- links -------------------------------------------------------------------------------
    def add_link(self, link: MemoryLink) -> None:
        self.db.execute(
            _LINK, (self.db.tenant, link.from_id, link.to_id, link.kind, link.created_at)
        )

    def links(self, memory_id: str) -> list[MemoryLink]:
        """Links from or to ``memory_id``, link rows and those the memories rows hold."""
        tenant = self.db.tenant
        rows = self.db.rows(
            "SELECT from_id, to_id, kind, created_at FROM memory_links "
            "WHERE tenant_id = %s AND (from_id = %s OR to_id = %s) "
            f"UNION ALL {supersedes_from('n.id = %s', '%s')} "
            f"UNION ALL {supersedes_to('o.id = %s', '%s')} "
            "ORDER BY from_id, to_id, kind",
            (tenant, memory_id, memory_id, tenant, memory_id, tenant, memory_id),
        )
        return [MemoryLink(str(a), str(b), str(k), str(at)) for a, b, k, at in rows]

    def linked(
        self, memory_ids: Sequence[str], flt: MemoryFilter, now: str
    ) -> list[tuple[str, str, Memory]]:
        """(seed id, link kind, neighbour) one hop from ``memory_ids``, either direction,
        neighbours ``flt`` sees at ``now`` only."""
        if not memory_ids:
            return []
        where, params = filter_sql(flt, now)
        ids = list(memory_ids)
        rows = self.db.rows(
            "WITH hop AS ("
            "SELECT from_id AS seed, to_id AS other, kind FROM memory_links "
            "WHERE tenant_id = %s AND from_id = ANY(%s) UNION ALL "
            "SELECT to_id, from_id, kind FROM memory_links WHERE tenant_id = %s AND to_id = ANY(%s)"
            " UNION ALL SELECT from_id, to_id, kind FROM ("
            f"{supersedes_from('n.id = ANY(%s)', '%s')}) AS f UNION ALL "
            f"SELECT to_id, from_id, kind FROM ({supersedes_to('o.id = ANY(%s)', '%s')}) AS t"
            f") SELECT {SELECT}, hop.seed, hop.kind FROM hop "
            "JOIN memories m ON m.tenant_id = %s AND m.id = hop.other "
            f"WHERE {where}",
            (*[self.db.tenant, ids] * 4, self.db.tenant, *params),
        )
        return [(str(r[-2]), str(r[-1]), memory_from_row(r)) for r in rows]

    def adjacent(
        self, memory_ids: Sequence[str], flt: MemoryFilter, now: str
    ) -> list[tuple[str, Memory]]:
        """``Store.adjacent_memories`` in this tenant: the memories next to ``memory_ids``
        in their sessions, those ``flt`` sees at ``now``."""
        if not memory_ids:
            return []
        where, params = filter_sql(flt, now)
        sql = adjacent_sql(SELECT, "s.id = ANY(%s)", where, tenant="%s")
        rows = self.db.rows(sql, (self.db.tenant, list(memory_ids), self.db.tenant, *params))
        return [(str(r[-1]), memory_from_row(r)) for r in rows]

    def problems(self) -> list[str]:
        """Supersession that points nowhere, half-set, and links to missing memories."""
        rows = self.db.rows(
            "SELECT m.id, 'is superseded by missing memory ' || m.superseded_by FROM memories m "
            "WHERE m.tenant_id = %s AND m.superseded_by IS NOT NULL AND NOT EXISTS ("
            "SELECT 1 FROM memories n WHERE n.tenant_id = m.tenant_id AND n.id = m.superseded_by)"
            " UNION ALL SELECT m.id, 'has only one of superseded_by and superseded_at' "
            "FROM memories m WHERE m.tenant_id = %s "
            "AND (m.superseded_by IS NULL) <> (m.superseded_at IS NULL)"
            " UNION ALL SELECT l.from_id || ' -> ' || l.to_id, 'links a missing memory' "
            "FROM memory_links l WHERE l.tenant_id = %s AND (NOT EXISTS (SELECT 1 FROM memories "
            "n WHERE n.tenant_id = l.tenant_id AND n.id = l.from_id) OR NOT EXISTS (SELECT 1 "
            "FROM memories n WHERE n.tenant_id = l.tenant_id AND n.id = l.to_id)) "
            "ORDER BY 1, 2 LIMIT %s",
            (self.db.tenant, self.db.tenant, self.db.tenant, _MAX_PROBLEMS),
        )
        return [f"memory {what} {problem}" for what, problem in rows]
