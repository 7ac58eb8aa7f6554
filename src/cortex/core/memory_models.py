"""The records of the memory lifecycle, as frozen dataclasses.

A ``Memory`` is one row of ``memories`` (its lifecycle columns); a session's history (events,
snapshots, checkpoints, compactions) is in ``cortex.core.history_models``. ``to_dict()`` gives
the JSON form the CLI, MCP and HTTP adapters print.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

    from cortex.core.history_models import SessionSnapshot

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
    ``own_project`` with a ``project``: that project's memories alone, not the global ones.
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
    own_project: bool = False


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
