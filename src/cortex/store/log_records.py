"""Rows of the append-only tables every backend shares: session events, snapshots, compaction
events, metrics and audit entries (the mutable ones are ``cortex.store.records``).

A backend selects ``*_COLUMNS`` in this order, hands each row to a ``*_from_row`` function and
writes the values ``*_values`` give.
"""

from __future__ import annotations

from collections.abc import Sequence

from cortex.store.records import json_value

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

    from cortex.core.history_models import CompactionEvent, SessionEvent, SessionSnapshot
    from cortex.core.models import AuditEntry, MetricEvent

# The history records are imported by the functions that make them: the metrics' rows are
# read and written by processes (a session start, a hook) that read no session history.

# -- session history -------------------------------------------------------------------------
EVENT_COLUMNS = (
    "id",
    "session_id",
    "role",
    "kind",
    "content",
    "token_count",
    "turn_index",
    "is_meaningful",
    "created_at",
)
SNAPSHOT_COLUMNS = (
    "id",
    "session_id",
    "slug",
    "source_trigger",
    "transcript_md",
    "message_count",
    "created_at",
)
COMPACTION_COLUMNS = (
    "id",
    "session_id",
    "trigger_type",
    "reason",
    "token_count_before",
    "turn_count_before",
    "summary_tokens",
    "checkpoint_id",
    "created_at",
    "completed_at",
)


def event_values(e: SessionEvent) -> tuple[Any, ...]:
    """``e`` as the values of ``EVENT_COLUMNS``."""
    return (
        e.id,
        e.session_id,
        e.role,
        e.kind,
        e.content,
        e.token_count,
        e.turn_index,
        bool(e.is_meaningful),  # any truthy value is meaningful (SQLite stores 1/0)
        e.created_at,
    )


def event_from_row(row: Sequence[Any]) -> SessionEvent:
    from cortex.core.history_models import SessionEvent

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


def snapshot_values(s: SessionSnapshot) -> tuple[Any, ...]:
    """``s`` as the values of ``SNAPSHOT_COLUMNS``."""
    return (
        s.id,
        s.session_id,
        s.slug,
        s.source_trigger,
        s.transcript_md,
        s.message_count,
        s.created_at,
    )


def snapshot_from_row(row: Sequence[Any]) -> SessionSnapshot:
    from cortex.core.history_models import SessionSnapshot

    return SessionSnapshot(
        id=str(row[0]),
        session_id=str(row[1]),
        slug=str(row[2]),
        source_trigger=str(row[3]),
        transcript_md=str(row[4]),
        message_count=int(row[5]),
        created_at=str(row[6]),
    )


def compaction_values(c: CompactionEvent) -> tuple[Any, ...]:
    """``c`` as the values of ``COMPACTION_COLUMNS``."""
    return (
        c.id,
        c.session_id,
        c.trigger_type,
        c.reason,
        c.token_count_before,
        c.turn_count_before,
        c.summary_tokens,
        c.checkpoint_id,
        c.created_at,
        c.completed_at,
    )


def compaction_from_row(row: Sequence[Any]) -> CompactionEvent:
    from cortex.core.history_models import CompactionEvent

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


# -- metrics and audit -----------------------------------------------------------------------
METRIC_COLUMNS = ("seq", "event", "session_id", "payload", "created_at", "prev_hash", "hash")
AUDIT_COLUMNS = ("id", "action", "actor", "target", "detail", "created_at")


def metric_from_row(row: Sequence[Any]) -> MetricEvent:
    seq, event, session_id, payload, created_at, prev_hash, hash_ = row
    from cortex.core.models import MetricEvent

    return MetricEvent(
        seq=int(seq),
        event=str(event),
        session_id=session_id,
        payload=json_value(payload, dict, f"metrics event {seq} payload"),
        created_at=str(created_at),
        prev_hash=str(prev_hash),
        hash=str(hash_),
    )


def audit_from_row(row: Sequence[Any]) -> AuditEntry:
    id_, action, actor, target, detail, created_at = row
    from cortex.core.models import AuditEntry

    return AuditEntry(
        id=int(id_),
        action=str(action),
        actor=str(actor),
        target=target,
        detail=json_value(detail, dict, f"audit entry {id_} detail"),
        created_at=str(created_at),
    )
