"""Sessions: one ``session_states`` row per session and tenant, written whole (UPSERT)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from psycopg.types.json import Jsonb

from cortex.core.jsontext import compact_encoder
from cortex.core.models import SessionState
from cortex.errors import BusyError
from cortex.store.postgres.db import Runner
from cortex.store.records import (
    SESSION_COLUMNS,
    SESSION_JSON_COLUMNS,
    SESSION_JSON_LISTS,
    SessionNarrowing,
    in_order,
    session_filter,
    session_projects_query,
    session_selects,
    session_values,
    sessions_from_rows,
)

JSON_TEXT = "{}::text"
"""How a JSON column of a session is read: as its text, which ``session_from_row`` parses.
Decoded by psycopg the row would hold lists and dicts, which cannot key the cache of decoded
rows; as text, a row read before (a restore reads the same ~50 sessions at every start) is
not parsed again."""

SELECT, _SELECT_FOR_RESTORE, _SELECT_FOR_RESTORE_LIGHT = session_selects(
    "'{}'::text",
    'CASE WHEN working_memory @> \'[{"importance": "CRITICAL"}]\' '
    "THEN working_memory::text ELSE '[]' END",
    JSON_TEXT,
)
UPSERT = (
    f"INSERT INTO session_states (tenant_id, {', '.join(SESSION_COLUMNS)}) "
    f"VALUES (%s, {', '.join('%s' for _ in SESSION_COLUMNS)}) "
    "ON CONFLICT (tenant_id, id) DO UPDATE SET "
    + ", ".join(f"{c} = EXCLUDED.{c}" for c in SESSION_COLUMNS[1:])
)
"""The whole row of a session, inserted or replaced; its parameters are ``session_row``'s."""


_JSON = compact_encoder(ensure_ascii=True)
"""How a session's JSON columns are written: ``json.dumps``'s text without its spaces (the
same JSONB), from an encoder built once rather than at each of a row's nine values; ASCII,
as ``json.dumps`` writes it, so a value PostgreSQL refuses is refused the same way."""


def session_row(tenant: str, state: SessionState) -> tuple[Any, ...]:
    """The parameters of ``UPSERT`` for ``tenant``'s session ``state``."""
    data = session_values(state)
    return (
        tenant,
        *(Jsonb(data[c], _JSON) if c in SESSION_JSON_COLUMNS else data[c] for c in SESSION_COLUMNS),
    )


def held(db: Runner) -> str:
    """What a read of one session appends in a transaction: ``FOR UPDATE``, so that the row
    read is the row the transaction writes back. Sessions are written whole (``UPSERT``): two
    writers of one session (a pin and a turn of two clients) that both read it unlocked would
    each write back their own copy, and the later commit would undo the earlier (a pin
    acknowledged, then gone). Locked, the second waits for the first to commit and reads its
    row, as SQLite's one writer at a time does."""
    return " FOR UPDATE" if db.in_transaction else ""


@contextlib.contextmanager
def busy(what: str) -> Iterator[None]:
    """A lock wait on ``what`` (a session) that lapsed, said of it: "session X is busy"."""
    try:
        yield
    except BusyError as exc:
        raise BusyError(
            f"{what} is busy (another request or transaction holds it); retry shortly"
        ) from exc


def project_clause(project: str | None) -> tuple[str, tuple[Any, ...]]:
    """``project`` compared as SQLite's ``IS`` does, in a form an index can serve."""
    return ("project IS NULL", ()) if project is None else ("project = %s", (project,))


class SessionRepository:
    """The session rows of one tenant."""

    def __init__(self, db: Runner) -> None:
        self.db = db

    def save(self, state: SessionState) -> None:
        """Insert or replace the whole row (one atomic UPSERT, safe against a racing writer);
        in a transaction it goes with the next statement or the commit."""
        self.db.execute_later(UPSERT, session_row(self.db.tenant, state))

    def get(self, session_id: str) -> SessionState | None:
        with busy(f"session {session_id}"):
            found = self.db.rows(*self.get_query(session_id))
        states = sessions_from_rows(found)
        return states[0] if states else None

    def get_query(self, session_id: str) -> tuple[str, tuple[Any, ...]]:
        """The SELECT of ``get`` (a store may send it ahead of the call); in a transaction it
        locks the row until the transaction ends (see ``held``)."""
        return (
            f"{SELECT} WHERE tenant_id = %s AND id = %s{held(self.db)}",
            (self.db.tenant, session_id),
        )

    def get_many(self, session_ids: Sequence[str]) -> list[SessionState]:
        """See ``Store.get_sessions``."""
        if not session_ids:
            return []
        found = self._sessions(
            f"{SELECT} WHERE tenant_id = %s AND id = ANY(%s)", (list(session_ids),)
        )
        return in_order(found, session_ids)

    def completed_query(
        self,
        since: str,
        project: str | None,
        *,
        limit: int,
        exclude_id: str | None = None,
        all_pins: bool = True,
    ) -> tuple[str, tuple[Any, ...]]:
        """The SELECT of ``Store.completed_sessions_since`` (sent ahead of it, or by it)."""
        select = _SELECT_FOR_RESTORE if all_pins else _SELECT_FOR_RESTORE_LIGHT
        where, params = project_clause(project)
        if exclude_id is not None:
            where, params = f"{where} AND id <> %s", (*params, exclude_id)
        # Served by idx_session_project_end, read backwards and stopped by LIMIT.
        return (
            f"{select} WHERE tenant_id = %s AND {where} AND end_time >= %s "
            "ORDER BY end_time DESC LIMIT %s",
            (self.db.tenant, *params, since, limit),
        )

    def latest_id(self, project: str | None) -> str | None:
        """The id of the session of ``project`` that started last, open or not."""
        found = self.db.rows(*self.latest_id_query(project))
        return str(found[0][0]) if found else None

    def latest_id_query(self, project: str | None) -> tuple[str, tuple[Any, ...]]:
        """The SELECT of ``latest_id`` (a store may send it ahead of the call)."""
        where, params = project_clause(project)
        return (
            f"SELECT id FROM session_states WHERE tenant_id = %s AND {where} "
            "ORDER BY start_time DESC LIMIT 1",
            (self.db.tenant, *params),
        )

    def latest_query(self, project: str | None) -> tuple[str, tuple[Any, ...]]:
        """The SELECT of ``latest`` (a store may send it ahead of the call)."""
        where, params = project_clause(project)
        return (
            f"{SELECT} WHERE tenant_id = %s AND {where} ORDER BY start_time DESC LIMIT 1",
            (self.db.tenant, *params),
        )

    def listing(
        self,
        *,
        limit: int,
        offset: int,
        project: str | None,
        any_project: bool,
        narrow: SessionNarrowing,
    ) -> list[SessionState]:
        """Sessions newest ``start_time`` first (all projects unless ``any_project`` is False),
        narrowed by ``narrow``."""
        clauses, params = session_filter("%s", narrow)
        if not any_project:
            where, of_project = project_clause(project)
            clauses, params = [where, *clauses], [*of_project, *params]
        return self._sessions(
            f"{SELECT} WHERE {' AND '.join(['tenant_id = %s', *clauses])} "
            "ORDER BY start_time DESC, id DESC LIMIT %s OFFSET %s",
            (*params, limit, offset),
        )

    def of_task(self, task_slug: str, *, limit: int) -> list[SessionState]:
        """Sessions of a protocol task, oldest ``start_time`` first."""
        return self._sessions(
            f"{SELECT} WHERE tenant_id = %s AND task_slug = %s ORDER BY start_time, id LIMIT %s",
            (task_slug, limit),
        )

    def projects(self, limit: int) -> list[str]:
        """See ``Store.session_projects``."""
        rows = self.db.rows(session_projects_query("tenant_id = %s AND "), (self.db.tenant, limit))
        return [str(row[0]) for row in rows]

    def count(self) -> int:
        row = self.db.one("SELECT count(*) FROM session_states WHERE tenant_id = %s", self._t())
        return int(row[0]) if row else 0

    def mark_continued(self, session_ids: list[str], next_id: str, at: str) -> None:
        """Set ``continued_by`` and ``updated_at`` on each of ``session_ids`` (one statement).

        The rows are locked in id order first: two starts of one tenant often continue the
        same sessions, and rows locked in scan order deadlock them (seen under load). In a
        transaction it goes with the next statement (a restore's: the metrics chain's read)."""
        self.db.execute_later(
            "UPDATE session_states SET continued_by = %s, updated_at = %s "
            "WHERE tenant_id = %s AND id IN (SELECT id FROM session_states "
            "WHERE tenant_id = %s AND id = ANY(%s) ORDER BY id FOR UPDATE)",
            (next_id, at, self.db.tenant, self.db.tenant, sorted(session_ids)),
        )

    def ended_before(self, before: str, *, limit: int) -> list[SessionState]:
        """Completed sessions with ``end_time < before``, oldest first (for archiving). In a
        transaction they are locked for it, and a row another transaction holds is passed
        over (archived by a later run) rather than waited for."""
        claim = " FOR UPDATE SKIP LOCKED" if self.db.in_transaction else ""
        return self._sessions(
            f"{SELECT} WHERE tenant_id = %s AND end_time < %s ORDER BY end_time LIMIT %s{claim}",
            (before, limit),
        )

    def delete(self, session_ids: list[str]) -> int:
        """Delete these rows of this tenant; return how many were deleted."""
        if not session_ids:
            return 0
        return self.db.execute(
            "DELETE FROM session_states WHERE tenant_id = %s AND id = ANY(%s)",
            (self.db.tenant, list(session_ids)),
        )

    def bump_checkpoint_count(self, session_id: str, at: str) -> int:
        """Add one to ``checkpoint_count``; return the new count (0: no such session)."""
        row = self.db.one(
            "UPDATE session_states SET checkpoint_count = checkpoint_count + 1, updated_at = %s "
            "WHERE tenant_id = %s AND id = %s RETURNING checkpoint_count",
            (at, self.db.tenant, session_id),
        )
        return int(row[0]) if row else 0

    def problems(self) -> list[str]:
        """Sessions whose JSON columns have the wrong shape (they read as empty)."""
        checks = [f"('{c}', jsonb_typeof({c}) = 'array')" for c in SESSION_JSON_LISTS]
        checks.append("('topic_state', jsonb_typeof(topic_state) = 'object')")
        rows = self.db.rows(
            f"SELECT s.id, v.name FROM session_states s, LATERAL (VALUES {', '.join(checks)}) "
            "AS v(name, ok) WHERE s.tenant_id = %s AND NOT v.ok ORDER BY s.id, v.name LIMIT 50",
            self._t(),
        )
        return [f"session {sid}: column {name} has the wrong JSON shape" for sid, name in rows]

    def _t(self) -> tuple[str]:
        return (self.db.tenant,)

    def _sessions(self, sql: str, params: tuple[Any, ...] = ()) -> list[SessionState]:
        """Run a SELECT whose first placeholder is the tenant."""
        return sessions_from_rows(self.db.rows(sql, (self.db.tenant, *params)))
