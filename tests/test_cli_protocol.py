"""The protocol's commands through the real CLI: exact output, exit codes and error lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_helpers import T0

LATER = "2026-02-16T09:10:00Z"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    return path


def run(home: Path, repo: Path, *args: str, now: str = T0) -> subprocess.CompletedProcess[str]:
    """``cortex ARGS`` in ``repo`` with a test home and a fixed clock."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    env.update(CORTEX_HOME=str(home), CORTEX_NOW=now)
    return subprocess.run(
        [sys.executable, "-m", "cortex.entry", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=repo,
        timeout=60,
    )


def test_a_task_through_the_cli(home: Path, repo: Path) -> None:
    assert run(home, repo, "task", "init", "feat-a").stdout == (
        f"task feat-a created {home / 'tasks' / 'feat-a'}\n"
    )
    started = run(home, repo, "--json", "task", "start", "feat-a", "--project", "p", "--goal", "g")
    assert started.returncode == 0, started.stderr
    report = json.loads(started.stdout)
    sid = report["session_id"]
    assert report["state"] == "ACTIVE" and report["log_lines"][1] == "[cortex] Health check: pass"
    made = run(
        home,
        repo,
        "checkpoint",
        "create",
        "--task",
        "feat-a",
        "--type",
        "file_change",
        "--summary",
        "auth module",
        "--state-json",
        '{"files_changed": [{"path": "auth.py", "action": "created"}]}',
    )
    assert made.returncode == 0, made.stderr
    cid = made.stdout.split()[1]
    assert made.stdout == f"checkpoint {cid} (file_change, gate G0)\n"
    assert run(home, repo, "checkpoint", "verify", "--task", "feat-a").stdout == (
        "ok: 1 checkpoints agree\n"
    )
    shown = json.loads(run(home, repo, "checkpoint", "show", cid).stdout)
    assert shown["state"]["files_changed"] == [{"path": "auth.py", "action": "created"}]
    ended = run(home, repo, "task", "end", "feat-a", "--outcome", "success", "--completed", "done")
    assert ended.stdout.splitlines()[0] == f"[cortex] Session end: {sid} outcome=success"
    listed = run(home, repo, "session", "list", "--task", "feat-a").stdout
    assert listed.startswith(f"{sid}  2026-02-16T09:00  complete   gate=G0  checkpoints=2")
    timeline = run(home, repo, "session", "timeline", "--task", "feat-a").stdout.splitlines()
    assert [line.split()[1] for line in timeline] == [
        "session.start",
        "checkpoint.file_change",
        "checkpoint.session_end",
        "session.complete",
    ]
    moved = run(home, repo, "session", "state", sid, "ACTIVE")
    assert (moved.returncode, moved.stderr) == (
        1,
        f"error: session {sid} cannot go from COMPLETE to ACTIVE; allowed from COMPLETE: "
        "SUSPENDED\n",
    )


@pytest.mark.parametrize("slug", ["../x", "a/b", "..", "/tmp/x", ".hidden", "_x"])
def test_a_slug_that_escapes_is_one_error_line(home: Path, repo: Path, slug: str) -> None:
    result = run(home, repo, "task", "init", slug)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == (
        f"error: invalid task slug {slug!r}: use 1-80 lowercase letters, digits, '.', '_' or "
        "'-', starting with a letter or digit (no '/', no '..'), e.g. feat-user-auth\n"
    )


def test_corrupt_status_and_missing_task(home: Path, repo: Path) -> None:
    missing = run(home, repo, "task", "start", "feat-a")
    assert missing.returncode == 1
    assert missing.stderr == (
        f"error: no task folder {home / 'tasks' / 'feat-a'}; create it with "
        "`cortex task init feat-a`\n"
    )
    run(home, repo, "task", "init", "feat-a")
    status = home / "tasks" / "feat-a" / "json" / "task-status.json"
    status.write_text("not json")
    result = run(home, repo, "task", "status", "feat-a")
    assert result.returncode == 1 and result.stderr.startswith(f"error: {status} is not valid JSON")
    assert len(result.stderr.splitlines()) == 1 and status.read_text() == "not json"


def test_a_checkpoint_of_a_task_never_made_points_at_task_init(home: Path, repo: Path) -> None:
    missing = run(home, repo, "checkpoint", "create", "--task", "nope", "--summary", "s")
    assert (missing.returncode, missing.stdout, missing.stderr) == (
        1,
        "",
        f"error: no task folder {home / 'tasks' / 'nope'}; "
        "create it with `cortex task init nope`\n",
    )
    run(home, repo, "task", "init", "nope")
    idle = run(home, repo, "checkpoint", "create", "--task", "nope", "--summary", "s")
    assert (
        idle.stderr
        == "error: task nope has no open session; start one with `cortex task start nope` "
        "(or name one with --session-id)\n"
    )


def test_a_hanging_smoke_command_fails_the_start(home: Path, repo: Path) -> None:
    (repo / ".agentic-governance").mkdir()
    (repo / ".agentic-governance" / "config.json").write_text(
        json.dumps({"commands": {"smoke": f"{sys.executable} -c 'import time; time.sleep(60)'"}})
    )
    run(home, repo, "task", "init", "feat-a")
    result = run(home, repo, "--set", "smoke_timeout_seconds=1", "task", "start", "feat-a")
    assert result.returncode == 1
    assert result.stderr == (
        "error: health check failed (stopped after 1 s); fix it, then rerun "
        "`cortex task start feat-a`\n"
    )
    assert "[cortex] Health check: fail" in result.stdout


def test_two_sessions_on_one_task(home: Path, repo: Path) -> None:
    run(home, repo, "task", "init", "feat-a")
    first = json.loads(run(home, repo, "--json", "task", "start", "feat-a").stdout)["session_id"]
    second = run(home, repo, "task", "start", "feat-a", "--session-id", "other")
    assert second.returncode == 1
    assert second.stderr.startswith(f"error: task feat-a already has a live session {first}")
    swept = run(home, repo, "task", "sweep", now=LATER)
    assert swept.stdout == "suspended 1 orphaned session(s)\n"
    status = json.loads(run(home, repo, "--json", "task", "status", "feat-a", now=LATER).stdout)
    assert status["live_session"] is None
    assert status["latest_checkpoint"]["type"] == "interrupted"


def test_bad_checkpoint_input(home: Path, repo: Path) -> None:
    run(home, repo, "task", "init", "feat-a")
    run(home, repo, "task", "start", "feat-a")
    bad_json = run(home, repo, "checkpoint", "create", "--task", "feat-a", "--state-json", "[1]")
    assert bad_json.returncode == 2
    assert bad_json.stderr.startswith("error: --state-json must be a JSON object")
    schema = run(
        home,
        repo,
        "checkpoint",
        "create",
        "--task",
        "feat-a",
        "--type",
        "decision",
        "--state-json",
        '{"decisions": [{"decision": "x"}]}',
    )
    assert schema.returncode == 1
    assert schema.stderr == (
        "error: checkpoint fails the checkpoint schema: a decision checkpoint must carry "
        "state.decisions, each with a rationale and alternatives_considered\n"
    )
    assert run(home, repo, "checkpoint", "list", "--task", "feat-a").stdout == "no checkpoints\n"


def test_tampering_exits_1(home: Path, repo: Path) -> None:
    run(home, repo, "task", "init", "feat-a")
    run(home, repo, "task", "start", "feat-a")
    made = run(home, repo, "checkpoint", "create", "--task", "feat-a", "--summary", "s")
    cid = made.stdout.split()[1]
    path = home / "tasks" / "feat-a" / "json" / "checkpoints" / f"{cid}.json"
    path.write_text(path.read_text().replace('"s"', '"forged"'))
    result = run(home, repo, "checkpoint", "verify", "--task", "feat-a")
    assert result.returncode == 1
    assert result.stdout == (
        f"MISMATCH:\n  {cid}: the file differs from the stored record (tampered)\n"
        f"  {cid}: the file's SHA-256 differs from the index (tampered)\n"
        "the store is authoritative: `cortex checkpoint verify --task feat-a --repair` rewrites "
        "the folder from it (what it replaces is moved aside)\n"
    )


def test_retries_through_the_cli(home: Path, repo: Path) -> None:
    run(home, repo, "task", "init", "feat-a")
    for _ in range(2):
        run(home, repo, "task", "fail", "feat-a", "--step", "G4-1", "--type", "test_failure")
    third = run(home, repo, "task", "fail", "feat-a", "--step", "G4-1", "--type", "test_failure")
    assert third.stdout == (
        "step G4-1: attempt 3, 3 in a row; diagnose, fix, then retry the step\n"
        "fixer: 3 consecutive failures on step G4-1; only step G4-1, read-only, 10 minutes\n"
    )


def test_the_documented_example_with_gaps_longer_than_the_lease(home: Path, repo: Path) -> None:
    """protocol.md's first example, each command 6 minutes (past lease_seconds) after the last:
    the task's own session is found again, nothing is recorded as a crash."""
    at = iter(f"2026-02-16T{9 + m // 60:02d}:{m % 60:02d}:00Z" for m in range(0, 60, 6))
    assert run(home, repo, "task", "init", "feat-user-auth", now=next(at)).returncode == 0
    started = run(home, repo, "--json", "task", "start", "feat-user-auth", "--goal", "JWT",
                  now=next(at))  # fmt: skip
    sid = json.loads(started.stdout)["session_id"]
    gate = run(home, repo, "checkpoint", "create", "--task", "feat-user-auth", "--type",
               "gate_transition", "--gate", "G4", "--summary", "unit tests written",
               "--state-json", '{"tests": {"passing": 12, "failing": 0, "pending": 2}, '
               '"decisions": []}', now=next(at))  # fmt: skip
    assert gate.returncode == 0, gate.stderr
    ended = run(home, repo, "task", "end", "feat-user-auth", "--outcome", "partial",
                "--completed", "JWT issue/verify", "--next-step", "refresh tokens",
                now=next(at))  # fmt: skip
    assert ended.stdout.splitlines()[0] == f"[cortex] Session end: {sid} outcome=partial"
    again = run(home, repo, "--json", "task", "start", "feat-user-auth", now=next(at))
    assert json.loads(again.stdout)["resumed_from"] is not None
    listed = run(home, repo, "session", "list", "--task", "feat-user-auth", now=next(at)).stdout
    assert listed.splitlines()[0].startswith(f"{sid}  2026-02-16T09:06  complete ")
    assert not (home / "tasks" / "feat-user-auth" / "logs" / "incidents.jsonl").exists()
    verify = run(home, repo, "checkpoint", "verify", "--task", "feat-user-auth", now=next(at))
    assert verify.stdout == "ok: 2 checkpoints agree\n"


def test_concurrent_starts_of_one_task_converge_on_one_session(home: Path, repo: Path) -> None:
    assert run(home, repo, "task", "init", "feat-a").returncode == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    env.update(CORTEX_HOME=str(home), CORTEX_NOW=T0)
    starts = [
        subprocess.Popen(
            [sys.executable, "-m", "cortex.entry", "--json", "task", "start", "feat-a"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=repo,
        )  # fmt: skip
        for _ in range(8)
    ]
    outcomes = [(p.communicate(timeout=60), p.returncode) for p in starts]
    assert [(rc, err) for (_, err), rc in outcomes] == [(0, "")] * 8
    reports = [json.loads(out) for (out, _), _ in outcomes]
    assert len({r["session_id"] for r in reports}) == 1
    assert {r["state"] for r in reports} == {"ACTIVE"}


def test_a_status_file_with_wrong_types_is_one_error_line(home: Path, repo: Path) -> None:
    run(home, repo, "task", "init", "t1")
    path = home / "tasks" / "t1" / "json" / "task-status.json"
    for status, problem in [
        ({"current_gate": "G99"}, "current_gate 'G99' is not a gate (G0..G10)"),
        ({"budget": [1]}, "budget is a list, not dict"),
        ({"retries": "x"}, "retries is a str, not dict"),
        ({"status": "done"}, "status 'done' is not one of pending, in-progress, complete, blocked"),
    ]:
        path.write_text(json.dumps({"task_slug": "t1", **status}))
        for args in (
            ("task", "start", "t1"),
            ("task", "budget", "t1", "--tokens", "10"),
            ("checkpoint", "create", "--task", "t1"),
            ("task", "end", "t1", "--outcome", "partial"),
        ):
            result = run(home, repo, *args)
            assert (result.returncode, result.stderr) == (
                1,
                f"error: {path}: {problem}; fix it or move it aside\n",
            )


def test_from_gate_needs_a_checkpoint_at_that_gate(home: Path, repo: Path) -> None:
    run(home, repo, "task", "init", "t1")
    run(home, repo, "task", "start", "t1")
    made = run(home, repo, "checkpoint", "create", "--task", "t1", "--type", "gate_transition",
               "--gate", "G4", "--summary", "impl",
               "--state-json", '{"decisions": []}')  # fmt: skip
    assert made.returncode == 0, made.stderr
    run(home, repo, "task", "end", "t1", "--outcome", "partial")
    typo = run(home, repo, "task", "start", "t1", "--from-gate", "G9")
    assert (typo.returncode, typo.stderr) == (
        1,
        "error: task t1 has no checkpoint at gate G9 (checkpoints at: G4); give one of those "
        "or start without --from-gate\n",
    )
    status = json.loads(run(home, repo, "--json", "task", "status", "t1").stdout)
    assert (status["status"]["current_gate"], status["live_session"]) == ("G4", None)
    assert run(home, repo, "task", "start", "t1", "--from-gate", "G4").returncode == 0
