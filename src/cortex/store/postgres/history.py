"""Session history of one tenant: events, snapshots, checkpoints and compaction events.

Every row carries the ``session_id`` of a ``session_states`` row (the one session entity)
and no foreign key to it, so archiving the session keeps its history.
"""

from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb

from cortex.core.history_models import (
    Checkpoint,
    CompactionEvent,
    EventTotals,
    SessionEvent,
    SessionSnapshot,
)
from cortex.store.log_records import (
    COMPACTION_COLUMNS,
    EVENT_COLUMNS,
    SNAPSHOT_COLUMNS,
    compaction_from_row,
    compaction_values,
    event_from_row,
    event_values,
    snapshot_from_row,
    snapshot_values,
)
from cortex.store.postgres.db import Runner

_EVENTS = ", ".join(EVENT_COLUMNS)
_SNAPSHOTS = ", ".join(SNAPSHOT_COLUMNS)
_COMPACTIONS = ", ".join(COMPACTION_COLUMNS)
_MAX_PROBLEMS = 50


def _insert(table: str, columns: tuple[str, ...]) -> str:
    return (
        f"INSERT INTO {table} (tenant_id, {', '.join(columns)}) "
        f"VALUES (%s, {', '.join('%s' for _ in columns)})"
    )


class HistoryRepository:
    """Events, snapshots, checkpoints and compaction events of one tenant's sessions."""

    def __init__(self, db: Runner) -> None:
        self.db = db

    # -- events ------------------------------------------------------------------------------
    def append_event(self, event: SessionEvent) -> None:
        self.db.execute(
            _insert("session_events", EVENT_COLUMNS), (self.db.tenant, *event_values(event))
        )

    def events(
        self,
        session_id: str,
        *,
        since: str | None = None,
        meaningful_only: bool = False,
        limit: int | None = None,
    ) -> list[SessionEvent]:
        """Events of a session in order (after ``since`` if given); the newest ``limit``."""
        meaningful = " AND is_meaningful" if meaningful_only else ""
        rows = self.db.rows(
            f"SELECT {_EVENTS} FROM (SELECT seq, {_EVENTS} FROM session_events "
            f"WHERE tenant_id = %s AND session_id = %s AND created_at > %s{meaningful} "
            "ORDER BY seq DESC LIMIT %s) AS newest ORDER BY seq",
            (self.db.tenant, session_id, since or "", limit),
        )
        return [event_from_row(r) for r in rows]

    def event_totals(self, session_id: str, since: str | None = None) -> EventTotals:
        """Token sum, distinct turns and count of a session's events after ``since``."""
        row = self.db.one(
            "SELECT COALESCE(SUM(token_count), 0), COUNT(DISTINCT turn_index), COUNT(*), "
            "MAX(created_at), MAX(turn_index) FROM session_events "
            "WHERE tenant_id = %s AND session_id = %s AND created_at > %s",
            (self.db.tenant, session_id, since or ""),
        )
        if row is None:  # an aggregate always returns one row
            return EventTotals()
        return EventTotals(
            int(row[0]), int(row[1]), int(row[2]), row[3], None if row[4] is None else int(row[4])
        )

    def captures_per_day(self, since: str) -> list[tuple[str, int, int]]:
        """(UTC day, sessions started, events recorded) from ``since``, oldest day first."""
        rows = self.db.rows(
            "SELECT day, SUM(s), SUM(e) FROM ("
            "SELECT substr(start_time, 1, 10) AS day, 1 AS s, 0 AS e FROM session_states "
            "WHERE tenant_id = %s AND start_time >= %s UNION ALL "
            "SELECT substr(created_at, 1, 10), 0, 1 FROM session_events "
            "WHERE tenant_id = %s AND created_at >= %s"
            ") AS captured GROUP BY day ORDER BY day",
            (self.db.tenant, since, self.db.tenant, since),
        )
        return [(str(day), int(s), int(e)) for day, s, e in rows]

    # -- snapshots ---------------------------------------------------------------------------
    def save_snapshot(self, snapshot: SessionSnapshot) -> None:
        self.db.execute(
            _insert("session_snapshots", SNAPSHOT_COLUMNS),
            (self.db.tenant, *snapshot_values(snapshot)),
        )

    def snapshot(self, snapshot_id: str) -> SessionSnapshot | None:
        row = self.db.one(
            f"SELECT {_SNAPSHOTS} FROM session_snapshots WHERE tenant_id = %s AND id = %s",
            (self.db.tenant, snapshot_id),
        )
        return snapshot_from_row(row) if row else None

    def snapshots(self, session_id: str, *, limit: int) -> list[SessionSnapshot]:
        """Snapshots of a session, newest first."""
        rows = self.db.rows(
            f"SELECT {_SNAPSHOTS} FROM session_snapshots WHERE tenant_id = %s "
            "AND session_id = %s ORDER BY created_at DESC, seq DESC LIMIT %s",
            (self.db.tenant, session_id, limit),
        )
        return [snapshot_from_row(r) for r in rows]

    # -- checkpoints -------------------------------------------------------------------------
    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        self.db.execute(
            "INSERT INTO checkpoints "
            "(tenant_id, id, session_id, type, summary, body, created_at, task_slug) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, (SELECT task_slug FROM session_states "
            "WHERE tenant_id = %s AND id = %s))",
            (
                self.db.tenant,
                checkpoint.checkpoint_id,
                checkpoint.session_id,
                checkpoint.type,
                checkpoint.summary,
                Jsonb(checkpoint.to_dict()),
                checkpoint.timestamp,
                self.db.tenant,
                checkpoint.session_id,
            ),
        )

    def checkpoint(self, checkpoint_id: str) -> Checkpoint | None:
        row = self.db.one(
            "SELECT body FROM checkpoints WHERE tenant_id = %s AND id = %s",
            (self.db.tenant, checkpoint_id),
        )
        return Checkpoint.from_dict(row[0]) if row else None

    def checkpoints(self, session_id: str, *, limit: int) -> list[Checkpoint]:
        """Checkpoints of a session, newest first."""
        rows = self.db.rows(
            "SELECT body FROM checkpoints WHERE tenant_id = %s AND session_id = %s "
            "ORDER BY seq DESC LIMIT %s",
            (self.db.tenant, session_id, limit),
        )
        return [Checkpoint.from_dict(r[0]) for r in rows]

    def task_checkpoints(self, task_slug: str, *, limit: int) -> list[Checkpoint]:
        """Checkpoints of a task's sessions, oldest first."""
        rows = self.db.rows(
            "SELECT body FROM checkpoints WHERE tenant_id = %s AND task_slug = %s "
            "ORDER BY seq LIMIT %s",
            (self.db.tenant, task_slug, limit),
        )
        return [Checkpoint.from_dict(r[0]) for r in rows]

    # -- compaction events -------------------------------------------------------------------
    def append_compaction(self, event: CompactionEvent) -> None:
        self.db.execute(
            _insert("compaction_events", COMPACTION_COLUMNS),
            (self.db.tenant, *compaction_values(event)),
        )

    def complete_compaction(self, event_id: str, summary_tokens: int, at: str) -> None:
        """Record the summary size and completion time of a compaction."""
        self.db.execute(
            "UPDATE compaction_events SET summary_tokens = %s, completed_at = %s "
            "WHERE tenant_id = %s AND id = %s",
            (summary_tokens, at, self.db.tenant, event_id),
        )

    def compactions(self, session_id: str, *, limit: int) -> list[CompactionEvent]:
        """Compaction events of a session, newest first."""
        rows = self.db.rows(
            f"SELECT {_COMPACTIONS} FROM compaction_events WHERE tenant_id = %s "
            "AND session_id = %s ORDER BY seq DESC LIMIT %s",
            (self.db.tenant, session_id, limit),
        )
        return [compaction_from_row(r) for r in rows]

    def problems(self) -> list[str]:
        """Checkpoints whose JSON body names another checkpoint or session than its row."""
        rows: list[tuple[Any, ...]] = self.db.rows(
            "SELECT id FROM checkpoints WHERE tenant_id = %s AND ("
            "jsonb_typeof(body) <> 'object' OR body->>'checkpoint_id' IS DISTINCT FROM id "
            "OR body->>'session_id' IS DISTINCT FROM session_id) ORDER BY seq LIMIT %s",
            (self.db.tenant, _MAX_PROBLEMS),
        )
        return [f"checkpoint {cid}: its body does not match its row" for (cid,) in rows]
