"""The memory part of ``SQLiteStore``: memories, their FTS5 index, links and embeddings.

A mixin: ``SQLiteStore`` inherits it and provides the connection (``_conn``), ``url`` and
``transaction()``. Full-text search asks FTS5 for the best ``k`` candidates by ``bm25`` (an
``ORDER BY rank LIMIT`` inside the FTS table, so no join runs per match), then filters those
by scope, layer and liveness through the primary key; ``k`` grows only when the filter
leaves too few.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from cortex.core.memory_models import GLOBAL, Memory, MemoryFilter, MemoryLink
from cortex.errors import ConflictError

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

_MEMORY_COLUMNS = (
    "id",
    "content",
    "type",
    "memory_layer",
    "scope",
    "project_id",
    "user_id",
    "tags",
    "upsert_key",
    "source_session_id",
    "remember_intent",
    "confidence",
    "expires_at",
    "superseded_by",
    "superseded_at",
    "last_confirmed_at",
    "created_at",
    "updated_at",
    "deleted_at",
)
_SELECT = ", ".join(f"m.{c}" for c in _MEMORY_COLUMNS)
_INSERT = (
    f"INSERT INTO memories ({', '.join(_MEMORY_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in _MEMORY_COLUMNS)})"
)
_LIVE_KEY = (
    "SELECT id FROM memories WHERE scope = ? AND IFNULL(project_id, '') = IFNULL(?, '') "
    "AND IFNULL(user_id, '') = IFNULL(?, '') AND type = ? AND upsert_key = ? "
    "AND deleted_at IS NULL AND superseded_at IS NULL"
)
_MAX_CANDIDATES = 1 << 12
"""Deepest full-text candidate list filtered by scope: bounds the cost of a narrow filter."""
_PAGE = 500


def _tags_text(tags: Sequence[str]) -> str:
    """Tags as ``,a,b,``: FTS tokenizes it, and ``LIKE '%,a,%'`` matches one tag exactly."""
    return f",{','.join(tags)}," if tags else ""


def memory_row(m: Memory) -> tuple[Any, ...]:
    return (
        m.id,
        m.content,
        m.type,
        m.layer,
        m.scope,
        m.project,
        m.user_id,
        _tags_text(m.tags),
        m.upsert_key,
        m.source_session_id,
        m.remember_intent,
        m.confidence,
        m.expires_at,
        m.superseded_by,
        m.superseded_at,
        m.last_confirmed_at,
        m.created_at,
        m.updated_at,
        m.deleted_at,
    )


def memory_from_row(row: Sequence[Any]) -> Memory:
    data = dict(zip(_MEMORY_COLUMNS, row[: len(_MEMORY_COLUMNS)], strict=True))
    return Memory(
        id=str(data["id"]),
        content=str(data["content"]),
        layer=str(data["memory_layer"]),
        type=str(data["type"]),
        scope=str(data["scope"]),
        project=data["project_id"],
        user_id=data["user_id"],
        tags=tuple(t for t in str(data["tags"] or "").split(",") if t),
        upsert_key=data["upsert_key"],
        source_session_id=data["source_session_id"],
        remember_intent=str(data["remember_intent"]),
        confidence=float(data["confidence"]),
        expires_at=data["expires_at"],
        superseded_by=data["superseded_by"],
        superseded_at=data["superseded_at"],
        last_confirmed_at=data["last_confirmed_at"],
        created_at=str(data["created_at"]),
        updated_at=str(data["updated_at"]),
        deleted_at=data["deleted_at"],
    )


def filter_sql(flt: MemoryFilter, now: str) -> tuple[str, list[Any]]:
    """The WHERE clause (over alias ``m``) of what ``flt`` may see at ``now``."""
    clauses = ["m.deleted_at IS NULL"]
    params: list[Any] = []
    if not flt.include_history:
        clauses += ["m.superseded_at IS NULL", "(m.expires_at IS NULL OR m.expires_at > ?)"]
        params.append(now)
    clauses.append(f"m.memory_layer IN ({', '.join('?' for _ in flt.layers)})")
    params += list(flt.layers)
    if not flt.all_projects:
        if flt.project is None:
            clauses.append("m.scope = ?")
            params.append(GLOBAL)
        else:
            clauses.append("(m.scope = ? OR m.project_id = ?)")
            params += [GLOBAL, flt.project]
    if flt.user_id is not None:
        clauses.append("(m.user_id IS NULL OR m.user_id = ?)")
        params.append(flt.user_id)
    if flt.types:
        clauses.append(f"m.type IN ({', '.join('?' for _ in flt.types)})")
        params += list(flt.types)
    for tag in flt.tags:
        clauses.append("instr(m.tags, ?) > 0")
        params.append(f",{tag},")
    if flt.session_id is not None:
        clauses.append("m.source_session_id = ?")
        params.append(flt.session_id)
    return " AND ".join(clauses), params


class SQLiteMemoryMixin:
    """Memory methods of the ``Store`` protocol over SQLite."""

    url: str
    _conn: sqlite3.Connection
    _fts: bool | None = None

    if TYPE_CHECKING:

        def transaction(self) -> AbstractContextManager[None]: ...

    @contextlib.contextmanager
    def _mem_translated(self) -> Iterator[None]:
        from cortex.store.sqlite.store import storage_error

        try:
            yield
        except sqlite3.IntegrityError as exc:
            raise ConflictError(
                f"memory write conflicts with a live memory ({exc}); edit that memory instead"
            ) from exc
        except sqlite3.DatabaseError as exc:
            if type(exc) is sqlite3.DatabaseError or isinstance(exc, sqlite3.OperationalError):
                raise storage_error(exc, self.url) from exc
            raise

    def _mrows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._mem_translated():
            return self._conn.execute(sql, tuple(params)).fetchall()

    def _mexec(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        with self._mem_translated():
            return self._conn.execute(sql, tuple(params))

    # -- memories ----------------------------------------------------------------------------
    def has_fts(self) -> bool:
        """Whether the FTS5 index exists (it does not on a SQLite built without FTS5)."""
        if self._fts is None:
            rows = self._mrows("SELECT 1 FROM sqlite_master WHERE name = 'memories_fts'")
            self._fts = bool(rows)
        return self._fts

    def add_memories(self, memories: Sequence[Memory]) -> list[str | None]:
        """Insert ``memories`` in one transaction; return, per memory, the id it superseded.

        A memory with an ``upsert_key`` supersedes the live memory with the same scope,
        project, user, type and key: that one gets ``superseded_by``/``superseded_at`` and a
        ``supersedes`` link from the new one. Memories without a key go in one executemany.
        """
        superseded: list[str | None] = [None] * len(memories)
        with self.transaction(), self._mem_translated():
            plain = [memory_row(m) for m in memories if m.upsert_key is None]
            if plain:
                self._conn.executemany(_INSERT, plain)
            for index, m in enumerate(memories):
                if m.upsert_key is not None:
                    superseded[index] = self._upsert_one(m)
        return superseded

    def _upsert_one(self, m: Memory) -> str | None:
        key = (m.scope, m.project, m.user_id, m.type, m.upsert_key)
        found = self._conn.execute(_LIVE_KEY, key).fetchone()
        old_id = str(found[0]) if found else None
        if old_id is not None:
            self._conn.execute(
                "UPDATE memories SET superseded_by = ?, superseded_at = ?, updated_at = ? "
                "WHERE id = ?",
                (m.id, m.created_at, m.created_at, old_id),
            )
        self._conn.execute(_INSERT, memory_row(m))
        if old_id is not None:
            self._conn.execute(
                "INSERT OR IGNORE INTO memory_links (from_id, to_id, kind, created_at) "
                "VALUES (?, ?, 'supersedes', ?)",
                (m.id, old_id, m.created_at),
            )
        return old_id

    def get_memory(self, memory_id: str) -> Memory | None:
        rows = self._mrows(f"SELECT {_SELECT} FROM memories m WHERE m.id = ?", (memory_id,))
        return memory_from_row(rows[0]) if rows else None

    def update_memory(self, memory: Memory) -> None:
        """Rewrite the editable columns of ``memory.id`` (the FTS index follows by trigger)."""
        self._mexec(
            "UPDATE memories SET content = ?, type = ?, memory_layer = ?, tags = ?, "
            "upsert_key = ?, remember_intent = ?, confidence = ?, expires_at = ?, "
            "last_confirmed_at = ?, updated_at = ? WHERE id = ?",
            (
                memory.content,
                memory.type,
                memory.layer,
                _tags_text(memory.tags),
                memory.upsert_key,
                memory.remember_intent,
                memory.confidence,
                memory.expires_at,
                memory.last_confirmed_at,
                memory.updated_at,
                memory.id,
            ),
        )

    def delete_memory(self, memory_id: str, at: str) -> bool:
        """Soft delete: set ``deleted_at``; False if there is no such live row."""
        cursor = self._mexec(
            "UPDATE memories SET deleted_at = ?, updated_at = ? "
            "WHERE id = ? AND deleted_at IS NULL",
            (at, at, memory_id),
        )
        return cursor.rowcount > 0

    def list_memories(
        self, flt: MemoryFilter, now: str, *, limit: int = 50, offset: int = 0
    ) -> list[Memory]:
        """Memories ``flt`` sees at ``now``, newest first."""
        where, params = filter_sql(flt, now)
        rows = self._mrows(
            f"SELECT {_SELECT} FROM memories m WHERE {where} ORDER BY m.seq DESC LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )
        return [memory_from_row(r) for r in rows]

    def count_memories(self, flt: MemoryFilter, now: str) -> int:
        where, params = filter_sql(flt, now)
        return int(self._mrows(f"SELECT count(*) FROM memories m WHERE {where}", params)[0][0])

    def search_memories(
        self, match: str, flt: MemoryFilter, now: str, *, limit: int, by_recency: bool = False
    ) -> list[tuple[Memory, float]]:
        """FTS5 candidates for ``match`` that ``flt`` sees, best ``bm25`` first (empty without
        FTS5). ``by_recency``: the newest matches instead, with score 0 (no ``bm25`` pass)."""
        if not self.has_fts() or not match:
            return []
        where, params = filter_sql(flt, now)
        order = "rowid DESC" if by_recency else "rank"
        score = "0.0" if by_recency else "rank"
        k = max(limit * 8, 64)
        while True:
            candidates = self._mrows(
                f"SELECT rowid, {score} FROM memories_fts WHERE memories_fts MATCH ? "
                f"ORDER BY {order} LIMIT ?",
                (match, k),
            )
            found, passed = self._memories_by_seq(candidates, where, params, limit)
            if passed >= limit or len(candidates) < k or k >= _MAX_CANDIDATES:
                return found
            k *= 8

    def term_doc_counts(self, terms: Sequence[str], cap: int) -> dict[str, int]:
        """How many memories hold each term (FTS tokens), counted up to ``cap + 1`` only: a
        capped count stops early, so asking costs little even for very common terms."""
        if not self.has_fts():
            return {}
        from cortex.core.retrieval import fts_query  # not at import: the hook path loads the store

        sql = (
            "SELECT count(*) FROM (SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? "
            "LIMIT ?)"
        )
        return {t: int(self._mrows(sql, (fts_query([t]), cap + 1))[0][0]) for t in terms}

    def memory_count_estimate(self) -> int:
        """The highest memory ``seq``: an upper bound of the row count, read from the index."""
        return int(self._mrows("SELECT COALESCE(max(seq), 0) FROM memories")[0][0])

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
                for r in self._mrows(
                    f"SELECT m.seq FROM memories AS m NOT INDEXED "
                    f"WHERE m.seq IN ({', '.join('?' for _ in chunk)}) AND {where}",
                    (*chunk, *params),
                )
            ]
        best = sorted(passed, key=lambda seq: (scores[seq], -seq))[:limit]  # ties: newest
        if not best:
            return [], 0
        rows = self._mrows(
            f"SELECT {_SELECT}, m.seq FROM memories m "
            f"WHERE m.seq IN ({', '.join('?' for _ in best)})",
            best,
        )
        order = {seq: index for index, seq in enumerate(best)}
        rows.sort(key=lambda r: order[int(r[-1])])
        return [(memory_from_row(r), scores[int(r[-1])]) for r in rows], len(passed)

    def like_memories(
        self,
        patterns: Sequence[str],
        flt: MemoryFilter,
        now: str,
        *,
        limit: int,
        newest: int | None = None,
    ) -> list[Memory]:
        """The fallback search: memories whose content or tags contain any pattern (among the
        ``newest`` memories only, if given: a LIKE reads every row it considers)."""
        if not patterns:
            return []
        where, params = filter_sql(flt, now)
        if newest is not None:
            where += " AND m.seq > (SELECT COALESCE(max(seq), 0) FROM memories) - ?"
            params.append(newest)
        likes = " OR ".join(
            "m.content LIKE ? ESCAPE '\\' OR m.tags LIKE ? ESCAPE '\\'" for _ in patterns
        )
        rows = self._mrows(
            f"SELECT {_SELECT} FROM memories m WHERE {where} AND ({likes}) "
            "ORDER BY m.seq DESC LIMIT ?",
            (*params, *[p for p in patterns for _ in (0, 1)], limit),
        )
        return [memory_from_row(r) for r in rows]

    # -- links -------------------------------------------------------------------------------
    def add_memory_link(self, link: MemoryLink) -> None:
        self._mexec(
            "INSERT OR IGNORE INTO memory_links (from_id, to_id, kind, created_at) "
            "VALUES (?, ?, ?, ?)",
            (link.from_id, link.to_id, link.kind, link.created_at),
        )

    def memory_links(self, memory_id: str) -> list[MemoryLink]:
        """Links from or to ``memory_id``."""
        rows = self._mrows(
            "SELECT from_id, to_id, kind, created_at FROM memory_links WHERE from_id = ? "
            "UNION SELECT from_id, to_id, kind, created_at FROM memory_links WHERE to_id = ?",
            (memory_id, memory_id),
        )
        return [MemoryLink(str(a), str(b), str(k), str(at)) for a, b, k, at in rows]

    def linked_memories(
        self, memory_ids: Sequence[str], flt: MemoryFilter, now: str
    ) -> list[tuple[str, str, Memory]]:
        """(seed id, link kind, neighbour) one hop from ``memory_ids``, either direction,
        neighbours ``flt`` sees at ``now`` only."""
        if not memory_ids:
            return []
        marks = ", ".join("?" for _ in memory_ids)
        # The links first (a few rows, by index), then their ends by id: never a memory scan.
        links = self._mrows(
            f"SELECT from_id, to_id, kind FROM memory_links WHERE from_id IN ({marks}) "
            f"UNION ALL SELECT to_id, from_id, kind FROM memory_links WHERE to_id IN ({marks})",
            (*memory_ids, *memory_ids),
        )
        others = list(dict.fromkeys(str(other) for _, other, _ in links))
        if not others:
            return []
        where, params = filter_sql(flt, now)
        seqs = self._mrows(
            f"SELECT seq FROM memories WHERE id IN ({', '.join('?' for _ in others)})", others
        )
        # NOT INDEXED: by primary key, never a walk of the layer index (see _memories_by_seq).
        rows = self._mrows(
            f"SELECT {_SELECT} FROM memories AS m NOT INDEXED "
            f"WHERE m.seq IN ({', '.join('?' for _ in seqs)}) AND {where}",
            (*(r[0] for r in seqs), *params),
        )
        found = {m.id: m for m in map(memory_from_row, rows)}
        return [
            (str(seed), str(kind), found[str(other)])
            for seed, other, kind in links
            if str(other) in found
        ]

    # -- embeddings --------------------------------------------------------------------------
    def save_embeddings(self, model: str, items: Sequence[tuple[str, int, bytes]]) -> None:
        """Store (memory id, dimension, float32 vector bytes) for ``model``."""
        with self.transaction(), self._mem_translated():
            self._conn.executemany(
                "INSERT OR REPLACE INTO memory_embeddings (memory_seq, model, dim, vector) "
                "SELECT seq, ?, ?, ? FROM memories WHERE id = ?",
                [(model, dim, blob, mid) for mid, dim, blob in items],
            )

    def load_embeddings(
        self, model: str, flt: MemoryFilter, now: str
    ) -> list[tuple[Memory, bytes]]:
        """Vectors of ``model`` for the memories ``flt`` sees at ``now``."""
        where, params = filter_sql(flt, now)
        rows = self._mrows(
            f"SELECT {_SELECT}, e.vector FROM memory_embeddings e "
            f"JOIN memories m ON m.seq = e.memory_seq WHERE e.model = ? AND {where}",
            (model, *params),
        )
        return [(memory_from_row(r), bytes(r[-1])) for r in rows]

    def memories_without_embedding(self, model: str, *, limit: int) -> list[Memory]:
        """Live memories that have no vector of ``model`` yet, oldest first."""
        rows = self._mrows(
            f"SELECT {_SELECT} FROM memories m WHERE m.deleted_at IS NULL AND NOT EXISTS ("
            "SELECT 1 FROM memory_embeddings e WHERE e.model = ? AND e.memory_seq = m.seq) "
            "ORDER BY m.seq LIMIT ?",
            (model, limit),
        )
        return [memory_from_row(r) for r in rows]
