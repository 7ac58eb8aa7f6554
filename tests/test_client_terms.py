"""Client mode speaks each surface's terms: a refusal of the team server reaches the command
line and the MCP tools worded as the same refusal in a local home (a real server on a loopback
port, the real CLI in a subprocess, the SDK's MCP client)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
from cli_helpers import T0, cortex  # noqa: E402
from cortex.clock import FixedClock  # noqa: E402
from cortex.config import load_config  # noqa: E402
from cortex.services.app import Services  # noqa: E402
from cortex.services.hosting import ServiceHost  # noqa: E402
from test_client_server import free_port, running  # noqa: E402
from test_error_surfaces import mcp_errors, mcp_results  # noqa: E402


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, str, ServiceHost]]:
    """A real team server over a SQLite file on its own clock (T0): its URL, a write key of
    its tenant, and its host."""
    host = ServiceHost(str(tmp_path / "server.db"), tmp_path / "data", clock=FixedClock(T0))
    with host.registry() as app:
        app.tenants.create_tenant("default")
        key = app.tenants.create_key("default", "write")[1]
    with running(host, free_port()) as url:
        yield url, key, host
    host.close()


def sessions_in(app: Services) -> str:
    """An open session with 10 pins (working memory full) and an ended one; when it ended."""
    app.sessions.on_session_start("s-ended", "cli", project="api")
    end_time = str(app.sessions.on_session_end("s-ended").end_time)
    app.sessions.on_session_start("s-full", "cli", project="api")
    for i in range(10):
        app.sessions.add_pin(f"p{i}", "x", "s-full")
    return end_time


REFUSALS = [
    ("session", "show", "nope"),
    ("memory", "forget", "nope"),
    ("memory", "show", "nope"),
    ("pin", "add", "p10", "x", "--session-id", "s-full"),
    ("pin", "remove", "nope", "--session-id", "s-full"),
    ("pin", "add", "late", "x", "--session-id", "s-ended"),
    ("session", "event", "late", "--session-id", "s-ended"),
    ("session", "continue", "nope", "--session-id", "s-full"),
    ("session", "chain", "nope"),
]


def test_a_refusal_of_the_server_reads_as_the_same_refusal_in_a_local_home(
    home: Path, tmp_path: Path, server: tuple[str, str, ServiceHost]
) -> None:
    url, key, host = server
    with Services.open(load_config(home, {}), FixedClock(T0)) as app:
        local_end = sessions_in(app)
    with host.open("default") as app:
        assert sessions_in(app) == local_end  # the same clock: the same lines
    client = tmp_path / "client-home"
    env = {"CORTEX_SERVER": url, "CORTEX_API_KEY": key}
    for args in REFUSALS:
        local = cortex(home, *args, cwd=tmp_path)
        remote = cortex(client, *args, env=env, cwd=tmp_path)
        assert local.returncode == 1 and local.stderr.startswith("error: "), (args, local)
        assert (remote.returncode, remote.stderr) == (1, local.stderr), args
    shown = cortex(client, "pin", "add", "late", "x", "--session-id", "s-ended", env=env)
    assert shown.stderr == (
        f"error: session s-ended ended at {local_end}; start a new one with "
        "`cortex session start`\n"
    )
    for args in (
        ("task", "done", "nope"),
        ("task", "add", "t-1", "Draft"),
        ("task", "done", "nope"),
    ):
        local, remote = (
            cortex(home, *args, cwd=tmp_path),
            cortex(client, *args, env=env, cwd=tmp_path),
        )
        assert (remote.returncode, remote.stderr) == (local.returncode, local.stderr), args
    assert (remote.returncode, remote.stderr) == (
        1,
        "error: no task 'nope'; see `cortex task list`\n",
    )
    assert not (client / "spool" / "journal.jsonl").exists()  # refusals are never queued


def test_mcp_tools_in_client_mode_name_tools_not_endpoints(
    home: Path, tmp_path: Path, server: tuple[str, str, ServiceHost]
) -> None:
    url, key, host = server
    with Services.open(load_config(home, {}), FixedClock(T0)) as app:
        sessions_in(app)
    with host.open("default") as app:
        sessions_in(app)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("working_memory_pin", {"label": "p10", "content": "x", "session_id": "s-full"}),
        ("working_memory_unpin", {"label": "nope", "session_id": "s-full"}),
        ("working_memory_pin", {"label": "late", "content": "x", "session_id": "s-ended"}),
        ("session_chain", {"session_id": "nope"}),
        ("forget_memory", {"memory_id": "nope"}),
    ]
    local = mcp_errors(tmp_path, calls, home)
    remote = mcp_errors(tmp_path, calls, tmp_path / "client-home",
                        CORTEX_SERVER=url, CORTEX_API_KEY=key)  # fmt: skip
    assert remote == local
    assert (
        remote[0] == "working memory is full (10 pins); remove one first with working_memory_unpin"
    )
    assert remote[2].endswith("; start a new one with start_session")
    for text in remote:
        assert "/v1/" not in text and "refused the request" not in text, text


def test_a_service_error_body_carries_its_parts_and_the_document_declares_them(
    tmp_path: Path,
) -> None:
    from fastapi.testclient import TestClient

    from cortex.adapters.server.app import create_app
    from cortex.errors import from_parts

    host = ServiceHost(str(tmp_path / "server.db"), tmp_path / "data")
    with host.registry() as app:
        app.tenants.create_tenant("default")
        key = app.tenants.create_key("default", "write")[1]
    client = TestClient(create_app(host.url, host=host))
    headers = {"Authorization": f"Bearer {key}"}
    body = client.post("/v1/memories/add", json={"content": "x", "scope": "project"},
                       headers=headers).json()["error"]  # fmt: skip
    assert body == {
        "code": "validation_error",
        "message": 'scope project needs a project; pass "project"',
        "parts": ["scope project needs a project; pass ", {"param": "project", "metavar": "NAME"}],
    }
    missing = client.get("/v1/sessions/nope", headers=headers).json()["error"]
    assert missing["parts"] == ["no session 'nope'; see ", {"command": "session list"}]
    schema = client.post("/v1/memories/list", json={"limit": "5"}, headers=headers).json()
    assert "parts" not in schema["error"]  # the request's schema: no service message
    detail = client.get("/openapi.json").json()["components"]["schemas"]["ErrorDetail"]
    assert "parts" in detail["properties"] and detail["required"] == ["code", "message"]
    # a client takes nothing but text and references from the parts a server sent
    assert from_parts(["a\x1eb", {"param": "x\x1f"}]) == from_parts(["ab", {"param": "x"}])
    assert from_parts([{"nothing": 1}]) is None and from_parts("text") is None
    host.close()


def test_mcp_writes_queued_while_the_server_is_down_say_so_per_call(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A closed port: each write tool's result has a ``queued`` field with that call's writes
    (the process is long-lived: not the process's count) instead of passing guesses as data,
    and is the one report (no log line to the server's stderr beside it); a read still fails
    with one line."""
    caplog.set_level("WARNING", logger="cortex")
    url = f"http://127.0.0.1:{free_port()}"
    calls: list[tuple[str, dict[str, Any]]] = [
        ("start_session", {}),
        ("working_memory_pin", {"label": "rig", "content": "COM7", "session_id": "s1"}),
        ("add_memory", {"content": "The lab rig is on COM7"}),
        ("checkpoint_session", {"summary": "tuned", "session_id": "s1"}),
        ("cortex_session_continue", {"session_id": "s0", "into_session_id": "s1"}),
        ("working_memory_unpin", {"label": "rig", "session_id": "s1"}),
        ("forget_memory", {"memory_id": "m1"}),
        ("end_session", {"session_id": "s1"}),
        ("search_memories", {"query": "rig"}),
    ]
    results = mcp_results(tmp_path, calls, tmp_path / "client-home",
                          CORTEX_SERVER=url, CORTEX_API_KEY="ctx_aaaaaaaaaaaa_x")  # fmt: skip
    for waiting, (result, (name, _)) in enumerate(zip(results[:-1], calls, strict=False), 1):
        assert not result.is_error, (name, result.content)
        assert result.structured_content["queued"] == {
            "server": url, "writes": 1, "waiting": waiting, "deliver": "cortex sync"
        }, name  # fmt: skip
    pinned = results[1].structured_content
    assert pinned["count"] is None and pinned["pin"]["label"] == "rig"  # not a count of 0
    assert results[2].structured_content["memory"]["id"] == ""  # the server gives the id
    assert results[4].structured_content["summary"].startswith(f"queued for the server {url} ")
    assert results[-1].is_error and results[-1].content[0].text.startswith(f"server {url} ")
    assert len((tmp_path / "client-home" / "spool" / "journal.jsonl").read_text().splitlines()) == 8
    assert [r.getMessage() for r in caplog.records if r.name.startswith("cortex")] == []


def test_bridge_answers_say_which_writes_wait_in_the_journal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The OpenClaw bridge in a client home whose server is down: each answer whose request
    queued writes carries ``queued`` with that request's count (the one report: no log line
    beside it); a read-only one does not."""
    caplog.set_level("WARNING", logger="cortex")
    from cortex.adapters.openclaw.bridge import Bridge

    url = f"http://127.0.0.1:{free_port()}"
    env = {"CORTEX_SERVER": url, "CORTEX_API_KEY": "ctx_aaaaaaaaaaaa_x"}
    config = load_config(tmp_path / "client-home", env)
    requests: list[tuple[str, dict[str, Any], int]] = [  # (method, params, writes it queues)
        ("session_start", {}, 1),
        ("session_start", {"session_key": "oc-1"}, 0),
        ("before_prompt_build", {"session_key": "oc-1", "prompt": "tune the rig"}, 2),
        ("pin", {"session_key": "oc-1", "label": "rig", "content": "COM7"}, 1),
        ("after_tool_call", {"session_key": "oc-1", "tool_name": "bash"}, 1),
        ("before_compaction", {"session_key": "oc-1"}, 2),
        ("session_end", {"session_key": "oc-1"}, 1),
    ]
    with Services.open(config, FixedClock(T0)) as services:
        bridge = Bridge(services, project="radio")
        waiting = 0
        for method, params, writes in requests:
            response = bridge.handle({"id": 1, "method": method, "params": params})
            assert "result" in response, (method, response)
            waiting += writes
            expected = {"server": url, "writes": writes, "waiting": waiting,
                        "deliver": "cortex sync"} if writes else None  # fmt: skip
            assert response["result"].get("queued") == expected, method
            if method == "pin":
                assert response["result"]["count"] is None  # the server's to count
    assert [r.getMessage() for r in caplog.records if r.name.startswith("cortex")] == []


def test_a_snapshot_while_the_server_is_down_is_one_line_and_never_queued(
    tmp_path: Path,
) -> None:
    """A snapshot is written from the session's log on the server: offline it cannot be made,
    and it is not queued (a later sync would write one more than the command asked for)."""
    url = f"http://127.0.0.1:{free_port()}"
    client = tmp_path / "client-home"
    env = {"CORTEX_SERVER": url, "CORTEX_API_KEY": "ctx_aaaaaaaaaaaa_x"}
    assert cortex(client, "session", "start", "--session-id", "s1", env=env).returncode == 0
    line = (
        "error: the server is unreachable, and a snapshot is made from the session's log it "
        "holds; run `cortex session snapshot` again once it answers\n"
    )
    for args in (("--session-id", "s1"), (), ("--trigger", "reset", "--session-id", "s1")):
        result = cortex(client, "session", "snapshot", *args, env=env, cwd=tmp_path)
        assert (result.returncode, result.stdout, result.stderr) == (1, "", line), args
    journal = (client / "spool" / "journal.jsonl").read_text().splitlines()
    assert len(journal) == 1  # the start alone
    texts = mcp_errors(tmp_path, [("snapshot_session", {"session_id": "s1"})], client, **env)
    assert texts == [
        "the server is unreachable, and a snapshot is made from the session's log it holds; "
        "run snapshot_session again once it answers"
    ]


def test_without_a_session_id_offline_each_surface_says_to_pass_the_one_start_gave(
    tmp_path: Path,
) -> None:
    """Client mode, a closed port: the current session is found in the server's list, so a
    call without a session id names the session to pass, in its surface's terms."""
    url = f"http://127.0.0.1:{free_port()}"
    env = {"CORTEX_SERVER": url, "CORTEX_API_KEY": "ctx_aaaaaaaaaaaa_x"}
    client = tmp_path / "client-home"
    cut = f"server {url} is unreachable, so the current session cannot be found; pass "
    calls: list[tuple[str, dict[str, Any]]] = [
        ("working_memory_pin", {"label": "rig", "content": "COM7"}),
        ("working_memory_unpin", {"label": "rig"}),
        ("working_memory_view", {}),
        ("checkpoint_session", {"summary": "tuned"}),
        ("session_status", {}),
        ("end_session", {}),
    ]
    texts = mcp_errors(tmp_path, calls, client, **env)
    assert texts == [f"{cut}`session_id` (the id start_session gave)"] * len(calls)
    for args in (("pin", "add", "rig", "COM7"), ("session", "end")):
        result = cortex(client, *args, env=env, cwd=tmp_path)
        assert (result.returncode, result.stdout) == (1, ""), args
        assert result.stderr.endswith(
            f"error: {cut}--session-id ID (the id `cortex session start` gave)\n"
        ), args
    assert not (client / "spool" / "journal.jsonl").exists()  # nothing queued for no session
