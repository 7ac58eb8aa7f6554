"""The append-only logs over SQLite: the metrics hash chain and the audit log."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from cortex.store.log_records import AUDIT_COLUMNS, METRIC_COLUMNS, audit_from_row, metric_from_row
from cortex.store.records import dumps
from cortex.store.sqlite.db import Database

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

    from cortex.core.models import AuditEntry, MetricEvent
    from cortex.store.protocol import AuditRow, MetricRow

_METRICS = ", ".join(METRIC_COLUMNS)
_PAGE = 500
_INSERT_METRIC = (
    "INSERT INTO metrics (event, session_id, payload, created_at, prev_hash, hash) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)


_INSERT_AUDIT = (
    "INSERT INTO audit_log (action, actor, target, detail, created_at) VALUES (?, ?, ?, ?, ?)"
)


def _inserted_id(db: Database, sql: str, params: tuple[Any, ...]) -> int:
    cursor = db.run(sql, params)
    assert cursor.lastrowid is not None  # an INSERT into a rowid table always sets it
    return cursor.lastrowid


class MetricRepository:
    """The ``MetricStore`` part of the protocol; ``seq`` is AUTOINCREMENT, never reused."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def last_metric(self) -> MetricEvent | None:
        rows = self._db.rows(f"SELECT {_METRICS} FROM metrics ORDER BY seq DESC LIMIT 1")
        return metric_from_row(rows[0]) if rows else None

    def append_metric(
        self,
        event: str,
        session_id: str | None,
        payload: dict[str, Any],
        created_at: str,
        prev_hash: str,
        hash: str,
    ) -> int:
        """Append one event; return its ``seq`` (1, 2, 3... with no reuse)."""
        return _inserted_id(
            self._db,
            _INSERT_METRIC,
            (event, session_id, dumps(payload), created_at, prev_hash, hash),
        )

    def append_metrics(self, events: Sequence[MetricRow]) -> list[int]:
        """Append rows in order; return their ``seq`` values.

        One statement run for every row (``executemany``): the rows take consecutive ``seq``
        values in order (the transaction holds the write lock, and AUTOINCREMENT gives each row
        the largest ``seq`` ever used plus one), so the last one's rowid numbers them all.
        """
        if not events:
            return []
        rows = [
            (event, session_id, dumps(payload), created_at, prev_hash, hash_)
            for event, session_id, payload, created_at, prev_hash, hash_ in events
        ]
        with self._db.transaction():
            self._db.run_many(_INSERT_METRIC, rows)
            last = int(self._db.rows("SELECT last_insert_rowid()")[0][0])
        return list(range(last - len(rows) + 1, last + 1))

    def list_metrics(
        self,
        *,
        event: str | None = None,
        limit: int | None = None,
        after_seq: int = 0,
        session_id: str | None = None,
    ) -> list[MetricEvent]:
        """Events in ``seq`` order, optionally of one ``event`` name or one session."""
        where = "seq > ?"
        params: tuple[Any, ...] = (after_seq,)
        for column, value in (("event", event), ("session_id", session_id)):
            if value is not None:
                where, params = f"{where} AND {column} = ?", (*params, value)
        # LIMIT -1 is SQLite's "no limit".
        rows = self._db.rows(
            f"SELECT {_METRICS} FROM metrics WHERE {where} ORDER BY seq LIMIT ?",
            (*params, -1 if limit is None else limit),
        )
        return [metric_from_row(row) for row in rows]

    def iter_metrics(self) -> Iterator[MetricEvent]:
        """Every event in ``seq`` order, streamed (for ``metrics verify``)."""
        # Pages by seq rather than one open cursor, so writes on this connection stay possible.
        after = 0
        while page := self.list_metrics(limit=_PAGE, after_seq=after):
            yield from page
            after = page[-1].seq


class AuditRepository:
    """The ``AuditStore`` part of the protocol, and reading it back (SQLite only: tests)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def append_audit(
        self, action: str, actor: str, target: str | None, detail: dict[str, Any], at: str
    ) -> int:
        return _inserted_id(self._db, _INSERT_AUDIT, (action, actor, target, dumps(detail), at))

    def append_audits(self, entries: Sequence[AuditRow], at: str) -> None:
        rows = [
            (action, actor, target, dumps(detail), at) for action, actor, target, detail in entries
        ]
        self._db.run_many(_INSERT_AUDIT, rows)

    def list_audit(self, *, limit: int = 100, target: str | None = None) -> list[AuditEntry]:
        """Newest first; of one ``target`` (a memory id...) when it is given."""
        where = "" if target is None else "WHERE target = ? "
        rows = self._db.rows(
            f"SELECT {', '.join(AUDIT_COLUMNS)} FROM audit_log {where}ORDER BY id DESC LIMIT ?",
            (limit,) if target is None else (target, limit),
        )
        return [audit_from_row(row) for row in rows]
