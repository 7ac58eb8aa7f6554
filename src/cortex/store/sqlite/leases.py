"""Open sessions over SQLite: the lease and crash-recovery queries, and chaining marks."""

from __future__ import annotations

from cortex.store.records import sessions_from_rows
from cortex.store.sqlite.db import Database
from cortex.store.sqlite.sessions import SELECT

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from cortex.core.models import SessionState


class LeaseRepository:
    """The ``LeaseStore`` part of the protocol."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def open_sessions(
        self,
        *,
        exclude_id: str | None = None,
        idle_before: str | None = None,
        owner_keeps: Callable[[int, str | None], bool] | None = None,
    ) -> list[SessionState]:
        """Sessions with no ``end_time`` (live or crashed), any project, oldest first.

        With ``idle_before``, only those idle since before it or with a recorded owner process
        (the caller checks whether that process is alive). With ``owner_keeps`` the lease
        columns are read first and a session not idle whose owner keeps it is left out:
        decoding each live session's row cost crash recovery ~5 µs a session at every start.
        """
        where = "end_time IS NULL AND id IS NOT ?"
        params: tuple[Any, ...] = (exclude_id,)
        if idle_before is not None:
            idle = "COALESCE(last_activity, updated_at, start_time) < ?"
            where += f" AND ({idle} OR owner_pid IS NOT NULL)"
            params += (idle_before,)
            if owner_keeps is not None:
                leases = self._db.rows(
                    f"SELECT id, {idle}, owner_pid, owner_host FROM session_states WHERE {where}",
                    (idle_before, *params),
                )
                wanted = [
                    sid
                    for sid, lapsed, pid, host in leases
                    if lapsed or pid is None or not owner_keeps(pid, host)
                ]
                if not wanted:
                    return []
                if len(wanted) < len(leases):
                    where += f" AND id IN ({', '.join('?' * len(wanted))})"
                    params += tuple(wanted)
        rows = self._db.rows(f"{SELECT} WHERE {where} ORDER BY start_time, id", params)
        return sessions_from_rows(rows)

    def latest_open_session(
        self, project: str | None = None, *, any_project: bool = False
    ) -> SessionState | None:
        """The open session with the newest ``last_activity`` (of ``project`` unless
        ``any_project``)."""
        where = "end_time IS NULL" + ("" if any_project else " AND project IS ?")
        params: tuple[Any, ...] = () if any_project else (project,)
        # Served by idx_session_open (end_time, last_activity), read backwards: no sort.
        rows = self._db.rows(f"{SELECT} WHERE {where} ORDER BY last_activity DESC LIMIT 1", params)
        found = sessions_from_rows(rows)
        return found[0] if found else None

    def mark_continued(self, session_ids: list[str], next_id: str, at: str) -> None:
        """Set ``continued_by = next_id`` and ``updated_at = at`` on each of ``session_ids``."""
        with self._db.transaction():
            for sid in session_ids:
                self._db.run(
                    "UPDATE session_states SET continued_by = ?, updated_at = ? WHERE id = ?",
                    (next_id, at, sid),
                )
