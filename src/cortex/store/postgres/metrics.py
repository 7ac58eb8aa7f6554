"""Metrics (a keyed hash chain per tenant) and the audit log.

The chain must stay linear however many server processes append at once: a writer reads the
newest event and links the next one to it, so reading and appending happen under one
advisory lock per tenant, taken by ``last_metric`` inside a transaction and held until it
commits. ``seq`` comes from a counter row per tenant, so it counts 1, 2, 3... in each tenant
and a deleted ``seq`` is never reused.

Every other start of a tenant waits on that lock, so it is held as briefly as the chain
allows: the locked read of the newest event also reads the counter, which nobody else moves
while the lock is held, so the events appended after it know their ``seq`` in advance and
their statement goes with the ``COMMIT`` (one round trip under the lock, not two).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from cortex.core.models import AuditEntry, MetricEvent
from cortex.store.log_records import AUDIT_COLUMNS, METRIC_COLUMNS, audit_from_row, metric_from_row
from cortex.store.postgres.db import LOCK_METRICS_CHAIN, Runner
from cortex.store.records import dumps

if TYPE_CHECKING:
    from cortex.store.protocol import AuditRow, MetricRow

_METRICS = ", ".join(METRIC_COLUMNS)
# One round trip: bump the tenant's counter, then insert the event under the new number.
_APPEND = (
    "WITH counter AS (INSERT INTO metric_counters (tenant_id, last_seq) VALUES (%s, 1) "
    "ON CONFLICT (tenant_id) DO UPDATE SET last_seq = metric_counters.last_seq + 1 "
    "RETURNING tenant_id, last_seq) "
    f"INSERT INTO metrics (tenant_id, {_METRICS}) "
    "SELECT tenant_id, last_seq, %s, %s, %s, %s, %s, %s FROM counter RETURNING seq"
)
# Also one round trip for a whole batch: the counter moves by the batch's size, and each row
# takes its place below the new last number, in the order given.
_APPEND_MANY = (
    "WITH counter AS (INSERT INTO metric_counters (tenant_id, last_seq) VALUES (%s, %s) "
    "ON CONFLICT (tenant_id) DO UPDATE SET last_seq = metric_counters.last_seq + %s "
    "RETURNING tenant_id, last_seq) "
    f"INSERT INTO metrics (tenant_id, {_METRICS}) "
    "SELECT counter.tenant_id, counter.last_seq - %s + row.n, row.event, row.session_id, "
    "row.payload, row.created_at, row.prev_hash, row.hash FROM counter, "
    "unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[]) "
    "WITH ORDINALITY AS row(event, session_id, payload, created_at, prev_hash, hash, n) "
    "ORDER BY row.n RETURNING seq"
)
# The newest event and the counter, in one row even when the tenant has no event yet.
_LAST_AND_COUNTER = (
    "SELECT (SELECT last_seq FROM metric_counters WHERE tenant_id = %s), "
    f"{', '.join(f'newest.{c}' for c in METRIC_COLUMNS)} FROM (SELECT 1) AS one "
    f"LEFT JOIN LATERAL (SELECT {_METRICS} FROM metrics WHERE tenant_id = %s "
    "ORDER BY seq DESC LIMIT 1) AS newest ON true"
)
_PAGE = 500
_MAX_PROBLEMS = 50


class MetricsRepository:
    """The metrics chain of one tenant."""

    def __init__(self, db: Runner) -> None:
        self.db = db
        self._counter: tuple[int, int] | None = None
        """(transaction serial, the counter's value) read under the chain's lock."""

    def _lock_chain(self) -> None:
        """Serialize chain writers of this tenant until the transaction ends."""
        self.db.lock(LOCK_METRICS_CHAIN, self.db.tenant)

    def last(self) -> MetricEvent | None:
        """The newest event; inside a transaction, the chain stays locked for the append."""
        serial = self.db.transaction_serial
        if serial is None:
            row = self.db.one(
                f"SELECT {_METRICS} FROM metrics WHERE tenant_id = %s ORDER BY seq DESC LIMIT 1",
                (self.db.tenant,),
            )
            return metric_from_row(row) if row else None
        self._lock_chain()
        found = self.db.one(_LAST_AND_COUNTER, (self.db.tenant, self.db.tenant))
        assert found is not None  # a LEFT JOIN of a one-row table returns one row
        self._counter = (serial, int(found[0] or 0))
        return metric_from_row(found[1:]) if found[1] is not None else None

    def append(
        self,
        event: str,
        session_id: str | None,
        payload: dict[str, Any],
        created_at: str,
        prev_hash: str,
        hash: str,
    ) -> int:
        """Append one event; return its ``seq``."""
        self._counter = None  # it moves the counter: a later batch reads its numbers back
        with self.db.transaction():
            self._lock_chain()
            row = self.db.one(
                _APPEND,
                (self.db.tenant, event, session_id, dumps(payload), created_at, prev_hash, hash),
            )
        assert row is not None  # INSERT ... SELECT from a one-row CTE returns one row
        return int(row[0])

    def append_many(self, events: Sequence[MetricRow]) -> list[int]:
        """Append rows in order in one statement; return their ``seq`` values, in order."""
        if not events:
            return []
        columns = list(zip(*events, strict=True))
        columns[2] = tuple(dumps(payload) for payload in columns[2])
        count = len(events)
        params = (self.db.tenant, count, count, count, *map(list, columns))
        with self.db.transaction():
            self._lock_chain()
            serial, counter = self._counter or (None, 0)
            if serial is None or serial != self.db.transaction_serial:
                rows = self.db.rows(_APPEND_MANY, params)
                return sorted(int(row[0]) for row in rows)
            # The counter was read under this transaction's lock: these rows take the numbers
            # after it, and their statement waits for the next one (the COMMIT, usually).
            self.db.execute_later(_APPEND_MANY, params)
            self._counter = (serial, counter + count)
        return list(range(counter + 1, counter + count + 1))

    def since(
        self,
        *,
        event: str | None = None,
        limit: int | None = None,
        after_seq: int = 0,
        session_id: str | None = None,
    ) -> list[MetricEvent]:
        """Events in ``seq`` order, optionally of one ``event`` name or one session (LIMIT
        NULL: all)."""
        where = "tenant_id = %s AND seq > %s"
        params: tuple[Any, ...] = (self.db.tenant, after_seq)
        for column, value in (("event", event), ("session_id", session_id)):
            if value is not None:
                where, params = f"{where} AND {column} = %s", (*params, value)
        rows = self.db.rows(
            f"SELECT {_METRICS} FROM metrics WHERE {where} ORDER BY seq LIMIT %s", (*params, limit)
        )
        return [metric_from_row(row) for row in rows]

    def iterate(self) -> Iterator[MetricEvent]:
        """Every event in ``seq`` order, a page at a time (no connection held between pages)."""
        after = 0
        while page := self.since(limit=_PAGE, after_seq=after):
            yield from page
            after = page[-1].seq

    def problems(self) -> list[str]:
        """Events that do not link to the one before them, and a counter behind the chain."""
        rows = self.db.rows(
            "SELECT seq, before_seq FROM (SELECT seq, prev_hash, "
            "lag(seq) OVER (ORDER BY seq) AS before_seq, "
            "lag(hash) OVER (ORDER BY seq) AS before_hash "
            "FROM metrics WHERE tenant_id = %s) AS chain "
            "WHERE before_hash IS NOT NULL AND prev_hash <> before_hash ORDER BY seq LIMIT %s",
            (self.db.tenant, _MAX_PROBLEMS),
        )
        found = [
            f"metrics event {seq} does not follow event {before} (chain broken); "
            "run `cortex metrics verify`"
            for seq, before in rows
        ]
        behind = self.db.one(
            "SELECT max(m.seq), max(c.last_seq) FROM metrics m LEFT JOIN metric_counters c "
            "ON c.tenant_id = m.tenant_id WHERE m.tenant_id = %s",
            (self.db.tenant,),
        )
        if behind and behind[0] is not None and (behind[1] or 0) < behind[0]:
            found.append(
                f"metrics counter is behind event {behind[0]}: new events would reuse numbers"
            )
        return found


_INSERT_AUDIT = (
    "INSERT INTO audit_log (tenant_id, action, actor, target, detail, created_at) "
    "VALUES (%s, %s, %s, %s, %s, %s)"
)


class AuditRepository:
    """The audit log of one tenant."""

    def __init__(self, db: Runner) -> None:
        self.db = db

    def append(
        self, action: str, actor: str, target: str | None, detail: dict[str, Any], at: str
    ) -> int:
        row = self.db.one(
            f"{_INSERT_AUDIT} RETURNING id",
            (self.db.tenant, action, actor, target, dumps(detail), at),
        )
        assert row is not None  # INSERT ... RETURNING returns the row it inserted
        return int(row[0])

    def append_many(self, entries: Sequence[AuditRow], at: str) -> None:
        """Append ``entries`` in order, one statement run for every row."""
        tenant = self.db.tenant
        self.db.executemany(
            _INSERT_AUDIT,
            [(tenant, action, actor, target, dumps(d), at) for action, actor, target, d in entries],
        )

    def newest(self, *, limit: int = 100, target: str | None = None) -> list[AuditEntry]:
        """Newest first; of one ``target`` when it is given."""
        where = "" if target is None else " AND target = %s"
        params = (self.db.tenant,) if target is None else (self.db.tenant, target)
        rows = self.db.rows(
            f"SELECT {', '.join(AUDIT_COLUMNS)} FROM audit_log WHERE tenant_id = %s{where} "
            "ORDER BY id DESC LIMIT %s",
            (*params, limit),
        )
        return [audit_from_row(row) for row in rows]
