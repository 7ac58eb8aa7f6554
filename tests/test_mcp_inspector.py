"""``cortex mcp`` under an independent client: the MCP Inspector CLI (npm), every tool.

Needs Node >= 22.19 and ``@modelcontextprotocol/inspector``, which ``.ci/run`` installs into
``.ci/tools`` (``npm ci`` there); the test skips, saying why, when they are missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from test_mcp import TOOLS

TOOLS_BIN = Path(__file__).resolve().parents[1] / ".ci" / "tools" / "node_modules" / ".bin"
INSPECTOR = TOOLS_BIN / "mcp-inspector"
CORTEX = Path(sys.executable).with_name("cortex")


def _node_version(path: str) -> tuple[int, ...]:
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
    return tuple(int(p) for p in out.stdout.strip().lstrip("v").split(".")[:2] if p.isdigit())


def _skip_reason() -> str | None:
    if not INSPECTOR.exists():
        return f"MCP Inspector not installed at {INSPECTOR}: run `npm ci --prefix .ci/tools`"
    node = shutil.which("node", path=f"{TOOLS_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    if node is None or _node_version(node) < (22, 19):
        return "the MCP Inspector needs Node >= 22.19 (npm ci --prefix .ci/tools installs one)"
    if not CORTEX.exists():
        return f"no cortex script next to {sys.executable}"
    return None


pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")


class Inspector:
    """Runs ``mcp-inspector --cli cortex mcp ...`` against one Cortex home and project."""

    def __init__(self, home: Path, project: Path, tmp: Path) -> None:
        self.home, self.project = home, project
        self.env = {
            **os.environ,
            "PATH": f"{TOOLS_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "MCP_CATALOG_PATH": str(tmp / "mcp-catalog.json"),
            "HOME": str(tmp),
        }

    def run(self, method: str, *args: str) -> subprocess.CompletedProcess[str]:
        command = [
            str(INSPECTOR), "--cli", str(CORTEX), "mcp",
            "--method", method, *args,
            "-e", f"CORTEX_HOME={self.home}", "--cwd", str(self.project),
            "--format", "json", "-q",
        ]  # fmt: skip
        return subprocess.run(
            command, capture_output=True, text=True, env=self.env, timeout=120, check=False
        )

    def call(self, tool: str, **args: Any) -> dict[str, Any]:
        done = self.run("tools/call", "--tool-name", tool, "--tool-args-json", json.dumps(args))
        assert done.returncode == 0, (tool, done.returncode, done.stdout, done.stderr)
        result = json.loads(done.stdout)["result"]
        assert result["isError"] is False
        return dict(result["structuredContent"])


@pytest.fixture
def inspector(home: Path, tmp_path: Path) -> Inspector:
    project = tmp_path / "Projects" / "radio"
    project.mkdir(parents=True)
    return Inspector(home, project, tmp_path)


def test_inspector_lists_every_tool_with_portable_schemas(inspector: Inspector) -> None:
    done = inspector.run("tools/list", "--strict")
    assert done.returncode == 0, done.stderr  # --strict exits 6 on a schema portability error
    tools = {t["name"]: t for t in json.loads(done.stdout)["result"]["tools"]}
    assert set(tools) == set(TOOLS)
    for name, (read_only, destructive, idempotent) in TOOLS.items():
        hints = tools[name]["annotations"]
        assert hints["readOnlyHint"] is read_only and hints["openWorldHint"] is False
        if not read_only:
            assert (hints["destructiveHint"], hints["idempotentHint"]) == (destructive, idempotent)
        assert tools[name]["outputSchema"]["type"] == "object"


MEMORY_TOOLS = {"add_memory", "search_memories", "get_context", "list_memories",
                "consolidate_memories", "forget_memory"}  # fmt: skip
CHAIN_TOOLS = {"session_chain", "cortex_session_continue"}
"""The tools are called in three parts, each in a home of its own (memories; restore and chain;
the rest), so that they run on the test workers side by side: each call starts a Node process
and a Cortex MCP server, over a second."""


def test_the_three_parts_call_every_tool() -> None:
    assert MEMORY_TOOLS | CHAIN_TOOLS < set(TOOLS) and not MEMORY_TOOLS & CHAIN_TOOLS


def recording(inspector: Inspector, called: set[str]) -> Callable[..., dict[str, Any]]:
    def call(tool: str, **args: Any) -> dict[str, Any]:
        called.add(tool)
        return inspector.call(tool, **args)

    return call


def test_inspector_calls_every_working_memory_and_checkpoint_tool(inspector: Inspector) -> None:
    called: set[str] = set()
    call = recording(inspector, called)
    first = call("start_session", keywords=["ft991a", "cat"])["session_id"]
    assert call("working_memory_pin", label="baud", content="38400", critical=True)["count"] == 1
    call("working_memory_pin", label="tmp", content="scratch")
    assert call("working_memory_unpin", label="tmp")["count"] == 1
    assert [p["label"] for p in call("working_memory_view")["pins"]] == ["baud"]
    assert call("session_status")["session_id"] == first
    assert call("checkpoint_session", summary="cat control wired")["session_id"] == first
    assert call("snapshot_session")["session_id"] == first
    assert call("end_session")["state"] == "COMPLETE"
    assert called == set(TOOLS) - MEMORY_TOOLS - CHAIN_TOOLS


def test_inspector_calls_every_restore_and_chain_tool(inspector: Inspector) -> None:
    called: set[str] = set()
    call = recording(inspector, called)
    first = call("start_session", keywords=["ft991a", "cat"])["session_id"]
    call("working_memory_pin", label="baud", content="38400", critical=True)
    call("end_session")
    second = call("start_session", keywords=["ft991a"])
    assert second["restored_from"] == [first]
    chain = call("session_chain", depth=3)["sessions"]
    assert [s["session_id"] for s in chain] == [first, second["session_id"]]
    continued = call("cortex_session_continue", session_id=first)
    assert continued["continued_from"] == first and continued["inherited_pins"] == []
    assert CHAIN_TOOLS <= called


def test_inspector_calls_every_memory_tool(inspector: Inspector) -> None:
    called: set[str] = set()
    call = recording(inspector, called)
    added = call("add_memory", content="the radio serial port is /dev/ttyUSB0")["memory"]
    found = call("search_memories", query="serial port")["results"]
    assert [r["memory"]["id"] for r in found] == [added["id"]]
    assert "ttyUSB0" in call("get_context", query="serial")["text"]
    assert [m["id"] for m in call("list_memories")["memories"]] == [added["id"]]
    shadow = call("consolidate_memories")
    assert shadow["applied"] is False and shadow["input_count"] >= 1
    assert call("forget_memory", memory_id=added["id"])["id"] == added["id"]
    assert called == MEMORY_TOOLS


def test_inspector_sees_tool_errors_as_errors(inspector: Inspector) -> None:
    done = inspector.run(
        "tools/call", "--tool-name", "session_status", "--tool-args-json", '{"session_id": "../x"}'
    )
    assert done.returncode == 5  # the Inspector's exit code for isError: true
    assert json.loads(done.stderr.strip().splitlines()[-1])["error"]["code"] == "tool_is_error"
