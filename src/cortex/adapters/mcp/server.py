"""The MCP adapter: Cortex's tools over the official ``mcp`` SDK (``cortex mcp``, stdio).

Each tool is one small method over a service call (``session_tools``, ``memory_tools``),
registered explicitly in ``build_server`` with honest annotations and a typed result (clients
get ``structuredContent`` and an ``outputSchema``). A ``CortexError`` becomes a tool error
result (``isError: true``) carrying its one-line message; anything else is reported by the SDK
as a generic tool error and logged to stderr. The server never exits because of a tool call.
Which session a tool acts on by default is ``scope``'s rule.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from mcp.server import MCPServer
from mcp.types import ToolAnnotations

from cortex import __version__
from cortex.adapters.mcp.errors import CortexMCPServer
from cortex.adapters.mcp.memory_tools import MemoryTools
from cortex.adapters.mcp.scope import ProjectScope, ToolContext
from cortex.adapters.mcp.session_tools import SessionTools
from cortex.services.app import Services

__all__ = ["ProjectScope", "build_server"]

INSTRUCTIONS = """\
Cortex keeps your working memory and session history across restarts.
At the start of a task, call working_memory_view to see your pins (short notes you or an \
earlier session kept in view) and session_status to see pending tasks and hot topics. \
Pin what must survive a restart or a context compaction with working_memory_pin; unpin what \
is done. If the user asks to pick up a specific earlier session, call \
cortex_session_continue with its id. Tools without a session_id act on the current session \
of this project."""

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
    open_services: Callable[[], Services],
    scope: ProjectScope | None = None,
) -> MCPServer[Any]:
    """The MCP server with every Cortex tool registered; the services open on first use."""
    server = CortexMCPServer("cortex", instructions=INSTRUCTIONS, version=__version__)
    context = ToolContext(open_services, scope or ProjectScope())
    tools = SessionTools(context)
    memory = MemoryTools(context)
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
        (memory.list_memories, "List memories", READ_ONLY),
        # Supersedes duplicates (kept as history); a second run changes nothing more.
        (memory.consolidate_memories, "Consolidate memories", OVERWRITES),
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
