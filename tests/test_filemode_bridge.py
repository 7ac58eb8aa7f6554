"""File mode through the OpenClaw bridge: the triggers the plugin's hooks run, and the gate:
the workspace stays consistent across three simulated session resets."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cortex.adapters.openclaw.bridge import Bridge, openclaw_config
from cortex.clock import FixedClock
from cortex.config import Config
from cortex.core.filemode import parse_entries
from cortex.core.memory_models import MemoryFilter
from cortex.services.app import Services

PROJECT = "radio"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return tmp_path / "workspace"


@pytest.fixture
def make_bridge(
    make_config: Callable[..., Config], clock: FixedClock, ws: Path
) -> Iterator[Callable[..., Bridge]]:
    opened: list[Services] = []

    def make(**overrides: object) -> Bridge:
        config = openclaw_config(make_config(**overrides), ws)
        services = Services.open(config, clock)
        opened.append(services)
        return Bridge(services, project=PROJECT)

    yield make
    for services in opened:
        services.close()


def call(bridge: Bridge, method: str, **params: Any) -> Any:
    response = bridge.handle({"id": 1, "method": method, "params": params})
    assert "error" not in response, response
    return response["result"]


def live_contents(bridge: Bridge) -> list[str]:
    app = bridge.services
    found = app.store.list_memories(
        MemoryFilter(all_projects=True), app.filemode.now_iso(), limit=10_000
    )
    return sorted(m.content for m in found)


def check_workspace(bridge: Bridge, ws: Path, checkpoints: list[str], snapshots: int) -> None:
    """Consistent: markers name live memories, nothing twice, each checkpoint once in the
    daily logs, one snapshot file per reset, and a sync that finds nothing to do."""
    app = bridge.services
    entries = list(parse_entries((ws / "memory.md").read_text().splitlines()))
    texts = [e.text for e in entries]
    assert len(texts) == len(set(texts)), texts
    for entry in entries:
        memory = app.store.get_memory(entry.marker or "")
        assert memory is not None and memory.is_live(app.filemode.now_iso()), entry
        assert memory.content == entry.text
    contents = live_contents(bridge)
    assert len(contents) == len(set(contents)), contents
    logs = "".join(p.read_text() for p in sorted((ws / "memory" / "daily").glob("*.md")))
    for checkpoint_id in checkpoints:
        assert logs.count(f"<!-- cortex:{checkpoint_id} -->") == 1
    assert len(re.findall(r"<!-- cortex:ckpt-", logs)) == len(checkpoints)
    assert len(list((ws / "memory" / "snapshots").rglob("*.md"))) == snapshots
    before = {p: p.read_bytes() for p in ws.rglob("*.md")}
    assert not app.filemode.sync(PROJECT).changed
    assert {p: p.read_bytes() for p in ws.rglob("*.md")} == before


def test_three_resets_leave_the_workspace_consistent(
    make_bridge: Callable[..., Bridge], ws: Path, clock: FixedClock
) -> None:
    bridge = make_bridge(file_mode_enabled=True)
    call(bridge, "session_start")  # the service's own session
    checkpoints: list[str] = []
    for cycle in range(3):
        key = f"conv-{cycle}"
        call(bridge, "session_start", session_key=key)
        first = call(bridge, "before_prompt_build", session_key=key, prompt=f"work item {cycle}")
        context = first["prepend_context"] or ""
        for earlier in range(cycle):  # what earlier sessions remembered comes back
            assert f"fact from cycle {earlier}" in context
            assert f"hand-written in cycle {earlier}" in context
        if cycle:
            assert f"event of cycle {cycle - 1}" in context  # today's daily log
        call(bridge, "memory_remember", session_key=key, content=f"fact from cycle {cycle}")
        call(
            bridge,
            "memory_remember",
            session_key=key,
            content=f"event of cycle {cycle}",
            kind="episodic",
        )
        semantic = ws / "memory.md"
        semantic.write_text(semantic.read_text() + f"- hand-written in cycle {cycle}\n")
        call(
            bridge,
            "agent_end",
            session_key=key,
            messages=[{"role": "assistant", "content": f"answer {cycle}"}],
        )
        flushed = call(bridge, "before_compaction", session_key=key, messages=[])
        assert flushed["daily_log"] == "memory/daily/2026-02-16.md"
        checkpoints.append(flushed["checkpoint_id"])
        ended = call(bridge, "session_end", session_key=key, reason="reset")
        assert ended["ended"] and ended["snapshot_file"].startswith("memory/snapshots/2026-02-16/")
        assert f"work item {cycle}" in (ws / ended["snapshot_file"]).read_text()
        clock.advance(seconds=600)
        check_workspace(bridge, ws, checkpoints, snapshots=cycle + 1)
    assert live_contents(bridge) == sorted(
        [f"fact from cycle {c}" for c in range(3)]
        + [f"hand-written in cycle {c}" for c in range(3)]
        + [f"event of cycle {c}" for c in range(3)]
    )


def test_without_file_mode_the_hooks_leave_the_workspace_alone(
    make_bridge: Callable[..., Bridge], ws: Path
) -> None:
    bridge = make_bridge()
    call(bridge, "session_start", session_key="k")
    prompt = call(bridge, "before_prompt_build", session_key="k", prompt="hello")
    assert prompt["memory_files"] is None
    assert call(bridge, "before_compaction", session_key="k")["daily_log"] is None
    assert call(bridge, "session_end", session_key="k", reason="new")["snapshot_file"] is None
    assert not (ws / "memory.md").exists() and not (ws / "memory" / "daily").exists()


def test_a_hook_trigger_fails_open(make_bridge: Callable[..., Bridge], tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the workspace's parent directory should be")
    bridge = make_bridge(file_mode_enabled=True, file_mode_workspace=str(blocker / "ws"))
    call(bridge, "session_start", session_key="k")
    assert call(bridge, "before_compaction", session_key="k")["daily_log"] is None
    assert call(bridge, "session_end", session_key="k", reason="reset")["ended"]
    response = bridge.handle({"id": 2, "method": "memory_sync", "params": {}})
    assert response["error"]["type"] == "StorageError"  # asked for explicitly: an error


def test_the_bridge_points_file_mode_at_its_workspace(
    make_config: Callable[..., Config], tmp_path: Path
) -> None:
    assert openclaw_config(make_config(), tmp_path / "w").file_mode_workspace == tmp_path / "w"
    moved = make_config(file_mode_workspace=str(tmp_path / "mine"))
    assert openclaw_config(moved, tmp_path / "w").file_mode_workspace == tmp_path / "mine"


def test_explicit_methods_validate_their_input(make_bridge: Callable[..., Bridge]) -> None:
    bridge = make_bridge()
    call(bridge, "session_start", session_key="k")
    for params, kind in (
        ({"slug": "../../etc"}, "UnsafeIdError"),
        ({"trigger": "auto_compaction"}, "ValidationError"),
    ):
        response = bridge.handle(
            {"id": 3, "method": "memory_snapshot", "params": {"session_key": "k", **params}}
        )
        assert response["error"]["type"] == kind, response
    response = bridge.handle(
        {
            "id": 4,
            "method": "memory_remember",
            "params": {"session_key": "k", "content": "x", "kind": "weird"},
        }
    )
    assert response["error"]["message"].startswith("kind must be one of semantic, episodic")
