"""Hooks in a home they cannot write: real hook processes, each confined the way a user or a
mount confines it, so that the tests hold for the superuser too (whom file modes do not stop).

- ``modes``: the home's folder 0555 and its ``brain.db`` 0444, the hook run by a plain user
  (the superuser's own process, in a user namespace that maps it to one).
- ``mount``: the home bind-mounted read-only in a mount namespace of the hook's own.

Where the system allows neither, the test says so and is skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from test_hooks import (
    LATER,
    context_of,
    cortex_cli,
    event,
    hook_process,
    make_repo,
    manager,
    run_hook,
)

STORED_NOTHING = (
    "is read-only to this process: answered from a copy of its database, stored nothing"
)
RECORDED_NOTHING = "is read-only to this process: nothing recorded"
FIX = "; make it writable, or point CORTEX_HOME at a writable home"


def runs(prefix: list[str]) -> bool:
    """Whether this system runs a command behind ``prefix``."""
    try:
        done = subprocess.run([*prefix, "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def confinement(way: str, home: Path) -> list[str]:
    """The command prefix that runs a process to which ``home`` is read-only ``way`` (for
    ``modes``, once ``read_only`` set them); skips when this system cannot have one."""
    root = os.geteuid() == 0
    if way == "modes" and not root:
        return []
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("needs unshare(1) to confine a hook here")
    if way == "modes":  # the superuser's process, run as a plain user: modes bind it
        prefix = [unshare, "--user", "--map-user=1000", "--map-group=1000"]
    else:
        prefix = [unshare, "--mount", "--propagation", "private"]
        prefix += [] if root else ["--map-root-user"]
        prefix += ["sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"', str(home)]
    if not runs(prefix):
        pytest.skip(f"this system does not run {' '.join(prefix[:4])} (namespaces are off)")
    return prefix


@contextlib.contextmanager
def read_only(home: Path, way: str, *, folder: bool = True) -> Iterator[list[str]]:
    """``home`` read-only (its folder too unless ``folder`` is False) to the processes run
    with the prefix this yields; its modes are given back afterwards."""
    prefix = confinement(way, home)
    files = [p for p in home.glob("brain.db*") if p.is_file()]
    if way == "modes":
        for path in files:
            path.chmod(0o444)
        if folder:
            home.chmod(0o555)
    try:
        yield prefix
    finally:
        home.chmod(0o700)
        for path in files:
            path.chmod(0o600)


def hook(
    prefix: list[str], home: Path, payload: dict[str, Any], **kwargs: Any
) -> subprocess.CompletedProcess[bytes]:
    """One hook process confined by ``prefix``, two days after ``lived_in`` (``hook_process``)."""
    return hook_process(home, payload, prefix=tuple(prefix), now=LATER, **kwargs)


def contents(home: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and folder (None) under ``home``."""
    return {
        str(p.relative_to(home)): p.read_bytes() if p.is_file() else None
        for p in sorted(home.rglob("*"))
    }


BOOKKEEPING = {"logs", "logs/hooks.log", "hooks/status/claude-code.json"}
"""What a hook still writes where a read-only home lets it (a folder in it left writable): its
log line and the host's status, which say that nothing was stored."""


def changed(before: dict[str, bytes | None], after: dict[str, bytes | None]) -> set[str]:
    gone = b"(not there)"
    return {n for n in {*before, *after} if after.get(n, gone) != before.get(n, gone)}


def lived_in(home: Path, repo: Path) -> None:
    """A home as a day of work leaves it: an ended session with a critical pin and a pending
    task, then one that crashed (still open when the next start comes, two days later)."""
    run_hook(home, event("SessionStart", "s0", repo, source="startup"))
    cortex_cli(
        home, "pin", "add", "deploy", "make deploy ENV=staging", "--critical", "--session-id", "s0"
    )
    cortex_cli(home, "task", "add", "task-7", "Rotate the signing keys", "--stage", "build")
    run_hook(home, event("UserPromptSubmit", "s0", repo, prompt="fix the flaky auth test"))
    run_hook(home, event("SessionEnd", "s0", repo))
    run_hook(home, event("SessionStart", "s1", repo, source="startup"))
    run_hook(home, event("UserPromptSubmit", "s1", repo, prompt="tune the ft991a cat control"))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "radio")


@pytest.fixture(params=["modes", "mount"])
def way(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# -- a start answers what a writable copy of the home answers --------------------------------------
@pytest.mark.parametrize(("entry", "server"), [("console script", "0"), ("hook client", "1")])
def test_a_start_in_a_read_only_home_answers_as_a_writable_copy_and_stores_nothing(
    home: Path, repo: Path, tmp_path: Path, way: str, entry: str, server: str
) -> None:
    lived_in(home, repo)
    writable = Path(shutil.copytree(home, tmp_path / "writable"))
    start = event("SessionStart", "s2", repo, source="startup")
    expected = context_of(run_hook(writable, start, now=LATER), "SessionStart")
    assert "RECOVERED AFTER CRASH: s1" in expected and "[task-7]" in expected
    assert "make deploy ENV=staging" in expected
    before = contents(home)
    with read_only(home, way) as prefix:
        env = {"CORTEX_HOOK_SERVER": server, "CORTEX_HOOK_SERVER_IDLE": "5"}
        result = hook(prefix, home, start, entry=entry, env=env)
        assert context_of(result, "SessionStart") == expected
        lines = result.stderr.decode().splitlines()  # (the log cannot be written: stderr)
        assert len(lines) == 1 and lines[0].startswith("cortex hook: "), lines
        assert f"claude-code SessionStart 's2': the home {home} {STORED_NOTHING}{FIX}" in lines[0]
        # No session, mirror, hook state, socket or lock file; the host's status where its
        # folder (0700 in the 0555 home) can be written.
        assert changed(before, contents(home)) <= BOOKKEEPING
    assert manager(home).store.get_session("s2") is None
    assert manager(writable).store.get_session("s2") is not None  # (what the copy stored)


def test_every_other_event_in_a_read_only_home_exits_0_with_one_line(
    home: Path, repo: Path, way: str
) -> None:
    lived_in(home, repo)
    before = contents(home)
    events = [
        event("UserPromptSubmit", "s1", repo, prompt="and the antenna tuner"),
        event("PostToolUse", "s1", repo, tool_name="Bash", tool_input={"command": "make"}),
        event("PreCompact", "s1", repo, trigger="auto"),
        event("PostCompact", "s1", repo, compact_summary="tuned the rig"),
        event("Stop", "s1", repo, last_assistant_message="done"),
        event("SessionEnd", "s1", repo),
    ]
    with read_only(home, way) as prefix:
        for payload in events:
            result = hook(prefix, home, payload)
            assert (result.returncode, result.stdout) == (0, b"")
            lines = result.stderr.decode().splitlines()
            name = payload["hook_event_name"]
            assert (
                len(lines) == 1 and f" {name} 's1': the home {home} {RECORDED_NOTHING}" in lines[0]
            )
        assert changed(before, contents(home)) <= BOOKKEEPING
    state = manager(home).store.get_session("s1")
    assert state is not None and state.end_time is None  # as it was: nothing recorded


def test_a_read_only_database_in_a_writable_folder_is_left_as_it_was(
    home: Path, repo: Path, tmp_path: Path
) -> None:
    # SQLite makes a database's log files beside it when the folder lets it, for a reader
    # too: the copy is read without them, and the folder keeps only the hooks' log line and
    # status (what `cortex doctor` reports).
    lived_in(home, repo)
    writable = Path(shutil.copytree(home, tmp_path / "writable"))
    start = event("SessionStart", "s2", repo, source="startup")
    expected = context_of(run_hook(writable, start, now=LATER), "SessionStart")
    before = contents(home)
    with read_only(home, "modes", folder=False) as prefix:
        result = hook(prefix, home, start)
        assert context_of(result, "SessionStart") == expected
        assert result.stderr == b""
    after = contents(home)
    assert changed(before, after) == BOOKKEEPING
    (line,) = after["logs/hooks.log"].decode().splitlines()  # type: ignore[union-attr]
    assert f"SessionStart 's2': {home / 'brain.db'} {STORED_NOTHING}{FIX}" in line
    status = json.loads(after["hooks/status/claude-code.json"] or b"")
    assert (status["event"], status["ok"]) == ("SessionStart", False)
    assert not (home / "run").exists()  # no hook server for a home it could not write to


def test_a_start_reads_what_only_the_write_ahead_log_holds(
    home: Path, repo: Path, tmp_path: Path, way: str
) -> None:
    lived_in(home, repo)
    live = tmp_path / "live"
    shutil.copytree(home, live)
    conn = sqlite3.connect(live / "brain.db")  # held open: the writer's close keeps its log
    try:
        conn.execute("SELECT count(*) FROM session_states").fetchone()
        cortex_cli(
            live, "pin", "add", "rig", "FT-991A on ttyUSB0", "--critical", "--session-id", "s1"
        )
        for name in ("brain.db", "brain.db-wal", "brain.db-shm"):
            shutil.copy2(live / name, home / name)  # a writer's files, as it holds them open
    finally:
        conn.close()
    assert (home / "brain.db-wal").stat().st_size > 0
    start = event("SessionStart", "s2", repo, source="startup")
    writable = Path(shutil.copytree(home, tmp_path / "writable"))
    expected = context_of(run_hook(writable, start, now=LATER), "SessionStart")
    assert "FT-991A on ttyUSB0" in expected  # only the log has it
    before = contents(home)
    with read_only(home, way) as prefix:
        assert context_of(hook(prefix, home, start), "SessionStart") == expected
        assert changed(before, contents(home)) <= BOOKKEEPING
    # Without its shared-memory file a log can be read only where that file can be made.
    (home / "brain.db-shm").unlink()
    with read_only(home, way) as prefix:
        result = hook(prefix, home, start)
        assert (result.returncode, result.stdout) == (0, b"")
        (line,) = result.stderr.decode().splitlines()
        assert "nothing restored or recorded (database " in line
        assert "its write-ahead log holds commits that only a process that can write" in line


def test_a_database_larger_than_a_hook_copies_is_not_copied(
    home: Path, repo: Path, way: str
) -> None:
    lived_in(home, repo)
    start = event("SessionStart", "s2", repo, source="startup")
    with read_only(home, way) as prefix:
        result = hook(prefix, home, start, options=("--set", "hook_migrate_max_mb=0.01"))
    assert (result.returncode, result.stdout) == (0, b"")
    (line,) = result.stderr.decode().splitlines()
    assert "nothing restored or recorded (database " in line
    assert "more than a hook copies into memory (hook_migrate_max_mb = 0.01)" in line


def test_a_failed_restore_in_a_read_only_home_is_named_in_its_one_line(
    home: Path, repo: Path, tmp_path: Path, way: str
) -> None:
    """The engine's lines about writes the copy could not make are expected and dropped; a
    restore that failed is said, as a writable home's hooks.log says it, credential redacted."""
    lived_in(home, repo)
    conn = sqlite3.connect(home / "brain.db")
    with conn:  # an ended session whose end no restore can read (a credential in it)
        conn.execute("UPDATE session_states SET end_time = ? WHERE id = 's0'", [f"2026-2 {KEY}"])
    conn.close()
    writable = Path(shutil.copytree(home, tmp_path / "writable"))
    start = event("SessionStart", "s2", repo, source="startup")
    written = run_hook(writable, start, now=LATER)
    assert context_of(written, "SessionStart") == (  # nothing inherited, crash recovery said
        "[SESSION CONTINUITY — nothing inherited: restoration failed, starting cold]\n"
        "RECOVERED AFTER CRASH: s1"
    )
    expected = written.stdout
    cold = (
        "restoration failed, starting cold: not an ISO 8601 time: '2026-2 [REDACTED]'; "
        "use a form like 2026-02-18T09:00:00Z"
    )
    assert (writable / "logs/hooks.log").read_text().splitlines()[-1].endswith(f"engine: {cold}")
    with read_only(home, way) as prefix:
        result = hook(prefix, home, start)
    assert (result.returncode, result.stdout) == (0, expected)
    (line,) = result.stderr.decode().splitlines()
    assert line.endswith(f"{home} {STORED_NOTHING}, and {cold}{FIX}"), line
    assert KEY not in line and "not written" not in line


KEY = "AKIAIOSFODNN7EXAMPLE"
