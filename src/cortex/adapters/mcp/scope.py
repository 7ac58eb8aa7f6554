"""Which session and project an MCP tool acts on, and what every tool shares.

Which session a tool acts on when it is given no ``session_id`` (the "current session"):

1. The project directory is ``--project-dir`` / ``CLAUDE_PROJECT_DIR`` (or the Gemini or
   Cursor equivalent, passed in by the command), else the client's first ``file://`` root
   when it offers roots, else the server's working directory.
2. The project is ``project_identity(directory).id``, the same id the harness hooks record on
   the sessions they open (one id per repository, whatever subdirectory).
3. The current session is the open session of that project with the newest activity.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, cast
from urllib.parse import unquote, urlparse

import anyio
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field
from typing_extensions import TypedDict

from cortex.adapters.mcp.errors import MCP
from cortex.errors import (
    CortexError,
    NotFoundError,
    UnavailableError,
    param,
    refuse_empty,
)
from cortex.files import check_id
from cortex.logs import getLogger
from cortex.services.app import Services
from cortex.services.project import ProjectIdentity, project_identity
from cortex.services.sessions.manager import SessionPersistenceManager

log = getLogger("cortex.mcp")

ROOTS_TIMEOUT_SECONDS = 2.0
"""How long to wait for a client's ``roots/list`` answer before using the working directory."""


class QueuedOut(TypedDict):
    """A write the server has not taken (client mode, the server unreachable): it waits in
    the journal, and the result's other fields are this client's, not the server's."""

    server: str
    writes: int
    waiting: int
    deliver: str


# -- argument types (their descriptions and limits land in each tool's inputSchema) ----------
SessionIdArg = Annotated[
    str | None,
    Field(
        description="Session to act on. Omit it to use the current session of this project.",
        max_length=128,
    ),
]


def given(
    value: str | None,
    argument: str = "session_id",
    omitted: str = "the current session",
    instead: str = "a session id",
) -> str | None:
    """``value`` as a tool got it. Only an omitted one means its default (the current session,
    this directory's project): an empty one (a template's unset variable) is refused, never
    taken for another session or project."""
    return refuse_empty(value, param(argument), omitted, instead)


@contextmanager
def tool_errors() -> Iterator[None]:
    """Turn a CortexError into a tool error result with its one-line message."""
    try:
        yield
    except CortexError as exc:
        raise ToolError(exc.render(MCP)) from exc


@dataclass
class ProjectScope:
    """Finds the directory, and from it the project, that "the current session" refers to.

    Each directory's identity is resolved once per server process: a tool call may need it
    twice (the current session, then the memory scope), and it only changes when a repository
    gets its first commit or first remote, after which a restarted server picks it up.
    """

    project_dir: str | None = None
    env: Mapping[str, str] | None = None
    """The server's environment: ``git`` runs in it to identify a repository."""
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
            self._identities[directory] = project_identity(directory, cache_dir, self.env)
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


class ToolContext:
    """The services (opened on first use) and the project scope every tool shares.

    Tools are ``async`` so that every call runs on the server's event-loop thread: the SQLite
    connection belongs to the thread that opened it.
    """

    def __init__(self, open_services: Callable[[], Services], scope: ProjectScope) -> None:
        self._open_services = open_services
        self._services: Services | None = None
        self.scope = scope

    @property
    def services(self) -> Services:
        if self._services is None:  # (each result says what it queued: ``queued``)
            self._services = self._open_services().answers_queued()
        return self._services

    @property
    def sessions(self) -> SessionPersistenceManager:
        return self.services.sessions

    def mark(self) -> int:
        """How many writes were queued for a server before this call (``queued``'s start)."""
        return self._services.spooled() if self._services is not None else 0

    def queued(self, since: int) -> QueuedOut | None:
        """This call's writes that wait in the journal for the server (client mode), or None
        when it took them all."""
        found = self._services.queued(since) if self._services is not None else None
        return cast(QueuedOut, found) if found is not None else None

    async def identity(self, ctx: Context | None) -> ProjectIdentity:
        return await self.scope.identity(ctx, self.services.config.home / "cache")

    async def session_id_for(
        self, ctx: Context | None, session_id: str | None, argument: str = "session_id"
    ) -> str:
        """The named session (its whole id, also from a unique prefix), or the current session
        of this project (module docstring) when ``argument`` was omitted."""
        if session_id is not None and given(session_id, argument) is not None:
            try:
                return self.sessions.resolve(session_id).session_id
            except UnavailableError:  # client mode, the server down: the id as given, as the
                return check_id(session_id)  # command line takes it (a write waits for it)
        project = (await self.identity(ctx)).id
        try:
            return self.sessions.resolve(None, project).session_id
        except NotFoundError as exc:
            raise NotFoundError(
                f"no open session for project {project!r}; call start_session, or pass session_id"
            ) from exc

    async def open_session(self, ctx: Context) -> str | None:
        """The current session of this project, or None when none is open (or none is known:
        client mode, the server down)."""
        try:
            return await self.session_id_for(ctx, None)
        except (NotFoundError, UnavailableError):
            return None
