"""A session's history over SQLite: events, snapshots, checkpoints, compaction events.

Every row carries a ``session_id`` that is a ``session_states.id``: the one session entity.
No foreign key ties them to it: archiving a session row keeps its history.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from cortex.core.memory_models import (
    Checkpoint,
    CompactionEvent,
    EventTotals,
    SessionEvent,
    SessionSnapshot,
)
from cortex.store.sqlite.db import Database, dumps

_EVENT_COLUMNS = (
    "id, session_id, role, kind, content, token_count, turn_index, is_meaningful, created_at"
)
_SNAPSHOT_COLUMNS = "id, session_id, slug, source_trigger, transcript_md, message_count, created_at"
_COMPACTION_COLUMNS = (
    "id, session_id, trigger_type, reason, token_count_before, turn_count_before, "
    "summary_tokens, checkpoint_id, created_at, completed_at"
)
_CONFLICT = "session history record conflicts with a stored one ({}); use a new id"


def _event(row: Sequence[Any]) -> SessionEvent:
    return SessionEvent(
        id=str(row[0]),
        session_id=str(row[1]),
        role=str(row[2]),
        kind=str(row[3]),
        content=str(row[4]),
        token_count=int(row[5] or 0),
        turn_index=None if row[6] is None else int(row[6]),
        is_meaningful=bool(row[7]),
        created_at=str(row[8]),
    )


def _snapshot(row: Sequence[Any]) -> SessionSnapshot:
    return SessionSnapshot(
        id=str(row[0]),
        session_id=str(row[1]),
        slug=str(row[2]),
        source_trigger=str(row[3]),
        transcript_md=str(row[4]),
        message_count=int(row[5]),
        created_at=str(row[6]),
    )


def _compaction(row: Sequence[Any]) -> CompactionEvent:
    return CompactionEvent(
        id=str(row[0]),
        session_id=str(row[1]),
        trigger_type=str(row[2]),
        reason=str(row[3]),
        token_count_before=int(row[4] or 0),
        turn_count_before=int(row[5] or 0),
        summary_tokens=None if row[6] is None else int(row[6]),
        checkpoint_id=row[7],
        created_at=str(row[8]),
        completed_at=row[9],
    )


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
        self._insert(
            f"INSERT INTO session_events ({_EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                event.id,
                event.session_id,
                event.role,
                event.kind,
                event.content,
                event.token_count,
                event.turn_index,
                1 if event.is_meaningful else 0,
                event.created_at,
            ),
        )

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
            f"SELECT {_EVENT_COLUMNS} FROM (SELECT seq, {_EVENT_COLUMNS} FROM session_events "
            f"WHERE {where} ORDER BY seq DESC LIMIT ?) ORDER BY seq",
            (session_id, since or "", -1 if limit is None else limit),
        )
        return [_event(r) for r in rows]

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

    # -- snapshots ---------------------------------------------------------------------------
    def save_snapshot(self, snapshot: SessionSnapshot) -> None:
        self._insert(
            f"INSERT INTO session_snapshots ({_SNAPSHOT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                snapshot.id,
                snapshot.session_id,
                snapshot.slug,
                snapshot.source_trigger,
                snapshot.transcript_md,
                snapshot.message_count,
                snapshot.created_at,
            ),
        )

    def get_snapshot(self, snapshot_id: str) -> SessionSnapshot | None:
        rows = self._db.rows(
            f"SELECT {_SNAPSHOT_COLUMNS} FROM session_snapshots WHERE id = ?", (snapshot_id,)
        )
        return _snapshot(rows[0]) if rows else None

    def list_snapshots(self, session_id: str, *, limit: int = 20) -> list[SessionSnapshot]:
        """Snapshots of a session, newest first."""
        rows = self._db.rows(
            f"SELECT {_SNAPSHOT_COLUMNS} FROM session_snapshots WHERE session_id = ? "
            "ORDER BY created_at DESC, rowid DESC LIMIT ?",
            (session_id, limit),
        )
        return [_snapshot(r) for r in rows]

    # -- checkpoints -------------------------------------------------------------------------
    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        body = dumps(checkpoint.to_dict())
        self._insert(
            "INSERT INTO checkpoints (id, session_id, type, summary, body, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                checkpoint.checkpoint_id,
                checkpoint.session_id,
                checkpoint.type,
                checkpoint.summary,
                body,
                checkpoint.timestamp,
            ),
        )

    def get_checkpoint(self, checkpoint_id: str) -> Checkpoint | None:
        """One checkpoint by id (SQLite only: tests and tools)."""
        rows = self._db.rows("SELECT body FROM checkpoints WHERE id = ?", (checkpoint_id,))
        return _checkpoint(rows[0][0]) if rows else None

    def list_checkpoints(self, session_id: str, *, limit: int = 20) -> list[Checkpoint]:
        """Checkpoints of a session, newest first."""
        rows = self._db.rows(
            "SELECT body FROM checkpoints WHERE session_id = ? ORDER BY seq DESC LIMIT ?",
            (session_id, limit),
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
        self._insert(
            f"INSERT INTO compaction_events ({_COMPACTION_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                event.id,
                event.session_id,
                event.trigger_type,
                event.reason,
                event.token_count_before,
                event.turn_count_before,
                event.summary_tokens,
                event.checkpoint_id,
                event.created_at,
                event.completed_at,
            ),
        )

    def complete_compaction_event(self, event_id: str, summary_tokens: int, at: str) -> None:
        """Record the summary size and completion time of a compaction."""
        self._db.run(
            "UPDATE compaction_events SET summary_tokens = ?, completed_at = ? WHERE id = ?",
            (summary_tokens, at, event_id),
        )

    def list_compaction_events(self, session_id: str, *, limit: int = 20) -> list[CompactionEvent]:
        """Compaction events of a session, newest first."""
        rows = self._db.rows(
            f"SELECT {_COMPACTION_COLUMNS} FROM compaction_events WHERE session_id = ? "
            "ORDER BY seq DESC LIMIT ?",
            (session_id, limit),
        )
        return [_compaction(r) for r in rows]
