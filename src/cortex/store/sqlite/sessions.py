"""Session records over SQLite: save, read, list and archive ``session_states`` rows."""

from __future__ import annotations

from typing import Any

from cortex.core.models import SessionState
from cortex.store.sqlite.db import Database
from cortex.store.sqlite.session_rows import (
    SELECT,
    SELECT_FOR_RESTORE,
    SELECT_FOR_RESTORE_LIGHT,
    UPSERT,
    session_row,
    sessions_from,
)

_PAGE = 500


class SessionRepository:
    """The ``SessionStore`` part of the protocol."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def _sessions(self, sql: str, params: tuple[Any, ...] = ()) -> list[SessionState]:
        return sessions_from(self._db.rows(sql, params))

    def save_session(self, state: SessionState) -> None:
        """Insert or replace the whole row of ``state.session_id`` (UPSERT)."""
        self._db.run(UPSERT, session_row(state))

    def get_session(self, session_id: str) -> SessionState | None:
        found = self._sessions(f"{SELECT} WHERE id = ?", (session_id,))
        return found[0] if found else None

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
        select = SELECT_FOR_RESTORE if all_pins else SELECT_FOR_RESTORE_LIGHT
        # Served by idx_session_project_end: a range scan read backwards, stopped by LIMIT.
        return self._sessions(
            f"{select} WHERE project IS ? AND end_time >= ? AND id IS NOT ? "
            "ORDER BY end_time DESC LIMIT ?",
            (project, since, exclude_id, limit),
        )

    def latest_session(self, project: str | None) -> SessionState | None:
        """The session of ``project`` that started last, open or not."""
        found = self._sessions(
            f"{SELECT} WHERE project IS ? ORDER BY start_time DESC LIMIT 1", (project,)
        )
        return found[0] if found else None

    def list_sessions(
        self,
        *,
        limit: int = 50,
        offset: int = 0,
        project: str | None = None,
        any_project: bool = True,
    ) -> list[SessionState]:
        """Sessions newest ``start_time`` first (all projects unless ``any_project`` is False)."""
        where = "" if any_project else " WHERE project IS ?"
        params: tuple[Any, ...] = () if any_project else (project,)
        return self._sessions(
            f"{SELECT}{where} ORDER BY start_time DESC LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )

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
