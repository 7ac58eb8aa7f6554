"""Client mode against the real team server: Claude Code hooks (real processes) capture into a
tenant on PostgreSQL over HTTP, the next session is restored from it, and turns spooled while
the server was down arrive once each after `cortex sync`."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")

from cortex.adapters.server.app import create_app  # noqa: E402
from cortex.services.hosting import ServiceHost  # noqa: E402
from test_hooks import child_env, run_hook  # noqa: E402

T1 = "2026-02-16T09:00:00Z"
T2 = "2026-02-16T15:00:00Z"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def running(host: ServiceHost, port: int) -> Iterator[str]:
    """The real server app on uvicorn, on a loopback port, in a thread of this process."""
    app = create_app(host.url, host=host, burst=10_000, rate_per_second=10_000)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(20)


@pytest.fixture
def host(pg_url: str, tmp_path: Path) -> Iterator[ServiceHost]:
    served = ServiceHost(pg_url, tmp_path / "server-data", pool_size=4)
    yield served
    served.close()


def tenant_key(host: ServiceHost, tenant: str) -> str:
    with host.registry() as app:
        app.tenants.create_tenant(tenant)
        return app.tenants.create_key(tenant, "write")[1]


def hook(home: Path, url: str, key: str, cwd: Path, now: str, **event: object) -> str:
    env = {"CORTEX_SERVER": url, "CORTEX_API_KEY": key, "CORTEX_SERVER_TIMEOUT_SECONDS": "3"}
    result = run_hook(home, {"cwd": str(cwd), **event}, env=env, cwd=cwd, now=now)
    assert result.returncode == 0
    return result.stdout.decode()


def test_hooks_capture_into_the_tenant_and_the_next_session_is_restored(
    host: ServiceHost, home: Path, tmp_path: Path
) -> None:
    project = tmp_path / "radio-control"
    project.mkdir()
    tenant = f"team-{time.time_ns()}"
    key = tenant_key(host, tenant)
    with running(host, free_port()) as url:
        hook(home, url, key, project, T1, hook_event_name="SessionStart", session_id="s1",
             source="startup")  # fmt: skip
        hook(home, url, key, project, T1, hook_event_name="UserPromptSubmit", session_id="s1",
             prompt="tune the ft991a cat control timeouts")  # fmt: skip
        hook(home, url, key, project, T1, hook_event_name="SessionEnd", session_id="s1",
             reason="exit")  # fmt: skip
        out = hook(home, url, key, project, T2, hook_event_name="SessionStart", session_id="s2",
                   source="startup")  # fmt: skip
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "SESSION CONTINUITY" in context and "ft991a" in context
    with host.open(tenant) as app:
        first = app.sessions.get_session("s1")
        assert first is not None and first.end_time is not None
        assert "ft991a" in first.hot_topics
    assert not (home / "brain.db").exists()  # nothing was captured locally


def test_turns_spooled_while_the_server_is_down_arrive_once_after_sync(
    host: ServiceHost, home: Path, tmp_path: Path
) -> None:
    tenant = f"team-{time.time_ns()}"
    key = tenant_key(host, tenant)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with running(host, port):
        hook(home, url, key, tmp_path, T1, hook_event_name="SessionStart", session_id="s1",
             source="startup")  # fmt: skip
    for n in range(3):  # the server is down: each turn is spooled, each hook exits 0
        hook(home, url, key, tmp_path, T1, hook_event_name="UserPromptSubmit", session_id="s1",
             prompt=f"offline turn number {n} about the antenna tuner")  # fmt: skip
    spooled = [json.loads(line) for line in (home / "spool/journal.jsonl").read_text().splitlines()]
    # The session's reopen (the server may have closed it meanwhile), then the three turns.
    assert [e["path"].rsplit("/", 1)[-1] for e in spooled] == ["start", "turns", "turns", "turns"]
    env = child_env(home, CORTEX_SERVER=url, CORTEX_API_KEY=key)
    with running(host, port):
        for _ in range(2):  # a second sync finds nothing left and sends nothing twice
            synced = subprocess.run(
                [sys.executable, "-m", "cortex.entry", "--json", "sync"],
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
            )
            assert synced.returncode == 0, synced.stderr
    assert json.loads(synced.stdout)["sent"] == 0
    with host.open(tenant) as app:
        state = app.sessions.get_session("s1")
        assert state is not None and "antenna" in state.hot_topics
        # Every spooled request id was applied: the server refuses to claim it again.
        for entry in spooled:
            assert app.store.claim_request(entry["body"]["request_id"], T2) is False


def run_client(
    home: Path, url: str, key: str, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``cortex ARGS`` in client mode (a real process), run in ``cwd``."""
    env = child_env(home, T1, CORTEX_SERVER=url, CORTEX_API_KEY=key)
    env["CORTEX_SERVER_TIMEOUT_SECONDS"] = "3"
    return subprocess.run(
        [sys.executable, "-m", "cortex.entry", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
    )


def cortex_json(home: Path, url: str, key: str, *args: str) -> object:
    """``cortex --json ARGS`` in client mode (a real process); its parsed output."""
    done = run_client(home, url, key, "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_memory_commands_in_client_mode_reach_the_tenant(
    host: ServiceHost, home: Path, tmp_path: Path
) -> None:
    tenant = f"team-{time.time_ns()}"
    key = tenant_key(host, tenant)
    port = free_port()
    with running(host, port) as url:
        keyed = ("--project", "api", "--upsert-key", "deploy-region")
        first = cortex_json(
            home, url, key, "memory", "add", "Deploys go to eu-west-1", *keyed, "--tags", "ops"
        )
        second = cortex_json(home, url, key, "memory", "add", "Deploys go to us-east-2", *keyed)
        assert isinstance(first, dict) and isinstance(second, dict)
        assert second["superseded_id"] == first["id"]
        found = cortex_json(
            home, url, key, "memory", "search", "deploys region", "--project", "api"
        )
        assert isinstance(found, list) and [hit["id"] for hit in found] == [second["id"]]
        listed = cortex_json(home, url, key, "memory", "list", "--project", "api", "--history")
        assert isinstance(listed, list) and {m["id"] for m in listed} == {first["id"], second["id"]}
        recalled = cortex_json(home, url, key, "memory", "recall", "deploy", "--project", "api")
        assert isinstance(recalled, dict)
        assert [m["id"] for m in recalled["memories"]] == [second["id"]]
        edited = cortex_json(home, url, key, "memory", "edit", second["id"], "--tags", "ops,prod")
        assert isinstance(edited, dict) and edited["tags"] == ["ops", "prod"]
        shown = cortex_json(home, url, key, "memory", "show", first["id"])
        assert isinstance(shown, dict) and shown["superseded_by"] == second["id"]
        cortex_json(home, url, key, "memory", "forget", second["id"])
        after = cortex_json(home, url, key, "memory", "search", "deploys", "--project", "api")
        assert after == []
    with host.open(tenant) as app:  # the tenant holds them; nothing was written locally
        assert app.memory.get(second["id"]).deleted_at is not None
        assert app.memory.get(first["id"]).superseded_by == second["id"]
    assert not (home / "brain.db").exists()


def test_doctor_of_a_client_home_asks_the_server_not_a_local_database(
    host: ServiceHost, home: Path, tmp_path: Path
) -> None:
    key = tenant_key(host, f"team-{time.time_ns()}")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = child_env(home, T1, CORTEX_SERVER=url, CORTEX_API_KEY=key, HOME=str(tmp_path))
    env["CORTEX_SERVER_TIMEOUT_SECONDS"] = "3"

    def doctor() -> dict[str, Any]:
        command = [sys.executable, "-m", "cortex.entry", "--json", "doctor"]
        done = subprocess.run(
            command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60
        )
        assert done.returncode == 1, done.stderr  # no hooks are installed under tmp_path
        return json.loads(done.stdout)  # type: ignore[no-any-return]

    with running(host, port):
        hook(home, url, key, tmp_path, T1, hook_event_name="SessionStart", session_id="s1",
             source="startup")  # fmt: skip
        report = doctor()
    assert report["database"] == {"server": url, "waiting": 0, "held": 0, "reachable": True}
    assert [s["session_id"] for s in report["sessions"]] == ["s1"]
    assert not any("database" in p for p in report["problems"]), report["problems"]
    hook(home, url, key, tmp_path, T1, hook_event_name="UserPromptSubmit", session_id="s1",
         prompt="offline while the doctor looks")  # fmt: skip
    report = doctor()
    assert report["database"] == {"server": url, "waiting": 2, "held": 0, "reachable": False}
    assert report["problems"][-1].startswith(f"server {url} is unavailable (")
    assert not (home / "brain.db").exists()


def cortex_here(home: Path, url: str, key: str, cwd: Path, *args: str) -> tuple[int, str]:
    """``cortex ARGS`` in client mode, run in ``cwd``: its exit code and its output."""
    done = run_client(home, url, key, *args, cwd=cwd)
    return done.returncode, done.stdout + done.stderr


def test_commands_without_session_id_act_on_the_servers_current_session(
    host: ServiceHost, home: Path, tmp_path: Path
) -> None:
    tenant = f"team-{time.time_ns()}"
    key = tenant_key(host, tenant)
    port = free_port()
    with running(host, port) as url:
        other = cortex_json(home, url, key, "session", "start", "--project", "web")
        assert isinstance(other, dict)
        cortex_json(home, url, key, "session", "end", "--session-id", other["session_id"])
        started = cortex_json(home, url, key, "session", "start", "--project", "api")
        assert isinstance(started, dict)
        sid = started["session_id"]
        for args in (
            ("session", "record", "--text", "wired the antenna tuner"),
            ("pin", "add", "deploy", "make deploy"),
            ("session", "checkpoint", "--summary", "tuner wired"),
        ):
            code, out = cortex_here(home, url, key, tmp_path, *args)
            assert code == 0, out
        code, shown = cortex_here(home, url, key, tmp_path, "pin", "list")
        assert (code, shown) == (0, "- deploy (confidence 1.00): make deploy\n")
        code, ended = cortex_here(home, url, key, tmp_path, "session", "end")
        assert code == 0 and ended.startswith(f"session {sid} captured: 1 pins"), ended
    code, down = cortex_here(home, url, key, tmp_path, "session", "record", "--text", "x")
    assert code == 1 and down.count("\n") == 1 and "pass --session-id" in down, down
    with host.open(tenant) as app:
        state = app.sessions.get_session(sid)
        assert state is not None and state.end_time is not None
        assert "antenna" in state.hot_topics


def test_a_memory_added_while_the_server_is_down_arrives_after_sync(
    host: ServiceHost, home: Path
) -> None:
    tenant = f"team-{time.time_ns()}"
    key = tenant_key(host, tenant)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    offline = cortex_json(
        home, url, key, "memory", "add", "The lab rig is on COM7", "--tags", "lab"
    )
    assert isinstance(offline, dict) and offline["id"] == ""  # waiting in the journal
    with running(host, port):
        synced = cortex_json(home, url, key, "sync")
        assert isinstance(synced, dict) and synced["sent"] == 1
        found = cortex_json(home, url, key, "memory", "search", "lab rig")
    assert isinstance(found, list) and [hit["content"] for hit in found] == [
        "The lab rig is on COM7"
    ]


def test_the_mcp_server_in_client_mode_keeps_memories_in_the_tenant(
    host: ServiceHost, home: Path, tmp_path: Path
) -> None:
    anyio = pytest.importorskip("anyio")
    from mcp import Client, StdioServerParameters

    tenant = f"team-{time.time_ns()}"
    key = tenant_key(host, tenant)
    outcomes: dict[str, object] = {}
    with running(host, free_port()) as url:
        env = child_env(home, T1, CORTEX_SERVER=url, CORTEX_API_KEY=key)
        env["CLAUDE_PROJECT_DIR"] = str(tmp_path)
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "cortex.entry", "mcp"], env=env, cwd=str(tmp_path)
        )

        async def body(client: Client) -> None:
            async def call(tool: str, args: dict[str, object]) -> dict[str, object]:
                result = await client.call_tool(tool, args)
                text = [getattr(b, "text", b) for b in result.content]
                assert not result.is_error, (tool, text)
                assert result.structured_content is not None
                return result.structured_content

            sid = (await call("start_session", {}))["session_id"]
            first = await call(
                "add_memory", {"content": "CI runs on port 8443", "upsert_key": "ci"}
            )
            second = await call("add_memory", {"content": "CI moved to 9443", "upsert_key": "ci"})
            outcomes["superseded"] = second["superseded_id"] == first["memory"]["id"]  # type: ignore[index]
            found = await call("search_memories", {"query": "CI port"})
            outcomes["found"] = [r["memory"]["content"] for r in found["results"]]  # type: ignore[attr-defined]
            await call("working_memory_pin", {"label": "step", "content": "2 of 3"})
            checkpoint = await call("checkpoint_session", {"summary": "moved CI"})
            context = await call("get_context", {"query": "CI"})
            outcomes["context"] = context["text"]
            outcomes["checkpoint"] = context["latest_checkpoint_id"] == checkpoint["checkpoint_id"]
            outcomes["sid"] = sid

        async def main() -> None:
            async with Client(params) as client:
                await body(client)

        anyio.run(main)
    assert outcomes["superseded"] is True
    assert outcomes["found"] == ["CI moved to 9443"]
    assert outcomes["context"] == "- [long_term] CI moved to 9443"
    assert outcomes["checkpoint"] is True
    with host.open(tenant) as app:
        live = app.memory.list(all_projects=True)
        assert [m.content for m in live] == ["CI moved to 9443"]
        assert app.sessions.get_session(str(outcomes["sid"])) is not None
    assert not (home / "brain.db").exists()


def test_compaction_in_client_mode_reinjects_the_servers_checkpoint(
    host: ServiceHost, home: Path, tmp_path: Path
) -> None:
    tenant = f"team-{time.time_ns()}"
    key = tenant_key(host, tenant)
    with running(host, free_port()) as url:
        hook(home, url, key, tmp_path, T1, hook_event_name="SessionStart", session_id="s1",
             source="startup")  # fmt: skip
        cortex_json(
            home, url, key, "pin", "add", "goal", "ship the CAT driver", "--session-id", "s1"
        )
        hook(home, url, key, tmp_path, T1, hook_event_name="PreCompact", session_id="s1",
             trigger="auto", custom_instructions="")  # fmt: skip
        hook(home, url, key, tmp_path, T1, hook_event_name="PostCompact", session_id="s1",
             trigger="auto", compact_summary="Wired CAT; tests next.")  # fmt: skip
        out = hook(home, url, key, tmp_path, T1, hook_event_name="SessionStart", session_id="s1",
                   source="compact")  # fmt: skip
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("[CORTEX CHECKPOINT ckpt-") and "pre_compaction" in context
    assert "PINS:\n- goal: ship the CAT driver" in context
    assert "LAST COMPACTION SUMMARY" in context and "Wired CAT; tests next." in context
    with host.open(tenant) as app:
        [event] = app.compaction.compactions("s1")
        assert event.completed_at is not None and event.checkpoint_id
        assert [c.type for c in app.compaction.checkpoints("s1")] == ["pre_compaction"]
        summaries = [e.content for e in app.events.events("s1") if e.kind == "summary"]
        assert summaries == ["Wired CAT; tests next."]
        assert [s.source_trigger for s in app.events.snapshots("s1")] == ["auto_compaction"]
    assert not (home / "brain.db").exists()


def test_the_openclaw_bridge_in_client_mode_captures_into_the_tenant(
    host: ServiceHost, home: Path
) -> None:
    tenant = f"team-{time.time_ns()}"
    key = tenant_key(host, tenant)
    with running(host, free_port()) as url:
        env = child_env(home, T1, CORTEX_SERVER=url, CORTEX_API_KEY=key)
        proc = subprocess.Popen(
            [sys.executable, "-m", "cortex.entry", "bridge", "--project", "radio"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )

        def ask(method: str, **params: object) -> dict[str, object]:
            assert proc.stdin is not None and proc.stdout is not None
            request = {"id": method, "method": method, "params": params}
            proc.stdin.write(json.dumps(request).encode() + b"\n")
            proc.stdin.flush()
            answer = json.loads(proc.stdout.readline())
            assert "error" not in answer, answer
            return dict(answer["result"])

        sid = str(ask("session_start", session_key="k")["session_id"])
        ask("pin", session_key="k", label="step", content="3 of 5")
        ask("before_prompt_build", session_key="k", prompt="tune the ft991a cat timeouts")
        ask("agent_end", session_key="k", messages=[
            {"role": "assistant", "content": "Raised the CAT timeout to 5 s."}])  # fmt: skip
        compacted = ask("before_compaction", session_key="k", messages=[])
        after = ask("before_prompt_build", session_key="k", with_pins=False)
        ended = ask("session_end", session_key="k")
        ask("shutdown")
        assert proc.wait(timeout=20) == 0
    assert compacted["checkpoint_id"] and after["prepend_context"] == after["checkpoint"]
    assert "PINS:\n- step: 3 of 5" in str(after["checkpoint"])
    assert ended["ended"] is True
    with host.open(tenant) as app:
        state = app.sessions.get_session(sid)
        assert state is not None and state.end_time is not None and "ft991a" in state.hot_topics
        log = [(e.role, e.content) for e in app.events.events(sid)]
        assert ("user", "tune the ft991a cat timeouts") in log
        assert ("assistant", "Raised the CAT timeout to 5 s.") in log
        assert [c.checkpoint_id for c in app.compaction.checkpoints(sid)] == [
            compacted["checkpoint_id"]
        ]
    assert not (home / "brain.db").exists()


def _database_down(url: str, down: bool) -> None:
    """Refuse (or allow again) new connections to ``url``'s database and, going down, cut
    the open ones: what a PostgreSQL restart or failover looks like to the server."""
    from pg_helpers import admin

    name = url.rsplit("/", 1)[1]
    admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {"false" if down else "true"}')
    if down:
        admin(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{name}' AND pid <> pg_backend_pid()"
        )


def test_a_database_outage_mid_load_loses_and_duplicates_nothing(
    fresh_database: str, home: Path, tmp_path: Path
) -> None:
    served = ServiceHost(fresh_database, tmp_path / "server-data", pool_size=2)
    tenant = f"team-{time.time_ns()}"
    key = tenant_key(served, tenant)
    facts = [f"fact number {n} about the antenna tuner" for n in range(9)]
    answers = []
    try:
        with running(served, free_port()) as url:
            for n, fact in enumerate(facts):
                if n in (3, 6):  # down for facts 3-5, back for 6-8
                    _database_down(fresh_database, down=n == 3)
                answers.append(cortex_json(home, url, key, "memory", "add", fact))
            synced = cortex_json(home, url, key, "sync")
        assert isinstance(synced, dict) and synced["left"] == 0 and synced["rejected"] == 0
        waited = [a["content"] for a in answers if isinstance(a, dict) and a["id"] == ""]
        assert waited, "the outage sent nothing to the journal: it did not happen"
        with served.open(tenant) as app:
            stored = sorted(m.content for m in app.memory.list(limit=100))
        assert stored == sorted(facts)  # every fact once: none lost, none twice
    finally:
        _database_down(fresh_database, down=False)
        served.close()
