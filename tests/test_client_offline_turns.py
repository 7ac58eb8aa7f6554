"""A client home's offline writes replay as online: the real server (stopped while the laptop
is away), the real Claude Code hooks and command line in client mode, the worker's orphan
sweep on the server's database past the session's lease, the server restarted and `cortex
sync`. Offline turns land in the session crash recovery closed meanwhile, in order, and
nothing is rejected; a session that ended normally (here, or from another home) is not
revived by a late tool or reply, only by a prompt or a start; and starts and ends typed
offline leave the session as the same commands would online."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
from cortex.clock import FixedClock  # noqa: E402
from cortex.core.models import COMPLETE, SUSPENDED  # noqa: E402
from cortex.services.hosting import ServiceHost  # noqa: E402
from test_client_server import free_port, running  # noqa: E402
from test_hooks import child_env, run_hook  # noqa: E402

T1 = "2026-02-16T09:00:00Z"
AWAY = "2026-02-16T09:40:00Z"
"""Forty minutes offline: the session's lease (five) lapsed on the server."""
BACK = "2026-02-16T10:00:00Z"
WORDS = ("antenna", "balun", "coaxial", "dipole")


class Server:
    """A team server over one database that can be stopped and started again, each time on
    its own clock, and its worker run on that database as an operator runs it."""

    def __init__(self, db: str, home: Path) -> None:
        self.db, self.home, self.port = db, home, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.host = self._host(T1)
        # A SQLite server serves tenant default; one PostgreSQL database serves the whole run.
        self.tenant = "default" if db.endswith(".db") else f"team-{time.time_ns()}"
        with self.host.registry() as app:
            app.tenants.create_tenant(self.tenant)
            self.key = app.tenants.create_key(self.tenant, "write")[1]

    def _host(self, now: str) -> ServiceHost:
        return ServiceHost(self.db, self.home / "server", clock=FixedClock(now))

    @contextmanager
    def up(self, now: str) -> Iterator[None]:
        self.host.close()
        self.host = self._host(now)
        with running(self.host, self.port):
            yield

    def sweep(self, now: str) -> dict[str, object]:
        """One pass of the orphan sweep (`cortex worker --db`), the server stopped."""
        done = subprocess.run(
            [sys.executable, "-m", "cortex.entry", "--home", str(self.home), "--now", now,
             "--json", "worker", "--db", self.db, "--tenant", self.tenant, "--once", "--job",
             "orphan_sweep"],
            capture_output=True, text=True, env=child_env(self.home, now), timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        (job,) = json.loads(done.stdout)
        assert job["status"] == "ok", job
        return dict(job["detail"])


@pytest.fixture(params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    if request.param == "postgres":
        db = str(request.getfixturevalue("pg_url"))
    else:
        db = str(tmp_path / "server.db")
    served = Server(db, tmp_path / "operator")
    yield served
    served.host.close()


def hook(home: Path, server: Server, cwd: Path, now: str, **event: object) -> None:
    env = {"CORTEX_SERVER": server.url, "CORTEX_API_KEY": server.key,
           "CORTEX_SERVER_TIMEOUT_SECONDS": "3"}  # fmt: skip
    result = run_hook(home, {"cwd": str(cwd), **event}, env=env, cwd=cwd, now=now)
    assert result.returncode == 0 and not result.stderr, result.stderr


def begin(home: Path, server: Server, cwd: Path, prompt: str) -> None:
    """Session s1 started and its first prompt recorded, the server up."""
    with server.up(T1):
        hook(home, server, cwd, T1, hook_event_name="SessionStart", session_id="s1",
             source="startup")  # fmt: skip
        hook(home, server, cwd, T1, hook_event_name="UserPromptSubmit", session_id="s1",
             prompt=prompt)  # fmt: skip


def sync(home: Path, server: Server) -> dict[str, object]:
    env = child_env(home, BACK, CORTEX_SERVER=server.url, CORTEX_API_KEY=server.key)
    done = subprocess.run(
        [sys.executable, "-m", "cortex.entry", "--json", "sync"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def cli(home: Path, server: Server, now: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``cortex ARGS`` in client mode of ``server`` (a real process)."""
    env = child_env(home, now, CORTEX_SERVER=server.url, CORTEX_API_KEY=server.key,
                    CORTEX_SERVER_TIMEOUT_SECONDS="3")  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "cortex.entry", *args],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


def journal(home: Path) -> list[dict[str, object]]:
    path = home / "spool/journal.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_offline_turns_reach_the_session_the_server_crash_recovered(
    server: Server, home: Path, tmp_path: Path
) -> None:
    begin(home, server, tmp_path, "wire the radio shack")
    # The laptop is offline: a tool in flight, then prompts and replies, each spooled.
    hook(home, server, tmp_path, AWAY, hook_event_name="PostToolUse", session_id="s1",
         tool_name="Bash", tool_input={"command": "make antenna"})  # fmt: skip
    for word in WORDS:
        hook(home, server, tmp_path, AWAY, hook_event_name="UserPromptSubmit", session_id="s1",
             prompt=f"offline turn about the {word} {word}")  # fmt: skip
        hook(home, server, tmp_path, AWAY, hook_event_name="Stop", session_id="s1",
             last_assistant_message=f"done with the {word}")  # fmt: skip
    spooled = journal(home)
    turns = [e for e in spooled if str(e["path"]).endswith("/turns")]
    assert len(turns) == 1 + 2 * len(WORDS)
    # The tool's reopen continues only a session crash recovery closed (``keep_ended``);
    # the first prompt's reopens whatever the server holds, as a prompt does online.
    starts = [e["body"] for e in spooled if str(e["path"]).endswith("/start")]
    assert [b.get("keep_ended") for b in starts if isinstance(b, dict)] == [True, None]
    # Meanwhile the server's worker finds the session's lease lapsed and recovers it.
    assert server.sweep(AWAY)["suspended"] == 1
    with server.host.open(server.tenant) as app:
        recovered = app.sessions.get_session("s1")
        assert recovered is not None and recovered.state == SUSPENDED

    with server.up(BACK):
        report = sync(home, server)
    assert report["rejected"] == 0 and report["left"] == 0, report
    assert not (home / "spool/rejected.jsonl").exists()
    with server.host.open(server.tenant) as app:
        state = app.sessions.get_session("s1")
        assert state is not None and state.is_open  # reopened, as a resume reopens it
        assert set(WORDS) <= set(state.hot_topics)
        # The crash stays recorded: the sweep's interrupted checkpoint.
        assert [c.type for c in app.compaction.checkpoints("s1")] == ["interrupted"]
        # Every spooled write was applied, once.
        for entry in spooled:
            body = entry["body"]
            assert isinstance(body, dict)
            assert app.store.claim_request(body["request_id"], BACK) is False


def test_a_late_event_after_a_normal_end_stays_refused_offline(
    server: Server, home: Path, tmp_path: Path
) -> None:
    begin(home, server, tmp_path, "tune the balun")
    # Offline: the host ends the session, then delivers a last async reply after the end.
    hook(home, server, tmp_path, AWAY, hook_event_name="SessionEnd", session_id="s1",
         reason="exit")  # fmt: skip
    hook(home, server, tmp_path, AWAY, hook_event_name="Stop", session_id="s1",
         last_assistant_message="a late reply about the dipole")  # fmt: skip
    assert [str(e["path"]).rsplit("/", 1)[-1] for e in journal(home)] == ["end"]
    with server.up(BACK):
        sync(home, server)
        # Online too: the session ended normally, so a late event does not revive it.
        hook(home, server, tmp_path, BACK, hook_event_name="PostToolUse", session_id="s1",
             tool_name="Bash", tool_input={"command": "make coaxial"})  # fmt: skip
    with server.host.open(server.tenant) as app:
        state = app.sessions.get_session("s1")
        assert state is not None and state.state == COMPLETE and not state.is_open
        assert "dipole" not in state.hot_topics and "coaxial" not in state.hot_topics


def test_a_session_ended_from_another_home_is_not_revived_by_an_offline_tool_or_reply(
    server: Server, home: Path, tmp_path: Path
) -> None:
    begin(home, server, tmp_path, "tune the balun")  # this home keeps its hook state for s1
    with server.up(T1):  # ended online from another home, while this one still has it open
        cli(tmp_path / "other-home", server, T1, "session", "end", "--session-id", "s1")
    with server.host.open(server.tenant) as app:
        ended = app.sessions.get_session("s1")
        assert ended is not None and ended.ended_normally
    # Offline here: a tool and a reply. Online the hooks would find s1 ended and drop both.
    hook(home, server, tmp_path, AWAY, hook_event_name="PostToolUse", session_id="s1",
         tool_name="Bash", tool_input={"command": "make coaxial"})  # fmt: skip
    hook(home, server, tmp_path, AWAY, hook_event_name="Stop", session_id="s1",
         last_assistant_message="done with the dipole")  # fmt: skip
    spooled = journal(home)
    assert [str(e["path"]).rsplit("/", 1)[-1] for e in spooled] == ["start", "turns", "turns"]
    with server.up(BACK):
        report = sync(home, server)
    # The reopen is refused as a write to an ended session is (409), and so are the writes
    # behind it: kept in spool/rejected.jsonl with the server's message, nothing revived.
    assert (report["sent"], report["left"], report["rejected"]) == (0, 0, 3), report
    rejected = [json.loads(x) for x in (home / "spool/rejected.jsonl").read_text().splitlines()]
    assert [r["entry"]["path"] for r in rejected] == [e["path"] for e in spooled]
    assert all(f"session s1 ended at {ended.end_time}" in r["error"] for r in rejected)
    with server.host.open(server.tenant) as app:
        state = app.sessions.get_session("s1")
        assert state is not None and (state.state, state.end_time) == (COMPLETE, ended.end_time)
        assert "coaxial" not in state.hot_topics and "dipole" not in state.hot_topics
        for entry in spooled:  # refused: none of their request ids was used up
            body = entry["body"]
            assert isinstance(body, dict)
            assert app.store.claim_request(body["request_id"], BACK) is True
    # A prompt is the conversation going on: online it reopens s1, and offline it does too.
    hook(home, server, tmp_path, AWAY, hook_event_name="UserPromptSubmit", session_id="s1",
         prompt="back to the antenna")  # fmt: skip
    with server.up(BACK):
        report = sync(home, server)
    assert (report["left"], report["rejected"]) == (0, 0), report
    with server.host.open(server.tenant) as app:
        state = app.sessions.get_session("s1")
        assert state is not None and state.is_open and "antenna" in state.hot_topics


def test_starts_and_ends_typed_offline_leave_the_session_as_online(
    server: Server, home: Path, tmp_path: Path
) -> None:
    """start, end, start, start: offline (s1, each queued, then synced) and online (s2)."""
    steps = [("start",), ("end",), ("start",), ("start",)]
    for step in steps:
        done = cli(home, server, AWAY, "session", *step, "--session-id", "s1")
        # each write is queued and says so, the repeated start too (it is not the server's)
        assert done.stdout.startswith(f"queued for the server {server.url} "), (step, done)
        assert done.stderr == "", (step, done)
    assert [str(e["path"]).rsplit("/", 1)[-1] for e in journal(home)] == [
        "start", "end", "start", "start"
    ]  # fmt: skip
    with server.up(BACK):
        report = sync(home, server)
        for step in steps:
            cli(tmp_path / "online-home", server, BACK, "session", *step, "--session-id", "s2")
    assert (report["sent"], report["left"], report["rejected"]) == (4, 0, 0), report
    with server.host.open(server.tenant) as app:
        offline, online = app.sessions.get_session("s1"), app.sessions.get_session("s2")
        assert offline is not None and online is not None
        assert offline.is_open and online.is_open
        assert (offline.state, offline.end_time) == (online.state, online.end_time)


def test_an_explicit_start_offline_reopens_what_a_hooks_reopen_would_not(
    server: Server, home: Path, tmp_path: Path
) -> None:
    """s1 ended from another home; offline here, a tool journals the hook's reopen (which
    leaves an ended session ended), then `cortex session start --session-id s1` reopens it,
    as it would online, and the reply after it lands."""
    begin(home, server, tmp_path, "tune the balun")
    with server.up(T1):
        cli(tmp_path / "other-home", server, T1, "session", "end", "--session-id", "s1")
    hook(home, server, tmp_path, AWAY, hook_event_name="PostToolUse", session_id="s1",
         tool_name="Bash", tool_input={"command": "make coaxial"})  # fmt: skip
    cli(home, server, AWAY, "session", "start", "--session-id", "s1")
    hook(home, server, tmp_path, AWAY, hook_event_name="Stop", session_id="s1",
         last_assistant_message="done with the dipole")  # fmt: skip
    assert [str(e["path"]).rsplit("/", 1)[-1] for e in journal(home)] == [
        "start", "turns", "start", "turns"
    ]  # fmt: skip
    with server.up(BACK):
        report = sync(home, server)
    assert (report["sent"], report["rejected"]) == (2, 2), report  # the tool's, as online
    with server.host.open(server.tenant) as app:
        state = app.sessions.get_session("s1")
        assert state is not None and state.is_open
        assert "dipole" in state.hot_topics and "coaxial" not in state.hot_topics
