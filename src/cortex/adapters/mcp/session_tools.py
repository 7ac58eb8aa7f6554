"""The MCP session tools: working memory (view, pin, unpin) and sessions (start, end, status,
continue, chain), each one small method over ``SessionPersistenceManager``."""

from __future__ import annotations

import os
from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import Field
from typing_extensions import TypedDict

from cortex.adapters.mcp.scope import QueuedOut, SessionIdArg, ToolContext, given, tool_errors
from cortex.core.models import PendingTask, Pin, SessionState
from cortex.core.pins import MAX_LABEL_CHARS, MAX_PIN_CHARS, WORKING_MEMORY_CAP
from cortex.core.preamble import format_continue_summary
from cortex.services.app import queued_line

LabelArg = Annotated[
    str,
    Field(description="Short name of the pin, e.g. 'deploy-cmd'.", max_length=MAX_LABEL_CHARS),
]


# -- structured results ------------------------------------------------------------------------
class PinOut(TypedDict):
    label: str
    content: str
    importance: str
    confidence: float
    pinned_at: str
    inherited_from: str | None


class TaskOut(TypedDict):
    task_id: str
    title: str
    stage: str


class SessionOut(TypedDict):
    session_id: str
    project: str | None
    state: str
    start_time: str
    end_time: str | None
    crash_recovered: bool
    previous_session_id: str | None
    continued_by: str | None
    hot_topics: list[str]
    active_projects: list[str]
    pending_tasks: list[TaskOut]
    pin_count: int


class WorkingMemoryOut(TypedDict):
    session_id: str
    pins: list[PinOut]
    count: int
    capacity: int


class PinResult(TypedDict):
    session_id: str
    pin: PinOut
    count: int | None
    queued: QueuedOut | None


class StartResult(TypedDict):
    session_id: str
    project: str | None
    preamble: str | None
    inherited_pins: list[PinOut]
    restored_from: list[str]
    relevance_scores: list[float]
    pending_task_count: int
    queued: QueuedOut | None


class ContinueResult(TypedDict):
    session_id: str
    continued_from: str
    preamble: str | None
    summary: str
    inherited_pins: list[PinOut]
    pending_task_count: int
    queued: QueuedOut | None


class EndResult(SessionOut):
    queued: QueuedOut | None


class ChainResult(TypedDict):
    session_id: str
    sessions: list[SessionOut]


def pin_out(pin: Pin) -> PinOut:
    return {
        "label": pin.label,
        "content": pin.content,
        "importance": pin.importance,
        "confidence": pin.confidence,
        "pinned_at": pin.pinned_at,
        "inherited_from": pin.source_session_id,
    }


def task_out(task: PendingTask) -> TaskOut:
    return {"task_id": task.task_id, "title": task.title, "stage": task.stage}


def session_out(state: SessionState) -> SessionOut:
    return {
        "session_id": state.session_id,
        "project": state.project,
        "state": state.state,
        "start_time": state.start_time,
        "end_time": state.end_time,
        "crash_recovered": state.crash_recovered,
        "previous_session_id": state.previous_session_id,
        "continued_by": state.continued_by,
        "hot_topics": list(state.hot_topics[:20]),
        "active_projects": list(state.active_projects),
        "pending_tasks": [task_out(t) for t in state.pending_tasks],
        "pin_count": len(state.working_memory),
    }


class SessionTools:
    """The session and working-memory tools over the shared ``ToolContext``."""

    def __init__(self, context: ToolContext) -> None:
        self.context = context

    async def working_memory_view(
        self, ctx: Context, session_id: SessionIdArg = None
    ) -> WorkingMemoryOut:
        """Show the working-memory pins of the current session (or of session_id).

        Pins are short labelled notes kept in view across restarts and context compactions:
        commands, decisions, constraints, what you were in the middle of. Call this at the
        start of a task and after a compaction. Pins inherited from an earlier session carry
        "[inherited from <id> @ <time>]" in their label and a confidence that decays with age;
        CRITICAL pins are inherited for a week whatever their relevance. Returns the session
        id, the pins (label, content, importance, confidence, pinned_at, inherited_from), how
        many there are and the capacity (10).
        """
        with tool_errors():
            sid = await self.context.session_id_for(ctx, session_id)
            pins = self.context.sessions.list_pins(sid)
        return {
            "session_id": sid,
            "pins": [pin_out(p) for p in pins],
            "count": len(pins),
            "capacity": WORKING_MEMORY_CAP,
        }

    async def working_memory_pin(
        self,
        ctx: Context,
        label: LabelArg,
        content: Annotated[
            str,
            Field(description="The note itself, one or a few lines.", max_length=MAX_PIN_CHARS),
        ],
        critical: Annotated[
            bool,
            Field(description="CRITICAL pins are carried into every session for 7 days."),
        ] = False,
        confidence: Annotated[
            float, Field(description="How sure you are of this note, 0 to 1.", ge=0.0, le=1.0)
        ] = 1.0,
        session_id: SessionIdArg = None,
    ) -> PinResult:
        """Pin a note into the working memory of the current session (or of session_id).

        Use it for what must not be lost if the session restarts or the context is compacted:
        a build or deploy command, a decision and its reason, the step you are on, a constraint
        the user gave. A pin with the same label replaces the old one. Working memory holds 10
        pins; when it is full this fails with an error, so unpin something first. Credentials
        are redacted before anything is stored. Returns the stored pin and the new count.
        """
        with tool_errors():
            since = self.context.mark()
            sid = await self.context.session_id_for(ctx, session_id)
            pin = self.context.sessions.add_pin(
                label, content, sid, critical=critical, confidence=confidence
            )
            return self._pinned(sid, pin, since)

    def _pinned(self, session_id: str, pin: Pin, since: int) -> PinResult:
        """A pin tool's result: the count is the server's (null while the write waits)."""
        queued = self.context.queued(since)
        count = None if queued else len(self.context.sessions.list_pins(session_id))
        return {"session_id": session_id, "pin": pin_out(pin), "count": count, "queued": queued}

    async def working_memory_unpin(
        self, ctx: Context, label: LabelArg, session_id: SessionIdArg = None
    ) -> PinResult:
        """Remove the pin with this label from the working memory of the current session.

        Unpin what is done or no longer true, so the pins that matter stay in view. The label
        matches without its "[inherited from ...]" suffix and ignoring case. The pin is gone
        for this session (the earlier session it was inherited from keeps its own copy).
        Returns the removed pin and the new count; fails if no pin has that label.
        """
        with tool_errors():
            since = self.context.mark()
            sid = await self.context.session_id_for(ctx, session_id)
            removed = self.context.sessions.remove_pin(label, sid)
            return self._pinned(sid, removed, since)

    async def cortex_session_continue(
        self,
        ctx: Context,
        session_id: Annotated[
            str, Field(description="The earlier session to inherit from.", max_length=128)
        ],
        into_session_id: Annotated[
            str | None,
            Field(description="Session that inherits; omit for the current one.", max_length=128),
        ] = None,
    ) -> ContinueResult:
        """Continue an earlier session by id: inherit its pins and pending tasks now.

        Use it when the user names a session to pick up ("continue yesterday's session",
        "resume a1b2c3d4"), or when automatic restoration at start missed it: this ignores
        the session's age and relevance score. Pins are added with provenance labels (at most
        5 inherited, 10 in all; your current pins win on a label clash), so calling it twice
        adds nothing more. The override is recorded in the audit log. Returns the preamble
        describing what was inherited, a short summary (pins, tasks, topics), the inherited
        pins and the pending-task count.
        """
        with tool_errors():
            since = self.context.mark()
            into = await self.context.session_id_for(ctx, into_session_id, "into_session_id")
            restored = self.context.sessions.force_inherit_session(session_id, into, actor="mcp")
            queued = self.context.queued(since)
            summary = (  # nothing inherited yet while the server has not taken it
                queued_line(queued)
                if queued
                else format_continue_summary(self.context.sessions.resolve(session_id), restored)
            )
        return {
            "session_id": restored.session_id,
            "continued_from": session_id,
            "preamble": restored.preamble,
            "summary": summary,
            "inherited_pins": [pin_out(p) for p in restored.inherited_pins],
            "pending_task_count": restored.pending_task_count,
            "queued": queued,
        }

    async def session_chain(
        self,
        ctx: Context,
        session_id: SessionIdArg = None,
        depth: Annotated[
            int, Field(description="How many sessions, counting this one.", ge=1, le=100)
        ] = 5,
    ) -> ChainResult:
        """List the chain of sessions that led to the current session (or to session_id).

        Each session links to the one before it in the same project; this follows those links
        back up to depth sessions and returns them oldest first, each with its state, times,
        hot topics, pending tasks and pin count. Use it to see what earlier sessions worked
        on, or to find the id to pass to cortex_session_continue.
        """
        with tool_errors():
            sid = await self.context.session_id_for(ctx, session_id)
            chain = self.context.sessions.get_session_chain(sid, depth)
        return {"session_id": sid, "sessions": [session_out(s) for s in chain]}

    async def session_status(self, ctx: Context, session_id: SessionIdArg = None) -> SessionOut:
        """Show the current session (or session_id): state, hot topics, pending tasks.

        Use it to check which session the other tools act on, what it has been about (hot
        topics and active projects, mined from the work so far) and which tasks are still
        pending. Fails with an error when no session is open; start one with start_session.
        """
        with tool_errors():
            sid = await self.context.session_id_for(ctx, session_id)
            state = self.context.sessions.resolve(sid)
        return session_out(state)

    async def start_session(
        self,
        ctx: Context,
        project: Annotated[
            str | None,
            Field(
                description="Project id to file the session under. Omit it to use this "
                "directory's project; when you set it, pass the returned session_id to the "
                "other tools, which otherwise look for a session of this directory's project.",
                max_length=200,
            ),
        ] = None,
        keywords: Annotated[
            tuple[Annotated[str, Field(max_length=200)], ...],
            Field(description="Words describing what this session is about.", max_length=50),
        ] = (),
    ) -> StartResult:
        """Start a new session and restore what is relevant from earlier ones.

        Only call this when no harness hook started a session for you (session_status fails
        with "no active session"): Claude Code and OpenClaw start sessions themselves. Earlier
        sessions of the same project are scored by recency, topic overlap with the keywords
        and pending work; the best ones pass on their pins and pending tasks. Returns the new
        session id and a continuity preamble (null on a cold start) to read before working.
        """
        with tool_errors():
            since = self.context.mark()
            project = given(project, "project", "this directory's project", "a project id")
            identity = await self.context.identity(ctx)
            name = project or identity.id
            words = [identity.name, *([identity.branch] if identity.branch else []), *keywords]
            restored = self.context.sessions.on_session_start(
                None,
                "mcp",
                project=name,
                project_name=None if project else identity.name,
                keywords=words,
                workdir=await self.context.scope.directory(ctx),
                owner_pid=os.getpid(),
            )
        return {
            "session_id": restored.session_id,
            "project": name,
            "preamble": restored.preamble,
            "inherited_pins": [pin_out(p) for p in restored.inherited_pins],
            "restored_from": list(restored.session_ids),
            "relevance_scores": [round(s, 4) for s in restored.relevance_scores],
            "pending_task_count": restored.pending_task_count,
            "queued": self.context.queued(since),
        }

    async def end_session(self, ctx: Context, session_id: SessionIdArg = None) -> EndResult:
        """End the current session (or session_id) and capture its final state.

        Call it when the user says the work is finished, or before switching to an unrelated
        task. The session's pins, pending tasks and hot topics are stored for the next session
        to restore. Ending a session twice changes nothing. Harness hooks normally do this on
        exit. Returns the captured session.
        """
        with tool_errors():
            since = self.context.mark()
            sid = await self.context.session_id_for(ctx, session_id)
            state = self.context.sessions.on_session_end(sid)
        return {**session_out(state), "queued": self.context.queued(since)}
