"""A batch of captured turns of many tenants in one transaction (the team server's group
commit): three round trips for the whole batch, where one turn alone takes five.

1. ``BEGIN`` and the callers' API keys;
2. the request-id claims, the sessions and the tenants' pending tasks, pipelined;
3. the claims taken back, the session UPSERTs and ``COMMIT``, pipelined.

When the callers' tenants are known beforehand (keys the server process authenticated
before), the keys go with the second round trip: two round trips in all.

Every statement names the tenant of each row it reads or writes (arrays of (tenant, id)
pairs). The sessions are read locked (``FOR UPDATE``), as a single request reads the session
it writes: a pin or end of another request waits for the batch's commit instead of writing
back a copy without its turn (or the batch writing back one without the pin). A session
another transaction holds is left out (``SKIP LOCKED``) rather than waited for: its turn is
captured alone after the batch, so one held session costs the batch's other turns nothing and
its own turn one lock bound, not a failed batch and then a second wait. Rows are locked and
written in (tenant, id) order, so that two batches of two worker processes lock the same rows
in the same order and never deadlock each other.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from cortex.core.models import SessionState
from cortex.core.tasks import PENDING_STAGES, TaskRecord
from cortex.core.tenancy import ApiKeyRecord
from cortex.store.postgres.db import Connection, Cursor, Pool, roll_back, translated
from cortex.store.postgres.sessions import JSON_TEXT, UPSERT, session_row
from cortex.store.records import SESSION_COLUMNS, session_column, session_from_row
from cortex.store.registry import KEYS, key_from_row
from cortex.store.tasks import TASK_COLUMNS, task_from_row

if TYPE_CHECKING:
    import psycopg

    from cortex.store.protocol import BatchReads, TenantKey

_PAIRS = "unnest(%s::text[], %s::text[]) AS u(tenant_id, id)"
_CLAIM = (
    "INSERT INTO request_ids (tenant_id, request_id, created_at) "
    f"SELECT u.tenant_id, u.id, %s FROM {_PAIRS} ORDER BY 1, 2 "
    "ON CONFLICT DO NOTHING RETURNING tenant_id, request_id"
)
_SESSIONS = (
    f"SELECT s.tenant_id, {', '.join(session_column(c, JSON_TEXT, 's.') for c in SESSION_COLUMNS)} "
    f"FROM {_PAIRS} JOIN session_states s ON s.tenant_id = u.tenant_id AND s.id = u.id "
    "ORDER BY s.tenant_id, s.id FOR UPDATE OF s SKIP LOCKED"
)
_TASKS = (
    f"SELECT tenant_id, {TASK_COLUMNS} FROM tasks "
    "WHERE tenant_id = ANY(%s::text[]) AND stage = ANY(%s::text[]) ORDER BY tenant_id, seq"
)
_RELEASE = (
    f"DELETE FROM request_ids r USING {_PAIRS} "
    "WHERE r.tenant_id = u.tenant_id AND r.request_id = u.id"
)


_KEYS = f"{KEYS} WHERE k.key_id = ANY(%s::text[])"


def _array(values: Iterable[str]) -> str:
    """``values`` as the text of a PostgreSQL array, for a ``%s::text[]`` parameter: each
    item quoted, its backslashes and double quotes escaped. psycopg dumps a list by looking
    at its items to choose the array's type at every statement; a text is dumped as it is."""
    items = list(values)
    text = '","'.join(items)
    if "\\" in text or '"' in text:  # rare: escape each item's own
        text = '","'.join(v.replace("\\", "\\\\").replace('"', '\\"') for v in items)
    return '{"' + text + '"}' if items else "{}"


_STAGES = _array(PENDING_STAGES)


def _pairs(keys: Sequence[TenantKey]) -> tuple[str, str]:
    return _array(tenant for tenant, _ in keys), _array(key for _, key in keys)


_cursors: dict[Connection, dict[str, Cursor]] = {}
"""The kept cursors of each open connection. Not weakly keyed: a cursor refers to its
connection, so a weak key would never be let go; a closed connection's are dropped when a
new connection comes (the pool closes one it replaces)."""
_cursors_lock = threading.Lock()


def _cursor(conn: Connection, sql: str) -> Cursor:
    """The cursor that runs ``sql`` (one of this module's statements) on ``conn``, kept for
    the connection's next batches: psycopg makes a cursor (with its own adapters map) per
    ``Connection.execute``, and a cursor that runs the same query again keeps its transformer
    (the dumpers and loaders it found); a fifth of a batch's CPU went to making them anew.
    A connection serves one batch at a time (the pool's checkout), so its cursors do too."""
    kept = _cursors.get(conn)
    if kept is None:
        with _cursors_lock:
            for closed in [known for known in _cursors if known.closed]:
                del _cursors[closed]
            kept = _cursors.setdefault(conn, {})
    cursor = kept.get(sql)
    if cursor is None:
        cursor = kept[sql] = conn.cursor()
    return cursor


def _run(conn: Connection, sql: str, params: Sequence[Any] | None = None) -> Cursor:
    """``sql`` run on ``conn`` by its kept cursor (``BEGIN`` and ``COMMIT`` never prepared)."""
    prepare = False if params is None else None
    return _cursor(conn, sql).execute(sql, params, prepare=prepare)


def _keys(cursor: Cursor) -> dict[str, ApiKeyRecord]:
    return {record.key_id: record for record in map(key_from_row, cursor.fetchall())}


class PostgresTurnBatch:
    """``TurnBatch`` on one connection in an open transaction, in pipeline mode from its
    first statement to its ``COMMIT`` (see ``turn_batch``): each read ends with a sync of the
    pipeline (its round trip), the writes and ``COMMIT`` go with the pipeline's end."""

    def __init__(self, conn: Connection, pipeline: psycopg.Pipeline) -> None:
        self._conn = conn
        self._pipeline = pipeline
        self._writes: list[tuple[str, Sequence[Any]]] = []
        self._begun = False

    def _begin(self) -> None:
        """``BEGIN``, sent with the first statement (in its pipeline)."""
        if not self._begun:
            _run(self._conn, "BEGIN")
            self._begun = True

    def api_keys(self, key_ids: Sequence[str]) -> dict[str, ApiKeyRecord]:
        self._begin()
        cursor = _run(self._conn, _KEYS, (_array(key_ids),))
        self._pipeline.sync()
        return _keys(cursor)

    def claim_and_read(
        self,
        claims: Sequence[TenantKey],
        at: str,
        sessions: Sequence[TenantKey],
        key_ids: Sequence[str] = (),
    ) -> BatchReads:
        tenants = sorted({tenant for tenant, _ in sessions})
        self._begin()
        keys = _run(self._conn, _KEYS, (_array(key_ids),)) if key_ids else None
        claimed = _run(self._conn, _CLAIM, (at, *_pairs(claims))) if claims else None
        found = _run(self._conn, _SESSIONS, _pairs(sessions))
        pending = _run(self._conn, _TASKS, (_array(tenants), _STAGES))
        self._pipeline.sync()
        states: dict[TenantKey, SessionState] = {}
        for row in found.fetchall():
            state = session_from_row(row[1:], keep=False)  # about to change: never read again
            if state is not None:  # an unreadable row: the item is retried alone, which says so
                states[(str(row[0]), state.session_id)] = state
        tasks: dict[str, list[TaskRecord]] = {tenant: [] for tenant in tenants}
        for row in pending.fetchall():
            tasks[str(row[0])].append(task_from_row(row[1:]))
        taken = {(str(t), str(r)) for t, r in claimed.fetchall()} if claimed is not None else set()
        return taken, states, tasks, _keys(keys) if keys is not None else {}

    def release(self, claims: Sequence[TenantKey]) -> None:
        if claims:
            self._writes.append((_RELEASE, _pairs(sorted(claims))))

    def save_sessions(self, states: Sequence[tuple[str, SessionState]]) -> None:
        for tenant, state in sorted(states, key=lambda item: (item[0], item[1].session_id)):
            self._writes.append((UPSERT, session_row(tenant, state)))

    def commit(self) -> None:
        """Queue the waiting writes and ``COMMIT``: the pipeline's end sends them, in one
        round trip."""
        writes, self._writes = self._writes, []
        if not self._begun:
            return  # nothing was read, so nothing was written
        for sql, params in writes:
            _run(self._conn, sql, params)
        _run(self._conn, "COMMIT")


@contextlib.contextmanager
def turn_batch(pool: Pool, url: str) -> Iterator[PostgresTurnBatch]:
    """A ``PostgresTurnBatch`` on a connection of ``pool``: committed when the block ends,
    rolled back on an exception (psycopg errors leave as Cortex errors)."""
    with translated(url), pool.connection() as conn:
        try:
            with conn.pipeline() as pipeline:
                batch = PostgresTurnBatch(conn, pipeline)
                yield batch
                batch.commit()
        except BaseException:
            roll_back(conn)
            raise
