"""Tool errors that speak to the agent: one sentence naming the fix in the tool's own terms.

Cortex's errors name the next step for a person at a terminal (`cortex session list`); an
agent calling a tool has tools, not a shell. ``for_agent`` rewrites those hints into tool
terms, and ``CortexMCPServer`` turns the SDK's argument-validation dumps (several lines and a
URL per field) into one sentence naming the argument.
"""

from __future__ import annotations

import re
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, InputRequiredResult
from pydantic import ValidationError

# A person's next step (a CLI command) -> the agent's, in tool terms; the first match wins.
_HINTS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        (r"(?:see|start it with) `cortex session (?:list|start)[^`]*`",
         "use a session_id that start_session or session_chain returned"),
        (r"start one with `cortex session start` or pass --session-id",
         "call start_session, or pass session_id"),
        (r"start a new one with `cortex session start`", "call start_session for a new one"),
        (r"see `cortex memory list`", "use a memory_id that search_memories returned"),
        (r"(?:remove one first|remove a pin) with `cortex pin remove LABEL`",
         "remove one first with working_memory_unpin"),
        (r"see `cortex pin list`", "see working_memory_view"),
        (r"see `cortex session snapshot`", "call snapshot_session first"),
    )
)  # fmt: skip
_ANY_COMMAND = re.compile(r"[;,(]?\s*[^;,(]*`cortex [^`]*`[^;)]*\)?")


def for_agent(message: str) -> str:
    """``message`` with any CLI command in it replaced by what the agent can call."""
    if "`cortex " not in message:
        return message
    for pattern, replacement in _HINTS:
        if pattern.search(message):
            return pattern.sub(replacement, message)
    stripped = _ANY_COMMAND.sub("", message).rstrip(" ;,")
    return f"{stripped}; check the tool's arguments"


def schema_message(tool: str, error: ValidationError) -> str:
    """One sentence for arguments that fail the tool's schema: which argument and why."""
    errors = error.errors()
    if not errors:
        return f"the arguments are not valid; fix them and call {tool} again"
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "the arguments"
    reason = "is required" if first["type"] == "missing" else str(first["msg"])
    if reason.startswith("Input should"):
        reason = "should" + reason[len("Input should") :]
    extra = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"argument `{where}` {reason}{extra}; fix it and call {tool} again"


class CortexMCPServer(MCPServer[Any]):
    """``MCPServer`` whose argument errors are one sentence, without the validator's dump."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(schema_message(name, exc.__cause__)) from exc.__cause__
            prefix = f"Error executing tool {name}: "  # the SDK's, around our own message
            if str(exc).startswith(prefix) and type(exc) is ToolError:
                raise ToolError(str(exc)[len(prefix) :]) from exc.__cause__
            raise
