"""``cortex install/uninstall HOST`` and ``cortex doctor``, through the real CLI."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cortex.adapters.hooks import client as hook_client
from cortex.adapters.hooks.install import CLAUDE_HOOKS, CODEX_HOOKS, CURSOR_EVENTS, GEMINI_HOOKS
from cortex.adapters.hooks.install_hosts import CLIENT_FLAGS
from cortex.store import migration_names

ROOT = Path(__file__).resolve().parent.parent
CORTEX_BIN = str(Path(sys.executable).parent / "cortex")
HOOK_PROGRAM = shlex.join([sys.executable, *CLIENT_FLAGS, hook_client.__file__])


@pytest.fixture
def user(tmp_path: Path) -> Path:
    path = tmp_path / "user"
    path.mkdir()
    return path


def cortex(
    home: Path, user: Path, *args: str, input: bytes | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CORTEX_", "CLAUDE_"))}
    env.update(HOME=str(user), CORTEX_HOME=str(home), CORTEX_HOOK_SERVER="0")
    return subprocess.run(
        [sys.executable, "-m", "cortex.entry", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd or user,
        input=input.decode() if input is not None else None,
        timeout=60,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def read(path: Path) -> Any:
    return json.loads(path.read_text())


def our_command(home: Path, host: str) -> str:
    """What install writes: this interpreter running the hook client by path."""
    return f"{HOOK_PROGRAM} --home {home} hook {host}"


OTHER_HOOKS = {
    "model": "opus",
    "hooks": {
        "PostToolUse": [
            {"matcher": "Edit", "hooks": [{"type": "command", "command": "/usr/bin/lint.sh"}]}
        ],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    },
}


def test_claude_code_user_install_is_idempotent_and_uninstall_restores(
    home: Path, user: Path
) -> None:
    settings = user / ".claude" / "settings.json"
    settings.parent.mkdir()
    original = json.dumps(OTHER_HOOKS, indent=2) + "\n"
    settings.write_text(original)
    first = ok(cortex(home, user, "install", "claude-code"))
    assert first.splitlines() == [
        f"{settings}: updated (added {', '.join(s.event for s in CLAUDE_HOOKS)})",
        f"{user / '.claude.json'}: created (added mcpServers.cortex)",
    ]
    installed = settings.read_text()
    data = json.loads(installed)
    assert data["model"] == "opus"
    assert data["hooks"]["PostToolUse"][0] == OTHER_HOOKS["hooks"]["PostToolUse"][0]
    assert data["hooks"]["PostToolUse"][1] == {
        "matcher": "*",
        "hooks": [
            {
                "type": "command",
                "command": our_command(home, "claude-code"),
                "timeout": 30,
                "async": True,
            }
        ],
    }
    assert data["hooks"]["SessionStart"] == [
        {
            "matcher": "startup|resume|clear|compact",
            "hooks": [
                {"type": "command", "command": our_command(home, "claude-code"), "timeout": 15}
            ],
        }
    ]
    assert read(user / ".claude.json") == {
        "mcpServers": {
            "cortex": {"type": "stdio", "command": CORTEX_BIN, "args": ["--home", str(home), "mcp"]}
        }
    }
    second = ok(cortex(home, user, "install", "claude-code", "--user"))
    assert second.splitlines() == [
        f"{settings}: unchanged",
        f"{user / '.claude.json'}: unchanged",
    ]
    assert settings.read_text() == installed
    ok(cortex(home, user, "uninstall", "claude-code"))
    assert settings.read_text() == original
    assert not (user / ".claude.json").exists()


def test_claude_code_project_install_and_an_existing_mcp_file(
    home: Path, user: Path, tmp_path: Path
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    other_server = {"mcpServers": {"db": {"command": "db-mcp"}}}
    (project / ".mcp.json").write_text(json.dumps(other_server, indent=2) + "\n")
    ok(cortex(home, user, "install", "claude-code", "--project", str(project)))
    local = read(project / ".claude" / "settings.local.json")
    assert set(local["hooks"]) == {s.event for s in CLAUDE_HOOKS}
    servers = read(project / ".mcp.json")["mcpServers"]
    assert servers["db"] == {"command": "db-mcp"}
    assert servers["cortex"]["args"] == ["--home", str(home), "mcp", "--project-dir", str(project)]
    assert not (user / ".claude").exists()
    ok(cortex(home, user, "uninstall", "claude-code", "--project", str(project)))
    assert read(project / ".mcp.json") == other_server
    assert not (project / ".claude" / "settings.local.json").exists()


def test_dry_run_shows_a_diff_and_writes_nothing(home: Path, user: Path) -> None:
    out = ok(cortex(home, user, "install", "gemini", "--dry-run"))
    settings = user / ".gemini" / "settings.json"
    assert out.startswith(f"{settings}: would be created (would add SessionStart, ")
    assert f"--- /dev/null\n+++ {user / '.gemini' / 'settings.json'}" in out
    assert '+        "name": "cortex",' in out.replace("            ", "        ")
    assert not (user / ".gemini").exists()


def test_json_output(home: Path, user: Path) -> None:
    data = json.loads(ok(cortex(home, user, "--json", "install", "cursor")))
    assert data == {
        "dry_run": False,
        "files": [
            {
                "path": str(user / ".cursor" / "hooks.json"),
                "action": "created",
                "added": list(CURSOR_EVENTS),
                "removed": [],
                "notes": [],
            },
            {
                "path": str(user / ".cursor" / "mcp.json"),
                "action": "created",
                "added": ["mcpServers.cortex"],
                "removed": [],
                "notes": [],
            },
        ],
    }


def test_codex_toml_block_is_added_once_and_removed_exactly(home: Path, user: Path) -> None:
    config = user / ".codex" / "config.toml"
    config.parent.mkdir()
    original = 'model = "o3"\n\n[mcp_servers.other]\ncommand = "x"\n'
    config.write_text(original)
    ok(cortex(home, user, "install", "codex"))
    once = config.read_text()
    assert once == original + (
        "\n# >>> cortex: managed by `cortex install codex`; `cortex uninstall codex` removes it\n"
        f'[mcp_servers.cortex]\ncommand = "{CORTEX_BIN}"\n'
        f'args = ["--home", "{home}", "mcp"]\n# <<< cortex\n'
    )
    hooks = read(user / ".codex" / "hooks.json")["hooks"]
    assert list(hooks) == [s.event for s in CODEX_HOOKS]
    ok(cortex(home, user, "install", "codex"))
    assert config.read_text() == once
    ok(cortex(home, user, "uninstall", "codex"))
    assert config.read_text() == original
    assert not (user / ".codex" / "hooks.json").exists()


def test_someone_elses_cortex_entry_is_left_alone(home: Path, user: Path) -> None:
    config = user / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text('[mcp_servers.cortex]\ncommand = "/opt/other/server"\n')
    out = ok(cortex(home, user, "install", "codex"))
    assert "already has [mcp_servers.cortex]; left as it is" in out
    assert config.read_text() == '[mcp_servers.cortex]\ncommand = "/opt/other/server"\n'


def test_gemini_one_file_with_millisecond_timeouts(home: Path, user: Path) -> None:
    ok(cortex(home, user, "install", "gemini"))
    data = read(user / ".gemini" / "settings.json")
    assert [event for event in data["hooks"]] == [s.event for s in GEMINI_HOOKS]
    assert data["hooks"]["SessionStart"][0]["hooks"][0] == {
        "name": "cortex",
        "type": "command",
        "command": our_command(home, "gemini"),
        "timeout": 15000,
    }
    assert data["mcpServers"]["cortex"]["command"] == CORTEX_BIN
    ok(cortex(home, user, "uninstall", "gemini"))
    assert not (user / ".gemini" / "settings.json").exists()


def test_a_broken_settings_file_is_never_rewritten(home: Path, user: Path) -> None:
    settings = user / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{ not json")
    result = cortex(home, user, "install", "claude-code")
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: {settings} is not valid JSON (")
    assert result.stderr.rstrip().endswith("fix it or move it aside, then rerun")
    assert len(result.stderr.splitlines()) == 1
    assert settings.read_text() == "{ not json"


def test_project_and_user_together_is_a_usage_error(home: Path, user: Path) -> None:
    result = cortex(home, user, "install", "claude-code", "--user", "--project", ".")
    assert result.returncode == 2 and "choose one of --project DIR and --user" in result.stderr


def test_the_plugin_folder_matches_the_installed_hooks() -> None:
    plugin = ROOT / "integrations" / "claude-code"
    assert read(plugin / ".claude-plugin" / "plugin.json")["name"] == "cortex"
    hooks = read(plugin / "hooks" / "hooks.json")["hooks"]
    assert list(hooks) == [s.event for s in CLAUDE_HOOKS]
    for spec in CLAUDE_HOOKS:
        (group,) = hooks[spec.event]
        assert group.get("matcher") == spec.matcher
        (handler,) = group["hooks"]
        assert handler["command"] == "${CORTEX_BIN:-cortex} hook claude-code"
        assert handler.get("async", False) == spec.is_async
    assert read(plugin / ".mcp.json") == {
        "mcpServers": {"cortex": {"command": "${CORTEX_BIN:-cortex}", "args": ["mcp"]}}
    }


# -- doctor ----------------------------------------------------------------------------------------
def test_doctor_fails_until_capture_works(home: Path, user: Path) -> None:
    nothing = cortex(home, user, "doctor")
    assert nothing.returncode == 1
    assert "no hooks are installed for any host" in nothing.stdout
    ok(cortex(home, user, "install", "claude-code"))
    waiting = cortex(home, user, "doctor")
    assert waiting.returncode == 1
    assert "claude-code: hooks are installed" in waiting.stdout
    assert "no event has reached Cortex yet" in waiting.stdout
    start = {"hook_event_name": "SessionStart", "session_id": "d1", "cwd": str(user)}
    ok(cortex(home, user, "hook", "claude-code", input=json.dumps(start).encode()))
    healthy = cortex(home, user, "--json", "doctor")
    report = json.loads(healthy.stdout)
    assert healthy.returncode == 0, report["problems"]
    assert report["ok"] is True and report["problems"] == []
    assert report["hosts"]["claude-code"]["last_event"]["event"] == "SessionStart"
    assert report["database"]["quick_check"] == "ok"
    assert report["database"]["pending_migrations"] == []
    assert [s["session_id"] for s in report["sessions"]] == ["d1"]
    assert report["sessions"][0]["lease"] == "live"
    text = ok(cortex(home, user, "doctor"))
    assert text.rstrip().endswith("ok: capture is working")


def test_doctor_checks_the_home_the_installed_hooks_use(home: Path, user: Path) -> None:
    custom = user / "elsewhere"
    ok(cortex(custom, user, "install", "claude-code"))  # hooks run `cortex --home custom`
    start = {"hook_event_name": "SessionStart", "session_id": "d1", "cwd": str(user)}
    ok(cortex(custom, user, "hook", "claude-code", input=json.dumps(start).encode()))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CORTEX_", "CLAUDE_"))}
    env.update(HOME=str(user), CORTEX_HOOK_SERVER="0")  # no CORTEX_HOME: the default home
    found = subprocess.run(
        [sys.executable, "-m", "cortex.entry", "--json", "doctor"],
        capture_output=True, text=True, env=env, cwd=user, timeout=60,
    )  # fmt: skip
    report = json.loads(found.stdout)
    assert found.returncode == 0, report["problems"]
    assert report["home"] == str(custom)
    assert [s["session_id"] for s in report["sessions"]] == ["d1"]
    named = json.loads(cortex(home, user, "--json", "doctor").stdout)
    assert named["home"] == str(home)
    assert f"claude-code: the hooks write to {custom}, not {home}" in named["problems"][0]


def test_uninstall_removes_the_folders_it_made_and_stops_the_hook_server(
    home: Path, user: Path
) -> None:
    from cortex.adapters.hooks.server import server_pid

    (user / "proj").mkdir()
    ok(cortex(home, user, "install", "cursor", "--project", str(user / "proj")))
    assert (user / "proj" / ".cursor" / "hooks.json").is_file()
    start = {"hook_event_name": "sessionStart", "conversation_id": "c1", "cwd": str(user)}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CORTEX_", "CLAUDE_"))}
    env.update(HOME=str(user), CORTEX_HOME=str(home), CORTEX_HOOK_SERVER="1")
    subprocess.run(
        [sys.executable, "-m", "cortex.entry", "hook", "cursor"],
        input=json.dumps(start).encode(), env=env, capture_output=True, timeout=60,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while server_pid(home) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = server_pid(home)
    assert pid is not None
    out = ok(cortex(home, user, "uninstall", "cursor", "--project", str(user / "proj")))
    assert f"removed the empty folder {user / 'proj' / '.cursor'}" in out
    assert f"stopped the hook server (pid {pid})" in out
    assert not (user / "proj" / ".cursor").exists() and (user / "proj").is_dir()
    deadline = time.monotonic() + 20
    while server_pid(home) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server_pid(home) is None


def test_doctor_reports_a_failed_event_and_a_broken_database(home: Path, user: Path) -> None:
    ok(cortex(home, user, "install", "claude-code"))
    bad = {"hook_event_name": "Stop", "session_id": "../x"}
    ok(cortex(home, user, "hook", "claude-code", input=json.dumps(bad).encode()))
    result = cortex(home, user, "doctor")
    assert result.returncode == 1
    assert "claude-code: the last event (Stop," in result.stdout
    assert "failed: invalid session id (4 characters, not shown)" in result.stdout
    (home / "brain.db").write_bytes(b"this is not a database" * 100)
    broken = cortex(home, user, "doctor")
    assert broken.returncode == 1
    assert "is not a Cortex database or is damaged" in broken.stdout


def _damaged_copy(home: Path, user: Path, damage: Callable[[bytearray, Path], None]) -> Path:
    """A new home whose brain.db is a copy of a working one, then damaged in place."""
    ok(cortex(home, user, "session", "start", "--session-id", "s1"))
    ok(cortex(home, user, "memory", "add", "deploys go to eu-west-1"))
    copy = home.parent / "damaged"
    copy.mkdir()
    data = bytearray((home / "brain.db").read_bytes())
    damage(data, home / "brain.db")
    (copy / "brain.db").write_bytes(data)
    return copy


def _problems(stdout: str) -> list[str]:
    return stdout.split("PROBLEMS:\n", 1)[1].splitlines()


def test_doctor_reports_a_damaged_schema_page_in_one_line(home: Path, user: Path) -> None:
    def garble_schema_text(data: bytearray, _db: Path) -> None:
        start = data.index(b"CREATE TABLE memories")
        quote = data.rfind(b"'", start, data.index(b"deleted_at TEXT", start))
        # The last string literal loses its closing quote to non-UTF-8 bytes, which SQLite's
        # "unrecognized token" error then quotes.
        data[quote - 3 : quote + 1] = b"\xab" * 4

    damaged = _damaged_copy(home, user, garble_schema_text)
    result = cortex(damaged, user, "doctor")
    assert result.returncode == 1 and "unexpected" not in result.stderr
    assert _problems(result.stdout)[-1] == (
        f"  - database: {damaged / 'brain.db'} is damaged (SQLite reports unreadable text: "
        "invalid start byte); move it aside (a new one is created) or restore a backup"
    )


def test_doctor_reports_a_damaged_index_page_in_one_line(home: Path, user: Path) -> None:
    def garble_index_page(data: bytearray, db: Path) -> None:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            (root,) = conn.execute(
                "SELECT rootpage FROM sqlite_master WHERE name = 'idx_session_start'"
            ).fetchone()
            size = conn.execute("PRAGMA page_size").fetchone()[0]
        start = (root - 1) * size
        data[start + 8 : start + 200] = b"\xab" * 192

    damaged = _damaged_copy(home, user, garble_index_page)
    result = cortex(damaged, user, "doctor")
    assert result.returncode == 1 and "unexpected" not in result.stderr
    problems = _problems(result.stdout)
    assert all(line.startswith("  - ") for line in problems)
    assert problems[-1].startswith(f"  - database {damaged / 'brain.db'} is damaged (")
    assert problems[-1].endswith("); restore a backup or move it aside")


def test_doctor_reports_an_unmigrated_database(home: Path, user: Path) -> None:
    home.mkdir(parents=True)
    sqlite3.connect(home / "brain.db").close()
    result = cortex(home, user, "doctor")
    assert result.returncode == 1
    assert "pending migration(s) (m001_session_states, ...); run `cortex db migrate`" in (
        result.stdout
    )


def test_doctor_says_a_background_migration_is_applying_the_pending_steps(
    home: Path, user: Path
) -> None:
    import fcntl

    home.mkdir(parents=True)
    sqlite3.connect(home / "brain.db").close()
    (home / "run").mkdir()
    lock = os.open(home / "run" / "migrate.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)  # as the background migration a hook started holds it
    try:
        result = cortex(home, user, "doctor")
    finally:
        os.close(lock)
    assert result.returncode == 1
    assert (
        "pending migration(s) (m001_session_states, ...); a background migration started by a "
        "hook is applying them (logs/hooks.log says when it is done)"
    ) in result.stdout
    assert "run `cortex db migrate`" not in result.stdout
    assert "run `cortex db migrate`" in cortex(home, user, "doctor").stdout  # lock let go


def test_doctor_names_db_vacuum_when_the_file_holds_much_free_space(home: Path, user: Path) -> None:
    ok(cortex(home, user, "session", "start", "--session-id", "s1"))
    line = [x for x in cortex(home, user, "doctor").stdout.splitlines() if x.startswith("data")]
    migrations = len(migration_names())
    assert line == [f"database: {home / 'brain.db'} (quick_check ok, {migrations} migrations)"]
    with sqlite3.connect(home / "brain.db") as conn:  # 20 MB of pages made free
        conn.execute("CREATE TABLE scratch (data BLOB)")
        conn.executemany("INSERT INTO scratch VALUES (?)", [(b"x" * 4000,)] * 5000)
    with sqlite3.connect(home / "brain.db") as conn:
        conn.execute("DROP TABLE scratch")
    report = json.loads(cortex(home, user, "--json", "doctor").stdout)
    assert report["database"]["free_bytes"] >= 20_000_000
    text = cortex(home, user, "doctor").stdout
    assert "MB of it free: `cortex db vacuum` hands it back)" in text
    ok(cortex(home, user, "db", "vacuum"))
    assert json.loads(cortex(home, user, "--json", "doctor").stdout)["database"]["free_bytes"] == 0


def test_doctor_names_db_vacuum_when_the_search_index_has_many_segments(
    home: Path, user: Path
) -> None:
    from cortex.services.app import MERGE_SEGMENTS as SEGMENTS_HINT
    from cortex.store import SQLiteStore
    from store_contract_memory import memory

    def segments() -> int:
        report = json.loads(cortex(home, user, "--json", "doctor").stdout)
        count = report["database"]["search_index_segments"]
        assert isinstance(count, int)
        return count

    ok(cortex(home, user, "session", "start", "--session-id", "s1"))
    with SQLiteStore(home / "brain.db") as store:
        store.add_memories([memory("m0", "deploy note 0")])
        store.add_memories([memory("m1", "deploy note 1")])
    assert 1 <= segments() < SEGMENTS_HINT
    assert "search index in" not in cortex(home, user, "doctor").stdout  # a few: no hint
    with SQLiteStore(home / "brain.db") as store:
        for i in range(2, 60):  # a commit, a segment, each (FTS5 merges some of them)
            store.add_memories([memory(f"m{i}", f"deploy note {i}")])
            if store.search_index_segments() >= SEGMENTS_HINT:
                break
    count = segments()
    assert count >= SEGMENTS_HINT
    text = cortex(home, user, "doctor").stdout
    assert f"; search index in {count} segments: `cortex db vacuum` merges them)" in text
    ok(cortex(home, user, "db", "vacuum"))
    assert segments() == 1
    assert "search index in" not in cortex(home, user, "doctor").stdout


# -- the hook client's command line ---------------------------------------------------------------
def installed_command(settings: Path, event: str) -> str:
    command = read(settings)["hooks"][event][0]["hooks"][0]["command"]
    assert isinstance(command, str)
    return command


def test_the_installed_command_runs_the_hook_client_with_and_without_a_server(
    home: Path, user: Path
) -> None:
    from cortex.adapters.hooks.server import server_pid
    from test_hooks import manager, wait_for_server

    ok(cortex(home, user, "install", "claude-code", "--no-mcp"))
    command = installed_command(user / ".claude" / "settings.json", "SessionStart")
    assert command == our_command(home, "claude-code")
    # What a host passes: no CORTEX_HOME (the command names it); a PYTHONPATH that `-I` ignores.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CORTEX_", "CLAUDE_"))}
    env.update(HOME=str(user), PYTHONPATH=str(user / "nowhere"), CORTEX_HOOK_SERVER_IDLE="30")

    def hook(payload: dict[str, Any], *flags: str) -> subprocess.CompletedProcess[bytes]:
        words = shlex.split(command)
        return subprocess.run(
            [words[0], *flags, *words[1:]],
            input=json.dumps(payload).encode(), env=env, cwd=user, capture_output=True,
            timeout=60,
        )  # fmt: skip

    start = {"hook_event_name": "SessionStart", "session_id": "c1", "cwd": str(user)}
    first = hook(start)  # no server yet: handled in-process, then one is started
    assert (first.returncode, first.stderr) == (0, b"")
    pid = wait_for_server(home)  # which the client started
    try:
        prompt = {**start, "hook_event_name": "UserPromptSubmit", "prompt": "tune the antenna"}
        served = hook(prompt, "-X", "importtime")
        assert served.returncode == 0
        imported = {line.split("|")[-1].strip() for line in served.stderr.decode().splitlines()}
        assert "_socket" in imported  # it asked the server...
        assert not {m for m in imported if m.startswith(("cortex", "site", "json"))}  # ...only
        state = manager(home).store.get_session("c1")
        assert state is not None and "antenna" in state.hot_topics
        command = command.replace("hook claude-code", "hook bogus")  # the server refuses it
        assert hook(prompt).returncode == 0
        assert "unknown host 'bogus'" in (home / "logs" / "hooks.log").read_text()
        assert server_pid(home) == pid  # and serves on
        command = our_command(home, "claude-code")
    finally:
        os.kill(pid, 15)
    refused = hook({**start, "session_id": "c2"}, "-I")  # "-I" twice is fine; no server now
    assert refused.returncode == 0
    assert manager(home).store.get_session("c2") is not None


def test_an_install_of_the_console_script_is_recognized_replaced_and_removed(
    home: Path, user: Path
) -> None:
    """Installs written before the hook client keep working: doctor, install and uninstall
    all treat ``cortex --home HOME hook HOST`` as Cortex's hook."""
    settings = user / ".claude" / "settings.json"
    settings.parent.mkdir()
    old = f"{CORTEX_BIN} --home {home} hook claude-code"
    groups = {"SessionStart": [{"hooks": [{"type": "command", "command": old}]}]}
    settings.write_text(json.dumps({"hooks": groups}))
    report = json.loads(cortex(home, user, "--json", "doctor").stdout)
    assert report["hosts"]["claude-code"]["installed"] == [{"path": str(settings), "command": old}]
    removed = ok(cortex(home, user, "uninstall", "claude-code"))
    assert f"{settings}: deleted (removed SessionStart)" in removed
    settings.parent.mkdir(exist_ok=True)
    settings.write_text(json.dumps({"hooks": groups}))
    ok(cortex(home, user, "install", "claude-code", "--no-mcp"))
    data = read(settings)
    assert [h["command"] for g in data["hooks"]["SessionStart"] for h in g["hooks"]] == [
        our_command(home, "claude-code")
    ]


def test_doctor_reports_a_hook_client_that_is_gone(home: Path, user: Path) -> None:
    ok(cortex(home, user, "install", "claude-code", "--no-mcp"))
    settings = user / ".claude" / "settings.json"
    gone = str(user / "old-venv" / "cortex" / "adapters" / "hooks" / "client.py")
    settings.write_text(settings.read_text().replace(hook_client.__file__, gone))
    report = json.loads(cortex(home, user, "--json", "doctor").stdout)
    assert (
        f"claude-code: the hook command's program {gone} is gone; rerun `cortex install "
        "claude-code`" in report["problems"]
    )
    assert not any(sys.executable in p for p in report["problems"])


# What each host's latest release reads, taken from the published packages (checked 2026-11-24):
# Codex CLI 0.169.0 (@openai/codex, the linux-x64 binary's hook schemas and messages) and
# Gemini CLI 0.61.0 (@google/gemini-cli, its bundled hook registry and settings schema).
# Cursor is not published as a package: its events are those of Cursor's hooks documentation.
HOST_EVENTS = {
    "codex": {
        "SessionStart", "SessionEnd", "UserPromptSubmit", "PreToolUse", "PermissionRequest",
        "PostToolUse", "PreCompact", "PostCompact", "SubagentStart", "SubagentStop", "Stop",
        "Interrupt",
    },
    "gemini": {
        "BeforeTool", "AfterTool", "BeforeAgent", "Notification", "AfterAgent", "SessionStart",
        "SessionEnd", "PreCompress", "BeforeModel", "AfterModel", "BeforeToolSelection",
    },
    "cursor": {
        "sessionStart", "sessionEnd", "beforeSubmitPrompt", "preToolUse", "postToolUse",
        "postToolUseFailure", "subagentStart", "subagentStop", "beforeShellExecution",
        "afterShellExecution", "beforeMCPExecution", "afterMCPExecution", "beforeReadFile",
        "afterFileEdit", "afterAgentResponse", "afterAgentThought", "preCompact", "stop",
    },
}  # fmt: skip
# The keys of a command handler each release reads. Codex 0.169.0 accepts ``async`` but runs
# such a handler synchronously with a warning; Gemini 0.61.0 has no async flag (a group's
# handlers run in parallel unless the group says ``sequential``).
HANDLER_KEYS = {
    "codex": {"type", "command", "timeout", "statusMessage"},
    "gemini": {"type", "command", "name", "timeout", "description"},
    "cursor": {"command", "timeout", "matcher"},
}
CODEX_START_SOURCES = ("startup", "resume", "clear", "compact", "fork")


@pytest.mark.parametrize("host", sorted(HOST_EVENTS))
def test_the_written_hooks_are_what_the_hosts_latest_release_reads(host: str, user: Path) -> None:
    from cortex.adapters.hooks.events import KINDS
    from cortex.adapters.hooks.install_hosts import target, wanted_hooks

    where = target(host, project=None, user_home=user, cortex_bin=CORTEX_BIN, cortex_home=None)
    wanted = wanted_hooks(where)
    assert wanted
    for event, handler, entry in wanted:
        assert event in HOST_EVENTS[host], event
        assert event in KINDS[host], event  # and the hook understands what it registered
        assert set(handler) <= HANDLER_KEYS[host], (event, handler)
        assert "async" not in handler
        if host != "cursor":
            assert handler["type"] == "command" and set(entry) <= {"matcher", "hooks"}
    if host == "codex":
        (start,) = [entry for event, _, entry in wanted if event == "SessionStart"]
        assert start["matcher"].split("|") == list(CODEX_START_SOURCES)
    if host == "gemini":  # milliseconds: at least a second, at most the default minute
        assert all(1000 <= handler["timeout"] <= 60_000 for _, handler, _ in wanted)


def test_doctor_reports_a_database_that_cannot_be_written(home: Path, user: Path) -> None:
    ok(cortex(home, user, "install", "claude-code"))
    ok(cortex(home, user, "session", "start", "--session-id", "s1"))
    db = home / "brain.db"
    root = os.geteuid() == 0  # root writes read-only files: the immutable flag stops it
    lock, unlock = (["chattr", "+i", str(db)], ["chattr", "-i", str(db)]) if root else ([], [])
    if root:
        subprocess.run(lock, check=True)
    else:
        db.chmod(0o444)
    try:
        result = cortex(home, user, "doctor")
        refused = cortex(home, user, "session", "start", "--session-id", "s2")
    finally:
        if root:
            subprocess.run(unlock, check=True)
        else:
            db.chmod(0o600)
    assert refused.returncode != 0  # what doctor must warn of
    assert result.returncode == 1
    assert f"database {db} cannot be written (attempt to write a readonly database)" in (
        result.stdout
    )
    healthy = cortex(home, user, "doctor")
    assert "cannot be written" not in healthy.stdout


def test_install_into_a_project_directory_that_does_not_exist_is_refused(
    home: Path, user: Path
) -> None:
    """A typo in ``--project`` made the whole tree of folders and installed the hooks there."""
    typo = user / "porj" / "api"
    done = cortex(home, user, "install", "claude-code", "--project", str(typo))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == f"error: no directory {typo}; give an existing project's directory\n"
    assert not (user / "porj").exists()


def test_doctor_probes_the_database_of_a_home_whose_path_holds_hash_and_question_marks(
    tmp_path: Path, user: Path
) -> None:
    # SQLite reads a URI's '#' as the start of a fragment: unescaped, the write probe opened
    # (and made) a database at the path cut there, and checked that one instead.
    home = tmp_path / "a#1?b"
    ok(cortex(home, user, "session", "start", "--project", "p"))
    result = cortex(home, user, "doctor")
    assert "cannot be written" not in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a#1?b", "user"]
