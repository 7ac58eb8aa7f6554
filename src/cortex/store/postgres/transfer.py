"""Whole-table reads and verbatim inserts of one tenant, for copying a home into it.

Values arrive as a SQLite file holds them (JSON as text, booleans as 0/1): each placeholder is
cast to its column's type, so one statement fits either source.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from cortex.store.links import fold_supersedes, held_links, is_held
from cortex.store.postgres.db import Runner
from cortex.store.records import dumps
from cortex.store.transfer import HELD_LINKS, check_table

_PAGE = 500
_COLUMNS = (
    "SELECT column_name, udt_name, is_generated, identity_generation "
    "FROM information_schema.columns WHERE table_schema = current_schema() "
    "AND table_name = %s AND column_name <> 'tenant_id' ORDER BY ordinal_position"
)


class TransferRepository:
    """One tenant's rows of the transferable tables, as column -> value dicts."""

    def __init__(self, db: Runner) -> None:
        self.db = db
        self._types: dict[str, list[tuple[str, str, bool]]] = {}

    def _columns(self, table: str) -> list[tuple[str, str, bool]]:
        """(name, type, writable) of every column but ``tenant_id``; generated and identity
        columns are not writable."""
        if table not in self._types:
            with self.db.connection() as conn:
                found = conn.execute(_COLUMNS, (check_table(table),)).fetchall()
            self._types[table] = [
                (name, udt, generated != "ALWAYS" and identity != "ALWAYS")
                for name, udt, generated, identity in found
            ]
        return self._types[table]

    def export_rows(self, table: str) -> Iterator[dict[str, Any]]:
        """Every row of the tenant's ``table``, oldest first, as a SQLite file would hold it
        (JSON as text), streamed a page at a time; for ``memory_links``, then the
        ``supersedes`` links the memories rows hold, as link rows."""
        yield from self._table_rows(table)
        if table == "memory_links":
            yield from held_links(self.db.rows, "%s", (self.db.tenant,), page=_PAGE)

    def _table_rows(self, table: str) -> Iterator[dict[str, Any]]:
        columns = self._columns(table)
        names = [name for name, _, writable in columns if writable and (table, name) != HELD_LINKS]
        json_columns = {name for name, udt, _ in columns if udt in ("json", "jsonb")}
        every = {name for name, _, _ in columns}
        order = next(c for c in ("seq", "id", "created_at") if c in every)
        offset = 0
        while True:
            page = self.db.rows(
                f"SELECT {', '.join(names)} FROM {table} WHERE tenant_id = %s "
                f"ORDER BY {order}, {names[0]} LIMIT %s OFFSET %s",
                (self.db.tenant, _PAGE, offset),
            )
            for row in page:
                yield {
                    name: dumps(value) if name in json_columns and value is not None else value
                    for name, value in zip(names, row, strict=True)
                }
            if len(page) < _PAGE:
                return
            offset += _PAGE

    def import_rows(self, table: str, rows: Sequence[dict[str, Any]]) -> int:
        """Insert ``rows`` as they are, skipping any that collide with a stored key; return
        how many were inserted. A ``supersedes`` link the memories rows can hold goes there
        (one they hold already is skipped)."""
        types = {name: udt for name, udt, writable in self._columns(table) if writable}
        added = 0
        with self.db.transaction():
            if table == "memory_links":
                tenant = (self.db.tenant,)
                rows = [row for row in rows if not is_held(self.db.rows, "%s", row, tenant)]
            for row in rows:
                names = [name for name in row if name in types]
                values = ", ".join(f"%s::{types[name]}" for name in names)
                sql = (
                    f"INSERT INTO {table} (tenant_id, {', '.join(names)}) "
                    f"VALUES (%s, {values}) ON CONFLICT DO NOTHING"
                )
                params = [_value(row[n], types[n]) for n in names]
                added += self.db.execute(sql, [self.db.tenant, *params])
            if table == "memory_links":
                for sql in fold_supersedes("%s", tenants=True):
                    self.db.execute(sql, (self.db.tenant,))
        return added


def _value(value: Any, udt: str) -> Any:
    """A SQLite value as its PostgreSQL column takes it (0/1 to a boolean)."""
    if udt == "bool" and isinstance(value, int):
        return bool(value)
    return value
