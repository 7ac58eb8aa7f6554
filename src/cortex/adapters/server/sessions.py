"""The session endpoints: start, per-turn capture, end, checkpoint, snapshot, list, show,
continue, chain and pins. Each opens the caller's tenant services for the request only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Query

from cortex.adapters.server.answers import (
    CheckpointOut,
    Checkpoints,
    CompactionOut,
    EventOut,
    Events,
    PinOut,
    Pins,
    RestoredOut,
    SessionOut,
    Sessions,
    SnapshotOut,
    Snapshots,
    TurnOut,
    answers,
    once,
)
from cortex.adapters.server.auth import DUPLICATE, Caller, Id, Json, Label, Reader, Writer
from cortex.adapters.server.models import (
    MAX_OFFSET,
    CheckpointIn,
    CompactionIn,
    ContinueIn,
    DeleteIn,
    EndIn,
    EventIn,
    Mutation,
    PinIn,
    SnapshotIn,
    StartIn,
    TurnIn,
)
from cortex.core.models import SessionState
from cortex.services.app import Services
from cortex.services.hosting import apply_once

router = APIRouter(prefix="/v1", tags=["sessions"])


class Record(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


@router.post("/sessions/start", responses=once(RestoredOut))
def start(body: StartIn, caller: Writer) -> Json:
    """Open a session (or resume one) and restore what is relevant from earlier ones."""
    with caller.services() as app:
        fields = body.model_dump(exclude={"request_id", "session_id", "channel"})
        ctx = apply_once(
            app,
            body.request_id,
            lambda: app.sessions.on_session_start(body.session_id, body.channel, **fields),
            ahead=True,
            key=caller.key,
        )
    if ctx is None:
        return DUPLICATE
    return ctx.to_dict() | ({"explain": list(ctx.explain)} if body.explain else {})


@router.post("/sessions/{session_id}/turns", responses=answers(TurnOut))
def turn(session_id: Id, body: TurnIn, caller: Writer) -> Json:
    """Per-turn capture: fold this turn's signals into the stored session."""
    with caller.services() as app:
        fields = turn_signals(body)
        record = lambda: app.sessions.record(session_id, **fields)  # noqa: E731
        state = apply_once(app, body.request_id, record, ahead=True, key=caller.key)
    return turn_answer(session_id, state)


def turn_signals(body: TurnIn) -> dict[str, Any]:
    """The keyword arguments of ``record`` a turn's body gives."""
    fields = body.model_dump(exclude={"request_id"})
    fields["categories"] = tuple(fields["categories"])
    return fields


def turn_answer(session_id: str, state: SessionState | None) -> Json:
    """The answer to a captured turn (``state`` None: its request id was a replay)."""
    return {"session_id": session_id, "duplicate": state is None}


@router.post("/sessions/end", responses=once(SessionOut, "Its final record"))
def end(body: EndIn, caller: Writer) -> Json:
    """End a session: its final record, with redacted pins, tasks and topics."""
    with caller.services() as app:
        state = apply_once(
            app,
            body.request_id,
            lambda: app.sessions.on_session_end(body.session_id),
            ahead=True,
            key=caller.key,
        )
    return DUPLICATE if state is None else state.to_dict()


@router.post("/sessions/checkpoint", responses=once(CheckpointOut))
def checkpoint(body: CheckpointIn, caller: Writer) -> Json:
    """Write a checkpoint of what must survive a compaction."""
    return _once(caller, body, lambda app: app.compaction.checkpoint(
        body.session_id, summary=body.reason, decisions=body.decisions,
        next_steps=body.next_steps))  # fmt: skip


@router.get("/sessions/{session_id}/checkpoints", responses=answers(Checkpoints))
def checkpoints(
    session_id: Id, caller: Reader, limit: Annotated[int, Query(ge=1, le=100)] = 20
) -> Json:
    """The session's checkpoints, newest first."""
    with caller.services() as app:
        found = app.compaction.checkpoints(session_id, limit=limit)
    return {"checkpoints": [c.to_dict() for c in found]}


@router.post("/sessions/{session_id}/precompact", responses=once(CheckpointOut))
def precompact(session_id: Id, body: CompactionIn, caller: Writer) -> Json:
    """Write-ahead before the harness compacts: checkpoint, snapshot and compaction event."""
    return _once(caller, body, lambda app: app.compaction.pre_compact(
        session_id, body.trigger, body.summary))  # fmt: skip


@router.post("/sessions/{session_id}/postcompact", responses=once(CompactionOut))
def postcompact(session_id: Id, body: CompactionIn, caller: Writer) -> Json:
    """The harness's compaction summary: completes the compaction event, joins the log."""
    return _once(caller, body, lambda app: app.compaction.post_compact(
        session_id, body.summary, body.trigger))  # fmt: skip


def _once(caller: Caller, body: Mutation, work: Callable[[Services], Record]) -> Json:
    """``work`` applied once per request id in the caller's tenant; its record as JSON."""
    with caller.services() as app:
        done = apply_once(app, body.request_id, lambda: work(app))
    return DUPLICATE if done is None else done.to_dict()


@router.get("/sessions/{session_id}/snapshot", responses=answers(SnapshotOut))
def snapshot(session_id: Id, caller: Reader) -> Json:
    """A markdown transcript of the session's meaningful events (kept as a manual snapshot)."""
    with caller.services() as app:
        return app.events.snapshot(session_id, "manual").to_dict()


@router.post("/sessions/{session_id}/snapshots", responses=once(SnapshotOut))
def take_snapshot(session_id: Id, body: SnapshotIn, caller: Writer) -> Json:
    """Keep a markdown transcript of the session's meaningful events (``trigger`` says why)."""
    return _once(caller, body, lambda app: app.events.snapshot(
        session_id, body.trigger, slug=body.slug))  # fmt: skip


@router.get("/sessions/{session_id}/snapshots", responses=answers(Snapshots))
def snapshots(
    session_id: Id, caller: Reader, limit: Annotated[int, Query(ge=1, le=100)] = 20
) -> Json:
    """The session's snapshots, newest first."""
    with caller.services() as app:
        found = app.events.snapshots(session_id, limit=limit)
    return {"snapshots": [s.to_dict() for s in found]}


@router.post("/sessions/{session_id}/events", responses=once(EventOut))
def append_event(session_id: Id, body: EventIn, caller: Writer) -> Json:
    """Append one event (a message, checkpoint note or summary) to the session's log."""
    return _once(caller, body, lambda app: app.events.append(
        session_id, body.content, role=body.role, kind=body.kind,
        meaningful=body.meaningful))  # fmt: skip


@router.get("/sessions/{session_id}/events", responses=answers(Events))
def list_events(
    session_id: Id,
    caller: Reader,
    limit: Annotated[int, Query(ge=1, le=10_000)] | None = None,
    meaningful_only: bool = False,
) -> Json:
    """The session's events in order (the newest ``limit`` of them)."""
    with caller.services() as app:
        found = app.events.events(session_id, meaningful_only=meaningful_only, limit=limit)
    return {"events": [e.to_dict() for e in found]}


@router.get("/sessions", responses=answers(Sessions))
def listing(
    caller: Reader,
    project: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 20,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    open_only: Annotated[bool, Query(alias="open")] = False,
) -> Json:
    """Sessions newest first, of one project when it is given; with ``open=true`` only those
    not ended yet, of any project (what a client needs to find its current session)."""
    with caller.services() as app:
        if open_only:
            states = sorted(
                app.sessions.open_sessions(), key=lambda s: (s.start_time, s.session_id)
            )[::-1][offset : offset + limit]
        else:
            states = app.sessions.list_sessions(limit, project or None, offset)
    return {"sessions": [s.to_dict() for s in states]}


@router.get("/sessions/{session_id}", responses=answers(SessionOut))
def show(session_id: Id, caller: Reader) -> Json:
    with caller.services() as app:
        return app.sessions.resolve(session_id).to_dict()


@router.post("/sessions/{session_id}/continue", responses=once(RestoredOut))
def continue_(session_id: Id, body: ContinueIn, caller: Writer) -> Json:
    """Inherit everything from ``target_session_id`` whatever its age or score (audited)."""
    with caller.services() as app:
        ctx = apply_once(
            app,
            body.request_id,
            lambda: app.sessions.force_inherit_session(
                body.target_session_id, session_id, actor="api"
            ),
        )
    return DUPLICATE if ctx is None else ctx.to_dict()


@router.get("/sessions/{session_id}/chain", responses=answers(Sessions))
def chain(session_id: Id, caller: Reader, depth: Annotated[int, Query(ge=1, le=50)] = 5) -> Json:
    with caller.services() as app:
        return {
            "sessions": [s.to_dict() for s in app.sessions.get_session_chain(session_id, depth)]
        }


@router.get("/sessions/{session_id}/pins", responses=answers(Pins))
def pins(session_id: Id, caller: Reader) -> Json:
    with caller.services() as app:
        return {"pins": [p.to_dict() for p in app.sessions.list_pins(session_id)]}


@router.put("/sessions/{session_id}/pins/{label}", responses=once(PinOut))
def pin(session_id: Id, label: Label, body: PinIn, caller: Writer) -> Json:
    """Pin a note in the session's working memory (the same label replaces it)."""
    with caller.services() as app:
        added = apply_once(
            app,
            body.request_id,
            lambda: app.sessions.add_pin(
                label, body.content, session_id, critical=body.critical, confidence=body.confidence
            ),
        )
    return DUPLICATE if added is None else added.to_dict()


@router.delete("/sessions/{session_id}/pins/{label}", responses=once(PinOut, "The pin removed"))
def unpin(session_id: Id, label: Label, caller: Writer, body: DeleteIn | None = None) -> Json:
    """Unpin a note (the body, with its ``request_id``, is optional)."""
    return _once(caller, body or DeleteIn(), lambda app: app.sessions.remove_pin(
        label, session_id))  # fmt: skip
