"""The records Cortex keeps: a session and what it carries, as frozen dataclasses.

``to_dict()`` gives the wire names (the session record's for ``SessionState``; the OpenClaw
``working_memory.json`` names, e.g. ``pinnedAt``, for ``Pin``); ``from_dict()`` reads them back
and tolerates missing optional keys, so records written by older versions still load.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from functools import cached_property

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any, TypeVar

    R = TypeVar("R")

SCHEMA_VERSION = 1
"""``session_states.schema_version`` of the records this version writes."""

CRITICAL = "CRITICAL"
NORMAL = "NORMAL"

# Session states of the continuity protocol; "compacted" is an event, not a state.
INIT = "INIT"
ACTIVE = "ACTIVE"
COMPLETE = "COMPLETE"
SUSPENDED = "SUSPENDED"
TERMINATED = "TERMINATED"
SESSION_STATES = (INIT, ACTIVE, COMPLETE, SUSPENDED, TERMINATED)
TASK_CHANNEL = "protocol"
"""The channel of the sessions the task commands open (``cortex task start``, a fork at the
context cap, a continuation): no harness process runs them."""


def evolve(record: R, **changes: Any) -> R:
    """``dataclasses.replace(record, **changes)``, made by copying the record's attributes.

    ``replace`` calls the generated ``__init__``, which sets every field of a frozen record
    through ``object.__setattr__``: 14 µs for a ``SessionState`` (29 fields) against 2 µs,
    and a restore makes about ten such copies. Only for records that ``__init__`` would copy
    as is (every field an init field, no ``__post_init__``); any other goes to ``replace``.
    """
    cls: type[Any] = type(record)
    names = _copyable(cls)
    if names is None:
        return replace(record, **changes)  # type: ignore[type-var]
    unknown = changes.keys() - names
    if unknown:  # what replace raises for a name that is not a field
        raise TypeError(f"{type(record).__name__} has no field {sorted(unknown)[0]!r}")
    copy = object.__new__(cls)
    copy.__dict__.update(record.__dict__)
    copy.__dict__.update(changes)
    return copy  # type: ignore[no-any-return]


def made(cls: type[R], values: dict[str, Any]) -> R:
    """``cls(**values)``, made as ``evolve`` makes a copy when ``values`` names every field of
    a record that ``__init__`` would store as given (a frozen ``__init__`` sets each field
    through ``object.__setattr__``: a ``SessionState`` decoded from a row paid 29 of them);
    any other call goes to ``__init__``, which checks the names."""
    names = _copyable(cls)
    if names is None or values.keys() != names:
        return cls(**values)
    record = object.__new__(cls)
    record.__dict__.update(values)
    return record


_COPYABLE: dict[type[Any], frozenset[str] | None] = {}


def _copyable(cls: type) -> frozenset[str] | None:
    try:
        return _COPYABLE[cls]
    except KeyError:
        names = _COPYABLE[cls] = _copyable_fields(cls)
        return names


def _copyable_fields(cls: type) -> frozenset[str] | None:
    """The field names of ``cls`` when a copy of an instance's ``__dict__`` equals what
    ``replace`` builds; None otherwise."""
    found = fields(cls)
    if hasattr(cls, "__post_init__") or hasattr(cls, "__slots__"):
        return None
    if any(not f.init for f in found) or any(
        isinstance(value, cached_property) for k in cls.__mro__ for value in vars(k).values()
    ):  # a cached value kept in ``__dict__`` must not outlive the fields it was made from
        return None
    return frozenset(f.name for f in found)


@dataclass(frozen=True)
class Pin:
    """A working-memory pin: a short labelled note the agent keeps in view.

    ``source_session_id`` and ``inherited_at`` are set only on pins inherited from a prior
    session; ``label`` then carries the provenance suffix ``[inherited from ...]``.
    """

    label: str
    content: str
    pinned_at: str
    importance: str = NORMAL
    confidence: float = 1.0
    source_session_id: str | None = None
    inherited_at: str | None = None

    @property
    def is_critical(self) -> bool:
        return self.importance.upper() == CRITICAL

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "label": self.label,
            "content": self.content,
            "pinnedAt": self.pinned_at,
            "importance": self.importance,
            "confidence": self.confidence,
        }
        if self.source_session_id is not None:
            out["sourceSessionId"] = self.source_session_id
        if self.inherited_at is not None:
            out["inheritedAt"] = self.inherited_at
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Pin:
        label = data.get("label")
        content = str(data.get("content", ""))
        return cls(
            label=str(label) if label else content[:40],
            content=content,
            pinned_at=str(data.get("pinnedAt") or data.get("pinned_at") or ""),
            importance=str(data.get("importance") or NORMAL).upper(),
            confidence=float(data.get("confidence", 1.0)),
            source_session_id=data.get("sourceSessionId") or data.get("source_session_id"),
            inherited_at=data.get("inheritedAt") or data.get("inherited_at"),
        )


@dataclass(frozen=True)
class PendingTask:
    """An unfinished task carried across sessions (``PendingTask`` in the session record).

    ``updated_at`` is the last activity seen for the task (for "{days}d ago"); ``source`` is
    ``pipeline_state`` or ``working_memory_scan`` (the metrics event's field).
    """

    task_id: str
    title: str
    stage: str
    flagged_incomplete: bool = False
    updated_at: str | None = None
    source: str = "pipeline_state"

    def to_dict(self) -> dict[str, Any]:
        # Field by field, not ``asdict``: a record with hundreds of tasks is measured several
        # times while the write lock is held, and ``asdict`` deep-copies every value.
        return {
            "task_id": self.task_id,
            "title": self.title,
            "stage": self.stage,
            "flagged_incomplete": self.flagged_incomplete,
            "updated_at": self.updated_at,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PendingTask:
        return cls(
            task_id=str(data["task_id"]),
            title=str(data.get("title", "")),
            stage=str(data.get("stage", "")),
            flagged_incomplete=bool(data.get("flagged_incomplete", False)),
            updated_at=data.get("updated_at"),
            source=str(data.get("source") or "pipeline_state"),
        )


@dataclass(frozen=True)
class ConfidenceUpdate:
    """A confidence change made during a session."""

    memory_id: str
    old_score: float
    new_score: float
    reason: str
    timestamp: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ConfidenceUpdate:
        return cls(
            memory_id=str(data["memory_id"]),
            old_score=float(data["old_score"]),
            new_score=float(data["new_score"]),
            reason=str(data.get("reason", "")),
            timestamp=str(data.get("timestamp", "")),
        )


@dataclass(frozen=True)
class SOPInteraction:
    """An SOP injected during a session and whether it was acknowledged."""

    sop_path: str
    injected_at: str
    acknowledged: bool
    tool_call: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SOPInteraction:
        return cls(
            sop_path=str(data["sop_path"]),
            injected_at=str(data.get("injected_at", "")),
            acknowledged=bool(data.get("acknowledged", False)),
            tool_call=str(data.get("tool_call", "")),
        )


@dataclass(frozen=True)
class SessionState:
    """One session: the session record plus the continuity columns.

    ``end_time`` is None while the session is live (or crashed and not yet recovered).
    ``topic_state`` is the serialized ``HotTopicExtractor`` so that each turn may be a
    separate process. ``last_activity`` is the lease: a session with no ``end_time`` whose
    ``last_activity`` is older than ``lease_seconds`` is crashed.
    """

    session_id: str
    start_time: str
    end_time: str | None = None
    channel: str = "unknown"
    working_memory: tuple[Pin, ...] = ()
    hot_topics: tuple[str, ...] = ()
    active_projects: tuple[str, ...] = ()
    pending_tasks: tuple[PendingTask, ...] = ()
    recent_learnings: tuple[str, ...] = ()
    confidence_updates: tuple[ConfidenceUpdate, ...] = ()
    sop_interactions: tuple[SOPInteraction, ...] = ()
    previous_session_id: str | None = None
    continued_by: str | None = None
    crash_recovered: bool = False
    schema_version: int = SCHEMA_VERSION
    created_at: str = ""
    updated_at: str | None = None
    # Continuity columns (protocol metadata, scope, lease, accumulator).
    state: str = ACTIVE
    scope: str = "project"
    project: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    task_slug: str | None = None
    last_activity: str | None = None
    topic_state: dict[str, Any] = field(default_factory=dict)
    checkpoint_count: int = 0
    parent_session: str | None = None
    owner_pid: int | None = None
    owner_host: str | None = None

    @property
    def is_open(self) -> bool:
        return self.end_time is None

    @property
    def ended_normally(self) -> bool:
        """Whether it ended by an end (a harness's, a command's, the worker's idle close)
        rather than being closed by crash recovery: only a start or a prompt reopens it, and
        an ordinary write (a tool, a reply) never does."""
        return not self.is_open and self.state == COMPLETE

    @property
    def crashed(self) -> bool:
        """Whether a restore reports it as recovered after a crash: crash recovery closed it
        and a harness ran it. A session the task commands opened has no harness turn to lose:
        its lapsed lease is a pause between two commands, and its task is pending work."""
        return self.crash_recovered and self.channel != TASK_CHANNEL

    def to_dict(self) -> dict[str, Any]:
        """The wire form (plus the added columns), JSON-ready."""
        return {
            "session_id": self.session_id,
            "start_time": self.start_time,
            "end_time": self.end_time,
            "channel": self.channel,
            "working_memory": [p.to_dict() for p in self.working_memory],
            "hot_topics": list(self.hot_topics),
            "active_projects": list(self.active_projects),
            "pending_tasks": [t.to_dict() for t in self.pending_tasks],
            "recent_learnings": list(self.recent_learnings),
            "confidence_updates": [c.to_dict() for c in self.confidence_updates],
            "sop_interactions": [s.to_dict() for s in self.sop_interactions],
            "previous_session_id": self.previous_session_id,
            "continued_by": self.continued_by,
            "crash_recovered": self.crash_recovered,
            "schema_version": self.schema_version,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "state": self.state,
            "scope": self.scope,
            "project": self.project,
            "user_id": self.user_id,
            "agent_id": self.agent_id,
            "task_slug": self.task_slug,
            "last_activity": self.last_activity,
            "topic_state": self.topic_state,
            "checkpoint_count": self.checkpoint_count,
            "parent_session": self.parent_session,
            "owner_pid": self.owner_pid,
            "owner_host": self.owner_host,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionState:
        values = dict(
            session_id=str(data["session_id"]),
            start_time=str(data["start_time"]),
            end_time=data.get("end_time"),
            channel=str(data.get("channel") or "unknown"),
            working_memory=tuple(Pin.from_dict(p) for p in data.get("working_memory") or ()),
            hot_topics=tuple(str(t) for t in data.get("hot_topics") or ()),
            active_projects=tuple(str(p) for p in data.get("active_projects") or ()),
            pending_tasks=tuple(PendingTask.from_dict(t) for t in data.get("pending_tasks") or ()),
            recent_learnings=tuple(str(i) for i in data.get("recent_learnings") or ()),
            confidence_updates=tuple(
                ConfidenceUpdate.from_dict(c) for c in data.get("confidence_updates") or ()
            ),
            sop_interactions=tuple(
                SOPInteraction.from_dict(s) for s in data.get("sop_interactions") or ()
            ),
            previous_session_id=data.get("previous_session_id"),
            continued_by=data.get("continued_by"),
            crash_recovered=bool(data.get("crash_recovered", False)),
            schema_version=int(data.get("schema_version") or SCHEMA_VERSION),
            created_at=str(data.get("created_at") or data["start_time"]),
            updated_at=data.get("updated_at"),
            state=str(data.get("state") or ACTIVE),
            scope=str(data.get("scope") or "project"),
            project=data.get("project"),
            user_id=data.get("user_id"),
            agent_id=data.get("agent_id"),
            task_slug=data.get("task_slug"),
            last_activity=data.get("last_activity"),
            topic_state=dict(data.get("topic_state") or {}),
            checkpoint_count=int(data.get("checkpoint_count") or 0),
            parent_session=data.get("parent_session"),
            owner_pid=data.get("owner_pid"),
            owner_host=data.get("owner_host"),
        )
        return made(cls, values)


@dataclass(frozen=True)
class ScoreBreakdown:
    """One prior session's relevance score and its three weighted parts."""

    recency: float
    topic_overlap: float
    pending_tasks: float
    total: float
    hours_elapsed: float
    overlap_count: int = 0
    union_count: int = 0
    task_count: int = 0


@dataclass(frozen=True)
class ScoredSession:
    """A prior session with its score, as ``score_all`` returns it."""

    session: SessionState
    score: float
    hours_elapsed: float
    breakdown: ScoreBreakdown


@dataclass(frozen=True)
class RestoredSessionContext:
    """What ``on_session_start`` restored, plus a human-readable ``explain``.

    ``preamble`` is None on a cold start. ``inherited_pins`` carry their decayed confidence.
    """

    session_id: str
    preamble: str | None
    inherited_pins: tuple[Pin, ...] = ()
    session_ids: tuple[str, ...] = ()
    relevance_scores: tuple[float, ...] = ()
    pending_task_count: int = 0
    explain: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "preamble": self.preamble,
            "inherited_pins": [p.to_dict() for p in self.inherited_pins],
            "session_ids": list(self.session_ids),
            "relevance_scores": [round(s, 4) for s in self.relevance_scores],
            "pending_task_count": self.pending_task_count,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RestoredSessionContext:
        return cls(
            session_id=str(data["session_id"]),
            preamble=data.get("preamble"),
            inherited_pins=tuple(Pin.from_dict(p) for p in data.get("inherited_pins") or ()),
            session_ids=tuple(str(i) for i in data.get("session_ids") or ()),
            relevance_scores=tuple(float(s) for s in data.get("relevance_scores") or ()),
            pending_task_count=int(data.get("pending_task_count") or 0),
        )


@dataclass(frozen=True)
class MetricEvent:
    """One stored metrics event: a link of the keyed hash chain."""

    seq: int
    event: str
    session_id: str | None
    payload: dict[str, Any]
    created_at: str
    prev_hash: str
    hash: str


@dataclass(frozen=True)
class AuditEntry:
    """One audit-log row: who did what to which record, and when."""

    id: int
    action: str
    actor: str
    target: str | None
    detail: dict[str, Any]
    created_at: str
