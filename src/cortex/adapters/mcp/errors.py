"""Tool errors that speak to the agent: one sentence naming the fix in the tool's own terms.

A Cortex error names the parameter it is about and the command that is the next step
(``cortex.errors.param``, ``command``); ``MCP`` renders them as the tool's argument
(`` `session_id` ``) and the tool that does the same (``working_memory_unpin``), and
``CortexMCPServer`` turns the SDK's argument-validation dumps (several lines and a URL per
field) into one sentence naming the argument.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.types import CallToolResult, Icon, InputRequiredResult, ToolAnnotations
from pydantic import ValidationError

from cortex.adapters.mcp.arguments import StrictArguments
from cortex.adapters.mcp.gate import stdin_gate
from cortex.adapters.mcp.wire import MendedStream
from cortex.errors import CortexError, Surface

MCP = Surface(
    "`{name}`",
    "`{name}`: {value}",
    commands={
        "session list": "the session_id that start_session or session_chain returned",
        "session start": "start_session",
        "session end": "end_session",
        "session show": "session_status",
        "session snapshot": "snapshot_session",
        "pin list": "working_memory_view",
        "pin add": "working_memory_pin",
        "pin remove": "working_memory_unpin",
        "memory list": "search_memories or list_memories",
    },
)
"""How a tool error names a parameter (the tool's argument, as the services' keyword names
it) and a command (the tool that does the same)."""


def schema_message(tool: str, error: ValidationError) -> str:
    """One sentence for arguments that fail the tool's schema: which argument and why, in the
    schema's terms ("should be a list of strings or a string", "should have at most 2000
    characters"), not the validator's ("tags.tuple[constrained-str, ...]", "Tuple should")."""
    errors = error.errors()
    if not errors:
        return f"the arguments are not valid; fix them and call {tool} again"
    first = errors[0]
    where = _where(first["loc"]) or "the arguments"
    union = [e for e in errors if _union_tag(e["loc"]) and e["loc"][0] == first["loc"][0]]
    tags = [e["loc"][1] for e in union]
    near = _within_one_shape(union)
    if len(set(tags)) > 1 and near:  # the value has one shape and breaks its limits
        where, reason = _where(near[0]["loc"]), _reason(near[0])
        left = len(errors) - len(union) + len(near) - 1
    elif len(tags) > 1:  # every shape of a union failed: say which shapes it takes
        where = str(first["loc"][0])
        shapes = dict.fromkeys(_shape(str(tag)) for tag in tags)
        reason, left = f"should be {' or '.join(shapes)}", len(errors) - len(tags)
    else:
        reason, left = _reason(first), len(errors) - 1
    extra = f" (and {left} more)" if left else ""
    return f"argument `{where}` {reason}{extra}; fix it and call {tool} again"


def _within_one_shape(union: list[Any]) -> list[Any]:
    """The errors of the one shape of a union the value has (every other shape failed on its
    type: a list, not a string), or none when no shape or several fit it so."""
    shapes: dict[Any, list[Any]] = {}
    for error in union:
        shapes.setdefault(error["loc"][1], []).append(error)
    fits = [found for found in shapes.values()
            if not any(str(e["type"]).endswith("_type") for e in found)]  # fmt: skip
    return fits[0] if len(fits) == 1 else []


def _union_tag(loc: tuple[int | str, ...]) -> bool:
    """Whether ``loc`` goes through one shape of a union (``("tags", "str")``): a tool's
    arguments are plain values, so a name after the argument's is a shape, not a field."""
    return len(loc) > 1 and isinstance(loc[1], str)


def _where(loc: tuple[int | str, ...]) -> str:
    """``tags[2]`` for ``("tags", "tuple[constrained-str, ...]", 2)``."""
    name = str(loc[0]) if loc else ""
    return name + "".join(f"[{part}]" for part in loc[1:] if isinstance(part, int))


_VALIDATOR_WORDS = re.compile(r"^(?:Input|String|Tuple|List|Value|Dictionary|Object) (?=should)")


def _reason(error: Any) -> str:
    kind, given = error["type"], error.get("input")
    if kind == "missing":
        return "is required"
    if kind == "int_type" and isinstance(given, float) and not math.isfinite(given):
        return "should be a finite number"  # (an integer of thousands of digits, read as one)
    reason = _VALIDATOR_WORDS.sub("", str(error["msg"])).replace(" after validation", "")
    reason = re.sub(r"\b(?:tuple|array)\b", "list", reason)  # (as the other messages say)
    if str(kind).endswith("_type") and "input" in error:  # a value of another JSON type
        reason += f", not {_json_type(given)}"
    return reason


def _json_type(value: Any) -> str:
    """What a wrong argument is, in JSON's terms: ``"5"`` is a string, ``true`` a boolean."""
    if value is None:
        return "null"
    if isinstance(value, float) and not value.is_integer():
        return "a number with a fraction"
    kinds = [(bool, "a boolean"), (str, "a string"), (int | float, "a number"),
             (list | tuple, "a list"), (dict, "an object")]  # fmt: skip
    return next((name for kind, name in kinds if isinstance(value, kind)), "another type")


_SHAPES = {"str": "a string", "int": "a whole number", "float": "a number", "bool": "true or false"}


def _shape(tag: str) -> str:
    """What a union's shape tag asks for: ``tuple[constrained-str, ...]`` -> a list of strings."""
    kind, _, inner = tag.partition("[")
    kind = kind.removeprefix("constrained-")
    if kind in ("tuple", "list", "set", "frozenset"):
        item = _shape(inner.split(",")[0].rstrip("]").strip())
        return "a list of " + (item[2:] + "s" if item.startswith("a ") else "values")
    return _SHAPES.get(kind, f"a {kind}")


class CortexMCPServer(MCPServer[Any]):
    """``MCPServer`` whose tools take their arguments strictly (``arguments``), whose argument
    errors are one sentence, without the validator's dump, whose stdio answers every line it
    cannot serve (``wire``), and whose tool calls run one at a time: a tool's writes that the
    journal kept are counted for its result as the difference before and after it
    (``ToolContext.queued``), which no other call may change meanwhile (the services are
    synchronous anyway)."""

    _one_at_a_time: anyio.Lock | None = None

    def add_tool(
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        icons: list[Icon] | None = None,
        meta: dict[str, Any] | None = None,
        structured_output: bool | None = None,
    ) -> None:
        """Register ``fn`` as the SDK does, its arguments then validated strictly."""
        super().add_tool(fn, name, title, description, annotations, icons, meta, structured_output)
        tool = self._tool_manager.get_tool(name or fn.__name__)
        assert tool is not None  # (just added)
        tool.fn_metadata = StrictArguments.of(tool.fn_metadata)

    async def run_stdio_async(self) -> None:
        """Serve on stdio, mending the request lines the SDK's parser refuses (``wire``) and
        answering those whose id it would drop (``gate``)."""
        with stdin_gate() as gate:
            async with stdio_server() as (read_stream, write_stream):
                async with anyio.create_task_group() as tasks:
                    if gate is not None:
                        tasks.start_soon(gate.run, write_stream)
                    lowlevel = self._lowlevel_server
                    mended = MendedStream(read_stream, write_stream)
                    options = lowlevel.create_initialization_options()
                    await lowlevel.run(mended, write_stream, options)
                    tasks.cancel_scope.cancel()

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        if self._one_at_a_time is None:
            self._one_at_a_time = anyio.Lock()
        async with self._one_at_a_time:
            return await self._call_tool(name, arguments, context)

    async def _call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None
    ) -> CallToolResult | InputRequiredResult:
        if self._tool_manager.get_tool(name) is None:  # (the SDK's "Unknown tool: x")
            raise ToolError(f"no tool {name!r}; call one of the tools this server lists")
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(schema_message(name, exc.__cause__)) from exc.__cause__
            if isinstance(exc.__cause__, CortexError):  # one a tool let through
                raise ToolError(exc.__cause__.render(MCP)) from exc.__cause__
            prefix = f"Error executing tool {name}: "  # the SDK's, around our own message
            if str(exc).startswith(prefix) and type(exc) is ToolError:
                raise ToolError(str(exc)[len(prefix) :]) from exc.__cause__
            raise
