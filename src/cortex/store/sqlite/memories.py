"""Memories over SQLite: writes with the live-upsert rule, filtered reads, links.

The row mapping and the filter are shared (``cortex.store.records``, ``cortex.store.filters``);
here is the SQL text. The FTS5 index follows every write by trigger (``m006_memory_fts``), so
batches go in many rows per statement (FTS5 flushes at each one); search is in
``cortex.store.sqlite.search``. A supersede's link is held by the two memories rows
(``cortex.store.links``), not by a link row.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import replace
from operator import itemgetter

from cortex.core.memory_models import Memory, MemoryFilter, MemoryLink
from cortex.store.filters import adjacent_sql, memory_filter_sql
from cortex.store.links import supersedes_from, supersedes_to
from cortex.store.records import (
    MEMORY_COLUMNS,
    MEMORY_EDITABLE,
    memories_from_rows,
    memory_edit_values,
    memory_values,
)
from cortex.store.sqlite.db import Database

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

COLUMNS = ", ".join(f"m.{c}" for c in MEMORY_COLUMNS)
"""Every memory column over alias ``m``, in the order ``memory_from_row`` reads."""
# A new row names the memory it supersedes in its own ``supersedes`` column (m024).
_INSERTED = (*MEMORY_COLUMNS, "supersedes")
_INSERT_INTO = f"INSERT INTO memories ({', '.join(_INSERTED)})"
_ROWS_PER_INSERT = 500
_BULK = 100
"""A batch at least this large grows the connection's page cache (``Database.grow_cache``)
to hold the pages it dirties: ``_CACHE_KIB_PER_MEMORY`` each (a replacing memory at
1,000,000 stored dirties about two pages of 4 KiB: its row, the old row, their index
entries), at most ``_CACHE_KIB_MAX``."""
_CACHE_KIB_PER_MEMORY = 8
_CACHE_KIB_MAX = 64 * 1024
_LOG_BATCHES = 2
"""A bulk batch also lets the write-ahead log hold this many batches' pages (as estimated for
the page cache) before a commit checkpoints it (``Database.grow_log``), at most
``_LOG_KIB_MAX``: at 1,000,000 stored, replacing batches of 1,000 went from 15,200-15,800 to
16,900-18,800 memories a second, the last checkpoint included (``docs/benchmarks-history.md``,
"Bulk ingest: the log holds two batches"). Since then a bulk batch's commit asks a thread of
its own to checkpoint the log (``Database.checkpoint_after_commit``), so the commits' own
checkpoints are only a backstop."""
_LOG_KIB_MAX = 32 * 1024
_UPDATE = f"UPDATE memories SET {', '.join(f'{c} = ?' for c in MEMORY_EDITABLE)} WHERE id = ?"
_CONFLICT = "memory write conflicts with a live memory ({}); edit that memory instead"
# The live memory of each (n, scope, project, user, type, key) row of a VALUES list, by the
# same expressions as idx_memories_upsert_live, so each row is one search of that index.
_LIVE_KEYS = (
    "WITH k(n, scope, project, user_id, type, upsert_key) AS (VALUES {}) "
    "SELECT k.n, m.id, m.seq FROM k JOIN memories m ON m.scope = k.scope "
    "AND IFNULL(m.project_id, '') = IFNULL(k.project, '') "
    "AND IFNULL(m.user_id, '') = IFNULL(k.user_id, '') AND m.type = k.type "
    "AND m.upsert_key = k.upsert_key AND m.deleted_at IS NULL AND m.superseded_at IS NULL"
)
_KEY_FIELDS = 6
_LINK = "INSERT OR IGNORE INTO memory_links (from_id, to_id, kind, created_at) VALUES (?, ?, ?, ?)"


def filter_sql(flt: MemoryFilter, now: str) -> tuple[str, list[Any]]:
    """The WHERE clause (over alias ``m``) of what ``flt`` may see at ``now``."""
    return memory_filter_sql(flt, now, mark="?", find="instr")


def _replaced(m: Memory, by: Memory | None) -> Memory:
    """``m`` as stored when ``by`` (of the same batch) supersedes it, else ``m``."""
    if by is None:
        return m
    return replace(m, superseded_by=by.id, superseded_at=by.created_at, updated_at=by.created_at)


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
        project, user, type and key: that one gets ``superseded_by``/``superseded_at`` and the
        new one names it in ``supersedes`` (their link, with no link row). Upserts apply in
        order: a later memory of the batch with the same key supersedes the earlier one,
        which is stored superseded.
        Rows without a key are stored first, then the keyed ones, each in input order.
        """
        superseded: list[str | None] = [None] * len(memories)
        latest: dict[tuple[Any, ...], int] = {}  # live key -> index of its newest memory
        replaced_by: dict[int, Memory] = {}  # index -> the memory of the batch replacing it
        if len(memories) >= _BULK:
            kib = min(_CACHE_KIB_MAX, _CACHE_KIB_PER_MEMORY * len(memories))
            self._db.grow_cache(kib)
            self._db.grow_log(min(_LOG_KIB_MAX, _LOG_BATCHES * kib))
            self._db.checkpoint_after_commit()
        with self._db.transaction():
            live = self._live_ids(
                [
                    (m.scope, m.project, m.user_id, m.type, m.upsert_key)
                    for m in memories
                    if m.upsert_key is not None
                ]
            )
            stored: list[tuple[int, Memory]] = []  # (seq of a stored row replaced, by)
            for index, m in enumerate(memories):
                if m.upsert_key is None:
                    continue
                key = (m.scope, m.project, m.user_id, m.type, m.upsert_key)
                earlier = latest.get(key)
                if earlier is not None:
                    superseded[index] = memories[earlier].id
                    replaced_by[earlier] = m
                elif key in live:
                    superseded[index], seq = live[key]
                    stored.append((seq, m))
                latest[key] = index
            # By seq: the old rows' pages in file order, each found by the primary key.
            stored.sort(key=lambda pair: pair[0])
            self._db.run_many(
                "UPDATE memories SET superseded_by = ?, superseded_at = ?, updated_at = ? "
                "WHERE seq = ?",
                [(m.id, m.created_at, m.created_at, seq) for seq, m in stored],
            )
            rows = [(*memory_values(m), None) for m in memories if m.upsert_key is None]
            rows += [
                (*memory_values(_replaced(m, replaced_by.get(index))), superseded[index])
                for index, m in enumerate(memories)
                if m.upsert_key is not None
            ]
            self._insert(rows)
        return superseded

    def _live_ids(self, keys: list[tuple[Any, ...]]) -> dict[tuple[Any, ...], tuple[str, int]]:
        """The id and seq of the live memory holding each (scope, project, user, type, key)
        of ``keys`` that one holds, found before the batch writes anything: a statement per
        few hundred keys (a batch of upserts spent more on a statement per key than on the
        index searches)."""
        wanted = list(dict.fromkeys(keys))
        found: dict[tuple[Any, ...], tuple[str, int]] = {}
        for start, chunk in self._chunks(wanted, _KEY_FIELDS):
            sql = _LIVE_KEYS.format(", ".join(f"({marks(range(_KEY_FIELDS))})" for _ in chunk))
            params = [v for n, key in enumerate(chunk, start) for v in (n, *key)]
            for n, memory_id, seq in self._db.rows(sql, params):
                found[wanted[n]] = (str(memory_id), int(seq))
        return found

    def _chunks(self, items: list[Any], fields: int) -> Iterator[tuple[int, list[Any]]]:
        """(start, items) in runs of up to ``_ROWS_PER_INSERT``, fewer if ``fields`` values
        per item would pass SQLite's limit on a statement's parameters."""
        limit = self._db.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        size = max(1, min(_ROWS_PER_INSERT, limit // fields))
        for start in range(0, len(items), size):
            yield start, items[start : start + size]

    def _insert(self, rows: list[tuple[Any, ...]]) -> None:
        """Insert memory rows, many per statement.

        The full-text index follows by trigger; FTS5 flushes its pending terms at every
        statement, so one row per statement (``executemany``) costs about three times as
        much as a few hundred rows per ``INSERT``. The index it builds is the same.
        """
        one_row = f"({marks(_INSERTED)})"
        for _, chunk in self._chunks(rows, len(_INSERTED)):
            sql = f"{_INSERT_INTO} VALUES {', '.join(one_row for _ in chunk)}"
            self._db.run(sql, [value for row in chunk for value in row], conflict=_CONFLICT)

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

    def memories_by_id(
        self, memory_ids: Sequence[str], flt: MemoryFilter, now: str
    ) -> list[Memory]:
        """Those of ``memory_ids`` that ``flt`` sees at ``now``, by ``seq``: a statement per
        few hundred ids, so that no list of ids passes SQLite's limit on parameters."""
        if not memory_ids:  # (a search whose meaning side found nothing new)
            return []
        where, params = filter_sql(flt, now)
        rows: list[Sequence[Any]] = []
        for _, chunk in self._chunks(list(dict.fromkeys(memory_ids)), 1):
            # NOT INDEXED: by primary key, never a walk of the layer index (see search.py).
            rows += self._db.rows(
                f"SELECT m.seq, {COLUMNS} FROM memories AS m NOT INDEXED WHERE m.seq IN "
                f"(SELECT seq FROM memories WHERE id IN ({marks(chunk)})) AND {where}",
                (*chunk, *params),
            )
        rows.sort(key=itemgetter(0))
        return memories_from_rows(row[1:] for row in rows)

    def count_memories(self, flt: MemoryFilter, now: str) -> int:
        """How many memories ``flt`` sees at ``now`` (a context counts the rules it leaves
        out with it)."""
        where, params = filter_sql(flt, now)
        return int(self._db.rows(f"SELECT count(*) FROM memories m WHERE {where}", params)[0][0])

    # -- links -------------------------------------------------------------------------------
    def add_memory_link(self, link: MemoryLink) -> None:
        """Store a link row (SQLite only: the service makes ``supersedes`` links by upsert,
        held by the memories rows)."""
        self._db.run(_LINK, (link.from_id, link.to_id, link.kind, link.created_at))

    def memory_links(self, memory_id: str) -> list[MemoryLink]:
        """Links from or to ``memory_id``, link rows and those the memories rows hold, by
        (from, to, kind)."""
        rows = self._db.rows(
            "SELECT from_id, to_id, kind, created_at FROM memory_links WHERE from_id = ? "
            "UNION SELECT from_id, to_id, kind, created_at FROM memory_links WHERE to_id = ? "
            f"UNION {supersedes_from('n.id = ?')} UNION {supersedes_to('o.id = ?')} "
            "ORDER BY 1, 2, 3",
            (memory_id, memory_id, memory_id, memory_id),
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
        # The links first (a few rows, by index; those the rows hold by id), then their ends
        # by id: never a memory scan.
        links = self._db.rows(
            f"SELECT from_id, to_id, kind FROM memory_links WHERE from_id IN ({seeds}) "
            f"UNION ALL SELECT to_id, from_id, kind FROM memory_links WHERE to_id IN ({seeds}) "
            f"UNION ALL SELECT from_id, to_id, kind FROM ({supersedes_from(f'n.id IN ({seeds})')}) "
            f"UNION ALL SELECT to_id, from_id, kind FROM ({supersedes_to(f'o.id IN ({seeds})')})",
            (*memory_ids, *memory_ids, *memory_ids, *memory_ids),
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

    def adjacent_memories(
        self, memory_ids: Sequence[str], flt: MemoryFilter, now: str
    ) -> list[tuple[str, Memory]]:
        """(memory id, neighbour): the memories captured just before and just after each of
        ``memory_ids`` in its session (by ``seq``), those ``flt`` sees at ``now``."""
        if not memory_ids:
            return []
        where, params = filter_sql(flt, now)
        sql = adjacent_sql(COLUMNS, f"s.id IN ({marks(memory_ids)})", where)
        rows = self._db.rows(sql, (*memory_ids, *params))
        return [(str(row[-1]), m) for row, m in zip(rows, memories_from_rows(rows), strict=True)]
