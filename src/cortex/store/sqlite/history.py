"""A session's history over SQLite: events, snapshots, checkpoints, compaction events.

Every row carries a ``session_id`` that is a ``session_states.id``: the one session entity.
No foreign key ties them to it: archiving a session row keeps its history.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

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
from cortex.store.records import dumps
from cortex.store.sqlite.db import Database

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

_EVENTS = ", ".join(EVENT_COLUMNS)
_SNAPSHOTS = ", ".join(SNAPSHOT_COLUMNS)
_COMPACTIONS = ", ".join(COMPACTION_COLUMNS)
_CONFLICT = "session history record conflicts with a stored one ({}); use a new id"


def _insert(table: str, columns: tuple[str, ...]) -> str:
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"


def _checkpoint(body: str) -> Checkpoint:
    return Checkpoint.from_dict(json.loads(body))


class HistoryRepository:
    """The ``HistoryStore`` part of the protocol."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def _insert(self, sql: str, params: Sequence[Any]) -> None:
        self._db.run(sql, params, conflict=_CONFLICT)

    # -- events ------------------------------------------------------------------------------
    def append_session_event(self, event: SessionEvent) -> None:
        self._insert(_insert("session_events", EVENT_COLUMNS), event_values(event))

    def list_session_events(
        self,
        session_id: str,
        *,
        since: str | None = None,
        meaningful_only: bool = False,
        limit: int | None = None,
    ) -> list[SessionEvent]:
        """Events of a session in order (after ``since`` if given); the newest ``limit``."""
        where = "session_id = ? AND created_at > ?" + (
            " AND is_meaningful = 1" if meaningful_only else ""
        )
        rows = self._db.rows(
            f"SELECT {_EVENTS} FROM (SELECT seq, {_EVENTS} FROM session_events "
            f"WHERE {where} ORDER BY seq DESC LIMIT ?) ORDER BY seq",
            (session_id, since or "", -1 if limit is None else limit),
        )
        return [event_from_row(r) for r in rows]

    def session_event_totals(self, session_id: str, since: str | None = None) -> EventTotals:
        """Token sum, distinct turns and count of a session's events after ``since``."""
        row = self._db.rows(
            "SELECT COALESCE(SUM(token_count), 0), COUNT(DISTINCT turn_index), COUNT(*), "
            "MAX(created_at), MAX(turn_index) FROM session_events "
            "WHERE session_id = ? AND created_at > ?",
            (session_id, since or ""),
        )[0]
        return EventTotals(
            int(row[0]), int(row[1]), int(row[2]), row[3], None if row[4] is None else int(row[4])
        )

    def captures_per_day(self, since: str) -> list[tuple[str, int, int]]:
        """(UTC day, sessions started, events recorded) from ``since``, oldest day first."""
        rows = self._db.rows(
            "SELECT day, SUM(s), SUM(e) FROM ("
            "SELECT substr(start_time, 1, 10) AS day, 1 AS s, 0 AS e FROM session_states "
            "WHERE start_time >= ? UNION ALL "
            "SELECT substr(created_at, 1, 10), 0, 1 FROM session_events WHERE created_at >= ?"
            ") GROUP BY day ORDER BY day",
            (since, since),
        )
        return [(str(day), int(s), int(e)) for day, s, e in rows]

    # -- snapshots ---------------------------------------------------------------------------
    def save_snapshot(self, snapshot: SessionSnapshot) -> None:
        self._insert(_insert("session_snapshots", SNAPSHOT_COLUMNS), snapshot_values(snapshot))

    def get_snapshot(self, snapshot_id: str) -> SessionSnapshot | None:
        rows = self._db.rows(
            f"SELECT {_SNAPSHOTS} FROM session_snapshots WHERE id = ?", (snapshot_id,)
        )
        return snapshot_from_row(rows[0]) if rows else None

    def list_snapshots(self, session_id: str, *, limit: int = 20) -> list[SessionSnapshot]:
        """Snapshots of a session, newest first."""
        rows = self._db.rows(
            f"SELECT {_SNAPSHOTS} FROM session_snapshots WHERE session_id = ? "
            "ORDER BY created_at DESC, rowid DESC LIMIT ?",
            (session_id, limit),
        )
        return [snapshot_from_row(r) for r in rows]

    # -- checkpoints -------------------------------------------------------------------------
    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        body = dumps(checkpoint.to_dict())
        self._insert(
            "INSERT INTO checkpoints (id, session_id, type, summary, body, created_at, task_slug) "
            "VALUES (?, ?, ?, ?, ?, ?, (SELECT task_slug FROM session_states WHERE id = ?))",
            (
                checkpoint.checkpoint_id,
                checkpoint.session_id,
                checkpoint.type,
                checkpoint.summary,
                body,
                checkpoint.timestamp,
                checkpoint.session_id,
            ),
        )

    def get_checkpoint(self, checkpoint_id: str) -> Checkpoint | None:
        """One checkpoint by id."""
        rows = self._db.rows("SELECT body FROM checkpoints WHERE id = ?", (checkpoint_id,))
        return _checkpoint(rows[0][0]) if rows else None

    def list_checkpoints(self, session_id: str, *, limit: int = 20) -> list[Checkpoint]:
        """Checkpoints of a session, newest first."""
        rows = self._db.rows(
            "SELECT body FROM checkpoints WHERE session_id = ? ORDER BY seq DESC LIMIT ?",
            (session_id, limit),
        )
        return [_checkpoint(r[0]) for r in rows]

    def task_checkpoints(self, task_slug: str, *, limit: int = 1000) -> list[Checkpoint]:
        """Checkpoints of a task's sessions, oldest first."""
        rows = self._db.rows(
            "SELECT body FROM checkpoints WHERE task_slug = ? ORDER BY seq LIMIT ?",
            (task_slug, limit),
        )
        return [_checkpoint(r[0]) for r in rows]

    def bump_checkpoint_count(self, session_id: str, at: str) -> int:
        """Add one to ``session_states.checkpoint_count``; return the new count (0: no row)."""
        self._db.run(
            "UPDATE session_states SET checkpoint_count = checkpoint_count + 1, updated_at = ? "
            "WHERE id = ?",
            (at, session_id),
        )
        rows = self._db.rows(
            "SELECT checkpoint_count FROM session_states WHERE id = ?", (session_id,)
        )
        return int(rows[0][0]) if rows else 0

    # -- compaction events -------------------------------------------------------------------
    def append_compaction_event(self, event: CompactionEvent) -> None:
        self._insert(_insert("compaction_events", COMPACTION_COLUMNS), compaction_values(event))

    def complete_compaction_event(self, event_id: str, summary_tokens: int, at: str) -> None:
        """Record the summary size and completion time of a compaction."""
        self._db.run(
            "UPDATE compaction_events SET summary_tokens = ?, completed_at = ? WHERE id = ?",
            (summary_tokens, at, event_id),
        )

    def list_compaction_events(self, session_id: str, *, limit: int = 20) -> list[CompactionEvent]:
        """Compaction events of a session, newest first."""
        rows = self._db.rows(
            f"SELECT {_COMPACTIONS} FROM compaction_events WHERE session_id = ? "
            "ORDER BY seq DESC LIMIT ?",
            (session_id, limit),
        )
        return [compaction_from_row(r) for r in rows]
