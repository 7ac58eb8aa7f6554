"""The records of the memory lifecycle, as frozen dataclasses.

A ``Memory`` is one row of ``memories`` (its lifecycle columns); session events, snapshots,
checkpoints and compaction events belong to a session (``session_states.id``, the one session
entity). ``to_dict()`` gives the JSON form the CLI, MCP and HTTP adapters print.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

RULE = "rule"
WORKING = "working"
LONG_TERM = "long_term"
LAYERS = (RULE, WORKING, LONG_TERM)

GLOBAL = "global"
PROJECT = "project"
SCOPES = (GLOBAL, PROJECT)

EXPLICIT = "explicit"
IMPLICIT = "implicit"
INTENTS = (EXPLICIT, IMPLICIT)

# Context modes (the same on the CLI, MCP and HTTP): which layers besides rules each one returns.
MODE_LAYERS: dict[str, tuple[str, ...]] = {
    "rules_only": (),
    "working": (WORKING,),
    "long_term": (LONG_TERM,),
    "all": (WORKING, LONG_TERM),
}
MODES = tuple(MODE_LAYERS)

LINK_KINDS = ("supersedes", "conflicts", "relates")

ROLES = ("user", "assistant", "tool")
EVENT_KINDS = ("message", "checkpoint", "summary", "event")
SNAPSHOT_TRIGGERS = ("new_session", "reset", "manual", "auto_compaction")
# Triggers count|time|semantic, plus manual for a compaction a person or harness forced.
TRIGGER_TYPES = ("count", "time", "semantic", "manual")


@dataclass(frozen=True)
class Memory:
    """One memory: its content, layer, scope and lifecycle columns."""

    id: str
    content: str
    layer: str = LONG_TERM
    type: str = "note"
    scope: str = GLOBAL
    project: str | None = None
    user_id: str | None = None
    tags: tuple[str, ...] = ()
    upsert_key: str | None = None
    source_session_id: str | None = None
    remember_intent: str = IMPLICIT
    confidence: float = 1.0
    expires_at: str | None = None
    superseded_by: str | None = None
    superseded_at: str | None = None
    last_confirmed_at: str | None = None
    created_at: str = ""
    updated_at: str = ""
    deleted_at: str | None = None

    def is_live(self, now_iso: str) -> bool:
        """Not deleted, not superseded, not past its expiry."""
        return (
            self.deleted_at is None
            and self.superseded_at is None
            and (self.expires_at is None or self.expires_at > now_iso)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "content": self.content,
            "layer": self.layer,
            "type": self.type,
            "scope": self.scope,
            "project": self.project,
            "user_id": self.user_id,
            "tags": list(self.tags),
            "upsert_key": self.upsert_key,
            "source_session_id": self.source_session_id,
            "remember_intent": self.remember_intent,
            "confidence": self.confidence,
            "expires_at": self.expires_at,
            "superseded_by": self.superseded_by,
            "superseded_at": self.superseded_at,
            "last_confirmed_at": self.last_confirmed_at,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "deleted_at": self.deleted_at,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Memory:
        """Read ``to_dict``'s form back (a server's answer); unknown keys are ignored."""
        names = cls.__dataclass_fields__
        fields = {k: v for k, v in data.items() if k in names}
        fields["tags"] = tuple(fields.get("tags") or ())
        return cls(**fields)

    @classmethod
    def quick(cls, **fields: Any) -> Memory:
        """``Memory(**fields)``, made without the generated ``__init__``: a frozen dataclass
        sets each of its 19 fields through ``object.__setattr__`` (2.5 us a record, a quarter
        of what ``add_many`` spends building a batch's records); filling the new instance's
        ``__dict__`` takes 1.8. The same record; a missing or unknown field is a ``TypeError``."""
        memory = object.__new__(cls)
        values = memory.__dict__
        values.update(_MEMORY_DEFAULTS)
        values.update(fields)
        if len(values) != len(cls.__dataclass_fields__) or not _MEMORY_REQUIRED <= fields.keys():
            raise TypeError(f"Memory.quick: missing or unknown fields in {sorted(fields)}")
        return memory


_MEMORY_DEFAULTS = {
    name: spec.default
    for name, spec in Memory.__dataclass_fields__.items()
    if spec.default is not MISSING
}
_MEMORY_REQUIRED = Memory.__dataclass_fields__.keys() - _MEMORY_DEFAULTS.keys()
"""The fields without a default (``id``, ``content``): given with no unknown one, the record
has every field exactly when it has as many as ``Memory`` declares."""


@dataclass(frozen=True)
class MemoryFilter:
    """Which memories a list, search or context call may see.

    A ``project`` sees that project's memories plus global ones, never another project's;
    no project sees global memories only, unless ``all_projects`` (admin listing).
    ``user_id`` set: that user's memories plus those of no user.
    """

    layers: tuple[str, ...] = LAYERS
    project: str | None = None
    user_id: str | None = None
    types: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    session_id: str | None = None
    all_projects: bool = False
    include_history: bool = False


@dataclass(frozen=True)
class MemoryLink:
    """A typed edge between two memories (supersedes, conflicts, relates)."""

    from_id: str
    to_id: str
    kind: str
    created_at: str


@dataclass(frozen=True)
class ScoredMemory:
    """A memory with its rank score and a one-line reason it was chosen."""

    memory: Memory
    score: float
    why: str
    tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        return self.memory.to_dict() | {
            "score": round(self.score, 6),
            "why": self.why,
            "tokens": self.tokens,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScoredMemory:
        """Read ``to_dict``'s flat form back."""
        score, why, tokens = data.get("score", 0.0), data.get("why", ""), data.get("tokens", 0)
        return cls(Memory.from_dict(data), float(score), str(why), int(tokens or 0))


@dataclass(frozen=True)
class SessionBlock:
    """The ``session`` block of a context result (``ContextResult.session``)."""

    session_id: str
    compaction_required: bool
    trigger_hint: str | None
    latest_checkpoint_id: str | None
    status: str = "active"

    def to_dict(self) -> dict[str, Any]:
        return {
            "sessionId": self.session_id,
            "compactionRequired": self.compaction_required,
            "triggerHint": self.trigger_hint,
            "latestCheckpointId": self.latest_checkpoint_id,
            "status": self.status,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionBlock:
        """Read ``to_dict``'s form back."""
        return cls(
            session_id=str(data["sessionId"]),
            compaction_required=bool(data.get("compactionRequired")),
            trigger_hint=data.get("triggerHint"),
            latest_checkpoint_id=data.get("latestCheckpointId"),
            status=str(data.get("status") or "active"),
        )


@dataclass(frozen=True)
class SessionSummary:
    """The session summary ``get_context`` adds on request (``includeSessionSummary``): the
    headers of the session's latest snapshots (no transcripts) and its latest checkpoint."""

    session_id: str
    snapshots: tuple[SessionSnapshot, ...] = ()
    checkpoint_id: str | None = None
    checkpoint_summary: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "sessionId": self.session_id,
            "snapshots": [
                {
                    "id": s.id,
                    "slug": s.slug,
                    "sourceTrigger": s.source_trigger,
                    "messageCount": s.message_count,
                    "createdAt": s.created_at,
                }
                for s in self.snapshots
            ],
            "latestCheckpointId": self.checkpoint_id,
            "latestCheckpointSummary": self.checkpoint_summary,
        }


@dataclass(frozen=True)
class ContextResult:
    """What ``get_context`` assembled: rules, then memories, within the token budget."""

    mode: str
    query: str | None
    rules: tuple[ScoredMemory, ...]
    memories: tuple[ScoredMemory, ...]
    budget_tokens: int | None
    used_tokens: int
    dropped: int
    session: SessionBlock | None = None
    summary: SessionSummary | None = None
    procedures: tuple[Any, ...] = ()
    """Procedures matching the task (``cortex.core.procedures.ScoredProcedure``), ranked
    before the memories."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "query": self.query,
            "rules": [r.to_dict() for r in self.rules],
            "procedures": [p.to_dict() for p in self.procedures],
            "memories": [m.to_dict() for m in self.memories],
            "budgetTokens": self.budget_tokens,
            "usedTokens": self.used_tokens,
            "dropped": self.dropped,
            "session": self.session.to_dict() if self.session else None,
            "sessionSummary": self.summary.to_dict() if self.summary else None,
        }


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
