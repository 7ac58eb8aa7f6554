"""The MCP adapter: Cortex's tools over the official ``mcp`` SDK (``cortex mcp``, stdio).

Each tool is one small method over a ``SessionPersistenceManager`` call, registered explicitly
in ``build_server`` with honest annotations and a typed result (clients get
``structuredContent`` and an ``outputSchema``). A ``CortexError`` becomes a tool error result
(``isError: true``) carrying its one-line message; anything else is reported by the SDK as a
generic tool error and logged to stderr. The server never exits because of a tool call.

Which session a tool acts on when it is given no ``session_id`` (the "current session"):

1. The project directory is ``--project-dir`` / ``CLAUDE_PROJECT_DIR`` (or the Gemini or
   Cursor equivalent, passed in by the command), else the client's first ``file://`` root
   when it offers roots, else the server's working directory.
2. The project is ``project_identity(directory).id``, the same id the harness hooks record on
   the sessions they open (one id per repository, whatever subdirectory).
3. The current session is the open session of that project with the newest activity.
"""

from __future__ import annotations

import inspect
import logging
import os
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import unquote, urlparse

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field
from typing_extensions import TypedDict

from cortex import __version__
from cortex.core.models import PendingTask, Pin, SessionState
from cortex.core.pins import MAX_LABEL_CHARS, MAX_PIN_CHARS, WORKING_MEMORY_CAP
from cortex.errors import CortexError, NotFoundError
from cortex.services.project import ProjectIdentity, project_identity
from cortex.services.sessions.manager import SessionPersistenceManager

log = logging.getLogger("cortex.mcp")

ROOTS_TIMEOUT_SECONDS = 2.0
"""How long to wait for a client's ``roots/list`` answer before using the working directory."""

INSTRUCTIONS = """\
Cortex keeps your working memory and session history across restarts.
At the start of a task, call working_memory_view to see your pins (short notes you or an \
earlier session kept in view) and session_status to see pending tasks and hot topics. \
Pin what must survive a restart or a context compaction with working_memory_pin; unpin what \
is done. If the user asks to pick up a specific earlier session, call \
cortex_session_continue with its id. Tools without a session_id act on the current session \
of this project."""

# -- argument types (their descriptions and limits land in each tool's inputSchema) ----------
SessionIdArg = Annotated[
    str | None,
    Field(
        description="Session to act on. Omit it to use the current session of this project.",
        max_length=128,
    ),
]
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
    count: int


class StartResult(TypedDict):
    session_id: str
    project: str | None
    preamble: str | None
    inherited_pins: list[PinOut]
    restored_from: list[str]
    relevance_scores: list[float]
    pending_task_count: int


class ContinueResult(TypedDict):
    session_id: str
    continued_from: str
    preamble: str | None
    inherited_pins: list[PinOut]
    pending_task_count: int


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


@contextmanager
def tool_errors() -> Iterator[None]:
    """Turn a CortexError into a tool error result with its one-line message."""
    try:
        yield
    except CortexError as exc:
        raise ToolError(str(exc)) from exc


@dataclass
class ProjectScope:
    """Finds the directory, and from it the project, that "the current session" refers to.

    Each directory's identity is resolved once per server process: a tool call may need it
    twice (the current session, then the memory scope), and it only changes when a repository
    gets its first commit or first remote, after which a restarted server picks it up.
    """

    project_dir: str | None = None
    cwd: str = field(default_factory=os.getcwd)
    _roots_dir: str | None = None
    _asked_roots: bool = False
    _identities: dict[str, ProjectIdentity] = field(default_factory=dict)

    async def directory(self, ctx: Context | None) -> str:
        if self.project_dir:
            return self.project_dir
        if ctx is not None and not self._asked_roots:
            self._asked_roots = True
            self._roots_dir = await _first_root(ctx)
        return self._roots_dir or self.cwd

    async def identity(self, ctx: Context | None, cache_dir: Path) -> ProjectIdentity:
        directory = await self.directory(ctx)
        if directory not in self._identities:
            self._identities[directory] = project_identity(directory, cache_dir)
        return self._identities[directory]


async def _first_root(ctx: Context) -> str | None:
    """The first ``file://`` root the client offers, or None (no roots, an error, a timeout)."""
    caps = ctx.client_capabilities
    if caps is None or caps.roots is None:
        return None
    try:
        with anyio.fail_after(ROOTS_TIMEOUT_SECONDS), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # roots are deprecated from protocol 2026-07-28
            result = await ctx.session.list_roots()
    except Exception as exc:  # noqa: BLE001 - a client's roots are a hint, never a failure
        log.info("roots/list failed (%s); using the working directory", exc)
        return None
    for root in result.roots:
        uri = urlparse(str(root.uri))
        if uri.scheme == "file" and uri.path:
            return str(Path(unquote(uri.path)))
    return None


class CortexTools:
    """The tool functions, bound to one lazily opened manager and one project scope.

    Tools are ``async`` so that every call runs on the server's event-loop thread: the SQLite
    connection belongs to the thread that opened it.
    """

    def __init__(
        self, open_manager: Callable[[], SessionPersistenceManager], scope: ProjectScope
    ) -> None:
        self._open_manager = open_manager
        self._manager: SessionPersistenceManager | None = None
        self.scope = scope

    @property
    def manager(self) -> SessionPersistenceManager:
        if self._manager is None:
            self._manager = self._open_manager()
        return self._manager

    async def identity(self, ctx: Context | None) -> ProjectIdentity:
        return await self.scope.identity(ctx, self.manager.config.home / "cache")

    async def session_id_for(self, ctx: Context | None, session_id: str | None) -> str:
        """The named session, or the current session of this project (module docstring)."""
        if session_id:
            return session_id
        project = (await self.identity(ctx)).id
        try:
            return self.manager.resolve(None, project).session_id
        except NotFoundError as exc:
            raise NotFoundError(
                f"no open session for project {project!r}; call start_session, or pass session_id"
            ) from exc

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
            sid = await self.session_id_for(ctx, session_id)
            pins = self.manager.list_pins(sid)
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
            sid = await self.session_id_for(ctx, session_id)
            pin = self.manager.add_pin(
                label, content, sid, critical=critical, confidence=confidence
            )
            count = len(self.manager.list_pins(sid))
        return {"session_id": sid, "pin": pin_out(pin), "count": count}

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
            sid = await self.session_id_for(ctx, session_id)
            removed = self.manager.remove_pin(label, sid)
            count = len(self.manager.list_pins(sid))
        return {"session_id": sid, "pin": pin_out(removed), "count": count}

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
        describing what was inherited, the inherited pins and the pending-task count.
        """
        with tool_errors():
            into = await self.session_id_for(ctx, into_session_id)
            restored = self.manager.force_inherit_session(session_id, into, actor="mcp")
        return {
            "session_id": restored.session_id,
            "continued_from": session_id,
            "preamble": restored.preamble,
            "inherited_pins": [pin_out(p) for p in restored.inherited_pins],
            "pending_task_count": restored.pending_task_count,
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
            sid = await self.session_id_for(ctx, session_id)
            chain = self.manager.get_session_chain(sid, depth)
        return {"session_id": sid, "sessions": [session_out(s) for s in chain]}

    async def session_status(self, ctx: Context, session_id: SessionIdArg = None) -> SessionOut:
        """Show the current session (or session_id): state, hot topics, pending tasks.

        Use it to check which session the other tools act on, what it has been about (hot
        topics and active projects, mined from the work so far) and which tasks are still
        pending. Fails with an error when no session is open; start one with start_session.
        """
        with tool_errors():
            sid = await self.session_id_for(ctx, session_id)
            state = self.manager.resolve(sid)
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
            identity = await self.identity(ctx)
            name = project or identity.id
            words = [identity.name, *([identity.branch] if identity.branch else []), *keywords]
            restored = self.manager.on_session_start(
                None,
                "mcp",
                project=name,
                project_name=None if project else identity.name,
                keywords=words,
                workdir=await self.scope.directory(ctx),
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
        }

    async def end_session(self, ctx: Context, session_id: SessionIdArg = None) -> SessionOut:
        """End the current session (or session_id) and capture its final state.

        Call it when the user says the work is finished, or before switching to an unrelated
        task. The session's pins, pending tasks and hot topics are stored for the next session
        to restore. Ending a session twice changes nothing. Harness hooks normally do this on
        exit. Returns the captured session.
        """
        with tool_errors():
            sid = await self.session_id_for(ctx, session_id)
            state = self.manager.on_session_end(sid)
        return session_out(state)


READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def _writes(*, destructive: bool, idempotent: bool) -> ToolAnnotations:
    return ToolAnnotations(
        read_only_hint=False,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


APPENDS = _writes(destructive=False, idempotent=False)
"""Each call adds something new (a session, a memory, a checkpoint, a snapshot)."""
SETTLES = _writes(destructive=False, idempotent=True)
"""Adds or closes state once; calling again changes nothing."""
OVERWRITES = _writes(destructive=True, idempotent=True)
"""Replaces or hides what was there; the same call again changes nothing more."""


def build_server(
    open_manager: Callable[[], SessionPersistenceManager],
    scope: ProjectScope | None = None,
) -> MCPServer[Any]:
    """The MCP server with every Cortex tool registered; the manager opens on first use."""
    server: MCPServer[Any] = MCPServer("cortex", instructions=INSTRUCTIONS, version=__version__)
    tools = CortexTools(open_manager, scope or ProjectScope())
    from cortex.adapters.mcp.memory_tools import (
        MemoryTools,  # it builds on CortexTools, defined above
    )

    memory = MemoryTools(tools)
    registry: list[tuple[Callable[..., Any], str, ToolAnnotations]] = [
        (tools.working_memory_view, "View working memory", READ_ONLY),
        # The same label replaces the old pin: an overwrite, so honestly destructive.
        (tools.working_memory_pin, "Pin a note", OVERWRITES),
        (tools.working_memory_unpin, "Unpin a note", OVERWRITES),
        # Inherited pins never displace current ones; inheriting twice adds nothing.
        (tools.cortex_session_continue, "Continue an earlier session", SETTLES),
        (tools.session_chain, "Session chain", READ_ONLY),
        (tools.session_status, "Session status", READ_ONLY),
        (tools.start_session, "Start a session", APPENDS),
        (tools.end_session, "End a session", SETTLES),  # ending twice is a no-op
        (memory.add_memory, "Remember", APPENDS),
        (memory.search_memories, "Search memories", READ_ONLY),
        (memory.get_context, "Get context", READ_ONLY),
        # Forgetting hides the memory for good (the row is kept for audit): destructive.
        (memory.forget_memory, "Forget", OVERWRITES),
        (memory.checkpoint_session, "Checkpoint the session", APPENDS),
        (memory.snapshot_session, "Snapshot the session", APPENDS),
    ]
    for tool, title, hints in registry:
        # The docstring, dedented, is the description the model reads.
        doc = inspect.cleandoc(tool.__doc__ or "")
        server.add_tool(tool, title=title, description=doc, annotations=hints)
    return server
