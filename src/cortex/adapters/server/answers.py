"""What the HTTP API answers on success: pydantic models that describe each route's 200 body
in ``/openapi.json``, for the document's readers and for the suite's conformance checks.

They document and never build an answer: each route still returns the records' own
``to_dict()`` (a request does no validation work for them, and the direct routes none at
all), so an answer's shape is the records'. Every field a body carries is declared, and no
other is allowed (``additionalProperties: false``): the fuzz test of the API fails when an
answer gains, loses or retypes a field the document does not say.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import FastAPI
from pydantic import Field

from cortex.adapters.server.models import Strict

Time = Annotated[str, Field(description="ISO-8601, UTC.")]
MaybeTime = Annotated[str | None, Field(description="ISO-8601, UTC; null when not set.")]


class Duplicate(Strict):
    """The answer to a replayed ``request_id``: nothing was changed."""

    duplicate: Literal[True]


# -- sessions ------------------------------------------------------------------------------------
class PinOut(Strict):
    """A working-memory pin (the OpenClaw ``working_memory.json`` names)."""

    label: str = Field(description="Its label; an inherited pin's ends `[inherited from ...]`.")
    content: str = Field(description="The note, redacted.")
    pinned_at: Time = Field(alias="pinnedAt")
    importance: str = Field(description="CRITICAL or NORMAL.")
    confidence: float = Field(description="0-1; an inherited pin's decays with its age.")
    source_session_id: str | None = Field(
        default=None,
        alias="sourceSessionId",
        description="The session an inherited pin came from; absent on the session's own pins.",
    )
    inherited_at: MaybeTime = Field(
        default=None, alias="inheritedAt", description="When it was inherited; absent if not."
    )


class PendingTaskOut(Strict):
    """An unfinished pipeline task the session carries."""

    task_id: str
    title: str
    stage: str = Field(description="build, verify or validate.")
    flagged_incomplete: bool
    updated_at: MaybeTime
    source: str = Field(description="Where it was found: pipeline_state or working_memory_scan.")


class ConfidenceUpdateOut(Strict):
    memory_id: str
    old_score: float
    new_score: float
    reason: str
    timestamp: str


class SopInteractionOut(Strict):
    sop_path: str
    injected_at: str
    acknowledged: bool
    tool_call: str


class SessionOut(Strict):
    """A session record (the same as `cortex --json session show` prints)."""

    session_id: str
    start_time: Time
    end_time: MaybeTime = Field(description="Null while the session is open.")
    channel: str = Field(description="Who ran it: api, claude-code, cli, protocol, ...")
    working_memory: list[PinOut] = Field(description="Its pins.")
    hot_topics: list[str] = Field(description="Its topics, hottest first.")
    active_projects: list[str]
    pending_tasks: list[PendingTaskOut]
    recent_learnings: list[str]
    confidence_updates: list[ConfidenceUpdateOut]
    sop_interactions: list[SopInteractionOut]
    previous_session_id: str | None = Field(description="The session it continues, if any.")
    continued_by: str | None = Field(description="The session that continued it, if any.")
    crash_recovered: bool = Field(description="Closed by crash recovery after its lease lapsed.")
    schema_version: int
    created_at: str
    updated_at: str | None
    state: str = Field(description="INIT, ACTIVE, COMPLETE, SUSPENDED or TERMINATED.")
    scope: str
    project: str | None = Field(description="Its project identity.")
    user_id: str | None
    agent_id: str | None
    task_slug: str | None = Field(description="The task folder it works on, if any.")
    last_activity: str | None = Field(description="Its lease: the time of its last write.")
    topic_state: dict[str, Any] = Field(description="The topic extractor's state (internal).")
    checkpoint_count: int
    parent_session: str | None
    owner_pid: int | None
    owner_host: str | None


class RestoredOut(Strict):
    """What a start (or a continue) restored from earlier sessions."""

    session_id: str = Field(description="The session started (or resumed, or continued into).")
    preamble: str | None = Field(
        description="The continuity preamble to give the agent; null on a cold start."
    )
    inherited_pins: list[PinOut] = Field(description="Pins inherited, with decayed confidence.")
    session_ids: list[str] = Field(description="The earlier sessions inherited from.")
    relevance_scores: list[float] = Field(description="Their scores, in the same order.")
    pending_task_count: int
    explain: list[str] | None = Field(
        default=None, description="Why each session was or was not inherited; with explain only."
    )


class TurnOut(Strict):
    session_id: str
    duplicate: bool = Field(description="True when the request_id was a replay (no change).")


class CheckpointOut(Strict):
    """A checkpoint: what must survive a compaction."""

    checkpoint_id: str
    session_id: str
    timestamp: Time
    gate: str | None
    step: int | None
    type: str = Field(description="manual, auto, pre_compact, ...")
    summary: str
    state: dict[str, Any] = Field(
        description="pins, pending_tasks, rules, decisions, files_changed, hot_topics and "
        "working_memories"
    )
    next_steps: list[str]
    can_resume: bool
    resume_instructions: str


class CompactionOut(Strict):
    """A compaction of the session (the harness's, completed by postcompact)."""

    id: str
    session_id: str
    trigger_type: str = Field(description="count, time, semantic or manual.")
    reason: str
    token_count_before: int
    turn_count_before: int
    summary_tokens: int | None
    checkpoint_id: str | None
    created_at: Time
    completed_at: MaybeTime


class SnapshotOut(Strict):
    """A markdown transcript of the session's meaningful events."""

    id: str
    session_id: str
    slug: str
    source_trigger: Literal["new_session", "reset", "manual", "auto_compaction"]
    transcript_md: str
    message_count: int
    created_at: Time


class EventOut(Strict):
    """One event of a session's log."""

    id: str
    session_id: str
    role: Literal["user", "assistant", "tool"]
    kind: Literal["message", "checkpoint", "summary", "event"]
    content: str = Field(description="Redacted.")
    token_count: int
    turn_index: int | None
    is_meaningful: bool
    created_at: Time


class Checkpoints(Strict):
    checkpoints: list[CheckpointOut] = Field(description="Newest first.")


class Snapshots(Strict):
    snapshots: list[SnapshotOut] = Field(description="Newest first.")


class Events(Strict):
    events: list[EventOut] = Field(description="In order.")


class Sessions(Strict):
    sessions: list[SessionOut]


class Pins(Strict):
    pins: list[PinOut]


# -- memories ------------------------------------------------------------------------------------
class MemoryOut(Strict):
    """A memory."""

    id: str
    content: str = Field(description="Redacted; over 64 KB cut, with a marker line.")
    layer: Literal["rule", "working", "long_term"]
    type: str = Field(description="note, preference, decision, ...")
    scope: Literal["global", "project"]
    project: str | None
    user_id: str | None
    tags: list[str]
    upsert_key: str | None = Field(description="A later add with the same key supersedes it.")
    source_session_id: str | None
    remember_intent: Literal["explicit", "implicit"]
    confidence: float = Field(description="0-1.")
    expires_at: str | None
    superseded_by: str | None = Field(description="The memory that replaced it, if any.")
    superseded_at: str | None
    last_confirmed_at: str | None
    created_at: str
    updated_at: str
    deleted_at: str | None


class Ranked(Strict):
    score: float = Field(description="Its rank score (higher is better).")
    why: str = Field(description="One line: why it was chosen.")
    tokens: int = Field(description="Its cost in the context's token budget.")


class ScoredMemoryOut(MemoryOut, Ranked):
    """A memory as a search found it: its fields and its rank."""


class AddedOut(MemoryOut):
    superseded_id: str | None = Field(
        description="The memory this one superseded (same upsert_key), if any."
    )


class LinkOut(Strict):
    from_id: str
    to_id: str
    kind: Literal["supersedes", "conflicts", "relates"]
    created_at: Time


class MemoryShown(MemoryOut):
    links: list[LinkOut] = Field(description="Its links to other memories, either way.")


class ForgottenOut(MemoryOut):
    deleted: Literal[True]


class Results(Strict):
    results: list[ScoredMemoryOut] = Field(description="Best first.")


class Memories(Strict):
    memories: list[MemoryOut] = Field(description="Newest first.")


class ProcedureOut(Strict):
    id: str
    procedure_key: str
    title: str
    steps: list[str]
    scope: str
    project: str | None
    user_id: str | None
    source_session_id: str | None
    usage_count: int
    last_used_at: str | None
    created_at: str
    updated_at: str
    deleted_at: str | None


class ScoredProcedureOut(ProcedureOut, Ranked):
    """A procedure matching the task, and its rank."""


class FoundOut(Strict):
    memory: MemoryOut
    score: float
    why: str


class SessionBlockOut(Strict):
    session_id: str = Field(alias="sessionId")
    compaction_required: bool = Field(alias="compactionRequired")
    trigger_hint: str | None = Field(alias="triggerHint")
    latest_checkpoint_id: str | None = Field(alias="latestCheckpointId")
    status: str


class SnapshotHeader(Strict):
    id: str
    slug: str
    source_trigger: str = Field(alias="sourceTrigger")
    message_count: int = Field(alias="messageCount")
    created_at: Time = Field(alias="createdAt")


class SessionSummaryOut(Strict):
    session_id: str = Field(alias="sessionId")
    snapshots: list[SnapshotHeader]
    latest_checkpoint_id: str | None = Field(alias="latestCheckpointId")
    latest_checkpoint_summary: str | None = Field(alias="latestCheckpointSummary")


class ContextOut(Strict):
    """Rules, procedures, then memories relevant to the work, within the token budget."""

    mode: Literal["rules_only", "working", "long_term", "all"]
    text: str = Field(description="All of it as lines to give the agent: `- [layer] content`.")
    rules: list[FoundOut]
    procedures: list[ScoredProcedureOut]
    memories: list[FoundOut]
    used_tokens: int
    dropped: int = Field(description="How many did not fit the budget.")
    compaction_required: bool | None = Field(description="With a session_id: whether it is due.")
    latest_checkpoint_id: str | None
    query: str | None
    budget_tokens: int | None
    session: SessionBlockOut | None = Field(description="With a session_id: where it stands.")
    session_summary: SessionSummaryOut | None = Field(
        description="With include_session_summary: its latest snapshots and checkpoint."
    )


class ActionOut(Strict):
    kind: Literal["merge", "supersede", "conflict", "promote", "duplicate_candidate"]
    keep_id: str
    other_id: str | None
    similarity: float
    reason: str


class ConsolidationOut(Strict):
    """A consolidation run's audit row and its actions (with dry_run, those it would take)."""

    id: str
    scope: str
    project: str | None
    user_id: str | None
    mode: Literal["shadow", "apply"]
    input_count: int
    candidate_count: int
    promoted_count: int
    merged_count: int
    superseded_count: int
    conflicted_count: int
    model: str | None
    created_at: Time
    metadata: dict[str, Any]
    applied: bool = Field(description="False for a dry run: nothing changed.")
    actions: list[ActionOut]


class VerifyOut(Strict):
    ok: bool = Field(description="The tenant's metrics chain verifies.")
    checked: int = Field(description="How many events were checked.")
    problems: list[str] = Field(description="What failed, one line each; empty when ok.")


# -- tasks ---------------------------------------------------------------------------------------
class TaskOut(Strict):
    """A pipeline task of the tenant."""

    task_id: str
    title: str = Field(description="Redacted.")
    stage: str
    updated_at: MaybeTime
    project: str | None = Field(
        default=None, description="The project identity it belongs to; absent: every project's."
    )
    pending: bool = Field(description="Its stage is build, verify or validate.")


class TaskPut(TaskOut):
    moved_from: str | None = Field(
        default=None,
        description='Present when the put moved the task: its project before ("" for every '
        "project's).",
    )


class Tasks(Strict):
    tasks: list[TaskOut] = Field(description="In the order they were added.")


# -- probes --------------------------------------------------------------------------------------
class Health(Strict):
    status: Literal["ok"]


class Ready(Strict):
    status: Literal["ready"]


def answers(model: Any, description: str = "Success") -> dict[int | str, dict[str, Any]]:
    """A route's ``responses`` entry for its 200: ``model`` documents it (the route's return
    value is served as it is)."""
    return {200: {"model": model, "description": description}}


def once(model: type[Strict], description: str = "Success") -> dict[int | str, dict[str, Any]]:
    """``answers`` of a change that takes a ``request_id``: ``model``, or ``Duplicate``."""
    return answers(model | Duplicate, f"{description}; a replayed request_id: duplicate")


def only_documented_answers(app: FastAPI) -> None:
    """Make each 200 of ``/openapi.json`` its documented model alone: a route that returns a
    ``dict`` also puts FastAPI's inferred ``object`` beside the model (which adds nothing)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = build()
        for operations in schema["paths"].values():
            for operation in operations.values():
                content = operation["responses"].get("200", {}).get("content", {})
                for media in content.values():
                    documented = media.get("schema", {})
                    if "$ref" in documented or "anyOf" in documented:
                        for inferred in ("type", "additionalProperties", "title"):
                            documented.pop(inferred, None)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
