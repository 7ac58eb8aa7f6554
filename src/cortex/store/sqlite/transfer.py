"""Whole-table reads and verbatim inserts for copying one home into another store."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from cortex.store.links import fold_supersedes, held_links, is_held
from cortex.store.sqlite.db import Database
from cortex.store.transfer import HELD_LINKS, KEYLESS_TABLES, check_table

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

_PAGE = 500


class TransferRepository:
    """Rows of the transferable tables, as column -> value dicts, in insertion order."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def _columns(self, table: str) -> list[str]:
        return [str(row[1]) for row in self.db.rows(f"PRAGMA table_info({check_table(table)})")]

    def _order(self, table: str) -> str:
        """``rowid`` (insertion order), or the primary key of a WITHOUT ROWID table."""
        sql = self.db.rows("SELECT sql FROM sqlite_master WHERE name = ?", (table,))
        if sql and "WITHOUT ROWID" not in str(sql[0][0]).upper():
            return "rowid"
        info = self.db.rows(f"PRAGMA table_info({table})")
        return ", ".join(str(r[1]) for r in sorted(info, key=lambda r: r[5]) if r[5])

    def export_rows(self, table: str) -> Iterator[dict[str, Any]]:
        """Every row of ``table``, oldest first, streamed a page at a time; for
        ``memory_links``, then the ``supersedes`` links the memories rows hold, as link rows
        (an export reads as one made before they moved there)."""
        yield from self._table_rows(table)
        if table == "memory_links":
            yield from held_links(self.db.rows, "?", page=_PAGE)

    def _table_rows(self, table: str) -> Iterator[dict[str, Any]]:
        columns = [c for c in self._columns(table) if (table, c) != HELD_LINKS]
        order, offset = self._order(table), 0
        while True:
            page = self.db.rows(
                f"SELECT {', '.join(columns)} FROM {table} ORDER BY {order} LIMIT ? OFFSET ?",
                (_PAGE, offset),
            )
            for row in page:
                yield dict(zip(columns, row, strict=True))
            if len(page) < _PAGE:
                return
            offset += _PAGE

    def import_rows(self, table: str, rows: Sequence[dict[str, Any]]) -> int:
        """Insert ``rows`` as they are, skipping any whose key is taken; return how many
        were inserted. A ``supersedes`` link the memories rows can hold goes there (one
        they hold already is skipped)."""
        known = set(self._columns(table))
        if table in KEYLESS_TABLES:
            known.discard("id")
        added = 0
        with self.db.transaction():
            if table == "memory_links":
                rows = [row for row in rows if not is_held(self.db.rows, "?", row)]
            for row in rows:
                names = [name for name in row if name in known]
                sql = (
                    f"INSERT OR IGNORE INTO {table} ({', '.join(names)}) "
                    f"VALUES ({', '.join('?' for _ in names)})"
                )
                added += self.db.run(sql, [row[name] for name in names]).rowcount
            if table == "memory_links":
                for sql in fold_supersedes():
                    self.db.run(sql)
        return added
