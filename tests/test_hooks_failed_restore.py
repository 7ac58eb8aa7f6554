"""A start whose restoration fails: real hook processes (in-process and served by the hook
server) and the real CLI still tell the agent what crash recovery did, and that nothing was
inherited because the restoration failed; the cause goes to the log."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from cortex.services.sessions import restore
from test_hooks import (
    LATER,
    child_env,
    context_of,
    cortex_cli,
    event,
    log_lines,
    make_repo,
    manager,
    run_hook,
    stop_and_wait,
    wait_for_server,
)

KEY = "AKIAIOSFODNN7EXAMPLE"
FAILED = "[SESSION CONTINUITY — nothing inherited: restoration failed, starting cold]"
CAUSE = (
    "restoration failed, starting cold: not an ISO 8601 time: '2026-2 [REDACTED]'; "
    "use a form like 2026-02-18T09:00:00Z"
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "radio")


def lived_in(home: Path, repo: Path, env: dict[str, str]) -> None:
    """An ended session ``s0`` whose end no restore can read (a credential in it), then
    ``s1``, which crashed: still open when the next start comes, two days later."""
    run_hook(home, event("SessionStart", "s0", repo, source="startup"), env=env)
    cortex_cli(home, "pin", "add", "deploy", "make deploy", "--critical", "--session-id", "s0")
    run_hook(home, event("UserPromptSubmit", "s0", repo, prompt="fix the flaky auth test"), env=env)
    run_hook(home, event("SessionEnd", "s0", repo), env=env)
    run_hook(home, event("SessionStart", "s1", repo, source="startup"), env=env)
    run_hook(home, event("UserPromptSubmit", "s1", repo, prompt="tune the cat control"), env=env)
    unreadable(home, "s0")


def unreadable(home: Path, session: str) -> None:
    conn = sqlite3.connect(home / "brain.db")
    with conn:
        conn.execute(
            "UPDATE session_states SET end_time = ? WHERE id = ?", [f"2026-2 {KEY}", session]
        )
    conn.close()


@pytest.mark.parametrize("server", ["0", "1"])
def test_a_start_whose_restore_fails_still_says_what_crash_recovery_did(
    home: Path, repo: Path, server: str
) -> None:
    env = {"CORTEX_HOOK_SERVER": server, "CORTEX_HOOK_SERVER_IDLE": "30"}
    lived_in(home, repo, env)
    pid = wait_for_server(home) if server == "1" else None
    try:
        start = run_hook(
            home, event("SessionStart", "s2", repo, source="startup"), now=LATER, env=env
        )
        assert start.stderr == b""
        assert context_of(start, "SessionStart") == f"{FAILED}\nRECOVERED AFTER CRASH: s1"
        # The prompt after it makes no second pass: the start said its piece once.
        prompt = event("UserPromptSubmit", "s2", repo, prompt="and the flaky auth test")
        assert run_hook(home, prompt, now=LATER, env=env).stdout == b""
    finally:
        if pid is not None:
            stop_and_wait(home, pid)
    assert [line for line in log_lines(home) if "restoration" in line][-1].endswith(
        f"engine: {CAUSE}"
    )
    assert KEY not in (home / "logs" / "hooks.log").read_text()
    store = manager(home).store
    s1, s2 = store.get_session("s1"), store.get_session("s2")
    assert s1 is not None and s1.crash_recovered and s1.end_time is not None
    assert s2 is not None and s2.is_open and s2.working_memory == ()


def test_a_failed_restore_with_nothing_recovered_says_only_that(home: Path, repo: Path) -> None:
    env = {"CORTEX_HOOK_SERVER": "0"}
    run_hook(home, event("SessionStart", "s0", repo, source="startup"), env=env)
    run_hook(home, event("SessionEnd", "s0", repo), env=env)
    unreadable(home, "s0")
    start = run_hook(home, event("SessionStart", "s1", repo, source="startup"), now=LATER)
    assert context_of(start, "SessionStart") == FAILED


def test_cortex_session_start_prints_it_and_the_cause_on_stderr(home: Path, repo: Path) -> None:
    lived_in(home, repo, {"CORTEX_HOOK_SERVER": "0"})
    project = manager(home).store.get_session("s1")
    assert project is not None and project.project
    result = subprocess.run(
        [sys.executable, "-m", "cortex.entry", "session", "start", "--project", project.project],
        capture_output=True,
        text=True,
        env=child_env(home, LATER),
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{FAILED}\nRECOVERED AFTER CRASH: s1\n"
    assert CAUSE in result.stderr and KEY not in result.stderr


def test_a_restore_past_its_time_budget_is_said_too(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions = manager(home)
    sessions.on_session_start("s0", project="p")
    sessions.on_session_end("s0")
    monkeypatch.setattr(restore, "RESTORE_BUDGET_SECONDS", -1.0)  # any restore passes it
    restored = sessions.on_session_start("s1", project="p")
    assert restored.preamble == (
        "[SESSION CONTINUITY — nothing inherited: restoration took longer than its time "
        "budget, starting cold]"
    )
