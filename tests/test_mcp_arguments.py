"""MCP tool arguments take the JSON type their ``inputSchema`` names, nothing converted.

The SDK validated arguments laxly: ``{"limit": true}`` ran as 1, ``{"limit": "5"}`` as 5,
``{"dry_run": "false"}`` applied a consolidation, a ``session_id`` of ``"null"`` meant the
current session and ``'["a"]'`` passed for an array. Through the SDK's client over stdio, a
property over every integer, number and boolean argument the tools advertise, and the
advertised types themselves (they must not change).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client, StdioServerParameters

from cortex.adapters.mcp.server import ProjectScope, build_server
from cortex.config import load_config
from cortex.services.app import Services
from test_mcp import data, error_text, run_client

PROJECT = "/home/u/Projects/radio"

SCALARS = {
    ("working_memory_pin", "critical"): "boolean",
    ("working_memory_pin", "confidence"): "number",
    ("session_chain", "depth"): "integer",
    ("search_memories", "limit"): "integer",
    ("list_memories", "limit"): "integer",
    ("list_memories", "offset"): "integer",
    ("get_context", "budget_tokens"): "integer",
    ("get_context", "include_session_summary"): "boolean",
    ("consolidate_memories", "dry_run"): "boolean",
}
"""Every integer, number and boolean argument the tools advertise, and its JSON type."""
BOUNDS = {
    ("working_memory_pin", "confidence"): (0.0, 1.0),
    ("session_chain", "depth"): (1, 100),
    ("search_memories", "limit"): (1, 50),
    ("list_memories", "limit"): (1, 200),
    ("list_memories", "offset"): (0, 1_000_000_000),
    ("get_context", "budget_tokens"): (0, 200_000),
}
"""Their advertised minimum and maximum, where they have them."""


def refusal(tool: str, argument: str, kind: str, given_as: str) -> str:
    reason = f"should be a valid {kind}, not {given_as}"
    return f"argument `{argument}` {reason}; fix it and call {tool} again"


def stdio_server(home: Path, cwd: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "cortex.entry", "mcp"],
        env={"CORTEX_HOME": str(home), "CLAUDE_PROJECT_DIR": PROJECT},
        cwd=str(cwd),
    )


def test_a_value_of_another_json_type_is_a_tool_error_naming_it(home: Path, tmp_path: Path) -> None:
    pin = {"label": "baud", "content": "38400"}
    refused = [
        ("search_memories", {"query": "tabs", "limit": True}, "limit", "integer", "a boolean"),
        ("search_memories", {"query": "tabs", "limit": "5"}, "limit", "integer", "a string"),
        ("search_memories", {"query": "tabs", "limit": 2.5}, "limit", "integer",
         "a number with a fraction"),
        ("session_chain", {"depth": "3"}, "depth", "integer", "a string"),
        ("list_memories", {"offset": False}, "offset", "integer", "a boolean"),
        ("get_context", {"budget_tokens": "100"}, "budget_tokens", "integer", "a string"),
        ("working_memory_pin", pin | {"critical": 1}, "critical", "boolean", "a number"),
        ("working_memory_pin", pin | {"critical": "true"}, "critical", "boolean", "a string"),
        ("working_memory_pin", pin | {"confidence": True}, "confidence", "number", "a boolean"),
        ("working_memory_pin", pin | {"confidence": "0.5"}, "confidence", "number", "a string"),
        ("consolidate_memories", {"dry_run": "false"}, "dry_run", "boolean", "a string"),
        ("consolidate_memories", {"dry_run": 0}, "dry_run", "boolean", "a number"),
        ("get_context", {"include_session_summary": 1}, "include_session_summary", "boolean",
         "a number"),
        ("start_session", {"keywords": '["radio"]'}, "keywords", "list", "a string"),
        ("add_memory", {"content": "x", "tags": '["a"]'}, "tags", "list", "a string"),
        ("checkpoint_session", {"next_steps": '["test"]'}, "next_steps", "list", "a string"),
    ]  # fmt: skip

    async def body(client: Client) -> None:
        sid = data(await client.call_tool("start_session", {}))["session_id"]
        for content in ("User prefers tabs", "user prefers tabs."):
            data(await client.call_tool("add_memory", {"content": content}))
        for tool, args, argument, kind, given_as in refused:
            text = error_text(await client.call_tool(tool, args))
            assert text == refusal(tool, argument, kind, given_as), (tool, args)
        # Nothing ran: no pin, no consolidation applied, no second session.
        assert data(await client.call_tool("working_memory_view", {}))["count"] == 0
        assert data(await client.call_tool("list_memories", {}))["count"] == 2
        chain = data(await client.call_tool("session_chain", {}))["sessions"]
        assert [s["session_id"] for s in chain] == [sid]

    run_client(stdio_server(home, tmp_path), body)


def test_every_valid_form_still_works_and_a_string_stays_a_string(
    home: Path, tmp_path: Path
) -> None:
    async def body(client: Client) -> None:
        async def ok(tool: str, **args: Any) -> dict[str, Any]:
            return data(await client.call_tool(tool, args))

        sid = (await ok("start_session", keywords=["radio"]))["session_id"]
        await ok("add_memory", content="the rig is an FT-991A", tags=["rig"])
        pinned = await ok("working_memory_pin", label="a", content="b", confidence=1)
        assert pinned["pin"]["confidence"] == 1.0  # an integer where a number is asked
        pinned = await ok("working_memory_pin", label="c", content="d", confidence=0.25,
                          critical=True)  # fmt: skip
        assert (pinned["pin"]["confidence"], pinned["pin"]["importance"]) == (0.25, "CRITICAL")
        for limit in (5, 5.0):  # (an integer written 5.0 is one to JSON Schema)
            assert len((await ok("search_memories", query="rig", limit=limit))["results"]) == 1
        chain = await ok("session_chain", depth=2.0)
        assert [s["session_id"] for s in chain["sessions"]] == [sid]
        assert (await ok("list_memories", limit=10, offset=0, tags="rig"))["count"] == 1
        context = await ok("get_context", budget_tokens=500.0, include_session_summary=False)
        assert context["used_tokens"] <= 500
        assert (await ok("consolidate_memories", dry_run=True))["applied"] is False
        # A string given for a string is that string, JSON-looking or not.
        for query in ("[1]", '{"rig": 1}', "null", "true"):
            assert (await ok("get_context", query=query))["mode"] == "all"
        assert (await ok("list_memories", tags='["rig"]'))["count"] == 0  # (the comma form)
        null = {"label": "e", "content": "f", "session_id": "null"}
        text = error_text(await client.call_tool("working_memory_pin", null))
        assert text.startswith("no session 'null'")  # (not the current session)
        assert (await ok("working_memory_view"))["count"] == 2

    run_client(stdio_server(home, tmp_path), body)


def test_an_integer_too_long_to_write_is_read_as_over_stdio(home: Path) -> None:
    server = build_server(lambda: Services.open(load_config(home, {}, {})), ProjectScope("/p"))

    async def body(client: Client) -> None:  # (in process: the client passes the int as is)
        for tool, argument, value in [("session_chain", "depth", 10**5000),
                                      ("list_memories", "offset", -(10**5000))]:  # fmt: skip
            reason = f"argument `{argument}` should be a finite number"
            text = error_text(await client.call_tool(tool, {argument: value}))
            assert text == f"{reason}; fix it and call {tool} again"

    run_client(server, body)


def json_types(schema: dict[str, Any]) -> set[str]:
    found = {schema["type"]} if "type" in schema else set()
    return found.union(*(json_types(choice) for choice in schema.get("anyOf", [])))


def bounds(schema: dict[str, Any]) -> tuple[float | None, float | None]:
    choices = [schema, *schema.get("anyOf", [])]
    low = [c["minimum"] for c in choices if "minimum" in c]
    high = [c["maximum"] for c in choices if "maximum" in c]
    return (low[0] if low else None, high[0] if high else None)


def test_the_advertised_types_and_bounds_are_unchanged(home: Path) -> None:
    server = build_server(lambda: Services.open(load_config(home, {}, {})), ProjectScope("/p"))

    async def body(client: Client) -> None:
        scalars, limits = {}, {}
        for tool in (await client.list_tools()).tools:
            for name, schema in tool.input_schema["properties"].items():
                kinds = json_types(schema) - {"null"}
                if kinds & {"integer", "number", "boolean"}:
                    assert len(kinds) == 1, (tool.name, name, schema)
                    scalars[tool.name, name] = kinds.pop()
                    if bounds(schema) != (None, None):
                        limits[tool.name, name] = bounds(schema)
        assert scalars == SCALARS
        assert limits == BOUNDS

    run_client(server, body)


# -- the property over every advertised scalar ----------------------------------------------
NUMERIC_TEXT = st.one_of(
    st.integers(-(10**6), 10**6).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["", "true", "false", "null", "1e3", " 5", "0x10"]),
)
WRONG = {
    "integer": st.one_of(
        st.booleans().map(lambda v: (v, "a boolean")),
        NUMERIC_TEXT.map(lambda v: (v, "a string")),
        st.floats(allow_nan=False, allow_infinity=False)
        .filter(lambda v: not v.is_integer())
        .map(lambda v: (v, "a number with a fraction")),
        st.lists(st.integers(), max_size=2).map(lambda v: (v, "a list")),
    ),
    "number": st.one_of(
        st.booleans().map(lambda v: (v, "a boolean")),
        NUMERIC_TEXT.map(lambda v: (v, "a string")),
        st.lists(st.floats(allow_nan=False), max_size=2).map(lambda v: (v, "a list")),
    ),
    "boolean": st.one_of(
        st.integers(-(2**40), 2**40).map(lambda v: (v, "a number")),
        st.floats(0.001, 0.999).map(lambda v: (v, "a number with a fraction")),
        NUMERIC_TEXT.map(lambda v: (v, "a string")),
        st.dictionaries(st.text(max_size=3), st.booleans(), max_size=2).map(
            lambda v: (v, "an object")
        ),
    ),
}


def valid(kind: str, low: float | None, high: float | None) -> st.SearchStrategy[Any]:
    """A value of ``kind`` within the schema's bounds, in each form JSON Schema allows."""
    if kind == "boolean":
        return st.booleans()
    low_int = None if low is None else math.ceil(low)
    high_int = None if high is None else math.floor(high)
    whole = st.integers(low_int, high_int)
    if kind == "integer":
        return st.one_of(whole, whole.map(float))
    return st.one_of(whole, st.floats(low, high, allow_nan=False, allow_infinity=False))


@st.composite
def scalar_calls(draw: st.DrawFn) -> list[tuple[str, str, Any, str | None]]:
    """Calls giving one advertised scalar argument a value: (tool, argument, value, the error
    it must get, or None when the value is of the argument's type)."""
    calls = []
    for _ in range(draw(st.integers(1, 4))):
        tool, argument = draw(st.sampled_from(sorted(SCALARS)))
        kind = SCALARS[tool, argument]
        if draw(st.booleans()):
            value, given_as = draw(WRONG[kind])
            calls.append((tool, argument, value, refusal(tool, argument, kind, given_as)))
        else:
            low, high = BOUNDS.get((tool, argument), (None, None))
            calls.append((tool, argument, draw(valid(kind, low, high)), None))
    return calls


REQUIRED = {"working_memory_pin": {"label": "l", "content": "c"}, "search_memories": {"query": "q"}}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=scalar_calls())
def test_each_scalar_argument_takes_its_json_type_only(
    calls: list[tuple[str, str, Any, str | None]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    config = load_config(tmp_path_factory.mktemp("scalars"), {}, {})
    server = build_server(lambda: Services.open(config), ProjectScope("/p"))

    async def body(client: Client) -> None:
        for tool, argument, value, expected in calls:
            args = REQUIRED.get(tool, {}) | {argument: value}
            result = await client.call_tool(tool, args)
            if expected is not None:
                assert error_text(result) == expected, (tool, args)
            elif result.is_error:  # (no session open, say): never about the argument
                assert not error_text(result).startswith("argument "), (tool, args)

    run_client(server, body)
