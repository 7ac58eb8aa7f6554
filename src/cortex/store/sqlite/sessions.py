"""Session records over SQLite: save, read, list and archive ``session_states`` rows.

The row mapping is ``cortex.store.records``'; here are the SQL text and the JSON columns'
encoding (SQLite keeps JSON as TEXT).
"""

from __future__ import annotations

from cortex.store.records import (
    SESSION_COLUMNS,
    SESSION_JSON_LISTS,
    SessionNarrowing,
    dumps,
    session_filter,
    session_projects_query,
    session_selects,
    session_values,
    sessions_from_rows,
)
from cortex.store.sqlite.db import Database

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from cortex.core.models import SessionState

_PAGE = 500
_JSON_COLUMNS = (*SESSION_JSON_LISTS, "topic_state")


# The columns restoration skips read as NULL (decoded as empty, like '[]' and '{}', but no
# text to hand over). The light select's pins come as bytes and ``_critical_pins_only``
# keeps those holding CRITICAL: SQLite's ``instr`` compares at every byte of the ~50
# candidates' pins (a third of the query's CPU), Python's substring search skips through them.
SELECT, _SELECT_FOR_RESTORE, _SELECT_FOR_RESTORE_LIGHT = session_selects(
    "NULL", "CAST(working_memory AS BLOB)"
)
_PINS = SESSION_COLUMNS.index("working_memory")
_CRITICAL = b'"CRITICAL"'
_UPSERT = (
    f"INSERT INTO session_states ({', '.join(SESSION_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in SESSION_COLUMNS)}) ON CONFLICT(id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in SESSION_COLUMNS[1:])
)


def _session_row(state: SessionState) -> tuple[Any, ...]:
    """``state`` as the values of ``SESSION_COLUMNS``, JSON columns as text."""
    data = session_values(state)
    for name in _JSON_COLUMNS:
        data[name] = dumps(data[name])
    data["crash_recovered"] = 1 if state.crash_recovered else 0
    return tuple(data[c] for c in SESSION_COLUMNS)


def _critical_pins_only(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A light select's row with its pins as text when they hold a CRITICAL one, else ``[]``
    (what ``CASE WHEN instr(working_memory, '"CRITICAL"') > 0 ...`` gives, NULL included)."""
    pins = row[_PINS]
    if isinstance(pins, bytes) and _CRITICAL in pins:
        text: str = pins.decode("utf-8")
    else:
        text = "[]"
    return (*row[:_PINS], text, *row[_PINS + 1 :])


class SessionRepository:
    """The ``SessionStore`` part of the protocol."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def _sessions(self, sql: str, params: tuple[Any, ...] = ()) -> list[SessionState]:
        return sessions_from_rows(self._db.rows(sql, params))

    def save_session(self, state: SessionState) -> None:
        """Insert or replace the whole row of ``state.session_id`` (UPSERT)."""
        self._db.run(_UPSERT, _session_row(state))

    def get_session(self, session_id: str) -> SessionState | None:
        found = self._sessions(f"{SELECT} WHERE id = ?", (session_id,))
        return found[0] if found else None

    def get_sessions(self, session_ids: Sequence[str]) -> list[SessionState]:
        """See ``Store.get_sessions`` (a read each: SQLite has no round trips to save)."""
        found = (self.get_session(sid) for sid in session_ids)
        return [state for state in found if state is not None]

    def completed_sessions_since(
        self,
        since: str,
        project: str | None,
        *,
        limit: int,
        exclude_id: str | None = None,
        all_pins: bool = True,
    ) -> list[SessionState]:
        """Sessions of ``project`` with ``end_time >= since``, newest ``end_time`` first."""
        select = _SELECT_FOR_RESTORE if all_pins else _SELECT_FOR_RESTORE_LIGHT
        # Served by idx_session_project_end: a range scan read backwards, stopped by LIMIT.
        rows = self._db.rows(
            f"{select} WHERE project IS ? AND end_time >= ? AND id IS NOT ? "
            "ORDER BY end_time DESC LIMIT ?",
            (project, since, exclude_id, limit),
        )
        if all_pins:
            return sessions_from_rows(rows)
        with self._db.translated():  # text that is not UTF-8 fails as the select's would
            return sessions_from_rows(map(_critical_pins_only, rows))

    def latest_session_id(self, project: str | None) -> str | None:
        """The id of the session of ``project`` that started last, open or not."""
        found = self._db.rows(
            "SELECT id FROM session_states WHERE project IS ? ORDER BY start_time DESC LIMIT 1",
            (project,),
        )
        return str(found[0][0]) if found else None

    def list_sessions(
        self,
        *,
        limit: int = 50,
        offset: int = 0,
        project: str | None = None,
        any_project: bool = True,
        state: str | None = None,
        crashed: bool | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> list[SessionState]:
        """Sessions newest ``start_time`` first (all projects unless ``any_project`` is False),
        in ``state``, crash-recovered or not, started in [since, until) when given."""
        narrow = SessionNarrowing(state=state, crashed=crashed, since=since, until=until)
        clauses, params = session_filter("?", narrow)
        if not any_project:
            clauses, params = ["project IS ?", *clauses], [project, *params]
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        return self._sessions(
            f"{SELECT}{where} ORDER BY start_time DESC LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )

    def task_sessions(self, task_slug: str, *, limit: int = 1000) -> list[SessionState]:
        """Sessions of a protocol task, oldest ``start_time`` first."""
        return self._sessions(
            f"{SELECT} WHERE task_slug = ? ORDER BY start_time, id LIMIT ?", (task_slug, limit)
        )

    def session_projects(self, *, limit: int = 500) -> list[str]:
        """See ``Store.session_projects``."""
        sql = session_projects_query().replace("%s", "?")
        return [str(row[0]) for row in self._db.rows(sql, (limit,))]

    def count_sessions(self) -> int:
        """How many session rows exist (SQLite only: tests and tools)."""
        return int(self._db.rows("SELECT count(*) FROM session_states")[0][0])

    def sessions_ended_before(self, before: str, *, limit: int) -> list[SessionState]:
        """Completed sessions with ``end_time < before``, oldest first (for archiving)."""
        return self._sessions(
            f"{SELECT} WHERE end_time < ? ORDER BY end_time LIMIT ?", (before, limit)
        )

    def delete_sessions(self, session_ids: list[str]) -> int:
        """Delete these rows; return how many were deleted."""
        deleted = 0
        with self._db.transaction():
            for start in range(0, len(session_ids), _PAGE):
                chunk = tuple(session_ids[start : start + _PAGE])
                marks = ", ".join("?" for _ in chunk)
                cursor = self._db.run(f"DELETE FROM session_states WHERE id IN ({marks})", chunk)
                deleted += cursor.rowcount
        return deleted
