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
    assert len(spooled) == 3
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
