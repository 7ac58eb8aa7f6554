"""Leases: the open sessions, and which of them crash recovery may claim.

A session with no ``end_time`` holds a lease (``last_activity``). Several server processes
may run crash recovery for one tenant at once: inside a transaction, the candidates come
back locked (``FOR UPDATE SKIP LOCKED``), so each lapsed session is claimed by exactly one
of them and the others pass over it instead of waiting.
"""

from __future__ import annotations

from typing import Any

from cortex.core.models import SessionState
from cortex.store.postgres.db import Runner
from cortex.store.postgres.sessions import SELECT, busy, held, project_clause
from cortex.store.records import sessions_from_rows


class LeaseRepository:
    """Open sessions of one tenant: crash-recovery candidates and the newest lease."""

    def __init__(self, db: Runner) -> None:
        self.db = db

    def open_sessions(
        self, *, exclude_id: str | None = None, idle_before: str | None = None
    ) -> list[SessionState]:
        """Sessions with no ``end_time``, any project, oldest first.

        With ``idle_before``, only those idle since before it or with a recorded owner
        process; inside a transaction these are locked for it and rows another transaction
        holds are skipped (that one is recovering them).
        """
        return sessions_from_rows(
            self.db.rows(*self.open_query(exclude_id=exclude_id, idle_before=idle_before))
        )

    def open_query(
        self, *, exclude_id: str | None = None, idle_before: str | None = None
    ) -> tuple[str, tuple[Any, ...]]:
        """The SELECT of ``open_sessions`` (a store may send it ahead of the call)."""
        where = "tenant_id = %s AND end_time IS NULL"
        params: tuple[Any, ...] = (self.db.tenant,)
        if exclude_id is not None:
            where, params = f"{where} AND id <> %s", (*params, exclude_id)
        claim = ""
        if idle_before is not None:
            where += (
                " AND (COALESCE(last_activity, updated_at, start_time) < %s"
                " OR owner_pid IS NOT NULL)"
            )
            params += (idle_before,)
            claim = " FOR UPDATE SKIP LOCKED" if self.db.in_transaction else ""
        return f"{SELECT} WHERE {where} ORDER BY start_time, id{claim}", params

    def latest_open(self, project: str | None, *, any_project: bool) -> SessionState | None:
        """The open session with the newest ``last_activity`` (of ``project`` unless
        ``any_project``); a session with no activity yet comes last, as in SQLite. In a
        transaction it is locked until the transaction ends (see ``held``)."""
        where, params = ("TRUE", ()) if any_project else project_clause(project)
        shown = "" if any_project or project is None else f" of project {project!r}"
        with busy(f"the current session{shown}"):
            rows = self.db.rows(
                f"{SELECT} WHERE tenant_id = %s AND end_time IS NULL AND {where} "
                f"ORDER BY last_activity DESC NULLS LAST LIMIT 1{held(self.db)}",
                (self.db.tenant, *params),
            )
        found = sessions_from_rows(rows)
        return found[0] if found else None
