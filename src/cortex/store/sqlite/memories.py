"""Memories over SQLite: writes with the live-upsert rule, filtered reads, links.

The row mapping and the filter are shared (``cortex.store.records``, ``cortex.store.filters``);
here is the SQL text. The FTS5 index follows every write by trigger (``m006_memory_fts``);
search is in ``cortex.store.sqlite.search``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cortex.core.memory_models import Memory, MemoryFilter, MemoryLink
from cortex.store.filters import memory_filter_sql
from cortex.store.records import (
    MEMORY_COLUMNS,
    MEMORY_EDITABLE,
    memories_from_rows,
    memory_edit_values,
    memory_values,
)
from cortex.store.sqlite.db import Database

COLUMNS = ", ".join(f"m.{c}" for c in MEMORY_COLUMNS)
"""Every memory column over alias ``m``, in the order ``memory_from_row`` reads."""
_INSERT = (
    f"INSERT INTO memories ({', '.join(MEMORY_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in MEMORY_COLUMNS)})"
)
_UPDATE = f"UPDATE memories SET {', '.join(f'{c} = ?' for c in MEMORY_EDITABLE)} WHERE id = ?"
_CONFLICT = "memory write conflicts with a live memory ({}); edit that memory instead"
_LIVE_KEY = (
    "SELECT id FROM memories WHERE scope = ? AND IFNULL(project_id, '') = IFNULL(?, '') "
    "AND IFNULL(user_id, '') = IFNULL(?, '') AND type = ? AND upsert_key = ? "
    "AND deleted_at IS NULL AND superseded_at IS NULL"
)
_LINK = "INSERT OR IGNORE INTO memory_links (from_id, to_id, kind, created_at) VALUES (?, ?, ?, ?)"


def filter_sql(flt: MemoryFilter, now: str) -> tuple[str, list[Any]]:
    """The WHERE clause (over alias ``m``) of what ``flt`` may see at ``now``."""
    return memory_filter_sql(flt, now, mark="?", find="instr")


def marks(values: Sequence[Any]) -> str:
    """``?, ?, ?``: one placeholder per value."""
    return ", ".join("?" for _ in values)


class MemoryRepository:
    """The ``MemoryStore`` part of the protocol, search aside."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def add_memories(self, memories: Sequence[Memory]) -> list[str | None]:
        """Insert ``memories`` in one transaction; return, per memory, the id it superseded.

        A memory with an ``upsert_key`` supersedes the live memory with the same scope,
        project, user, type and key: that one gets ``superseded_by``/``superseded_at`` and a
        ``supersedes`` link from the new one. Memories without a key go in one executemany.
        """
        superseded: list[str | None] = [None] * len(memories)
        with self._db.transaction():
            plain = [memory_values(m) for m in memories if m.upsert_key is None]
            if plain:
                self._db.run_many(_INSERT, plain, conflict=_CONFLICT)
            for index, m in enumerate(memories):
                if m.upsert_key is not None:
                    superseded[index] = self._upsert_one(m)
        return superseded

    def _upsert_one(self, m: Memory) -> str | None:
        key = (m.scope, m.project, m.user_id, m.type, m.upsert_key)
        found = self._db.rows(_LIVE_KEY, key)
        old_id = str(found[0][0]) if found else None
        if old_id is not None:
            self._db.run(
                "UPDATE memories SET superseded_by = ?, superseded_at = ?, updated_at = ? "
                "WHERE id = ?",
                (m.id, m.created_at, m.created_at, old_id),
            )
        self._db.run(_INSERT, memory_values(m), conflict=_CONFLICT)
        if old_id is not None:
            self._db.run(_LINK, (m.id, old_id, "supersedes", m.created_at))
        return old_id

    def get_memory(self, memory_id: str) -> Memory | None:
        found = memories_from_rows(
            self._db.rows(f"SELECT {COLUMNS} FROM memories m WHERE m.id = ?", (memory_id,))
        )
        return found[0] if found else None

    def update_memory(self, memory: Memory) -> None:
        """Rewrite the editable columns of ``memory.id`` (the FTS index follows by trigger)."""
        self._db.run(_UPDATE, (*memory_edit_values(memory), memory.id), conflict=_CONFLICT)

    def delete_memory(self, memory_id: str, at: str) -> bool:
        """Soft delete: set ``deleted_at``; False if there is no such live row."""
        cursor = self._db.run(
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
        rows = self._db.rows(
            f"SELECT {COLUMNS} FROM memories m WHERE {where} ORDER BY m.seq DESC LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )
        return memories_from_rows(rows)

    def count_memories(self, flt: MemoryFilter, now: str) -> int:
        """How many memories ``flt`` sees at ``now`` (SQLite only: tests and tools)."""
        where, params = filter_sql(flt, now)
        return int(self._db.rows(f"SELECT count(*) FROM memories m WHERE {where}", params)[0][0])

    # -- links -------------------------------------------------------------------------------
    def add_memory_link(self, link: MemoryLink) -> None:
        """Store a link (SQLite only: the service makes ``supersedes`` links by upsert)."""
        self._db.run(_LINK, (link.from_id, link.to_id, link.kind, link.created_at))

    def memory_links(self, memory_id: str) -> list[MemoryLink]:
        """Links from or to ``memory_id``."""
        rows = self._db.rows(
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
        seeds = marks(memory_ids)
        # The links first (a few rows, by index), then their ends by id: never a memory scan.
        links = self._db.rows(
            f"SELECT from_id, to_id, kind FROM memory_links WHERE from_id IN ({seeds}) "
            f"UNION ALL SELECT to_id, from_id, kind FROM memory_links WHERE to_id IN ({seeds})",
            (*memory_ids, *memory_ids),
        )
        others = list(dict.fromkeys(str(other) for _, other, _ in links))
        if not others:
            return []
        where, params = filter_sql(flt, now)
        seqs = self._db.rows(f"SELECT seq FROM memories WHERE id IN ({marks(others)})", others)
        # NOT INDEXED: by primary key, never a walk of the layer index (see search.py).
        rows = self._db.rows(
            f"SELECT {COLUMNS} FROM memories AS m NOT INDEXED "
            f"WHERE m.seq IN ({marks(seqs)}) AND {where}",
            (*(r[0] for r in seqs), *params),
        )
        found = {m.id: m for m in memories_from_rows(rows)}
        return [
            (str(seed), str(kind), found[str(other)])
            for seed, other, kind in links
            if str(other) in found
        ]
