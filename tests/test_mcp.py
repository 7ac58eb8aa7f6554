"""The MCP server through the SDK's own client: in-process, over stdio, and under fuzzing."""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, ListRootsResult, Root

from conftest import copy_home
from cortex.adapters.mcp.server import ProjectScope, build_server
from cortex.clock import FixedClock
from cortex.config import Config, load_config
from cortex.services.app import Services
from cortex.services.project import project_identity
from cortex.services.sessions.manager import SessionPersistenceManager

TOOLS = {
    # name: (readOnlyHint, destructiveHint, idempotentHint)
    "working_memory_view": (True, None, None),
    "working_memory_pin": (False, True, True),
    "working_memory_unpin": (False, True, True),
    "cortex_session_continue": (False, False, True),
    "session_chain": (True, None, None),
    "session_status": (True, None, None),
    "start_session": (False, False, False),
    "end_session": (False, False, True),
    "add_memory": (False, False, False),
    "search_memories": (True, None, None),
    "get_context": (True, None, None),
    "list_memories": (True, None, None),
    "consolidate_memories": (False, True, True),
    "forget_memory": (False, True, True),
    "checkpoint_session": (False, False, False),
    "snapshot_session": (False, False, False),
}

Call = Callable[[str, dict[str, Any]], Awaitable[CallToolResult]]


def run_client(server: Any, body: Callable[[Client], Awaitable[None]], **kw: Any) -> None:
    async def main() -> None:
        async with Client(server, **kw) as client:
            await body(client)

    anyio.run(main)


def data(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, [getattr(b, "text", b) for b in result.content]
    assert result.structured_content is not None
    return result.structured_content


def error_text(result: CallToolResult) -> str:
    assert result.is_error
    return " ".join(getattr(b, "text", "") for b in result.content)


@pytest.fixture
def server_for(
    make_config: Callable[..., Config], clock: FixedClock
) -> Callable[..., tuple[Any, SessionPersistenceManager]]:
    """An MCP server and a second manager on the same home (as a hook process would be)."""

    def make(project_dir: str | None = "/home/u/Projects/radio") -> Any:
        config = make_config()
        server = build_server(
            lambda: Services.open(config, clock),
            ProjectScope(project_dir=project_dir),
        )
        return server, SessionPersistenceManager.open(config, clock)

    return make


def test_the_preamble_names_a_cli_command_and_a_tool_that_exist(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from cli_helpers import cortex, ok
    from cortex.core.models import Pin
    from cortex.core.preamble import format_preamble

    text = format_preamble(
        session_count=1,
        inherited_pins=[Pin("a", "b", "2026-02-16T09:00:00Z")],
        pending_tasks=[],
        hot_topics=[],
        active_projects=[],
        now=datetime(2026, 2, 16, 10, tzinfo=UTC),
    )
    assert text is not None
    line = text.splitlines()[-1]
    assert line == (
        "WORKING MEMORY RESTORED: 1 pins inherited "
        "(see all with `cortex pin list` or the working_memory_view tool)"
    )
    (command,) = re.findall(r"`cortex ([^`]+)`", line)
    assert ok(cortex(tmp_path, *command.split(), "--help")).startswith("Usage: cortex pin list")
    (tool,) = re.findall(r"the (\w+) tool", line)
    assert tool in TOOLS


def test_the_docs_tool_table_is_the_tool_list_and_its_hints() -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "mcp.md").read_text()
    word = {"yes": True, "no": False, "": None}
    documented = {}
    for line in text.split("## Tools", 1)[1].split("\n## ", 1)[0].splitlines():
        if line.startswith("| `"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            documented[cells[0].strip("`")] = tuple(word[cell] for cell in cells[-3:])
    assert documented == TOOLS


def test_lists_every_tool_with_honest_annotations_and_schemas(server_for: Any) -> None:
    server, _ = server_for()

    async def body(client: Client) -> None:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert set(listed) == set(TOOLS)
        for name, (read_only, destructive, idempotent) in TOOLS.items():
            tool = listed[name]
            hints = tool.annotations
            assert hints is not None
            assert (hints.read_only_hint, hints.open_world_hint) == (read_only, False)
            if not read_only:
                assert (hints.destructive_hint, hints.idempotent_hint) == (destructive, idempotent)
            assert tool.output_schema is not None and tool.output_schema["type"] == "object"
            assert tool.description and not tool.description.startswith(" ")
            assert "\n        " not in tool.description
        pin_schema = listed["working_memory_pin"].input_schema
        assert pin_schema["required"] == ["label", "content"]
        assert pin_schema["properties"]["confidence"]["maximum"] == 1.0
        assert listed["cortex_session_continue"].input_schema["required"] == ["session_id"]
        assert listed["session_chain"].input_schema["properties"]["depth"]["minimum"] == 1

    run_client(server, body)


def test_session_lifecycle_and_restore_through_tools(server_for: Any, clock: FixedClock) -> None:
    server, _ = server_for()

    async def body(client: Client) -> None:
        first = data(await client.call_tool("start_session", {"keywords": ["ft991a", "cat"]}))
        assert first["preamble"] is None
        sid = first["session_id"]
        pinned = data(
            await client.call_tool(
                "working_memory_pin",
                {"label": "baud", "content": "CAT at 38400 baud", "critical": True},
            )
        )
        assert pinned["session_id"] == sid and pinned["count"] == 1
        assert pinned["pin"]["importance"] == "CRITICAL"
        await client.call_tool("working_memory_pin", {"label": "tmp", "content": "scratch"})
        removed = data(await client.call_tool("working_memory_unpin", {"label": "TMP"}))
        assert removed["pin"]["content"] == "scratch" and removed["count"] == 1
        view = data(await client.call_tool("working_memory_view", {}))
        assert [p["label"] for p in view["pins"]] == ["baud"] and view["capacity"] == 10
        status = data(await client.call_tool("session_status", {}))
        assert status["state"] == "ACTIVE" and "radio" in status["active_projects"]
        ended = data(await client.call_tool("end_session", {}))
        assert ended["state"] == "COMPLETE" and ended["pin_count"] == 1
        again = data(await client.call_tool("end_session", {"session_id": sid}))
        assert again["end_time"] == ended["end_time"]

        clock.advance(hours=2)
        second = data(await client.call_tool("start_session", {"keywords": ["ft991a"]}))
        assert second["restored_from"] == [sid]
        assert second["preamble"].startswith("[SESSION CONTINUITY")
        assert second["inherited_pins"][0]["inherited_from"] == sid
        chain = data(await client.call_tool("session_chain", {"depth": 5}))
        assert [s["session_id"] for s in chain["sessions"]] == [sid, second["session_id"]]
        cont = data(await client.call_tool("cortex_session_continue", {"session_id": sid}))
        assert cont["continued_from"] == sid and cont["session_id"] == second["session_id"]
        assert cont["inherited_pins"] == []  # already inherited: idempotent
        assert cont["summary"].startswith(f"Inherited from session {sid[:8]} (")
        assert "- 0 working memory pins restored" in cont["summary"]
        view = data(await client.call_tool("working_memory_view", {}))
        assert view["count"] == 1 and "[inherited from" in view["pins"][0]["label"]

    run_client(server, body)


def test_memory_tools_remember_search_context_and_forget(server_for: Any) -> None:
    server, _ = server_for()

    async def body(client: Client) -> None:
        sid = data(await client.call_tool("start_session", {}))["session_id"]
        first = data(
            await client.call_tool(
                "add_memory",
                {"content": "the staging db listens on port 5433", "upsert_key": "db-port"},
            )
        )
        mem = first["memory"]
        assert mem["project"] == "path:/home/u/Projects/radio" and mem["scope"] == "project"
        second = data(
            await client.call_tool(
                "add_memory",
                {"content": "the staging db moved to port 6543", "upsert_key": "db-port"},
            )
        )
        assert second["superseded_id"] == mem["id"]
        rule = {"content": "answer in English", "layer": "rule"}
        data(await client.call_tool("add_memory", rule))
        found = data(await client.call_tool("search_memories", {"query": "staging port"}))
        assert [r["memory"]["content"] for r in found["results"]] == [
            "the staging db moved to port 6543"
        ]
        context = data(await client.call_tool("get_context", {"query": "database port"}))
        assert context["text"].startswith("- [rule] answer in English\n- [long_term] the staging")
        assert context["compaction_required"] is False
        forget = {"memory_id": second["memory"]["id"]}
        assert data(await client.call_tool("forget_memory", forget))["id"] == forget["memory_id"]
        assert "already forgotten" in error_text(await client.call_tool("forget_memory", forget))
        assert (
            data(await client.call_tool("search_memories", {"query": "staging"}))["results"] == []
        )
        data(await client.call_tool("working_memory_pin", {"label": "step", "content": "3 of 5"}))
        checkpoint = data(
            await client.call_tool(
                "checkpoint_session",
                {"summary": "ported the db", "next_steps": ["run migrations"]},
            )
        )
        assert checkpoint["session_id"] == sid
        assert "SUMMARY: ported the db" in checkpoint["text"]
        assert "PINS:\n- step: 3 of 5" in checkpoint["text"]
        assert "NEXT STEPS:\n- run migrations" in checkpoint["text"]
        context = data(await client.call_tool("get_context", {}))
        assert context["latest_checkpoint_id"] == checkpoint["checkpoint_id"]
        snap = data(await client.call_tool("snapshot_session", {}))
        assert snap["session_id"] == sid and snap["transcript_md"].startswith(f"# Session {sid}")

    run_client(server, body)


def test_list_memories_follows_the_parity_matrix(server_for: Any) -> None:
    server, _ = server_for()

    async def body(client: Client) -> None:
        for content, layer, tags in [
            ("answer in English", "rule", ["style"]),
            ("scratch: step 3", "working", []),
            ("deploys go to eu-west-1", "long_term", ["infra", "deploy"]),
        ]:
            data(await client.call_tool("add_memory", {"content": content, "layer": layer,
                                                       "tags": tags}))  # fmt: skip

        async def listed(args: dict[str, Any]) -> list[str]:
            out = data(await client.call_tool("list_memories", args))
            assert out["count"] == len(out["memories"])
            return [m["content"] for m in out["memories"]]

        assert await listed({"layer": "long_term"}) == ["deploys go to eu-west-1"]
        assert await listed({"layer": "working"}) == ["scratch: step 3"]
        assert await listed({"tags": "infra,deploy"}) == ["deploys go to eu-west-1"]
        assert await listed({"tags": ["style"]}) == ["answer in English"]
        assert len(await listed({})) == 3
        assert await listed({"limit": 1, "offset": 1}) == ["scratch: step 3"]

    run_client(server, body)


def test_consolidate_memories_reports_first_then_applies(server_for: Any) -> None:
    server, _ = server_for()

    async def body(client: Client) -> None:
        for content in ("User prefers tabs", "user prefers tabs.", "The user prefers tabs"):
            data(await client.call_tool("add_memory", {"content": content}))
        shadow = data(await client.call_tool("consolidate_memories", {}))
        assert (shadow["applied"], shadow["merged_count"]) == (False, 2)
        assert data(await client.call_tool("list_memories", {}))["count"] == 3
        applied = data(await client.call_tool("consolidate_memories", {"dry_run": False}))
        assert (applied["applied"], applied["merged_count"]) == (True, 2)
        assert {a["kind"] for a in applied["actions"]} == {"merge"}
        assert data(await client.call_tool("list_memories", {}))["count"] == 1

    run_client(server, body)


def test_tools_act_on_the_session_a_hook_recorded(server_for: Any) -> None:
    server, hooks = server_for()
    other = hooks.on_session_start(project=project_identity("/elsewhere").id)
    radio = project_identity("/home/u/Projects/radio").id
    started = hooks.on_session_start(project=radio, workdir="/home/u/Projects/radio")
    hooks.add_pin("deploy", "make deploy", started.session_id)
    hooks.record(other.session_id, text="the other project is busier")  # newer activity

    async def body(client: Client) -> None:
        view = data(await client.call_tool("working_memory_view", {}))
        assert view["session_id"] == started.session_id
        assert [p["content"] for p in view["pins"]] == ["make deploy"]
        data(await client.call_tool("working_memory_pin", {"label": "next", "content": "tests"}))

    run_client(server, body)
    assert [p.label for p in hooks.list_pins(started.session_id)] == ["deploy", "next"]


def test_tools_take_unique_id_prefixes(server_for: Any) -> None:
    server, hooks = server_for()
    started = hooks.on_session_start("cafe1234-full", project="elsewhere")
    hooks.add_pin("deploy", "make deploy", started.session_id)
    hooks.on_session_start("cafe5678-full", project="elsewhere")

    async def body(client: Any) -> None:
        view = data(await client.call_tool("working_memory_view", {"session_id": "cafe1"}))
        assert view["session_id"] == "cafe1234-full"
        wrong = await client.call_tool("working_memory_view", {"session_id": "cafe"})
        assert "ambiguous" in error_text(wrong) and "cafe5678-full" in error_text(wrong)

    run_client(server, body)


def test_cortex_errors_become_one_line_tool_errors(server_for: Any) -> None:
    server, hooks = server_for()

    async def body(client: Client) -> None:
        text = error_text(await client.call_tool("working_memory_view", {}))
        assert (
            "no open session for project 'path:/home/u/Projects/radio'; call start_session, "
            "or pass session_id"
        ) in text
        text = error_text(await client.call_tool("session_status", {"session_id": "../x"}))
        assert "invalid session id '../x'" in text and "\n" not in text
        text = error_text(await client.call_tool("session_chain", {"session_id": "nope"}))
        assert "no session 'nope'" in text
        sid = data(await client.call_tool("start_session", {}))["session_id"]
        text = error_text(await client.call_tool("cortex_session_continue", {"session_id": sid}))
        assert "cannot continue itself" in text
        for i in range(10):
            await client.call_tool("working_memory_pin", {"label": f"p{i}", "content": "x"})
        text = error_text(
            await client.call_tool("working_memory_pin", {"label": "p10", "content": "x"})
        )
        assert "working memory is full (10 pins)" in text
        data(await client.call_tool("end_session", {"session_id": sid}))
        text = error_text(
            await client.call_tool(
                "working_memory_pin", {"label": "late", "content": "x", "session_id": sid}
            )
        )
        assert f"session {sid} ended at" in text
        late = {"summary": "late", "session_id": sid}
        text = error_text(await client.call_tool("checkpoint_session", late))
        assert f"session {sid} ended at" in text
        assert text.endswith("start a new one with start_session")

    run_client(server, body)


def test_arguments_failing_the_schema_are_tool_errors(server_for: Any) -> None:
    server, _ = server_for()

    async def body(client: Client) -> None:
        data(await client.call_tool("start_session", {}))
        bad = [
            ("working_memory_pin", {"label": 3, "content": "x"}),
            ("working_memory_pin", {"label": "x"}),
            ("working_memory_pin", {"label": "x", "content": "y", "confidence": 7}),
            ("working_memory_pin", {"label": "x" * 201, "content": "y"}),
            ("session_chain", {"depth": 0}),
            ("session_chain", {"depth": "deep"}),
            ("start_session", {"keywords": "not a list"}),
            ("cortex_session_continue", {}),
        ]
        for name, args in bad:
            assert (await client.call_tool(name, args)).is_error, (name, args)
        assert data(await client.call_tool("working_memory_view", {}))["count"] == 0

    run_client(server, body)


def test_errors_speak_to_the_agent_in_one_sentence(server_for: Any) -> None:
    server, _ = server_for()
    calls = [
        ("working_memory_pin", {"label": 3, "content": "x"}, "`label`"),
        ("working_memory_pin", {"label": "x"}, "`content` is required"),
        ("session_chain", {"depth": "deep"}, "`depth`"),
        ("add_memory", {"content": "x", "layer": "bogus"}, "`layer`"),
        ("session_chain", {"session_id": "nope"}, "start_session or session_chain"),
        ("forget_memory", {"memory_id": "nope"}, "search_memories"),
        ("snapshot_session", {"session_id": "zzz"}, "start_session"),
    ]

    async def body(client: Client) -> None:
        data(await client.call_tool("start_session", {}))
        for name, args, names in calls:
            text = error_text(await client.call_tool(name, args))
            assert names in text, (name, text)
            assert "\n" not in text and "http" not in text and "`cortex " not in text, text
            assert "validation error" not in text and "Error executing" not in text, text

    run_client(server, body)


def test_schema_errors_read_as_the_schema_not_as_the_validator(server_for: Any) -> None:
    server, _ = server_for()
    offset = "argument `offset` should be less than or equal to 1000000000"
    tags = "argument `tags` should be a list of strings or a string"
    calls = [
        ("list_memories", {"offset": 2**63}, offset),  # (past SQLite's integers)
        ("list_memories", {"offset": 10**30}, offset),
        ("list_memories", {"tags": 5}, tags),
        ("list_memories", {"tags": ["a", 5]}, tags),
        ("list_memories", {"types": ["a", 5]}, "argument `types[1]` should be a valid string, not"
         " a number"),
        ("search_memories", {"query": "q" * 2001}, "argument `query` should have at most 2000"
         " characters"),
        ("start_session", {"keywords": ["k"] * 60}, "argument `keywords` should have at most 50"
         " items, not 60"),
        ("add_memory", {"content": "x", "tags": 5}, "argument `tags` should be a valid list, not a"
         " number"),
        ("list_memories", {"tags": ["t"] * 101}, "argument `tags` should have at most 100 items,"
         " not 101"),  # (not "should be a list of strings or a string": it is one)
        ("list_memories", {"tags": ["t" * 65]}, "argument `tags[0]` should have at most 64"
         " characters"),
        ("session_chain", {"depth": 1e308}, "argument `depth` should be less than or equal to"
         " 100"),  # (an integer, written as JSON Schema allows; not "Unable to parse input")
    ]  # fmt: skip

    async def body(client: Client) -> None:
        for name, args, message in calls:
            text = error_text(await client.call_tool(name, args))
            assert text == f"{message}; fix it and call {name} again", text

    run_client(server, body)


def test_a_tag_filter_past_what_the_store_takes_is_one_line(server_for: Any) -> None:
    server, _ = server_for()

    async def body(client: Client) -> None:
        data(await client.call_tool("add_memory", {"content": "deploys", "tags": ["t1"]}))
        many = ",".join(f"t{i}" for i in range(1000))  # (SQLite refused the query it made)
        text = error_text(await client.call_tool("list_memories", {"tags": many}))
        assert text == "`tags` names 1000 tags; name at most 100"
        found = data(await client.call_tool("list_memories", {"tags": "t1,t1"}))
        assert [m["content"] for m in found["memories"]] == ["deploys"]

    run_client(server, body)


def test_an_unknown_tool_is_a_tool_error_naming_the_next_step(server_for: Any) -> None:
    server, _ = server_for()

    async def body(client: Client) -> None:
        text = error_text(await client.call_tool("working_memory_add", {"label": "x"}))
        assert text == "no tool 'working_memory_add'; call one of the tools this server lists"
        assert (await client.list_tools()).tools  # still serving

    run_client(server, body)


def test_client_roots_name_the_project_directory(server_for: Any) -> None:
    server, _ = server_for(project_dir=None)

    async def roots(_ctx: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri="file:///home/u/Projects/lbf-ham-radio")])

    async def body(client: Client) -> None:
        data(await client.call_tool("start_session", {}))
        status = data(await client.call_tool("session_status", {}))
        assert "lbf-ham-radio" in status["active_projects"]

    run_client(server, body, mode="legacy", list_roots_callback=roots)


def test_project_dir_wins_over_roots(server_for: Any) -> None:
    server, _ = server_for(project_dir="/home/u/Projects/chosen")

    async def roots(_ctx: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri="file:///home/u/Projects/other")])

    async def body(client: Client) -> None:
        data(await client.call_tool("start_session", {}))
        projects = data(await client.call_tool("session_status", {}))["active_projects"]
        assert "chosen" in projects and "other" not in projects

    run_client(server, body, mode="legacy", list_roots_callback=roots)


def test_stdio_server_subprocess(home: Path, tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "cortex.entry", "mcp"],
        env={"CORTEX_HOME": str(home), "CLAUDE_PROJECT_DIR": "/home/u/Projects/radio"},
        cwd=str(tmp_path),
    )

    async def body(client: Client) -> None:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == set(TOOLS)
        sid = data(await client.call_tool("start_session", {"keywords": ["stdio"]}))["session_id"]
        data(await client.call_tool("working_memory_pin", {"label": "k", "content": "v"}))
        assert "../" in error_text(
            await client.call_tool("session_status", {"session_id": "../../etc"})
        )
        view = data(await client.call_tool("working_memory_view", {"session_id": sid}))
        assert view["pins"][0]["content"] == "v"

    run_client(params, body)
    rows = sqlite3.connect(home / "brain.db").execute("SELECT project FROM session_states")
    assert rows.fetchall() == [("path:/home/u/Projects/radio",)]


# -- fuzzing -------------------------------------------------------------------------------------
HOSTILE = st.sampled_from(
    ["../x", "../../etc/passwd", "/abs", "a/b", "..", ".", "", " ", "\x00", "id\n", "%2e%2e"]
)
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=50),
    st.builds(str.__mul__, st.text(min_size=1, max_size=3), st.integers(1000, 10_000)),
    HOSTILE,
    st.lists(st.text(max_size=10), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
KEYS = st.sampled_from(
    [
        "session_id",
        "into_session_id",
        "label",
        "content",
        "critical",
        "confidence",
        "depth",
        "project",
        "keywords",
        "query",
        "layer",
        "mode",
        "budget_tokens",
        "memory_id",
        "tags",
        "upsert_key",
        "scope",
        "summary",
        "next_steps",
        "decisions",
        "limit",
        "offset",
        "types",
        "dry_run",
        "include_session_summary",
        "junk",
    ]  # fmt: skip
)
CALLS = st.lists(
    st.tuples(st.sampled_from(sorted(TOOLS)), st.dictionaries(KEYS, JUNK, max_size=4)),
    min_size=1,
    max_size=6,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=CALLS)
def test_fuzzed_arguments_never_crash_the_server_or_touch_other_data(
    calls: list[tuple[str, dict[str, Any]]],
    tmp_path_factory: pytest.TempPathFactory,
    kept_home: tuple[Path, str],
) -> None:
    template, kept = kept_home
    home = copy_home(template, tmp_path_factory.mktemp("fuzz"))
    config = load_config(home, {}, {})
    keeper = SessionPersistenceManager.open(config, FixedClock("2026-02-16T09:00:00Z"))
    before = keeper.store.get_session(kept)
    assert before is not None and before.working_memory
    server = build_server(lambda: Services.open(config), ProjectScope("/p"))

    async def body(client: Client) -> None:
        for name, args in calls:
            if "kept" in json.dumps(args, default=str) or kept in str(args):
                continue  # the one session fuzzing must not be able to name
            result = await client.call_tool(name, args)
            assert isinstance(result, CallToolResult)
            assert result.is_error or result.structured_content is not None
        assert (await client.list_tools()).tools  # still serving

    run_client(server, body)
    assert keeper.store.get_session(kept) == before
    outside = [p for p in home.parent.iterdir() if p.name.startswith(("x", "etc", "abs"))]
    assert outside == []
