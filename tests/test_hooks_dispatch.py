"""The hook dispatcher in-process: each event is one unit of work over the services, and a
prompt reads its session's row once (the row is passed along to the capture)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cortex.adapters.hooks.dispatch import handle
from cortex.adapters.hooks.hook import ServicesCache
from cortex.clock import Clock
from cortex.config import Config, load_config
from cortex.services.app import Services
from cortex.services.project import project_identity
from cortex.store import SQLiteStore

Run = Callable[..., str]


class TracedCache(ServicesCache):
    """The services over the test's own store, whose statements the test can trace."""

    def __init__(self, services: Services) -> None:
        super().__init__(keep=True)
        self.services = services

    def open(self, config: Config, clock: Clock) -> Services:
        return self.services.rebind(config, clock)

    def close(self) -> None:
        pass  # the test closes its store


@pytest.fixture
def store(home: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(load_config(home, {}).db_path)
    yield opened
    opened.close()


@pytest.fixture
def run(home: Path, tmp_path: Path, store: SQLiteStore) -> Run:
    """Handle one Claude Code event for session s1, as the hook server does."""
    cache = TracedCache(Services(store, load_config(home, {})))
    env = {"CORTEX_HOME": str(home), "CORTEX_NOW": "2026-02-16T09:00:00Z"}

    def run_event(name: str, **fields: Any) -> str:
        data = {"hook_event_name": name, "session_id": "s1", "cwd": str(tmp_path), **fields}
        return handle("claude-code", json.dumps(data).encode(), env, str(tmp_path), cache)

    return run_event


def session_reads(store: SQLiteStore, action: Callable[[], object]) -> int:
    """How many SELECTs of ``session_states`` rows ``action`` runs."""
    statements: list[str] = []
    store.connection.set_trace_callback(statements.append)
    try:
        action()
    finally:
        store.connection.set_trace_callback(None)
    return sum(s.startswith("SELECT") and "FROM session_states" in s for s in statements)


def test_a_prompt_reads_its_session_row_once(run: Run, store: SQLiteStore) -> None:
    run("SessionStart", source="startup")
    run("UserPromptSubmit", prompt="wire the CAT control")
    assert session_reads(store, lambda: run("UserPromptSubmit", prompt="tune the antenna")) == 1
    state = store.get_session("s1")
    assert state is not None and "antenna" in state.hot_topics


def test_a_tool_event_reads_its_session_row_once(run: Run, store: SQLiteStore) -> None:
    run("SessionStart", source="startup")
    tool = {"tool_name": "Bash", "tool_input": {"command": "rigctl -m 1036 f"}}
    assert session_reads(store, lambda: run("PostToolUse", **tool)) == 1


def test_a_failed_event_leaves_nothing_half_written(
    run: Run, store: SQLiteStore, home: Path
) -> None:
    run("SessionStart", source="startup")
    before = store.get_session("s1")
    store.connection.execute("DROP TABLE checkpoints")  # the write-ahead checkpoint will fail
    assert run("PreCompact", trigger="manual", custom_instructions="keep the CAT notes") == ""
    assert store.get_session("s1") == before  # the turn it recorded first was rolled back
    log = (home / "logs" / "hooks.log").read_text()
    assert "PreCompact" in log and "checkpoints" in log


@pytest.mark.parametrize(
    ("cwd", "env", "where"),
    [
        ("..", {}, "proj"),
        ("/tmp\0/x", {}, "proj/sub"),  # unusable: the hook's own directory
        ("", {"CLAUDE_PROJECT_DIR": "."}, "proj/sub"),
        (None, {"CLAUDE_PROJECT_DIR": "../.."}, ""),
    ],
)
def test_a_relative_or_unusable_directory_is_the_hook_processs_not_the_servers(
    home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cwd: str | None,
    env: dict[str, str],
    where: str,
) -> None:
    monkeypatch.chdir("/")  # where the hook server works from
    client_dir = tmp_path / "proj" / "sub"
    client_dir.mkdir(parents=True)
    data = {"hook_event_name": "SessionStart", "session_id": "s1", "source": "startup"}
    if cwd is not None:
        data["cwd"] = cwd
    event_env = {"CORTEX_HOME": str(home), "CORTEX_NOW": "2026-02-16T09:00:00Z", **env}
    handle("claude-code", json.dumps(data).encode(), event_env, str(client_dir))
    with SQLiteStore(load_config(home, {}).db_path) as store:
        state = store.get_session("s1")
    assert state is not None and state.project == project_identity(str(tmp_path / where)).id
