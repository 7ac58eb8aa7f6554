"""A task session no harness runs (`cortex task start` from a shell) goes quiet past its lease,
the worker's sweep suspends it, and the user's next commands carry on: real CLI processes,
the clock moved with CORTEX_NOW, the real worker pass and a real SessionStart hook."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_helpers import cortex, ok
from test_hooks import run_hook

T0, T1, T2 = "2026-02-16T09:00:00Z", "2026-02-16T09:30:00Z", "2026-02-16T09:31:00Z"
T3, T4, T5 = "2026-02-16T10:00:00Z", "2026-02-16T10:01:00Z", "2026-02-16T10:02:00Z"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    return path


def sessions(home: Path, repo: Path, now: str) -> list[dict[str, object]]:
    listed = json.loads(ok(cortex(home, "--json", "session", "list", "--task", "t1",
                                  cwd=repo, now=now)))  # fmt: skip
    assert isinstance(listed, list)
    return listed


def sweep(home: Path, repo: Path, now: str) -> None:
    """One pass of the worker's orphan sweep, as a timer runs it."""
    report = cortex(home, "--json", "worker", "--once", "--job", "orphan_sweep", cwd=repo, now=now)
    (job,) = json.loads(ok(report))
    assert (job["status"], job["detail"]["suspended"]) == ("ok", 1), report.stdout


def test_a_task_session_suspended_by_the_sweep_is_continued_not_lost(
    home: Path, repo: Path
) -> None:
    ok(cortex(home, "task", "init", "t1", cwd=repo, now=T0))
    first = json.loads(ok(cortex(home, "--json", "task", "start", "t1", "--goal", "auth",
                                 cwd=repo, now=T0)))["session_id"]  # fmt: skip
    ok(cortex(home, "checkpoint", "create", "--task", "t1", "--type", "gate_transition",
              "--gate", "G2", "--summary", "planned", "--state-json", '{"decisions": []}',
              cwd=repo, now=T0))  # fmt: skip
    sweep(home, repo, T1)  # 30 minutes of quiet: the lease (5 minutes) lapsed
    assert [s["state"] for s in sessions(home, repo, T1)] == ["suspended"]

    # The next checkpoint continues the task in a new session, a child of the suspended one.
    made = cortex(home, "--json", "checkpoint", "create", "--task", "t1", "--summary", "coded",
                  cwd=repo, now=T2)  # fmt: skip
    (second,) = [s["session_id"] for s in sessions(home, repo, T2) if s["state"] == "active"]
    assert made.returncode == 0 and json.loads(made.stdout)["session_id"] == second
    assert json.loads(made.stdout)["gate"] == "G2"
    assert made.stderr == (
        f"cortex: session {first} of task t1 was suspended when its lease lapsed; "
        f"continuing in session {second}, its child\n"
    )
    sweep(home, repo, T3)

    # So does the shutdown ritual: it ends a third session, the second's child.
    ended = json.loads(ok(cortex(home, "--json", "task", "end", "t1", "--outcome", "partial",
                                 "--next-step", "refresh tokens", cwd=repo, now=T4)))  # fmt: skip
    rows = sessions(home, repo, T4)
    assert [(s["state"], s["parent_session"]) for s in rows] == [
        ("suspended", None),
        ("suspended", first),
        ("complete", second),
    ]
    assert ended["session_id"] == rows[2]["session_id"] and ended["status"] == "in-progress"
    folder = home / "tasks" / "t1"
    assert (folder / "work" / "implementation-log.md").read_text().count("## Session") == 1
    status = json.loads((folder / "json" / "task-status.json").read_text())
    assert (status["current_gate"], status["last_session"]) == ("G2", rows[2]["session_id"])
    assert ok(cortex(home, "checkpoint", "verify", "--task", "t1", cwd=repo, now=T4)) == (
        "ok: 5 checkpoints agree\n"
    )

    # The next harness session is told about the task as pending work, not as a crash.
    hook = run_hook(home, {"hook_event_name": "SessionStart", "session_id": "next-1",
                           "cwd": str(repo), "source": "startup"}, cwd=repo, now=T5)  # fmt: skip
    assert hook.returncode == 0, hook.stderr
    preamble = json.loads(hook.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "PENDING TASKS:\n- [t1] t1 [G2]" in preamble
    assert "RECOVERED AFTER CRASH" not in preamble

    # And the next start resumes from where the last session ended, as its child.
    started = json.loads(ok(cortex(home, "--json", "task", "start", "t1", cwd=repo, now=T5)))
    assert started["resumed_from"] == ended["checkpoint"]["checkpoint_id"]
    assert sessions(home, repo, T5)[-1]["parent_session"] == rows[2]["session_id"]


def test_a_start_that_failed_its_health_check_is_not_continued(home: Path, repo: Path) -> None:
    governance = repo / ".agentic-governance"
    governance.mkdir()
    (governance / "config.json").write_text(json.dumps({"smoke_command": "false"}))
    ok(cortex(home, "task", "init", "t1", cwd=repo, now=T0))
    assert cortex(home, "task", "start", "t1", cwd=repo, now=T0).returncode == 1
    sweep(home, repo, T1)
    made = cortex(home, "checkpoint", "create", "--task", "t1", "--summary", "x", cwd=repo, now=T2)
    assert made.returncode == 1
    assert made.stderr == (
        "error: task t1 has no open session; start one with `cortex task start t1` "
        "(or name one with --session-id)\n"
    )
