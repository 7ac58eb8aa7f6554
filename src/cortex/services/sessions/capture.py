"""Capture: every turn's signals go to the store at once, and the final record at the end.

A turn may be a separate process (a hook), so nothing waits in memory: ``record`` folds the
turn into the stored session in one transaction, and a session killed at any instant loses at
most the turn in flight. Signals are redacted where they enter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from cortex.clock import parse_time
from cortex.core.models import COMPLETE, SUSPENDED, PendingTask, Pin, SessionState
from cortex.core.plaintext import plain, storable, storable_value
from cortex.core.redaction import clip, redact, redact_value
from cortex.core.topics import MAX_LEARNING_IDS, HotTopicExtractor
from cortex.errors import ValidationError, command
from cortex.files import check_id
from cortex.services.sessions.context import SessionContext, check_open, with_topics
from cortex.services.working_memory import load_working_memory
from cortex.store.records import EndReads

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any, Protocol

    from cortex.core.memory_models import MemoryFilter
else:
    Protocol = object  # a protocol is for mypy only; nothing checks one at run time

MAX_TURN_TEXT = 20_000
"""Characters of one turn's text used for topic extraction (a huge prompt costs no more)."""


class PendingOf(Protocol):
    """The pending tasks of a session with these pins, of this project."""

    def __call__(self, pins: Sequence[Pin], *, project: str | None) -> tuple[PendingTask, ...]: ...


class SessionCapture:
    """Record turns, update fields and end sessions."""

    def __init__(self, context: SessionContext) -> None:
        self.context = context

    def record(
        self,
        session_id: str | None = None,
        *,
        current: SessionState | None = None,
        **signals: Any,
    ) -> SessionState:
        """Crash-safe per-turn capture: fold this turn's signals (``fold_turn``'s keyword
        arguments) into the stored session.

        ``current`` is the session's row as the caller read it inside the same transaction
        (``SessionPersistenceManager.transaction``); it spares reading it again.
        """
        ctx = self.context
        at = ctx.now_iso()
        with ctx.tx():
            state = check_open(current) if current is not None else ctx.resolve_open(session_id)
            return ctx.save(fold_turn(state, at, ctx.detect_pending, **signals))

    def update_session_state(self, session_id: str, partial: Mapping[str, Any]) -> SessionState:
        """UPSERT the session-record fields present in ``partial``, keeping all others."""
        ctx = self.context
        with ctx.tx():
            current = ctx.load(session_id).to_dict()
            unknown = set(partial) - set(current)
            if unknown:
                raise ValidationError(
                    f"unknown SessionState field {sorted(unknown)[0]!r}; "
                    f"see {command('session show', ' --json')} for the names"
                )
            current.update(partial)
            current["session_id"] = session_id
            current["updated_at"] = ctx.now_iso()
            return ctx.save(SessionState.from_dict(current))

    def on_session_end(self, session_id: str | None = None) -> SessionState:
        """The final record (redacted pins, tasks, topics), its mirror and metric."""
        return self._end(session_id, None)

    def end_idle(self, session_id: str, last_activity: str) -> SessionState:
        """The final record of a session that sat idle: it ended at its last activity, not
        when the worker noticed (the record itself is written now)."""
        return self._end(session_id, last_activity)

    def _end(self, session_id: str | None, ended_at: str | None) -> SessionState:
        from cortex.core.lifecycle import can_transition  # (an end's: a start needs none)

        ctx = self.context
        now = ctx.now_iso()
        at = ended_at or now
        if session_id is not None:  # on a server's PostgreSQL: with the first round trip
            ctx.store.read_ahead_end(
                EndReads(
                    check_id(session_id),
                    _learned_filter(session_id),
                    now,
                    MAX_LEARNING_IDS,
                    pending_tasks=ctx.tasks_in_store,
                )
            )
        with ctx.tx():
            state = ctx.resolve(session_id)
            if not state.is_open:
                return state  # ending twice is a no-op
            pins = self._pins_from_file(state)
            extractor = HotTopicExtractor.from_dict(state.topic_state)
            known = {p.label for p in state.working_memory}  # counted when they were pinned
            for pin in pins:
                if pin.label not in known:  # pinned through the working-memory file
                    extractor.record_working_memory_label(pin.label)
            for memory_id in self._learned(state.session_id, now):
                extractor.record_learning_id(memory_id)
            state = ctx.save(
                with_topics(
                    state,
                    extractor,
                    end_time=at,
                    # A session that never became ACTIVE (a failed health check) is suspended.
                    state=COMPLETE if can_transition(state.state, COMPLETE) else SUSPENDED,
                    last_activity=at,
                    updated_at=now,
                    working_memory=pins,
                    pending_tasks=ctx.detect_pending(pins, project=state.project),
                )
            )
            emit_captured(ctx, state)
        ctx.mirror(state)
        return state

    def _learned(self, session_id: str, now: str) -> list[str]:
        """Ids of the live memories this session added, oldest first (its learnings)."""
        flt = _learned_filter(session_id)
        found = self.context.store.list_memories(flt, now, limit=MAX_LEARNING_IDS, offset=0)
        return [m.id for m in reversed(found)]

    def _pins_from_file(self, state: SessionState) -> tuple[Pin, ...]:
        """The session's stored pins, with the edits made to its working-memory file since
        Cortex wrote it (the file alone may be stale: the database is the truth)."""
        ctx = self.context
        mirror = load_working_memory(ctx.config.working_memory_path, ctx.now_iso())
        pins = state.working_memory
        if mirror is not None and mirror.session_id == state.session_id:
            pins = mirror.edits_onto(pins)
        return tuple(replace(p, label=redact(p.label), content=redact(p.content)) for p in pins)


def _learned_filter(session_id: str) -> MemoryFilter:
    """The live memories session ``session_id`` added, of any project."""
    from cortex.core.memory_models import MemoryFilter  # (an end's: a start needs none)

    return MemoryFilter(session_id=session_id, all_projects=True)


def fold_turn(
    state: SessionState,
    at: str,
    pending: PendingOf,
    *,
    text: str | None = None,
    workdir: str | None = None,
    categories: Iterable[str] = (),
    learning_id: str | None = None,
    tool_name: str | None = None,
    tool_input: Mapping[str, Any] | None = None,
    files: Iterable[str] = (),
    weight: float = 1.0,
) -> SessionState:
    """The open session ``state`` with one turn's signals folded in at ``at`` (nothing read
    or written: ``record`` and the server's batches of turns share it). ``pending`` gives
    the pending tasks of a session's pins and project."""
    extractor = HotTopicExtractor.from_dict(state.topic_state)
    # Made storable and redacted here, where signals enter: topics, topic_state and projects
    # derive from them. A learning id names a memory: one no store holds as given is refused.
    if learning_id:
        extractor.record_learning_id(redact(plain(learning_id, "learning_id")))
    if text:
        extractor.record_text(redact(storable(clip(text, MAX_TURN_TEXT))), weight)
    if workdir:
        extractor.record_exec_workdir(redact(storable(workdir)))
    if categories:
        extractor.record_memory_access([redact(storable(c)) for c in categories])
    if tool_name:
        tool_input = storable_value(dict(tool_input or {}))
        extractor.record_tool_call(storable(tool_name), redact_value(tool_input))
    for path in files:
        extractor.record_file_path(redact(storable(path)))
    return with_topics(
        state,
        extractor,
        pending_tasks=pending(state.working_memory, project=state.project),
        last_activity=at,
        updated_at=at,
    )


def emit_captured(context: SessionContext, state: SessionState) -> None:
    """Queue the ``session_captured`` metric of a session that just ended (or was recovered)."""
    start, end = parse_time(state.start_time), parse_time(state.end_time or state.start_time)
    context.emit(
        "session_captured",
        state.session_id,
        {
            "session_id": state.session_id,
            "channel": state.channel,
            "duration_minutes": round((end - start).total_seconds() / 60, 2),
            "pin_count": len(state.working_memory),
            "learning_count": len(state.recent_learnings),
            "task_count": len(state.pending_tasks),
            "hot_topic_count": len(state.hot_topics),
            "crash_recovered": state.crash_recovered,
        },
    )
