"""``cortex hook HOST``: real hook processes with JSON on stdin, for every event and host."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import git_helpers
from cortex.adapters.hooks import client as hook_client
from cortex.adapters.hooks.server import server_pid, socket_path
from cortex.adapters.hooks.state import prune_session_states
from cortex.adapters.hooks.wire import (
    CLIENT_TIMEOUT_SECONDS,
    SHORT_TIMEOUT_SECONDS,
    client_timeout,
    request,
)
from cortex.clock import FixedClock
from cortex.config import load_config
from cortex.services.compaction import CompactionService
from cortex.services.project import project_identity
from cortex.services.sessions.manager import SessionPersistenceManager

T0 = "2026-02-16T09:00:00Z"
LATER = "2026-02-18T09:00:00Z"


def child_env(home: Path, now: str = T0, **extra: str) -> dict[str, str]:
    """A process's environment as a host starts it: ours without Cortex's or Claude's vars."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CORTEX_", "CLAUDE_"))}
    env.update({"CORTEX_HOME": str(home), "CORTEX_NOW": now, **extra})
    return env


def run_hook(
    home: Path,
    payload: dict[str, Any] | None = None,
    *,
    raw: bytes | None = None,
    host: str = "claude-code",
    now: str = T0,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[bytes]:
    """One hook process, as a host runs it (the hook server off unless ``env`` turns it on)."""
    full = child_env(home, now, **{"CORTEX_HOOK_SERVER": "0", **(env or {})})
    data = raw if raw is not None else json.dumps(payload).encode()
    argv = [*args] if args and args[0] == "-c" else [*args, "-m", "cortex.entry", "hook", host]
    return subprocess.run(
        [sys.executable, *argv],
        input=data,
        capture_output=True,
        env=full,
        cwd=cwd,
        timeout=60,
    )


ENTRIES = {
    "console script": ["-m", "cortex.entry", "hook", "claude-code"],
    "hook client": [
        *("-S", "-I", "-X", "frozen_modules=on"),
        *(hook_client.__file__, "hook", "claude-code"),
    ],
}
"""The two ways a host runs a hook: ``cortex hook`` and the hook client ``cortex install``
writes."""


def hook_process(
    home: Path | None,
    payload: dict[str, Any],
    *,
    entry: str = "console script",
    options: tuple[str, ...] = (),
    prefix: tuple[str, ...] = (),
    now: str = T0,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """One hook process run the ``entry`` way (``options`` before ``hook``, the whole command
    after ``prefix``), the hook server off unless ``env`` turns it on; with ``home`` None,
    ``CORTEX_HOME`` only if ``env`` sets it."""
    full = child_env(home or Path("."), now, CORTEX_HOOK_SERVER="0")
    if home is None:
        del full["CORTEX_HOME"]
    full.update(env or {})
    command = ENTRIES[entry]
    at = command.index("hook")
    return subprocess.run(
        [*prefix, sys.executable, *command[:at], *options, *command[at:]],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=full,
        cwd=cwd,
        timeout=60,
    )


def context_of(result: subprocess.CompletedProcess[bytes], event: str) -> str:
    """The additionalContext of a Claude-shaped answer, checking the shape is exactly that."""
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert list(answer) == ["hookSpecificOutput"]
    assert list(answer["hookSpecificOutput"]) == ["hookEventName", "additionalContext"]
    assert answer["hookSpecificOutput"]["hookEventName"] == event
    text = answer["hookSpecificOutput"]["additionalContext"]
    assert isinstance(text, str) and 0 < len(text) < 10_000
    return text


def cortex_cli(home: Path, *args: str, now: str = T0) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "cortex.entry", *args],
        capture_output=True,
        text=True,
        env=child_env(home, now),
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def manager(home: Path) -> SessionPersistenceManager:
    return SessionPersistenceManager.open(load_config(home, {}))


def make_repo(path: Path, remote: str = "git@github.com:lbf/radio.git") -> Path:
    return git_helpers.make_repo(path, remote)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "radio")


def event(name: str, session: str, cwd: Path, **fields: Any) -> dict[str, Any]:
    return {
        "session_id": session,
        "transcript_path": f"/tmp/{session}.jsonl",
        "cwd": str(cwd),
        "hook_event_name": name,
        **fields,
    }


# -- one whole session, across processes ----------------------------------------------------------
def test_a_crashed_session_is_restored_two_days_later(home: Path, repo: Path) -> None:
    start = run_hook(home, event("SessionStart", "s1", repo, source="startup"))
    assert (start.returncode, start.stdout, start.stderr) == (0, b"", b"")
    cortex_cli(
        home,
        "pin",
        "add",
        "cat control",
        "CAT over USB at 38400 baud",
        "--critical",
        "--session-id",
        "s1",
    )
    cortex_cli(home, "task", "add", "task-7", "Wire CAT control", "--stage", "build")
    prompt = run_hook(home, event("UserPromptSubmit", "s1", repo, prompt="wire the ft991a cat"))
    tool = run_hook(
        home,
        event(
            "PostToolUse",
            "s1",
            repo,
            tool_name="Edit",
            tool_input={"file_path": str(repo / "src" / "cat_control.py"), "old_string": "x"},
            tool_response={"success": True},
        ),
    )
    stop = run_hook(home, event("Stop", "s1", repo, last_assistant_message="CAT wired."))
    for result in (prompt, tool, stop):
        assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    # The agent is killed here: no SessionEnd. Two days later a new session starts.
    later = run_hook(home, event("SessionStart", "s2", repo, source="startup"), now=LATER)
    text = context_of(later, "SessionStart")
    assert text.startswith(
        "[SESSION CONTINUITY — inherited from 1 prior session(s)]\nRECOVERED AFTER CRASH: s1\n\n"
        "PENDING TASKS:\n- [task-7] Wire CAT control (last stage: build, 2d ago)"
    )
    assert "WORKING MEMORY RESTORED: 1 pins inherited" in text
    assert text.endswith(
        "WORKING MEMORY PINS:\n- [CRITICAL] cat control [inherited from s1 @ 2026-02-16T09:00Z]: "
        "CAT over USB at 38400 baud"
    )
    store = manager(home).store
    s1, s2 = store.get_session("s1"), store.get_session("s2")
    assert s1 is not None and s2 is not None
    assert s1.crash_recovered and s1.end_time is not None
    assert s1.project == s2.project == project_identity(str(repo)).id
    assert {"ft991a", "cat_control"} <= set(s1.hot_topics)
    assert "radio" in s1.active_projects and not any(":" in p for p in s1.active_projects)
    assert s2.channel == "claude-code" and s2.previous_session_id == "s1"


@pytest.mark.parametrize(("server", "wrapper"), [("0", "sh -c"), ("1", "sh -c"), ("0", "script")])
def test_a_hook_records_its_harness_and_recovery_sees_it_gone(
    home: Path, repo: Path, tmp_path: Path, server: str, wrapper: str
) -> None:
    # A "harness" that runs the hook through a shell (which cannot exec it), or through a
    # wrapper script that does not exec it (a process named after the script), then exits.
    command = f"{sys.executable} -m cortex.entry hook claude-code"
    script = tmp_path / "hook-wrapper"
    script.write_text(f"#!/bin/sh\n{command}\n")
    script.chmod(0o755)
    argv = [str(script)] if wrapper == "script" else ["sh", "-c", f"{command}; :"]
    harness = (
        "import os, subprocess, sys\n"
        "subprocess.run(sys.argv[1:], input=sys.stdin.buffer.read(), check=True)\n"
        "print(os.getpid())\n"
    )
    env = child_env(home, CORTEX_HOOK_SERVER=server, CORTEX_HOOK_SERVER_IDLE="5")
    done = subprocess.run(
        [sys.executable, "-c", harness, *argv],
        input=json.dumps(event("SessionStart", "gone", repo, source="startup")).encode(),
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    harness_pid = int(done.stdout.split()[-1])
    state = manager(home).get_session("gone")
    assert state is not None and state.owner_pid == harness_pid and state.is_open
    # Minutes later (the lease is hours), another session starts: the dead harness's session
    # is recovered now, and the new preamble names it.
    run_hook(
        home, event("UserPromptSubmit", "gone-2", repo, prompt="x"), now="2026-02-16T09:05:00Z"
    )
    recovered = manager(home).get_session("gone")
    assert recovered is not None and recovered.crash_recovered


def test_a_session_end_captures_it_and_cleans_up(home: Path, repo: Path) -> None:
    run_hook(home, event("SessionStart", "s1", repo, source="startup"))
    end = run_hook(home, event("SessionEnd", "s1", repo, reason="prompt_input_exit"))
    assert (end.returncode, end.stdout) == (0, b"")
    state = manager(home).store.get_session("s1")
    assert state is not None and state.state == "COMPLETE" and not state.crash_recovered
    assert not (home / "hooks" / "sessions" / "s1.json").exists()
    assert (home / "sessions" / "s1.json").exists()  # the engine's JSON mirror


def test_hook_state_of_sessions_that_never_ended_is_pruned(home: Path, repo: Path) -> None:
    run_hook(home, event("SessionStart", "crashed", repo, source="startup"))
    run_hook(home, event("SessionStart", "live", repo, source="startup"))
    states = home / "hooks" / "sessions"
    two_days_ago = time.time() - 2 * 24 * 3600
    os.utime(states / "crashed.json", (two_days_ago, two_days_ago))  # its host never ended it
    run_hook(home, event("SessionStart", "next", repo, source="startup"))
    # The first start looked less than an hour ago: this one stats the stamp, not the folder.
    names = sorted(p.name for p in states.iterdir())
    assert names == ["crashed.json", "live.json", "next.json"]
    stamp = states.with_name("sessions.pruned")
    an_hour_ago = time.time() - 3601
    os.utime(stamp, (an_hour_ago, an_hour_ago))
    run_hook(home, event("SessionStart", "later", repo, source="startup"))
    assert sorted(p.name for p in states.iterdir()) == ["later.json", "live.json", "next.json"]
    assert time.time() - stamp.stat().st_mtime < 60  # looked: stamped again


def test_pruning_looks_at_once_past_a_stamp_from_the_future(tmp_path: Path) -> None:
    states = tmp_path / "hooks" / "sessions"
    states.mkdir(parents=True)
    old = time.time() - 2 * 24 * 3600
    (states / "gone.json").write_text("{}")
    os.utime(states / "gone.json", (old, old))
    assert prune_session_states(tmp_path) == 1  # no stamp yet counts as never looked
    (states / "gone.json").write_text("{}")
    os.utime(states / "gone.json", (old, old))
    assert prune_session_states(tmp_path) == 0  # looked just now
    future = time.time() + 7200  # a clock set back since the last look
    os.utime(states.with_name("sessions.pruned"), (future, future))
    assert prune_session_states(tmp_path) == 1
    assert prune_session_states(tmp_path / "missing") == 0


def test_late_async_events_do_not_revive_an_ended_session(home: Path, repo: Path) -> None:
    run_hook(home, event("SessionStart", "s1", repo, source="startup"))
    run_hook(home, event("SessionEnd", "s1", repo, reason="other"))
    for late in (
        event("Stop", "s1", repo, last_assistant_message="done"),
        event("PostToolUse", "s1", repo, tool_name="Bash", tool_input={"command": "ls"}),
    ):
        assert run_hook(home, late).returncode == 0
    state = manager(home).store.get_session("s1")
    assert state is not None and state.state == "COMPLETE"
    # A prompt is the conversation going on (a resume whose start did not arrive): reopened.
    run_hook(home, event("UserPromptSubmit", "s1", repo, prompt="one more thing"))
    reopened = manager(home).store.get_session("s1")
    assert reopened is not None and reopened.is_open


def test_the_hosts_project_dir_names_the_project(home: Path, repo: Path, tmp_path: Path) -> None:
    elsewhere = make_repo(tmp_path / "elsewhere", remote="https://github.com/lbf/elsewhere")
    payload = event("SessionStart", "s1", elsewhere, source="startup")
    run_hook(home, payload, env={"CLAUDE_PROJECT_DIR": str(repo)})
    state = manager(home).store.get_session("s1")
    assert state is not None and state.project == project_identity(str(repo)).id


def test_subdirectories_and_worktrees_share_memory_other_repos_do_not(
    home: Path, repo: Path, tmp_path: Path
) -> None:
    run_hook(home, event("SessionStart", "s1", repo, source="startup"))
    cortex_cli(home, "pin", "add", "baud", "38400", "--critical", "--session-id", "s1")
    run_hook(home, event("SessionEnd", "s1", repo))
    sub = repo / "src" / "cat"
    sub.mkdir(parents=True)
    subprocess.run(
        ["git", "-C", str(repo), "worktree", "add", "-q", "-b", "feat", str(tmp_path / "wt")],
        check=True,
        capture_output=True,
    )
    for session, cwd in (("s2", sub), ("s3", tmp_path / "wt")):
        text = context_of(run_hook(home, event("SessionStart", session, cwd)), "SessionStart")
        assert "[CRITICAL] baud [inherited from s1" in text
    other = make_repo(tmp_path / "other", remote="https://github.com/lbf/other")
    assert run_hook(home, event("SessionStart", "s4", other, source="startup")).stdout == b""


def test_resume_answers_the_sessions_own_pins(home: Path, repo: Path) -> None:
    run_hook(home, event("SessionStart", "s1", repo, source="startup"))
    cortex_cli(home, "pin", "add", "plan", "refactor the parser first", "--session-id", "s1")
    run_hook(home, event("SessionEnd", "s1", repo))
    resumed = run_hook(home, event("SessionStart", "s1", repo, source="resume"))
    assert context_of(resumed, "SessionStart") == (
        "WORKING MEMORY PINS:\n- plan: refactor the parser first"
    )
    state = manager(home).store.get_session("s1")
    assert state is not None and state.is_open  # resumed: open again, same id


def test_a_start_delivered_twice_injects_the_preamble_once(home: Path, repo: Path) -> None:
    run_hook(home, event("SessionStart", "s1", repo, source="startup"))
    cortex_cli(home, "pin", "add", "plan", "refactor the parser first", "--session-id", "s1")
    run_hook(home, event("SessionEnd", "s1", repo))
    first = run_hook(home, event("SessionStart", "s2", repo, source="startup"), now=LATER)
    assert "SESSION CONTINUITY" in context_of(first, "SessionStart")
    again = run_hook(home, event("SessionStart", "s2", repo, source="startup"), now=LATER)
    assert (again.returncode, again.stdout) == (0, b"")
    restored = manager(home).store.list_metrics(event="session_restored")
    assert [e.payload["new_session_id"] for e in restored] == ["s2"]


def test_compaction_keeps_the_summary_and_reinjects_pins_with_it(home: Path, repo: Path) -> None:
    run_hook(home, event("SessionStart", "s1", repo, source="startup"))
    cortex_cli(home, "pin", "add", "goal", "ship the CAT driver", "--session-id", "s1")
    pre = run_hook(home, event("PreCompact", "s1", repo, trigger="auto", custom_instructions=""))
    post = run_hook(
        home,
        event(
            "PostCompact",
            "s1",
            repo,
            trigger="auto",
            compact_summary="Wired CAT; tests next. api_key=sk-live-abcdefghijklmnopqrstuv",
        ),
    )
    assert (pre.returncode, pre.stdout, post.returncode, post.stdout) == (0, b"", 0, b"")
    text = context_of(
        run_hook(home, event("SessionStart", "s1", repo, source="compact")), "SessionStart"
    )
    assert re.fullmatch(
        r"\[CORTEX CHECKPOINT ckpt-2026-02-16-[0-9a-f]{8} - pre_compaction, 2026-02-16 09:00 UTC\]"
        r"\n\nPINS:\n- goal: ship the CAT driver\n(\n.*\n)*?\n"
        r"LAST COMPACTION SUMMARY \(2026-02-16 09:00 UTC\):\nWired CAT; tests next\. "
        r"api_key=\[REDACTED\]",
        text or "",
    ), text
    checkpoints = CompactionService.open(load_config(home, {})).store.list_checkpoints("s1")
    assert len(checkpoints) == 1 and checkpoints[0].type == "pre_compaction"
    assert "abcdefghijklmnopqrstuv" not in (home / "hooks" / "sessions" / "s1.json").read_text()


def test_a_first_prompt_after_a_cold_start_gets_a_prompt_aware_pass(home: Path, repo: Path) -> None:
    # Only a matching prompt lifts an old session over this threshold.
    env = {"CORTEX_RELEVANCE_THRESHOLD": "0.15"}
    run_hook(home, event("SessionStart", "s0", repo, source="startup"), env=env)
    run_hook(home, event("UserPromptSubmit", "s0", repo, prompt="ft991a cat control"), env=env)
    run_hook(home, event("SessionEnd", "s0", repo), env=env)
    six_days = "2026-02-22T09:00:00Z"
    start = run_hook(
        home, event("SessionStart", "s1", repo, source="startup"), now=six_days, env=env
    )
    assert start.stdout == b""
    first = run_hook(
        home,
        event("UserPromptSubmit", "s1", repo, prompt="ft991a cat control"),
        now=six_days,
        env=env,
    )
    text = context_of(first, "UserPromptSubmit")
    assert text.startswith("[SESSION CONTINUITY — inherited from 1 prior session(s)]")
    assert "ft991a" in text
    second = run_hook(
        home,
        event("UserPromptSubmit", "s1", repo, prompt="ft991a cat control"),
        now=six_days,
        env=env,
    )
    assert (second.returncode, second.stdout) == (0, b"")


def test_a_start_that_never_arrived_is_made_up_for_at_the_first_prompt(
    home: Path, repo: Path
) -> None:
    run_hook(home, event("SessionStart", "s1", repo, source="startup"))
    cortex_cli(home, "pin", "add", "baud", "38400", "--critical", "--session-id", "s1")
    run_hook(home, event("SessionEnd", "s1", repo))
    first = run_hook(home, event("UserPromptSubmit", "s2", repo, prompt="hello"), now=LATER)
    assert "[CRITICAL] baud [inherited from s1" in context_of(first, "UserPromptSubmit")
    state = manager(home).store.get_session("s2")
    assert state is not None and state.project == project_identity(str(repo)).id


def test_tool_events_record_paths_and_commands_never_contents(home: Path, repo: Path) -> None:
    run_hook(home, event("SessionStart", "s1", repo, source="startup"))
    secret = "sk-ant-" + "x" * 40
    token = "ghp_" + "Ab1" * 12
    run_hook(
        home,
        event(
            "PostToolUse",
            "s1",
            repo,
            tool_name="Write",
            tool_input={"file_path": str(repo / "keyring_store.py"), "content": secret},
        ),
    )
    run_hook(
        home,
        event(
            "PostToolUseFailure",
            "s1",
            repo,
            tool_name="Bash",
            error="exit 1",
            tool_input={"command": f"GH_TOKEN={token} pytest tests/test_baudrate.py"},
        ),
    )
    run_hook(
        home,
        event("CwdChanged", "s1", repo / "docs", old_cwd=str(repo), new_cwd=str(repo / "docs")),
    )
    state = manager(home).store.get_session("s1")
    assert state is not None
    assert {"keyring_store", "test_baudrate.py"} <= set(state.hot_topics)
    stored = (home / "brain.db").read_bytes().decode("utf-8", "replace")
    assert secret not in stored and token not in stored and token.lower() not in stored


# -- other hosts -----------------------------------------------------------------------------------
def prepare_prior(home: Path, repo: Path) -> None:
    run_hook(home, event("SessionStart", "s0", repo, source="startup"))
    cortex_cli(home, "pin", "add", "baud", "38400", "--critical", "--session-id", "s0")
    run_hook(home, event("SessionEnd", "s0", repo))


def test_cursor_shapes(home: Path, repo: Path) -> None:
    prepare_prior(home, repo)
    base = {"conversation_id": "c1", "generation_id": "g1", "workspace_roots": [str(repo)]}
    start = run_hook(home, {**base, "hook_event_name": "sessionStart"}, host="cursor", now=LATER)
    answer = json.loads(start.stdout)
    assert list(answer) == ["additional_context"] and "baud" in answer["additional_context"]
    prompt = run_hook(
        home, {**base, "hook_event_name": "beforeSubmitPrompt", "prompt": "x"}, host="cursor"
    )
    assert json.loads(prompt.stdout) == {"continue": True}
    edit = run_hook(
        home,
        {**base, "hook_event_name": "afterFileEdit", "file_path": str(repo / "serial_port.py")},
        host="cursor",
    )
    assert (edit.returncode, edit.stdout) == (0, b"")
    state = manager(home).store.get_session("c1")
    assert state is not None and state.channel == "cursor"
    assert "serial_port" in state.hot_topics


@pytest.mark.parametrize(
    ("host", "start_event", "prompt_event"),
    [("codex", "SessionStart", "UserPromptSubmit"), ("gemini", "SessionStart", "BeforeAgent")],
)
def test_codex_and_gemini_answer_like_claude(
    home: Path, repo: Path, host: str, start_event: str, prompt_event: str
) -> None:
    prepare_prior(home, repo)
    start = run_hook(home, event(start_event, "h1", repo, source="startup"), host=host, now=LATER)
    assert "baud" in context_of(start, start_event)
    prompt = run_hook(home, event(prompt_event, "h1", repo, prompt="hi"), host=host, now=LATER)
    assert (prompt.returncode, prompt.stdout) == (0, b"")
    state = manager(home).store.get_session("h1")
    assert state is not None and state.channel == host


# -- bad input -------------------------------------------------------------------------------------
def log_lines(home: Path) -> list[str]:
    path = home / "logs" / "hooks.log"
    return path.read_text().splitlines() if path.exists() else []


def test_an_engine_warning_goes_to_the_hooks_log_and_not_to_stderr(home: Path, repo: Path) -> None:
    tasks = home / "pipeline" / "state.json"
    tasks.parent.mkdir(parents=True, exist_ok=True)
    tasks.write_text("{not json")  # the start reads the pending tasks: the engine warns
    result = run_hook(home, event("SessionStart", "s1", repo, source="startup"))
    assert (result.returncode, result.stderr) == (0, b"")
    warned = [line for line in log_lines(home) if "engine: pipeline state file" in line]
    assert warned and all(str(tasks) in line for line in warned)
    assert manager(home).store.get_session("s1") is not None  # and the start went on


@pytest.mark.parametrize(
    ("raw", "logged"),
    [
        (b"", "empty input"),
        (b"not json", "input is not JSON"),
        (b"[1, 2]", "input is a JSON list, not an object"),
        (b'{"hook_event_name": "SessionStart"}', "no session id in the input"),
        (
            b'{"hook_event_name": "Teleport", "session_id": "s1"}',
            "<a name of 8 characters> 's1': not an event Cortex handles",
        ),
        (b'{"hook_event_name": "Stop", "session_id": "../../etc/shadow"}', "invalid session id"),
        (b'{"hook_event_name": "Stop", "session_id": "a/b"}', "invalid session id"),
        (b'{"hook_event_name": "Stop", "session_id": "' + b"x" * 300 + b'"}', "invalid session id"),
        (b'{"hook_event_name": "Stop", "session_id": 42}', "no session id in the input"),
        (b'{"hook_event_name": "Stop", "session_id": "s1", "cwd": 7}', None),
        (b"\xff\xfe{\x00", "input is not JSON"),
    ],
)
def test_bad_input_exits_0_logs_one_line_and_keeps_data(
    home: Path, repo: Path, raw: bytes, logged: str | None
) -> None:
    run_hook(home, event("SessionStart", "keep", repo, source="startup"))
    cortex_cli(home, "pin", "add", "keep", "this pin", "--session-id", "keep")
    before = log_lines(home)
    result = run_hook(home, raw=raw, cwd=repo)
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    new = log_lines(home)[len(before) :]
    if logged is None:
        assert new == []
    else:
        assert len(new) == 1 and logged in new[0], new
    assert not (home.parent / "etc").exists()
    pins = manager(home).list_pins("keep")
    assert [p.content for p in pins] == ["this pin"]


def test_a_copy_whose_lock_another_process_holds_is_skipped_not_waited_for(
    home: Path, repo: Path
) -> None:
    """The pins' and a session's mirrors and the metrics chain's head are copies: a process
    stopped while holding one's lock costs a hook half a second and a line, not its event."""
    run_hook(home, event("SessionStart", "keep", repo, source="startup"))
    cortex_cli(home, "pin", "add", "keep", "this pin", "--session-id", "keep")
    run_hook(home, event("SessionEnd", "keep", repo))
    before = log_lines(home)
    held = [home / "working_memory.json", home / "sessions" / "s1.json", home / "metrics.head"]
    with contextlib.ExitStack() as stack:
        for target in held:  # (a lock file, flocked by this test's process)
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(f"{target}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            stack.callback(os.close, fd)
            fcntl.flock(fd, fcntl.LOCK_EX)
        began = time.monotonic()
        start = run_hook(home, event("SessionStart", "s1", repo, source="startup"))
        end = run_hook(home, event("SessionEnd", "s1", repo))
        took = time.monotonic() - began
    assert took < 8, took  # (each copy waits 0.5 s; before, the first one waited for ever)
    assert "this pin" in context_of(start, "SessionStart")
    assert (end.returncode, end.stdout, end.stderr) == (0, b"", b"")
    state = manager(home).store.get_session("s1")
    assert state is not None and not state.is_open
    skipped = log_lines(home)[len(before) :]
    assert skipped and all("has been held by another process for over 0.5 s" in x for x in skipped)
    assert {f"{t}.lock" for t in held} == {x.split(": ")[-1].split(" has been")[0] for x in skipped}


def test_a_session_end_waits_little_for_a_database_another_process_holds(
    home: Path, repo: Path
) -> None:
    """Its host kills a SessionEnd hook after 1.5 s, before the store's 5 s wait for the
    write lock ran out and said so: without a server it waits 1 s, and says so."""
    run_hook(home, event("SessionStart", "s1", repo, source="startup"))
    holder = sqlite3.connect(home / "brain.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        began = time.monotonic()
        end = run_hook(home, event("SessionEnd", "s1", repo))
        took = time.monotonic() - began
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert took < 5, took  # (the store's own wait)
    assert (end.returncode, end.stdout, end.stderr) == (0, b"", b"")
    [line] = log_lines(home)
    assert line.split(" ", 1)[1] == (
        f"claude-code SessionEnd 's1': StorageError: database {home / 'brain.db'} is locked by"
        " another process; retry, or stop the process that holds it"
    )
    assert (manager(home).store.get_session("s1") or pytest.fail()).is_open
    run_hook(home, event("SessionEnd", "s1", repo))  # and once it is free, the end goes in
    assert not (manager(home).store.get_session("s1") or pytest.fail()).is_open


@pytest.mark.parametrize(
    ("where", "fifo"),
    [
        ("repo", ".git/HEAD"),
        ("repo", ".git/config"),
        ("repo", ".git/packed-refs"),
        ("home", "hooks/sessions/s1.json"),
        ("home", "pipeline/state.json"),
        ("home", "cache/projects.json"),
        ("home", "metrics.key"),
    ],
)
def test_a_fifo_in_place_of_a_file_a_hook_reads_does_not_hold_it(
    home: Path, repo: Path, where: str, fifo: str
) -> None:
    """The git files the project's identity reads and the home's small files: one that is a
    FIFO (nothing ever writes to it) is no file to read, not a wait for ever."""
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/gone\n")  # (looked up in packed-refs)
    path = (repo if where == "repo" else home) / fifo
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    for name in ("SessionStart", "SessionEnd"):
        result = run_hook(home, event(name, "s1", repo, source="startup"), cwd=repo)
        assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    state = manager(home).store.get_session("s1")
    assert state is not None and not state.is_open
    assert state.project == project_identity(str(repo)).id
    assert all("not a regular file" in line for line in log_lines(home))  # (what it skipped)


def test_a_hook_started_without_a_stdout_records_its_event_quietly(home: Path, repo: Path) -> None:
    """No fd 1 at all (``sys.stdout`` is None): the answer has nowhere to go, nothing failed."""
    run_hook(home, event("SessionStart", "s0", repo, source="startup"))
    run_hook(home, event("SessionEnd", "s0", repo))  # (so that the next start has an answer)
    done = subprocess.run(
        [sys.executable, "-m", "cortex.entry", "hook", "claude-code"],
        input=json.dumps(event("SessionStart", "s1", repo, source="startup")).encode(),
        stderr=subprocess.PIPE,
        env=child_env(home, CORTEX_HOOK_SERVER="0"),
        preexec_fn=lambda: os.close(1),
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, b"")
    assert log_lines(home) == []
    assert manager(home).store.get_session("s1") is not None


def test_input_after_a_byte_order_mark_is_handled_in_process_and_served(
    home: Path, repo: Path
) -> None:
    env = {"CORTEX_HOOK_SERVER": "1", "CORTEX_HOOK_SERVER_IDLE": "30"}
    for session in ("in-process", "served"):
        start = event("SessionStart", session, repo, source="startup")
        result = run_hook(home, raw=b"\xef\xbb\xbf" + json.dumps(start).encode(), env=env)
        assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
        if session == "in-process":
            pid = wait_for_server(home)  # (the first event started it)
    os.kill(pid, signal.SIGTERM)
    assert log_lines(home) == []
    store = manager(home).store
    assert store.get_session("in-process") and store.get_session("served")


def test_a_project_directory_whose_name_is_no_utf8_is_recorded(home: Path, tmp_path: Path) -> None:
    """A name's bytes that are no UTF-8 (a legacy file name) are written as ``\\xff`` in the
    project's id: a lone surrogate, as ``os.fsdecode`` gives them, no store keeps in a name,
    and every event of the session was refused for it."""
    odd = Path(os.fsdecode(os.fsencode(tmp_path) + b"/radio-\xff"))
    odd.mkdir()
    start = {"hook_event_name": "SessionStart", "session_id": "s1", "source": "startup"}
    for payload in (start, {**start, "hook_event_name": "UserPromptSubmit", "prompt": "tune"}):
        result = run_hook(home, payload, cwd=odd)  # (no cwd in the event: the hook's own)
        assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert log_lines(home) == []
    state = manager(home).store.get_session("s1")
    assert state is not None and state.project == f"path:{tmp_path}/radio-\\xff"
    assert project_identity(str(odd)).id == state.project  # (what every reader resolves)


def test_unknown_host_and_help(home: Path) -> None:
    unknown = run_hook(home, {"hook_event_name": "Stop", "session_id": "s"}, host="vim")
    assert (unknown.returncode, unknown.stdout) == (0, b"")
    assert "unknown host 'vim'" in log_lines(home)[-1]
    helped = subprocess.run(
        [sys.executable, "-m", "cortex.entry", "hook", "--help"], capture_output=True, text=True
    )
    assert helped.returncode == 0 and "Example" in helped.stdout


def test_a_key_where_a_long_text_is_cut_is_not_kept_in_part(home: Path, repo: Path) -> None:
    """A prompt, a reply or a command longer than a hook keeps is cut; cut inside a key, the
    key's start was kept, too short to be recognised as one."""
    key = "sk-proj-Ab3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5bC7dE9fG1hJ3kL5m"
    prompt = "tune " * 3_998 + key  # 20,000 characters keep 10 of the key
    command = "ls " * 1_330 + key  # 4,000 keep 10 of it too
    for payload in (
        event("UserPromptSubmit", "s1", repo, prompt=prompt),
        event("Stop", "s1", repo, last_assistant_message=prompt),
        event("PostCompact", "s1", repo, compact_summary=prompt),
        event("PostToolUse", "s1", repo, tool_name="Bash", tool_input={"command": command}),
    ):
        assert run_hook(home, payload).returncode == 0
    assert "tune" in (manager(home).store.get_session("s1") or pytest.fail()).hot_topics
    stored = [p for p in home.rglob("*") if p.is_file()]
    assert [p.name for p in stored if key[:10].encode() in p.read_bytes()] == []


def test_a_huge_prompt_is_handled_and_a_larger_input_ignored(home: Path, repo: Path) -> None:
    run_hook(home, event("SessionStart", "s1", repo, source="startup"))
    prompt = "frequency " * 500_000  # 5 MB
    result = run_hook(home, event("UserPromptSubmit", "s1", repo, prompt=prompt))
    assert (result.returncode, result.stdout) == (0, b"")
    assert "frequency" in (manager(home).store.get_session("s1") or pytest.fail()).hot_topics
    too_big = run_hook(home, raw=b'{"prompt": "' + b"x" * (9 * 1024 * 1024) + b'"}')
    assert (too_big.returncode, too_big.stdout) == (0, b"")
    assert "larger than" in log_lines(home)[-1]


def test_an_unwritable_home_exits_0_with_one_line(tmp_path: Path, repo: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the home's parent should be")
    result = run_hook(blocker / "home", event("SessionStart", "s1", repo, source="startup"))
    assert (result.returncode, result.stdout) == (0, b"")
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cortex hook: ")


def test_global_options_before_hook_apply(tmp_path: Path, repo: Path) -> None:
    home = tmp_path / "elsewhere"
    payload = json.dumps(event("SessionStart", "g1", repo, source="startup")).encode()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "cortex.entry",
            "--home",
            str(home),
            "--now",
            T0,
            "--json",
            "--set",
            "lookback_days=3",
            "hook",
            "claude-code",
        ],
        input=payload,
        capture_output=True,
        env={**env, "CORTEX_HOOK_SERVER": "0"},
    )
    assert (result.returncode, result.stdout) == (0, b"")
    state = manager(home).store.get_session("g1")
    assert state is not None and state.start_time.startswith("2026-02-16T09:00")


def test_context_stays_under_the_hosts_limit(home: Path, repo: Path) -> None:
    run_hook(home, event("SessionStart", "s0", repo, source="startup"))
    for i in range(10):
        cortex_cli(
            home, "pin", "add", f"pin {i}", "long note " * 100, "--critical", "--session-id", "s0"
        )
    for i in range(5):
        cortex_cli(home, "task", "add", f"task-{i}", "a task title " * 10, "--stage", "build")
    run_hook(home, event("SessionEnd", "s0", repo))
    text = context_of(run_hook(home, event("SessionStart", "s1", repo), now=LATER), "SessionStart")
    assert len(text) <= 8000


# -- the standard-library-only path and the hook server -------------------------------------------
MODULES_SCRIPT = (
    "import sys; before = set(sys.modules); from cortex.entry import main; "
    "main(['hook', sys.argv[1]]); "
    "sys.stderr.write(' '.join(sorted(set(sys.modules) - before)))"
)


def imported_modules(home: Path, payload: dict[str, Any], env: dict[str, str]) -> set[str]:
    """The modules a hook process imports beyond the bare interpreter's."""
    result = run_hook(home, payload, env=env, args=("-c", MODULES_SCRIPT, "claude-code"))
    assert result.returncode == 0
    return set(result.stderr.decode().split())


def test_the_hook_path_imports_only_the_standard_library(home: Path, repo: Path) -> None:
    in_use(home)
    names = imported_modules(home, event("SessionStart", "s1", repo), {})
    assert "cortex.adapters.hooks.dispatch" in names  # the in-process path: the engine was loaded
    tops = {name.split(".")[0] for name in names}
    assert tops - set(sys.stdlib_module_names) == {"cortex"}
    assert not {"click", "mcp", "cortex.adapters.cli.main", "cortex.adapters.mcp.server"} & names
    assert "cortex.services.memory" not in names  # the services are built lazily
    assert not {"uuid", "platform"} & names  # ids come from services.ids.new_uuid
    assert NOT_ON_THE_EVENT_PATH & names == set()


def test_the_installed_client_without_a_server_needs_no_site_sockets_or_pure_python_datetime(
    home: Path, repo: Path
) -> None:
    # What a host runs (``python -S -I -X frozen_modules=on .../client.py hook HOST``) with the
    # server off: the engine in-process on the standard library alone, without ``site`` (it
    # runs only for a driver that needs it), ``_socket``, ``datetime.py`` (3.11 defines the
    # pure-Python version before replacing it with ``_datetime``'s), and what ``pathlib``
    # imports for Windows paths and ``as_uri``.
    in_use(home)
    flags = ("-S", "-I", "-X", "frozen_modules=on", "-X", "importtime")
    env = child_env(home, CORTEX_HOOK_SERVER="0")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # (the first start may fill the code cache)
    for session_id in ("s0", "s1"):
        result = subprocess.run(
            [sys.executable, *flags, hook_client.__file__, "hook", "claude-code"],
            input=json.dumps(event("SessionStart", session_id, repo, source="startup")).encode(),
            capture_output=True,
            env=env,
            cwd=repo,
            timeout=60,
        )
        assert result.returncode == 0
    names = {line.split("|")[-1].strip() for line in result.stderr.decode().splitlines()}
    assert {"cortex.adapters.hooks.dispatch", "sqlite3"} <= names  # in-process: the engine ran
    unused = {"site", "_socket", "socket", "urllib.parse", "ntpath", "inspect", "ast"}
    # ``re`` as a stand-in serving held programs
    unused |= {"enum", "re._parser", "re._compiler"}
    # a start reads and writes sessions: not the memory records, nor the store's search
    unused |= {"cortex.core.memory_models", "cortex.store.sqlite.search"}
    unused |= {"cortex.store.sqlite.transfer"}
    if sys.version_info < (3, 12):  # 3.12's datetime is _datetime's names alone, as ours
        unused.add("datetime")
    assert not unused & names
    assert manager(home).store.get_session("s1") is not None


SITE_ON_DEMAND = """
import sys, types
sys.path.insert(0, sys.argv[1])
import wire
sys.meta_path.append(wire.SiteOnDemand)
try:
    from org.python.core import PyStringMap  # the standard library's probe: no site for it
except ImportError:
    pass
ours = types.ModuleType("cortex.fixture")
exec("try:\\n    import _no_such_private\\nexcept ImportError:\\n    pass", vars(ours))
print("site" in sys.modules)
exec("import click", vars(ours))  # a third-party package, imported by Cortex's code
print("site" in sys.modules, ours.click.__name__, wire.SiteOnDemand in sys.meta_path)
"""


IN_PROCESS_THRESHOLD = """
import atexit, gc, sys
sys.path.insert(0, sys.argv[1])
import wire
atexit.register(lambda: print(gc.get_threshold()[0]))
wire.finish(wire._in_process(["claude-code"], (sys.stdin.buffer.read(), None)))
"""


def test_an_in_process_hook_collects_garbage_less_often(home: Path, repo: Path) -> None:
    hooks_dir = str(Path(hook_client.__file__).parent)
    done = subprocess.run(
        [sys.executable, "-S", "-I", "-c", IN_PROCESS_THRESHOLD, hooks_dir],
        input=json.dumps(event("SessionStart", "s1", repo, source="startup")).encode(),
        capture_output=True,
        env=child_env(home, CORTEX_HOOK_SERVER="0"),
        cwd=repo,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == b"100000"
    assert manager(home).store.get_session("s1") is not None


def test_an_in_process_hook_runs_site_only_for_a_module_it_does_not_find() -> None:
    hooks_dir = str(Path(hook_client.__file__).parent)
    done = subprocess.run(
        [sys.executable, "-S", "-I", "-c", SITE_ON_DEMAND, hooks_dir],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "click", "False"]


def test_a_start_that_recovers_a_crashed_session_logs_it_without_logging(
    home: Path, repo: Path
) -> None:
    # The previous start's harness is gone: this start suspends that session and writes the
    # incident to hooks.log, as ``logging`` would have, with ``logging`` never imported.
    in_use(home)
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], stdout=subprocess.PIPE
    )
    dead = {"CORTEX_HOOK_OWNER_PID": gone.stdout.decode().strip()}
    assert run_hook(home, event("SessionStart", "s1", repo), env=dead).returncode == 0
    names = imported_modules(home, event("SessionStart", "s2", repo), {})
    log = (home / "logs" / "hooks.log").read_text()
    assert "engine: incident: session s1 interrupted, suspended" in log
    assert NOT_ON_THE_EVENT_PATH & names == set()


FINISH = """
import atexit, sys
sys.path.insert(0, sys.argv[1])
import wire

class Late:
    def __del__(self):
        print("torn down")

late = Late()
atexit.register(print, "exit function ran")
sys.stdout.write("answer ")  # buffered: finish flushes it
wire.finish(int(sys.argv[2]))
"""


def test_the_hook_client_ends_after_its_exit_functions_without_teardown() -> None:
    hooks_dir = str(Path(hook_client.__file__).parent)
    done = subprocess.run(
        [sys.executable, "-c", FINISH, hooks_dir, "3"], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout, done.stderr) == (3, "answer exit function ran\n", "")
    # (``sys.exit`` would have torn ``late`` down: the code is the same, the work is not.)
    plain = FINISH.replace("wire.finish(", "sys.exit(")
    done = subprocess.run(
        [sys.executable, "-c", plain, hooks_dir, "3"], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (3, "answer exit function ran\ntorn down\n")


def test_the_hook_client_exits_the_ordinary_way_while_another_thread_runs() -> None:
    hooks_dir = str(Path(hook_client.__file__).parent)
    threaded = FINISH.replace(
        "late = Late()",
        "import threading, time\n"
        "threading.Thread(target=lambda: (time.sleep(0.2), print('thread done'))).start()\n"
        "late = Late()",
    )
    done = subprocess.run(
        [sys.executable, "-c", threaded, hooks_dir, "4"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 4  # waited for the thread, as ``sys.exit`` does
    assert done.stdout == "answer thread done\nexit function ran\ntorn down\n"


READ_STDIN = """
import signal, sys
sys.path.insert(0, sys.argv[1])
import wire
print(wire.read_stdin(int(sys.argv[2]), 0.3))
print(signal.getsignal(signal.SIGALRM) is signal.SIG_DFL, signal.getitimer(signal.ITIMER_REAL))
"""


def read_stdin_in_child(data: bytes, limit: int, close: bool) -> list[str]:
    """What ``wire.read_stdin`` returns in a process whose stdin gets ``data`` and is closed
    (or left open), and whether the alarm it set is gone afterwards."""
    hooks_dir = str(Path(hook_client.__file__).parent)
    proc = subprocess.Popen(
        [sys.executable, "-c", READ_STDIN, hooks_dir, str(limit)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(data.decode())
    proc.stdin.flush()
    if close:
        proc.stdin.close()
    try:
        return proc.stdout.read().splitlines()
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)


def test_the_hook_client_reads_stdin_within_a_time_limit() -> None:
    assert read_stdin_in_child(b'{"a": 1}', 100, close=True) == [
        "(b'{\"a\": 1}', None)",
        "True (0.0, 0.0)",  # the handler put back and the timer disarmed
    ]
    assert read_stdin_in_child(b'{"a": 1', 100, close=False) == [  # a host that never closes
        "(b'', 'stdin was not closed within 0.3 s; input ignored')",
        "True (0.0, 0.0)",
    ]
    assert read_stdin_in_child(b"x" * 200, 100, close=True)[0] == (
        "(b'', 'input is larger than 100 bytes; ignored')"
    )


# Modules an event that logs nothing never needs (the hook server would hold them for hours).
# (``threading`` comes with ``subprocess``, which a project's first event runs for git.)
NOT_ON_THE_EVENT_PATH = frozenset(
    {"logging", "traceback", "typing", "ast", "dis", "tokenize"}
    | {"cortex.store.hygiene_sql", "cortex.store.registry", "cortex.core.hygiene"}
    | {"cortex.core.retrieval"}  # the store's search ranks nothing for an event
    | {"cortex.services.archive"}  # nor does an event archive sessions
)


def in_use(home: Path) -> None:
    """Make ``home``'s database, as a home in use has it (a home's first event also loads the
    migration steps, and ``typing`` with them: once in its life)."""
    manager(home).store.close()


SERVED = """
import json, sys
from cortex.adapters.hooks.dispatch import handle
from cortex.adapters.hooks.hook import ServicesCache
home, cwd = sys.argv[1], sys.argv[2]
cache, env = ServicesCache(), {"CORTEX_HOME": home}
for sid in ("s1", "s2"):  # the second start restores (and scores) the first session
    for event in ({"hook_event_name": "SessionStart", "source": "startup"},
                  {"hook_event_name": "UserPromptSubmit", "prompt": "tune the ft991a"},
                  {"hook_event_name": "PostToolUse", "tool_name": "Bash",
                   "tool_input": {"command": "rigctl -m 1036 f"}},
                  {"hook_event_name": "PreCompact", "trigger": "auto"},
                  {"hook_event_name": "PostCompact", "compact_summary": "tuned the rig"},
                  {"hook_event_name": "SessionStart", "source": "compact"},
                  {"hook_event_name": "Stop", "last_assistant_message": "tuned"},
                  {"hook_event_name": "SessionEnd"}):
        raw = json.dumps({**event, "session_id": sid, "cwd": cwd}).encode()
        handle("claude-code", raw, env, cwd, cache=cache)
print(" ".join(sorted(sys.modules)))
"""


def test_served_events_leave_the_unneeded_modules_unloaded(home: Path, repo: Path) -> None:
    # What the hook server runs for each event (dispatch.handle with its ServicesCache).
    in_use(home)
    done = subprocess.run(
        [sys.executable, "-c", SERVED, str(home), str(repo)],
        capture_output=True,
        text=True,
        env=child_env(home),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    names = set(done.stdout.split())
    assert {"cortex.services.sessions.restore", "cortex.services.compaction"} <= names  # the engine
    assert NOT_ON_THE_EVENT_PATH & names == set()
    assert manager(home).store.get_session("s2") is not None


def test_a_served_event_leaves_its_bookkeeping_until_after_the_answer(
    home: Path, repo: Path
) -> None:
    # The hook server passes ``later``: the answer comes with the event committed, and the
    # files nothing in the answer depends on are written when the server runs ``later``.
    from cortex.adapters.hooks.dispatch import handle
    from cortex.adapters.hooks.hook import ServicesCache
    from cortex.adapters.hooks.state import read_status, session_state_path
    from cortex.files import file_lock
    from cortex.services.metrics import HEAD_FILE

    in_use(home)
    cache, env = ServicesCache(), {"CORTEX_HOME": str(home), "CORTEX_NOW": T0}
    head, mirror = home / HEAD_FILE, home / "working_memory.json"
    events = [
        event("SessionStart", "s1", repo, source="startup"),
        event("UserPromptSubmit", "s1", repo, prompt="tune the ft991a"),
        event("SessionEnd", "s1", repo),
        event("SessionStart", "s2", repo, source="startup"),  # restores s1: metrics events
    ]
    answers: list[str] = []
    try:
        for payload in events:
            later: list[Callable[[], None]] = []
            raw = json.dumps(payload).encode()
            answers.append(handle("claude-code", raw, env, str(repo), cache=cache, later=later))
            store = manager(home).store
            assert store.get_session(payload["session_id"]) is not None  # committed already
            newest = store.last_metric()
            store.close()
            head_seq = json.loads(head.read_text())["seq"] if head.exists() else 0
            assert read_status(home, "claude-code").get("event") != payload["hook_event_name"]
            if payload is events[-1]:  # the restore's events are stored, the head not yet moved
                assert newest is not None and head_seq < newest.seq
                # and the pins' copy waits, its lock held: a later writer waits for it
                assert json.loads(mirror.read_text())["sessionId"] == "s1"
                with pytest.raises(BlockingIOError), file_lock(mirror, wait=False):
                    pass
            for step in later:
                step()
            assert read_status(home, "claude-code")["event"] == payload["hook_event_name"]
            if newest is not None and newest.seq > head_seq:
                assert json.loads(head.read_text())["seq"] == newest.seq
    finally:
        cache.close()
    assert "SESSION CONTINUITY" in answers[-1]
    assert json.loads(mirror.read_text())["sessionId"] == "s2"
    with file_lock(mirror, wait=False):
        pass  # released
    assert json.loads(session_state_path(home, "s2").read_text())["primed"] is True
    assert json.loads(head.read_text())["seq"] > 0
    lines = (home / "hooks" / "latency.jsonl").read_text().splitlines()
    assert len(lines) == len(events)


def test_the_hook_servers_store_checkpoints_its_log_after_answers(home: Path, repo: Path) -> None:
    # The server's commits make no checkpoint (one cost ~5 ms of an answer every ~40 starts):
    # after_answer, which the server runs once an answer is sent, makes it every N events.
    from cortex.adapters.hooks.dispatch import handle
    from cortex.adapters.hooks.hook import ServicesCache

    in_use(home)
    cache, env = ServicesCache(), {"CORTEX_HOME": str(home), "CORTEX_NOW": T0}
    wal = home / "brain.db-wal"

    def start(sid: str) -> int:
        raw = json.dumps(event("SessionStart", sid, repo, source="startup")).encode()
        handle("claude-code", raw, env, str(repo), cache=cache, later=[])
        return wal.stat().st_size

    try:
        start("s0")
        store = cache.open(load_config(home, env), FixedClock(T0)).store
        assert store._db.rows("PRAGMA wal_autocheckpoint") == [(0,)]  # type: ignore[attr-defined]
        grown = start("s1")
        assert start("s2") > grown  # appended
        size = wal.stat().st_size
        for _ in range(ServicesCache.CHECKPOINT_EVENTS):
            cache.after_answer()
        assert start("s3") == size  # checkpointed: the log restarted from its beginning
    finally:
        cache.close()


def wait_for_server(home: Path, seconds: float = 30) -> int:
    """The pid of the hook server a hook started for ``home``, once it listens."""
    deadline = time.monotonic() + seconds
    while (pid := server_pid(home)) is None or not Path(socket_path(home)).exists():
        assert time.monotonic() < deadline, "the hook server did not start"
        time.sleep(0.05)
    return pid


DETACHED_CHILD = """
import json, os, sys
from cortex.adapters.hooks.server import leave_directory

leave_directory()
fds = {}
for name in os.listdir("/proc/self/fd"):
    try:
        fds[name] = os.readlink(f"/proc/self/fd/{name}")
    except OSError:
        pass  # (the listing's own descriptor)
report = {"fds": fds, "sid": os.getsid(0), "pid": os.getpid(), "cwd": os.getcwd()}
report["path"] = sys.path
with open(sys.argv[1] + ".tmp", "w") as fh:
    json.dump(report, fh)
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to look inside")
@pytest.mark.parametrize("way", ["posix_spawn", "subprocess"])
def test_a_detached_child_holds_none_of_the_hooks_descriptors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    """What a hook starts in the background (its server, a migration) outlives it, so it
    must hold none of the host's pipes: the host waits for the hook's output to close. Its
    standard streams are /dev/null, an inheritable descriptor of the hook is not open in it,
    it leads a session of its own, works from ``/``, and the hook's directory is not on its
    ``sys.path``; with ``posix_spawn`` and with ``subprocess`` (where there is none)."""
    from cortex.adapters.hooks import server

    if way == "subprocess":
        monkeypatch.delattr(os, "posix_spawn")
    monkeypatch.chdir(tmp_path)
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)  # as a host's pipe is
    report = tmp_path / "report.json"
    try:
        code = [sys.executable, "-P", "-c", DETACHED_CHILD, str(report)]
        server.start_detached(code, dict(os.environ))
        pipe = f"pipe:[{os.fstat(write_end).st_ino}]"
    finally:
        os.close(write_end)
        os.close(read_end)
    deadline = time.monotonic() + 30
    while not report.exists():
        assert time.monotonic() < deadline, "the detached child never reported"
        time.sleep(0.05)
    seen = json.loads(report.read_text())
    assert [seen["fds"].get(str(fd)) for fd in (0, 1, 2)] == [os.devnull] * 3
    assert pipe not in seen["fds"].values()
    assert seen["sid"] == seen["pid"]
    assert seen["cwd"] == os.sep
    assert str(tmp_path) not in seen["path"] and "" not in seen["path"]


def test_the_hook_server_merges_the_search_index_when_it_stops_for_idleness(
    home: Path, repo: Path
) -> None:
    from cortex.core.memory_models import MemoryFilter
    from cortex.services.app import MERGE_SEGMENTS
    from cortex.store import SQLiteStore
    from store_contract_memory import memory

    run_hook(home, event("SessionStart", "s1", repo, source="startup"))  # (no server yet)
    added = 0
    with SQLiteStore(home / "brain.db") as store:
        while added < 60:  # a commit, a segment of the full-text index, each
            store.add_memories([memory(f"m{added}", f"deploy note {added}")])
            added += 1
            if store.search_index_segments() >= MERGE_SEGMENTS:
                break
        assert store.search_index_segments() >= MERGE_SEGMENTS
    env = {"CORTEX_HOOK_SERVER": "1", "CORTEX_HOOK_SERVER_IDLE": "1"}
    prompt = event("UserPromptSubmit", "s1", repo, prompt="tune the antenna")
    ok = run_hook(home, prompt, env=env)  # handled here; a server starts for the next
    assert ok.returncode == 0
    pid = wait_for_server(home)
    assert run_hook(home, prompt, env=env).returncode == 0  # the server opens the store
    with SQLiteStore(home / "brain.db") as store:
        assert store.search_index_segments() >= MERGE_SEGMENTS  # not while it serves
    deadline = time.monotonic() + 30
    while server_pid(home) == pid:  # it stops after a second idle, checked every 5 s
        assert time.monotonic() < deadline, "the hook server did not stop"
        time.sleep(0.1)
    with SQLiteStore(home / "brain.db") as store:
        assert store.search_index_segments() == 1
        found = store.search_memories(["deploy"], MemoryFilter(), T0, limit=100)
        assert len(found) == added  # every memory still found


def test_the_hook_server_serves_later_events(home: Path, repo: Path) -> None:
    env = {"CORTEX_HOOK_SERVER": "1", "CORTEX_HOOK_SERVER_IDLE": "30"}
    first = run_hook(home, event("SessionStart", "s1", repo, source="startup"), env=env)
    assert (first.returncode, first.stdout) == (0, b"")
    pid = wait_for_server(home)
    try:
        prompt = event("UserPromptSubmit", "s1", repo, prompt="tune the antenna")
        names = imported_modules(home, prompt, env)
        assert "cortex.adapters.hooks.wire" in names  # the client half only
        assert not {"cortex.adapters.hooks.server", "cortex.adapters.hooks.dispatch"} & names
        assert not {"sqlite3", "json", "socket"} & names
        state = manager(home).store.get_session("s1")
        assert state is not None and "antenna" in state.hot_topics
        concurrent = [
            subprocess.Popen(
                [sys.executable, "-m", "cortex.entry", "hook", "claude-code"],
                stdin=subprocess.PIPE,
                env=child_env(home, **env),
            )
            for _ in range(8)
        ]
        for i, proc in enumerate(concurrent):  # all their input first: they run at once
            path = str(repo / f"tuner_{i}.py")
            tool = event(
                "PostToolUse", "s1", repo, tool_name="Edit", tool_input={"file_path": path}
            )
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(tool).encode())
            proc.stdin.close()
        assert [proc.wait(timeout=60) for proc in concurrent] == [0] * 8
        state = manager(home).store.get_session("s1")
        assert state is not None
        keywords = {k for k, _ in state.topic_state["keywords"]}
        assert {f"tuner_{i}" for i in range(8)} <= keywords
    finally:
        stop_and_wait(home, pid)


def stop_and_wait(home: Path, pid: int) -> None:
    """Stop the hook server ``pid`` of ``home`` (SIGTERM) and wait until it removed its socket."""
    os.kill(pid, 15)
    deadline = time.monotonic() + 10
    while Path(socket_path(home)).exists():
        assert time.monotonic() < deadline, "the hook server did not clean up"
        time.sleep(0.1)


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [
        (b'{"hook_event_name": "SessionEnd", "session_id": "s1"}', SHORT_TIMEOUT_SECONDS),
        (b'{"session_id":"s1","hook_event_name":\n  "sessionEnd"}', SHORT_TIMEOUT_SECONDS),
        (b'{"hook_event_name":"SessionStart"}', CLIENT_TIMEOUT_SECONDS),
        (
            b'{"hook_event_name":"UserPromptSubmit","prompt":"\\"hook_event_name\\":\\"SessionEnd\\""}',
            CLIENT_TIMEOUT_SECONDS,
        ),
        (
            b'{"prompt": "' + b"x" * 5000 + b'", "hook_event_name": "SessionEnd"}',
            CLIENT_TIMEOUT_SECONDS,
        ),
        (b"not json", CLIENT_TIMEOUT_SECONDS),
    ],
)
def test_a_session_end_waits_less_for_the_server(raw: bytes, seconds: float) -> None:
    assert client_timeout(raw) == seconds


def test_a_server_that_does_not_answer_is_logged_and_a_session_end_waits_little(
    home: Path, repo: Path
) -> None:
    import socket

    (home / "run").mkdir(parents=True)
    hung = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    hung.bind(socket_path(home))
    hung.listen(8)  # takes connections, never answers: a server stopped or stuck on a lock
    try:
        began = time.monotonic()
        end = run_hook(home, event("SessionEnd", "s1", repo), env={"CORTEX_HOOK_SERVER": "1"})
        assert time.monotonic() - began < CLIENT_TIMEOUT_SECONDS
    finally:
        hung.close()
    assert (end.returncode, end.stdout, end.stderr) == (0, b"", b"")
    [line] = log_lines(home)
    assert line.split(" ", 1)[1] == (
        "claude-code: the hook server did not answer within 1.2 s (it records the event when"
        f" it gets to it); if this repeats, stop it (kill the pid in {home}/run/hook.pid) and"
        " the next hook starts a fresh one"
    )


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory whose path leaves room for a socket path under it (``MAX_SOCKET_PATH``)."""
    base = Path(tempfile.mkdtemp(prefix="cx-"))
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("way", ["client", "console"])
def test_a_relative_home_is_one_home_in_process_and_served(
    short_dir: Path, repo: Path, way: str
) -> None:
    """The server works from ``/``: the hook makes a relative home absolute before sending
    it, and the server handles events in its own home whatever the environment says (an
    older client's). Were either resolved against ``/``, it would be ``short_dir / "h"``."""
    work = short_dir / "work"
    work.mkdir()
    relative = str(short_dir / "h").lstrip("/")
    home = work / relative
    env = child_env(home, CORTEX_HOOK_SERVER="1", CORTEX_HOOK_SERVER_IDLE="30")
    del env["CORTEX_HOME"]
    hook = [hook_client.__file__] if way == "client" else ["-m", "cortex.entry"]

    def start(session: str) -> None:
        done = subprocess.run(
            [sys.executable, *hook, "--home", relative, "hook", "claude-code"],
            input=json.dumps(event("SessionStart", session, repo, source="startup")).encode(),
            capture_output=True,
            env=env,
            cwd=work,
            timeout=60,
        )
        assert (done.returncode, done.stderr) == (0, b"")

    start("in-process")
    pid = wait_for_server(home)
    try:
        start("served")
        payload = json.dumps(event("SessionStart", "sent-relative", repo, source="startup"))
        sent = {**env, "CORTEX_HOME": relative}
        assert request(str(home), "claude-code", payload.encode(), sent, str(work)) is not None
        store = manager(home).store
        assert all(store.get_session(s) for s in ("in-process", "served", "sent-relative"))
        assert not (short_dir / "h").exists()
    finally:
        os.kill(pid, 15)


DYING_SERVER = """
import os, signal, sys
from cortex.adapters.hooks import dispatch, server

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

setattr(dispatch if sys.argv[2] == "handle" else server, sys.argv[2], die)
sys.exit(server.main(sys.argv[1:2]))
"""


@pytest.mark.parametrize("dies_in", ["handle", "receive"])
def test_an_event_the_server_dies_on_is_recorded_in_process(
    home: Path, repo: Path, dies_in: str
) -> None:
    """A server killed as it reads or handles an event (or one stopping as the event came)
    commits none of it and closes the connection unanswered: the hook records it itself."""
    dying = subprocess.Popen([sys.executable, "-c", DYING_SERVER, str(home), dies_in])
    try:
        wait_for_server(home)
        (home / "run" / "hook.spawned").touch()  # and no new server is started by this test
        start = event("SessionStart", "s1", repo, source="startup")
        result = run_hook(home, start, env={"CORTEX_HOOK_SERVER": "1"})
        assert dying.wait(timeout=30) == -signal.SIGKILL  # it died on this event
    finally:
        if dying.poll() is None:
            dying.kill()
            dying.wait()
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert manager(home).store.get_session("s1") is not None
    [line] = log_lines(home)
    assert line.split(" ", 1)[1] == (
        "claude-code: the hook server closed the connection without answering (it stopped or"
        " was killed); the event was handled in-process"
    )


SLOW_TO_STOP_SERVER = """
import sys, time
from pathlib import Path
from cortex.adapters.hooks import hook, server

def slow_tidying(self):
    Path(sys.argv[2]).touch()
    time.sleep(60)  # (a large search index's merge)

hook.ServicesCache.before_stop = slow_tidying
sys.exit(server.serve(Path(sys.argv[1]), idle_seconds=0.1))
"""


def test_an_event_while_the_server_tidies_up_to_stop_is_handled_in_process(
    home: Path, repo: Path
) -> None:
    """Stopping for idleness, the server first merges the search index; an event that came
    meanwhile waited in its socket's queue for an answer that never came."""
    tidying = home / "tidying"
    stopping = subprocess.Popen([sys.executable, "-c", SLOW_TO_STOP_SERVER, str(home), tidying])
    try:
        wait_for_server(home)
        (home / "run" / "hook.spawned").touch()  # and no new server is started by this test
        deadline = time.monotonic() + 30
        while not tidying.exists():
            assert time.monotonic() < deadline, "the server did not stop for idleness"
            time.sleep(0.05)
        start = event("SessionStart", "s1", repo, source="startup")
        began = time.monotonic()
        result = run_hook(home, start, env={"CORTEX_HOOK_SERVER": "1"})
        took = time.monotonic() - began
    finally:
        stopping.kill()
        stopping.wait()
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert took < CLIENT_TIMEOUT_SECONDS  # it did not wait for the server
    assert log_lines(home) == []
    assert manager(home).store.get_session("s1") is not None


def test_a_stale_socket_falls_back_to_in_process(home: Path, repo: Path) -> None:
    run_dir = home / "run"
    run_dir.mkdir(parents=True)
    import socket

    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(socket_path(home))
    stale.close()  # the file stays; nothing listens
    (run_dir / "hook.spawned").touch()  # and no new server is started by this test
    result = run_hook(
        home, event("SessionStart", "s1", repo, source="startup"), env={"CORTEX_HOOK_SERVER": "1"}
    )
    assert (result.returncode, result.stdout) == (0, b"")
    assert manager(home).store.get_session("s1") is not None


def test_the_hook_server_sees_a_change_anywhere_in_the_package():
    """An upgrade that only touches a core or store module still retires a running server."""
    import os

    import cortex.core.scoring as changed
    from cortex.adapters.hooks.server import code_stamp

    before = code_stamp()
    info = os.stat(changed.__file__)
    try:
        os.utime(changed.__file__, ns=(info.st_atime_ns, info.st_mtime_ns + 10**12 * 3600))
        assert code_stamp() != before
    finally:
        os.utime(changed.__file__, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert code_stamp() == before


# -- migrations after an upgrade -------------------------------------------------------------------
M025 = "m025_memory_embeddings_in_rows"


def _vectors_before_m025(db: Path) -> None:
    """``db`` as Cortex left it before m025, with three memories' vectors in m012's table."""
    from cortex.store import SQLiteStore
    from cortex.store.sqlite.migrations import m012_memory_embeddings
    from store_contract_memory import memory

    with SQLiteStore(db) as store:
        store.add_memories([memory(name, f"text {name}") for name in "abc"])
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("DROP TABLE memory_embeddings")
        m012_memory_embeddings(conn)
        conn.execute(
            "INSERT INTO memory_embeddings SELECT seq, 'm', 384, zeroblob(1536) FROM memories"
        )
        conn.execute("DELETE FROM _cortex_migrations WHERE name = ?", (M025,))


def _applied(db: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return {name for (name,) in conn.execute("SELECT name FROM _cortex_migrations")}


def _sessions(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return int(conn.execute("SELECT count(*) FROM session_states").fetchone()[0])


def test_a_hook_leaves_the_migration_of_a_large_file_to_a_background_process(
    home: Path, repo: Path
) -> None:
    import fcntl

    db = home / "brain.db"
    _vectors_before_m025(db)
    large = {"CORTEX_HOOK_MIGRATE_MAX_MB": "0"}  # every file is over the limit
    (home / "run").mkdir(mode=0o700)
    lock = os.open(home / "run" / "migrate.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)  # another migration runs: the hook's exits at once
    try:
        result = run_hook(home, event("SessionStart", "s1", repo, source="startup"), env=large)
    finally:
        os.close(lock)
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    (line,) = [line for line in log_lines(home) if M025 in line]
    assert "run `cortex db migrate`" in line and "this event was not recorded" in line
    assert M025 not in _applied(db) and _sessions(db) == 0  # the file as it was

    # The lock free, the next hook's background migration applies the step.
    os.utime(home / "run" / "migrate.spawned", (0, 0))  # (started long ago)
    result = run_hook(home, event("UserPromptSubmit", "s1", repo, prompt="hello"), env=large)
    assert result.returncode == 0
    deadline = time.monotonic() + 60
    while M025 not in _applied(db) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert M025 in _applied(db)
    while not any("background migration" in line for line in log_lines(home)):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    (done,) = [line for line in log_lines(home) if "background migration" in line]
    assert f"applied {M025} in " in done
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT count(*) FROM memory_embeddings").fetchone() == (3,)

    # Migrated, the file is opened as any other: the event is recorded.
    result = run_hook(home, event("SessionStart", "s2", repo, source="startup"), env=large)
    assert result.returncode == 0
    assert manager(home).store.get_session("s2") is not None


def test_a_hook_migrates_a_small_file_itself(home: Path, repo: Path) -> None:
    db = home / "brain.db"
    _vectors_before_m025(db)
    result = run_hook(home, event("SessionStart", "s1", repo, source="startup"))
    assert result.returncode == 0
    assert M025 in _applied(db) and _sessions(db) == 1
    assert not (home / "run" / "migrate.spawned").exists()


def test_a_failed_background_migration_says_so_in_the_hooks_log(home: Path) -> None:
    from cortex.adapters.hooks.upgrade import migrate

    home.mkdir(parents=True, exist_ok=True)
    (home / "brain.db").write_bytes(b"not a database" * 100)
    line = migrate(home)
    assert line.startswith(f"background migration of {home / 'brain.db'} failed: ")
    assert "\n" not in line and log_lines(home)[-1].endswith(line)
    assert (home / "brain.db").read_bytes() == b"not a database" * 100


def test_a_server_that_cannot_listen_says_why_in_the_log(home: Path) -> None:
    """A directory where the socket goes: the server started for the next events exited with
    a traceback no one saw, and every hook ran alone with nothing in hooks.log to say why."""
    (home / "run").mkdir(parents=True)
    os.mkdir(socket_path(home))
    done = subprocess.run(
        [sys.executable, "-m", "cortex.adapters.hooks.server", str(home)],
        env=child_env(home), capture_output=True, timeout=60,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (1, b"")
    (line,) = log_lines(home)
    assert f"the hook server cannot listen at {socket_path(home)} (" in line
    assert line.endswith(
        "move away what is there and the next hook starts it (until then each hook runs alone)"
    )
    assert server_pid(home) is None
