"""The session-continuity protocol end to end over a real SQLite file and real task folders:
rituals, checkpoints (file, index, store, memory), verify, chaining, the orphan sweep,
retries, budgets, safety, delivery of session.complete and the bad inputs."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from cortex.clock import FixedClock
from cortex.config import Config
from cortex.core.models import ACTIVE, COMPLETE, INIT, SUSPENDED
from cortex.errors import ConflictError, NotFoundError, UnsafeIdError, ValidationError
from cortex.services.app import Services
from cortex.services.protocol.rituals import end_task, start_task

Open = Callable[..., Services]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    (path / ".agentic-governance").mkdir(parents=True)
    return path


@pytest.fixture
def open_services(
    make_config: Callable[..., Config], clock: FixedClock, tmp_path: Path
) -> Iterator[Open]:
    opened: list[Services] = []

    def open_(**overrides: object) -> Services:
        config = make_config(
            tasks_root=str(tmp_path / "tasks"),
            pipeline_state_path=str(tmp_path / "pipeline.json"),
            governance_config_path=str(tmp_path / "repo" / ".agentic-governance" / "config.json"),
            **overrides,
        )
        services = Services.open(config, clock)
        opened.append(services)
        return services

    yield open_
    for services in opened:
        services.close()


@pytest.fixture
def app(open_services: Open) -> Services:
    return open_services()


def smoke(repo: Path, code: str) -> None:
    config = {"smoke_command": [sys.executable, "-c", code]}
    (repo / ".agentic-governance" / "config.json").write_text(json.dumps(config))


def start(app: Services, repo: Path, slug: str = "feat-auth", **kw: Any) -> Any:
    return start_task(app.protocol, slug, project="proj", workdir=repo, **kw)


def test_a_task_from_init_to_end(app: Services, repo: Path, tmp_path: Path) -> None:
    app.protocol.init_task("feat-auth", "User auth")
    smoke(repo, "print('ok')")
    report = start(app, repo, goal="JWT sessions")
    session = app.sessions.get_session(report.session_id)
    assert session is not None and session.state == ACTIVE and session.task_slug == "feat-auth"
    assert report.healthy and report.health["returncode"] == 0
    assert report.lines == [
        f"[cortex] Session start: {report.session_id} resuming from none",
        "[cortex] Health check: pass",
        "[cortex] Session starting: JWT sessions",
    ]
    pipeline = json.loads((tmp_path / "pipeline.json").read_text())
    assert pipeline["active_tasks"][0]["current_stage"] == "build"  # pending: in every preamble

    made, warnings = app.protocol.create_checkpoint(
        "feat-auth",
        type="gate_transition",
        gate="G4",
        summary="tests written",
        state={
            "tests": {"passing": 3, "failing": 0, "pending": 1},
            "files_changed": [{"path": "src/auth.py", "action": "created"}],
        },
    )
    assert warnings == [] and made.gate == "G4"
    out = end_task(
        app.protocol,
        "feat-auth",
        outcome="success",
        completed="JWT issue and check",
        next_steps=["refresh tokens"],
        decisions=["Use JWT for session tokens"],
    )
    assert out["state"] == COMPLETE and out["status"] == "complete"
    assert out["event"]["payload"] == {
        "session_id": report.session_id,
        "task_slug": "feat-auth",
        "outcome": "success",
        "next_session_hint": "refresh tokens",
    }
    folder = app.protocol.folder("feat-auth")
    status = folder.status()
    assert (status["status"], status["current_gate"], status["last_session"]) == (
        "complete",
        "G4",
        report.session_id,
    )
    log = folder.read_log()
    assert "## Session 2026-02-16 (0s)\n\n**Goal**: JWT sessions" in log
    assert "**Completed**: JWT issue and check\n**Blocked**: none\n**Next**: refresh tokens" in log
    evidence = (folder.logs_dir / "sessions.log").read_text()
    assert f"[cortex] Checkpoint created: {made.checkpoint_id}" in evidence
    assert f"[cortex] Session end: {report.session_id} outcome=success" in evidence
    assert app.protocol.verify("feat-auth").to_dict()["ok"]
    found = [m.memory.content for m in app.memory.search("JWT session tokens", project="proj")]
    assert "Use JWT for session tokens" in found
    mirrored = [m.memory.content for m in app.memory.search("tests written", project="proj")]
    assert any(made.checkpoint_id in text for text in mirrored)
    events = [e.content for e in app.events.events(report.session_id)]
    assert any(e.startswith("session.complete {") for e in events)
    pipeline = json.loads((tmp_path / "pipeline.json").read_text())
    assert pipeline["active_tasks"][0]["current_stage"] == "done"


def test_the_next_session_continues_from_the_final_checkpoint(
    app: Services, repo: Path, clock: FixedClock
) -> None:
    app.protocol.init_task("feat-auth")
    first = start(app, repo)
    end_task(
        app.protocol,
        "feat-auth",
        outcome="partial",
        completed="half",
        next_steps=["wire refresh"],
        resume_instructions="Continue from G4 step 4",
    )
    clock.advance(hours=2)
    final = app.protocol.latest_checkpoint("feat-auth")
    assert final is not None and final.type == "session_end"
    second = start(app, repo)
    assert second.session_id != first.session_id
    assert second.resumed_from == final.checkpoint_id
    assert [p["ok"] for p in second.preconditions] == [True, True, True, True]
    assert "RESUME FROM" in second.text() and "Continue from G4 step 4" in second.text()
    assert "  next: wire refresh" in second.text()
    rows = app.protocol.session_rows("feat-auth")
    assert rows[0]["child_sessions"] == [second.session_id]
    assert rows[1]["parent_session"] == first.session_id
    assert (rows[0]["state"], rows[1]["state"]) == ("complete", "active")


def test_resume_from_a_gate(app: Services, repo: Path) -> None:
    app.protocol.init_task("feat-auth")
    start(app, repo)
    g2, _ = app.protocol.create_checkpoint(
        "feat-auth",
        type="gate_transition",
        gate="G2",
        state={"decisions": []},
        resume_instructions="plan",
    )
    app.protocol.create_checkpoint(
        "feat-auth", type="gate_transition", gate="G4", state={"decisions": []}
    )
    end_task(app.protocol, "feat-auth", outcome="partial", completed="x")
    again = start(app, repo, from_gate="g2")
    assert (again.gate, again.resumed_from) == ("G2", g2.checkpoint_id)
    assert app.protocol.folder("feat-auth").status()["current_gate"] == "G2"


def test_a_failing_health_check_stops_new_work(app: Services, repo: Path) -> None:
    app.protocol.init_task("feat-auth")
    smoke(repo, "import sys; print('2 failed'); sys.exit(3)")
    report = start(app, repo)
    assert not report.healthy and report.state == INIT
    assert report.health["detail"] == "exit code 3" and "2 failed" in report.health["output"]
    assert "[cortex] Health check: fail" in report.lines
    assert "STOP: the health check failed" in report.text()
    assert app.protocol.folder("feat-auth").status()["status"] == "blocked"
    smoke(repo, "pass")
    fixed = start(app, repo)  # the same session, now healthy
    assert (fixed.session_id, fixed.state) == (report.session_id, ACTIVE)


def test_a_smoke_command_that_hangs_is_stopped(open_services: Open, repo: Path) -> None:
    app = open_services(smoke_timeout_seconds=1)
    app.protocol.init_task("feat-auth")
    smoke(repo, "import time; time.sleep(60)")
    report = start(app, repo)
    assert not report.healthy and report.health["timed_out"]
    assert report.health["detail"] == "stopped after 1 s"


def test_a_smoke_command_that_leaves_a_helper_running_passes(
    open_services: Open, repo: Path
) -> None:
    """Judged by its own exit: the helper it starts in the background holds its output open."""
    app = open_services(smoke_timeout_seconds=3)
    app.protocol.init_task("feat-auth")
    helper = "import subprocess, sys; subprocess.Popen(['sleep', '30']); print('started')"
    smoke(repo, helper)
    started = time.monotonic()
    report = start(app, repo)
    assert report.healthy and not report.health["timed_out"]
    assert "started" in report.health["output"]
    assert time.monotonic() - started < 3


def test_two_sessions_on_one_task_is_a_conflict(app: Services, repo: Path) -> None:
    app.protocol.init_task("feat-auth")
    first = start(app, repo)
    before = app.protocol.folder("feat-auth").status_path.read_text()
    with pytest.raises(ConflictError, match=f"already has a live session {first.session_id}"):
        start(app, repo, session_id="other-session")
    assert app.protocol.folder("feat-auth").status_path.read_text() == before
    assert start(app, repo).session_id == first.session_id  # rerunning the ritual is fine


def test_a_corrupt_status_file_is_refused_and_kept(app: Services, repo: Path) -> None:
    app.protocol.init_task("feat-auth")
    path = app.protocol.folder("feat-auth").status_path
    path.write_text('{"task_slug": "feat-auth", ')
    with pytest.raises(ValidationError, match="task-status.json is not valid JSON"):
        start(app, repo)
    assert path.read_text() == '{"task_slug": "feat-auth", '
    assert app.store.task_sessions("feat-auth") == []


@pytest.mark.parametrize("slug", ["../escape", "a/b", "/etc", "..", "x..y"])
def test_slugs_that_escape_are_refused(app: Services, slug: str, tmp_path: Path) -> None:
    with pytest.raises(UnsafeIdError, match="invalid task slug"):
        app.protocol.init_task(slug)
    assert not (tmp_path / "escape").exists()


def test_a_checkpoint_that_fails_the_schema_writes_nothing(app: Services, repo: Path) -> None:
    app.protocol.init_task("feat-auth")
    start(app, repo)
    with pytest.raises(ValidationError, match="a decision checkpoint must carry"):
        app.protocol.create_checkpoint(
            "feat-auth", type="decision", state={"decisions": [{"decision": "JWT"}]}
        )
    with pytest.raises(ValidationError, match="state.tests must be"):
        app.protocol.create_checkpoint("feat-auth", state={"tests": {"passing": "many"}})
    assert app.protocol.list_checkpoints("feat-auth") == []
    assert app.protocol.folder("feat-auth").checkpoint_files() == {}


def test_verify_finds_tampering(app: Services, repo: Path) -> None:
    app.protocol.init_task("feat-auth")
    start(app, repo)
    a, _ = app.protocol.create_checkpoint("feat-auth", summary="one")
    b, _ = app.protocol.create_checkpoint("feat-auth", summary="two")
    folder = app.protocol.folder("feat-auth")
    assert app.protocol.verify("feat-auth").ok
    path = folder.checkpoint_path(a.checkpoint_id)
    path.write_text(path.read_text().replace('"one"', '"ONE"'))
    folder.checkpoint_path(b.checkpoint_id).unlink()
    (folder.checkpoints_dir / "ckpt-forged.json").write_text("{}")
    problems = app.protocol.verify("feat-auth").problems
    assert f"{a.checkpoint_id}: the file differs from the stored record (tampered)" in problems
    assert f"{a.checkpoint_id}: the file's SHA-256 differs from the index (tampered)" in problems
    assert f"{b.checkpoint_id}: no file {b.checkpoint_id}.json" in problems
    assert "ckpt-forged: not in the store (a file or index entry with no stored record)" in problems


def test_the_sweep_suspends_orphans_with_an_interrupted_checkpoint(
    app: Services, repo: Path, clock: FixedClock
) -> None:
    app.protocol.init_task("feat-auth")
    report = start(app, repo)
    app.protocol.create_checkpoint(
        "feat-auth", gate="G3", step=2, next_steps=["stub the API"], resume_instructions="G3 step 3"
    )
    clock.advance(seconds=200)
    assert app.protocol.sweep_orphans().suspended == 0  # its lease holds
    clock.advance(seconds=200)
    swept = app.protocol.sweep_orphans()
    assert swept.to_dict() == {
        "suspended": 1,
        "checkpoints": 1,
        "incidents": 1,
        "session_ids": [report.session_id],
    }
    state = app.sessions.get_session(report.session_id)
    assert state is not None and state.state == SUSPENDED and state.crash_recovered
    last = app.protocol.latest_checkpoint("feat-auth")
    assert last is not None and last.type == "interrupted"
    assert (last.gate, last.step, last.next_steps, last.resume_instructions) == (
        "G3",
        2,
        ("stub the API",),
        "G3 step 3",
    )
    incidents = (app.protocol.folder("feat-auth").logs_dir / "incidents.jsonl").read_text()
    assert json.loads(incidents)["checkpoint_id"] == last.checkpoint_id
    audit = app.store.list_audit()  # type: ignore[attr-defined]
    assert any(e.action == "session.interrupted" and e.target == report.session_id for e in audit)
    assert app.protocol.verify("feat-auth").ok
    with pytest.raises(ConflictError, match="cannot go from SUSPENDED to ACTIVE"):
        app.protocol.set_state(report.session_id, ACTIVE)
    assert app.protocol.set_state(report.session_id, "TERMINATED").state == "TERMINATED"


def test_retry_bookkeeping(app: Services) -> None:
    app.protocol.init_task("feat-auth")
    advice = [
        app.protocol.record_failure("feat-auth", "G4-3", "test_failure", "red") for _ in "abc"
    ]
    assert advice[2].fixer is not None and not advice[2].escalate
    app.protocol.record_success("feat-auth", "G4-3")
    escalated = app.protocol.record_failure("feat-auth", "deploy", "persistent", "token=abc123")
    assert escalated.escalate
    folder = app.protocol.folder("feat-auth")
    assert folder.status()["status"] == "blocked"
    assert folder.status()["retries"]["steps"]["G4-3"]["consecutive"] == 0
    assert "task.escalated" in (folder.logs_dir / "incidents.jsonl").read_text()


def test_budget_refresh_and_fork(open_services: Open, repo: Path) -> None:
    app = open_services(model_context_window=100_000)
    app.protocol.init_task("feat-auth")
    first = start(app, repo)
    app.protocol.create_checkpoint("feat-auth", summary="auth half done")
    out = app.protocol.budget("feat-auth", 50_000)
    assert out["actions"] == ["[cortex] Context refresh complete (tokens_flushed=50000)"]
    assert app.memory.search("context refresh feat-auth", project="proj")
    assert app.protocol.budget("feat-auth", 10_000)["actions"] == []
    forked = app.protocol.budget("feat-auth", 20_000)
    assert forked["budget"]["cap_reached"] and forked["actions"] == [
        "[cortex] Context budget reached"
    ]
    fork = forked["fork"]
    assert "auth half done" in fork["context"]
    old, new = (
        app.sessions.get_session(first.session_id),
        app.sessions.get_session(fork["session_id"]),
    )
    assert old is not None and old.state == SUSPENDED
    assert (
        new is not None and new.parent_session == first.session_id and new.task_slug == "feat-auth"
    )
    assert app.protocol.live_session("feat-auth") == new


def test_a_probe_that_reports_drift_degrades_to_sandbox(
    open_services: Open, repo: Path, tmp_path: Path
) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import json,sys; sys.stdin.read(); print(json.dumps("
        "{'refusal_rate_window': 0.38, 'baseline_refusal_rate': 0.08}))"
    )
    app = open_services(safety_probe_command=f"{sys.executable} {probe}")
    app.protocol.init_task("feat-auth")
    start(app, repo)
    made, _ = app.protocol.create_checkpoint("feat-auth", summary="x")
    assert made.state["safety_metrics"]["action"] == "degrade_to_sandbox"
    status = app.protocol.folder("feat-auth").status()
    assert status["sandbox"] and Path(status["sandbox_manifest"]).is_file()
    end_task(app.protocol, "feat-auth", outcome="partial", completed="x")
    assert start(app, repo).sandbox


class _Capture(BaseHTTPRequestHandler):
    bodies: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server name
        _Capture.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_session_complete_goes_to_the_command_and_the_webhook(
    open_services: Open, repo: Path, tmp_path: Path
) -> None:
    server = HTTPServer(("127.0.0.1", 0), _Capture)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sink = tmp_path / "sink.json"
    script = tmp_path / "sink.py"
    script.write_text(f"import sys; open({str(sink)!r}, 'w').write(sys.stdin.read())")
    try:
        app = open_services(
            session_complete_command=f"{sys.executable} {script}",
            session_complete_webhook=f"http://127.0.0.1:{server.server_port}/hook",
        )
        app.protocol.init_task("feat-auth")
        start(app, repo)
        out = end_task(app.protocol, "feat-auth", outcome="failed", completed="x")
    finally:
        server.shutdown()
    assert [d["ok"] for d in out["deliveries"]] == [True, True]
    assert json.loads(sink.read_text()) == out["event"]["payload"]
    assert json.loads(_Capture.bodies[-1]) == out["event"]["payload"]
    assert out["status"] == "blocked"


def test_a_failed_delivery_is_logged_and_kept_in_the_event_log(
    open_services: Open, repo: Path
) -> None:
    app = open_services(
        session_complete_webhook="http://127.0.0.1:9/none",
        session_complete_command="/no/such/command",
    )
    app.protocol.init_task("feat-auth")
    report = start(app, repo)
    out = end_task(app.protocol, "feat-auth", outcome="success", completed="x")
    assert [d["ok"] for d in out["deliveries"]] == [False, False]
    evidence = (app.protocol.folder("feat-auth").logs_dir / "sessions.log").read_text()
    assert "session.complete delivery to the webhook failed" in evidence
    events = [e.content for e in app.events.events(report.session_id)]
    assert any(e.startswith("session.complete {") for e in events)


def test_unknown_things_are_named(app: Services, repo: Path) -> None:
    with pytest.raises(NotFoundError, match="cortex task init feat-auth"):
        start(app, repo)
    app.protocol.init_task("feat-auth")
    with pytest.raises(ConflictError, match="has no open session"):
        app.protocol.create_checkpoint("feat-auth", summary="x")
    with pytest.raises(ValidationError, match="invalid session id ''"):
        app.protocol.create_checkpoint("feat-auth", summary="x", session_id="")
    with pytest.raises(ValidationError, match="invalid session id ''"):  # not "no session"
        start(app, repo, session_id="")
    assert app.sessions.open_sessions() == []
    with pytest.raises(ValidationError, match="unknown gate"):
        start(app, repo, from_gate="G12")
    with pytest.raises(NotFoundError, match="no checkpoint"):
        app.protocol.show_checkpoint("ckpt-none")


# A hook never loads the embedder the setting names (a model takes a second or more to load):
# with a name that cannot load, a hook that tried would fail and record no checkpoint.
@pytest.mark.parametrize("embedder", ["", "bert"])
def test_precompact_and_session_end_hooks_checkpoint_a_task_session(
    open_services: Open, repo: Path, tmp_path: Path, home: Path, embedder: str
) -> None:
    from cortex.adapters.hooks.dispatch import handle
    from cortex.adapters.hooks.hook import ServicesCache

    app = open_services()
    env = {
        "CORTEX_HOME": str(home),
        "CORTEX_NOW": "2026-02-16T09:00:00Z",
        "CORTEX_TASKS_ROOT": str(tmp_path / "tasks"),
        "CORTEX_PIPELINE_STATE_PATH": str(tmp_path / "pipeline.json"),
        "CORTEX_EMBEDDER": embedder,
    }

    def hook(name: str, **fields: Any) -> str:
        data = {"hook_event_name": name, "session_id": "s1", "cwd": str(repo), **fields}
        return handle(
            "claude-code", json.dumps(data).encode(), env, str(repo), ServicesCache(False)
        )

    hook("SessionStart", source="startup")
    harness = app.sessions.get_session("s1")
    assert harness is not None
    app.protocol.init_task("feat-auth")
    report = start_task(app.protocol, "feat-auth", project=harness.project, workdir=repo)
    assert report.session_id == "s1"  # the live harness session of the project takes the task
    hook("PreCompact", trigger="auto")
    hook("SessionEnd", reason="exit")
    kinds = [c.type for c in app.protocol.list_checkpoints("feat-auth")]
    assert kinds == ["pre_compaction", "session_end"]
    folder = app.protocol.folder("feat-auth")
    assert len(folder.checkpoint_files()) == 2 and app.protocol.verify("feat-auth").ok
    state = app.sessions.get_session("s1")
    assert state is not None and state.state == COMPLETE
    assert "Session end: s1 outcome=partial" in (folder.logs_dir / "sessions.log").read_text()


def test_openclaw_compaction_checkpoints_a_task_session(app: Services, repo: Path) -> None:
    from cortex.adapters.openclaw.bridge import Bridge

    bridge = Bridge(app, project="proj", workdir=str(repo))
    response = bridge.handle({"id": 1, "method": "session_start", "params": {"session_key": "k"}})
    sid = response["result"]["session_id"]
    app.protocol.init_task("feat-auth")
    assert start(app, repo, session_id=sid).session_id == sid
    compacted = bridge.handle(
        {"id": 2, "method": "before_compaction", "params": {"session_key": "k", "messages": []}}
    )["result"]
    files = app.protocol.folder("feat-auth").checkpoint_files()
    assert list(files) == [compacted["checkpoint_id"]]
    bridge.handle({"id": 3, "method": "session_end", "params": {"session_key": "k"}})
    kinds = [c.type for c in app.protocol.list_checkpoints("feat-auth")]
    assert kinds == ["pre_compaction", "session_end"]
    assert app.protocol.verify("feat-auth").ok


def test_an_in_progress_task_is_in_the_next_preamble(
    app: Services, repo: Path, clock: FixedClock
) -> None:
    app.protocol.init_task("feat-auth", "User auth")
    start(app, repo)
    end_task(app.protocol, "feat-auth", outcome="partial", completed="half")
    clock.advance(hours=1)
    restored = app.sessions.on_session_start(project="proj")
    assert restored.preamble is not None and "User auth [G0]" in restored.preamble


def test_the_preamble_shows_the_gate_a_checkpoint_moved_the_task_to(
    app: Services, repo: Path, clock: FixedClock
) -> None:
    app.protocol.init_task("feat-auth", "User auth")
    start(app, repo)  # pending as "User auth [G0]"
    app.protocol.create_checkpoint(
        "feat-auth", type="gate_transition", gate="G2", summary="to G2", state={"decisions": []}
    )
    clock.advance(hours=1)
    restored = app.sessions.on_session_start(project="proj")
    assert restored.preamble is not None and "- [feat-auth] User auth [G2]" in restored.preamble
    assert "[G0]" not in restored.preamble


def test_secrets_never_reach_the_task_files(app: Services, repo: Path) -> None:
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    app.protocol.init_task("feat-auth")
    start(app, repo, goal=f"use token {secret}")
    end_task(
        app.protocol,
        "feat-auth",
        outcome="partial",
        completed=f"pushed with {secret}",
        next_steps=[f"rotate {secret}"],
    )
    folder = app.protocol.folder("feat-auth")
    texts = [p.read_text() for p in folder.path.rglob("*") if p.is_file()]
    assert texts and not any(secret in text for text in texts)


def test_a_start_recovers_a_crashed_session_as_suspended(app: Services, clock: FixedClock) -> None:
    app.sessions.on_session_start("crashed", project="proj")
    clock.advance(seconds=301)
    app.sessions.on_session_start("next", project="proj")
    crashed = app.sessions.get_session("crashed")
    assert crashed is not None and (crashed.state, crashed.crash_recovered) == (SUSPENDED, True)
    kinds = [c.type for c in app.store.list_checkpoints("crashed")]
    assert kinds == ["interrupted"]
    audit = app.store.list_audit()  # type: ignore[attr-defined]
    assert [e.target for e in audit if e.action == "session.interrupted"] == ["crashed"]


def test_a_session_that_never_became_active_ends_suspended(app: Services, repo: Path) -> None:
    app.protocol.init_task("feat-auth")
    smoke(repo, "raise SystemExit(1)")
    report = start(app, repo)
    assert report.state == INIT
    ended = app.sessions.on_session_end(report.session_id)
    assert ended.state == SUSPENDED


def test_a_damaged_task_folder_never_costs_a_compaction_its_checkpoint(
    app: Services, repo: Path
) -> None:
    app.protocol.init_task("feat-auth")
    sid = start(app, repo).session_id
    index = app.protocol.folder("feat-auth").index_path
    index.write_text("{broken")
    run = app.compaction.run(sid, force=True)
    assert run.checkpoint is not None
    assert app.store.get_checkpoint(run.checkpoint.checkpoint_id) == run.checkpoint
    assert index.read_text() == "{broken"
    problems = app.protocol.verify("feat-auth").problems
    assert problems[0].endswith(
        "checkpoint-index.json is not valid JSON (Expecting property "
        "name enclosed in double quotes: line 1 column 2 (char 1)); fix "
        "it or move it aside (Cortex never overwrites a file it cannot "
        "read)"
    )
    assert problems[1:] == [
        f"{run.checkpoint.checkpoint_id}: not in checkpoint-index.json",
        f"{run.checkpoint.checkpoint_id}: no 'Checkpoint created' line in sessions.log",
    ]
    with pytest.raises(ValidationError, match="checkpoint-index.json is not valid JSON"):
        app.protocol.create_checkpoint("feat-auth", summary="strict")


def test_a_start_reads_only_the_end_of_a_long_log(app: Services, repo: Path) -> None:
    app.protocol.init_task("feat-auth")
    folder = app.protocol.folder("feat-auth")
    with folder.log_path.open("ab") as log:
        log.write(b"\xff old entry\n" * 3_000_000)  # 36 MB, not UTF-8 at the start
        log.write(b"## Session 2026-02-15 (1h)\n\n**Goal**: the latest\n")
    tail = folder.read_log()
    assert len(tail) <= 64 * 1024 and tail.endswith("**Goal**: the latest\n")
    assert start(app, repo).log_tail.endswith("**Goal**: the latest")


def test_a_credential_used_as_a_state_key_reaches_neither_file_nor_store(
    app: Services, repo: Path, home: Path
) -> None:
    slack = "xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx"
    app.protocol.init_task("feat-auth")
    start(app, repo)
    made, _ = app.protocol.create_checkpoint("feat-auth", state={slack: "keyval"})
    assert "keyval" in made.state.values() and slack not in json.dumps(made.to_dict())
    path = app.protocol.folder("feat-auth").checkpoint_path(made.checkpoint_id)
    assert slack not in path.read_text()
    app.close()
    assert slack.encode() not in (home / "brain.db").read_bytes()


def test_verify_reports_a_checkpoint_path_that_is_a_directory_and_goes_on(
    app: Services, repo: Path
) -> None:
    app.protocol.init_task("feat-auth")
    start(app, repo)
    a, _ = app.protocol.create_checkpoint("feat-auth", summary="one")
    b, _ = app.protocol.create_checkpoint("feat-auth", summary="two")
    folder = app.protocol.folder("feat-auth")
    folder.checkpoint_path(a.checkpoint_id).unlink()
    folder.checkpoint_path(a.checkpoint_id).mkdir()
    folder.checkpoint_path(b.checkpoint_id).unlink()
    (folder.checkpoints_dir / "ckpt-extra.json").write_text("{}")
    assert sorted(app.protocol.verify("feat-auth").problems) == sorted([
        f"{a.checkpoint_id}: {a.checkpoint_id}.json is a directory, not a file",
        f"{b.checkpoint_id}: no file {b.checkpoint_id}.json",
        "ckpt-extra: not in the store (a file or index entry with no stored record)",
        "ckpt-extra: not in checkpoint-index.json",
        "ckpt-extra: the file fails the checkpoint schema (missing key 'checkpoint_id')",
    ])  # fmt: skip
    assert app.protocol.verify("feat-auth", repair=True).ok


def test_a_task_log_replaced_by_a_link_is_never_written_through(tmp_path: Path) -> None:
    """A link planted where a task's log is (a ``tasks_root`` inside a repository others
    write) would send the task's text wherever it points: the append is refused, naming the
    link, and the file it points to is unchanged; the log's other files still append."""
    from cortex.errors import StorageError
    from cortex.services.protocol.folders import TaskFolder

    folder = TaskFolder(tmp_path / "tasks", "t1")
    assert folder.append_log("first entry")
    outside = tmp_path / "outside.txt"
    outside.write_text("mine\n")
    folder.log_path.unlink()
    folder.log_path.symlink_to(outside)
    with pytest.raises(StorageError, match="is a symbolic link.*remove the link"):
        folder.append_log("second entry")
    assert outside.read_text() == "mine\n"
    assert folder.evidence("2026-01-01T00:00:00Z", "still logged")
    folder.log_path.unlink()
    assert folder.append_log("third entry")  # the next entry starts the file again
    assert folder.read_log().strip() == "third entry"
