"""A session's history, as frozen dataclasses: its events, snapshots, checkpoints and
compaction events, which belong to a session (``session_states.id``, the one session entity).
``to_dict()`` gives the JSON form the CLI, MCP and HTTP adapters print.

Apart from the memory records (``cortex.core.memory_models``): a session start reads and writes
history, and need not make the memory classes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

ROLES = ("user", "assistant", "tool")
EVENT_KINDS = ("message", "checkpoint", "summary", "event")
SNAPSHOT_TRIGGERS = ("new_session", "reset", "manual", "auto_compaction")
# Triggers count|time|semantic, plus manual for a compaction a person or harness forced.
TRIGGER_TYPES = ("count", "time", "semantic", "manual")


@dataclass(frozen=True)
class SessionEvent:
    """One event of a session: a message, checkpoint, summary or other event."""

    id: str
    session_id: str
    role: str
    kind: str
    content: str
    token_count: int
    turn_index: int | None
    is_meaningful: bool
    created_at: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session_id": self.session_id,
            "role": self.role,
            "kind": self.kind,
            "content": self.content,
            "token_count": self.token_count,
            "turn_index": self.turn_index,
            "is_meaningful": self.is_meaningful,
            "created_at": self.created_at,
        }


@dataclass(frozen=True)
class SessionSnapshot:
    """A markdown transcript of a session's meaningful events."""

    id: str
    session_id: str
    slug: str
    source_trigger: str
    transcript_md: str
    message_count: int
    created_at: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session_id": self.session_id,
            "slug": self.slug,
            "source_trigger": self.source_trigger,
            "transcript_md": self.transcript_md,
            "message_count": self.message_count,
            "created_at": self.created_at,
        }


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint in the continuity protocol's schema.

    ``state`` carries what must survive a compaction: ``pins``, ``pending_tasks``, ``rules``,
    ``decisions``, ``files_changed``, ``hot_topics`` and ``working_memories``.
    """

    checkpoint_id: str
    session_id: str
    timestamp: str
    type: str
    summary: str
    state: dict[str, Any] = field(default_factory=dict)
    next_steps: tuple[str, ...] = ()
    can_resume: bool = True
    resume_instructions: str = ""
    gate: str | None = None
    step: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "checkpoint_id": self.checkpoint_id,
            "session_id": self.session_id,
            "timestamp": self.timestamp,
            "gate": self.gate,
            "step": self.step,
            "type": self.type,
            "summary": self.summary,
            "state": self.state,
            "next_steps": list(self.next_steps),
            "can_resume": self.can_resume,
            "resume_instructions": self.resume_instructions,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Checkpoint:
        step = data.get("step")
        return cls(
            checkpoint_id=str(data["checkpoint_id"]),
            session_id=str(data["session_id"]),
            timestamp=str(data["timestamp"]),
            type=str(data.get("type") or "manual"),
            summary=str(data.get("summary") or ""),
            state=dict(data.get("state") or {}),
            next_steps=tuple(str(s) for s in data.get("next_steps") or ()),
            can_resume=bool(data.get("can_resume", True)),
            resume_instructions=str(data.get("resume_instructions") or ""),
            gate=data.get("gate"),
            step=int(step) if step is not None else None,
        )


@dataclass(frozen=True)
class CompactionEvent:
    """One compaction of a session (table ``compaction_events``)."""

    id: str
    session_id: str
    trigger_type: str
    reason: str
    token_count_before: int
    turn_count_before: int
    summary_tokens: int | None
    checkpoint_id: str | None
    created_at: str
    completed_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session_id": self.session_id,
            "trigger_type": self.trigger_type,
            "reason": self.reason,
            "token_count_before": self.token_count_before,
            "turn_count_before": self.turn_count_before,
            "summary_tokens": self.summary_tokens,
            "checkpoint_id": self.checkpoint_id,
            "created_at": self.created_at,
            "completed_at": self.completed_at,
        }


@dataclass(frozen=True)
class EventTotals:
    """Token and turn counts of a session's events since a moment (the trigger engine's input)."""

    tokens: int = 0
    turns: int = 0
    events: int = 0
    last_event_at: str | None = None
    last_turn_index: int | None = None
