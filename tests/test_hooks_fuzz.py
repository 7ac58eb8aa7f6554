"""Fuzzing the hook input: whatever arrives, no bug surfaces, the answer is well formed and
stored data survives. In-process (``dispatch.handle``, as the server runs it) for speed, with
``CORTEX_RAISE_ERRORS=1`` so that anything but a refusal of bad input fails the test."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortex.adapters.hooks.dispatch import handle
from cortex.adapters.hooks.events import KINDS, normalize
from cortex.adapters.hooks.hook import ServicesCache
from cortex.config import load_config
from cortex.services.sessions.manager import SessionPersistenceManager

hosts = st.sampled_from(sorted(KINDS))
EVENT_NAMES = sorted({name for names in KINDS.values() for name in names})
FUZZ = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
    | st.sampled_from(["\ud800 lone surrogate", "x\udcff", "\u0000", "../../etc", "\u202e"]),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
valid_ids = st.sampled_from(["fz-1", "fz-2", "c0ffee00-0000-4000-8000-000000000000"])
junk_ids = st.text(max_size=30) | json_values


def mostly(common: st.SearchStrategy[Any], rare: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``common`` nine times in ten (hypothesis alone would pick branches evenly)."""
    return st.integers(0, 9).flatmap(lambda n: common if n else rare)


session_ids = mostly(valid_ids, junk_ids)


@st.composite
def hook_inputs(draw: st.DrawFn, host: str, cwd: str) -> dict[str, Any]:
    """Objects shaped like ``host``'s input: mostly its own events and valid ids, real field
    names, values of any type."""
    own = st.sampled_from(sorted(KINDS[host]))
    data: dict[str, Any] = {
        "hook_event_name": draw(mostly(own, st.sampled_from(EVENT_NAMES) | st.text())),
        "session_id": draw(session_ids),
    }
    optional = {
        "cwd": st.sampled_from([cwd, "", "/nonexistent/x"]) | json_values,
        "conversation_id": session_ids,
        "workspace_roots": st.lists(st.sampled_from([cwd, "rel"]) | json_values, max_size=2),
        "source": st.sampled_from(["startup", "resume", "clear", "compact", "fork"]) | json_values,
        "prompt": st.text(max_size=200) | json_values,
        "tool_name": st.sampled_from(["Edit", "Bash", "Write"]) | json_values,
        "tool_input": st.fixed_dictionaries(
            {},
            optional={
                "file_path": st.text(max_size=60) | json_values,
                "command": st.text(max_size=60) | json_values,
                "path": json_values,
            },
        )
        | json_values
        | st.text(max_size=40).map(lambda t: "{" + t),
        "compact_summary": st.text(max_size=200) | json_values,
        "last_assistant_message": st.text(max_size=200) | json_values,
        "new_cwd": st.sampled_from([cwd]) | json_values,
        "file_path": st.text(max_size=60) | json_values,
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            data[key] = draw(strategy)
    return data


@pytest.fixture
def world(home: Path, tmp_path: Path) -> tuple[Path, dict[str, str], str]:
    """A home holding one session with a pin (which must survive), and a git repository."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    env = {"CORTEX_HOME": str(home), "CORTEX_NOW": "2026-02-16T09:00:00Z"}
    env["CORTEX_RAISE_ERRORS"] = "1"
    keep = {"hook_event_name": "SessionStart", "session_id": "keep", "cwd": str(repo)}
    handle("claude-code", json.dumps(keep).encode(), env, str(repo))
    manager = SessionPersistenceManager.open(load_config(home, {}))
    manager.add_pin("keep", "this pin survives", "keep", critical=True)
    manager.store.close()
    return home, env, str(repo)


def check_answer(host: str, output: str) -> None:
    if output == "":
        return
    answer = json.loads(output)
    if host == "cursor":
        assert answer == {"continue": True} or list(answer) == ["additional_context"]
    else:
        assert list(answer) == ["hookSpecificOutput"]
        inner = answer["hookSpecificOutput"]
        assert list(inner) == ["hookEventName", "additionalContext"]
        assert 0 < len(inner["additionalContext"]) <= 8000


def check_intact(home: Path) -> None:
    manager = SessionPersistenceManager.open(load_config(home, {}))
    try:
        state = manager.store.get_session("keep")
        assert state is not None
        assert [p.content for p in state.working_memory] == ["this pin survives"]
    finally:
        manager.store.close()


def test_fuzzed_host_input(world: tuple[Path, dict[str, str], str]) -> None:
    home, env, cwd = world
    cache = ServicesCache()

    @FUZZ
    @given(
        host_and_data=hosts.flatmap(lambda h: st.tuples(st.just(h), hook_inputs(h, cwd))),
        kept=st.booleans(),
    )
    def run(host_and_data: tuple[str, dict[str, Any]], kept: bool) -> None:
        host, data = host_and_data
        raw = json.dumps(data).encode()
        output = handle(host, raw, env, cwd, cache if kept else None)
        check_answer(host, output)

    try:
        run()
    finally:
        cache.close()
    check_intact(home)
    assert not (Path(cwd).parent / "etc").exists()
    assert all(p.name.endswith(".json") for p in (home / "hooks" / "sessions").iterdir())


def test_fuzzed_raw_bytes(world: tuple[Path, dict[str, str], str]) -> None:
    home, env, cwd = world

    @FUZZ
    @given(host=hosts, raw=st.binary(max_size=300) | st.text().map(str.encode))
    def run(host: str, raw: bytes) -> None:
        check_answer(host, handle(host, raw, env, cwd))

    run()
    check_intact(home)


@pytest.mark.parametrize(
    "raw",
    [b"[" * 100_000 + b"]" * 100_000, b'{"session_id": ' + b"9" * 5000 + b"}", rb'"\ud800"'],
)
def test_pathological_json(world: tuple[Path, dict[str, str], str], raw: bytes) -> None:
    home, env, cwd = world
    assert handle("claude-code", raw, env, cwd) == ""
    check_intact(home)


def test_hooks_main_reads_a_real_stdin(
    world: tuple[Path, dict[str, str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``hooks.main`` in-process, stdin a real pipe: exit 0 and one answer on stdout."""
    from cortex.adapters import hooks

    home, env, cwd = world
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CORTEX_HOOK_SERVER", "0")
    read, write = os.pipe()
    os.write(write, json.dumps({"hook_event_name": "Stop", "session_id": "keep"}).encode())
    os.close(write)
    saved = os.dup(0)
    try:
        os.dup2(read, 0)
        assert hooks.main(["claude-code"]) == 0
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(read)
    check_intact(home)


def test_a_lone_surrogate_in_host_input_is_replaced_not_a_crash(
    world: tuple[Path, dict[str, str], str],
) -> None:
    home, env, cwd = world
    for data in (
        {"hook_event_name": "CwdChanged", "session_id": "fz-1", "cwd": "\ud800 lone surrogate"},
        {
            "hook_event_name": "UserPromptSubmit",
            "session_id": "fz-1",
            "cwd": cwd,
            "prompt": "\udfff",
        },
    ):
        check_answer("claude-code", handle("claude-code", json.dumps(data).encode(), env, cwd))
    check_intact(home)
    prompt = {"hook_event_name": "UserPromptSubmit", "prompt": "a\ud800b\udfff"}
    assert normalize("claude-code", prompt).text == "a\ufffdb\ufffd"  # as the services do
