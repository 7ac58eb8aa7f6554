"""Run the real ``cortex`` CLI in a subprocess against a test home (shared by CLI tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

T0 = "2026-02-16T09:00:00Z"


def cortex(
    home: Path,
    *args: str,
    now: str = T0,
    env: dict[str, str] | None = None,
    input: str | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``cortex ARGS`` with CORTEX_HOME=home and a fixed clock; no other CORTEX_* leaks in."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    full_env.update({"CORTEX_HOME": str(home), "CORTEX_NOW": now}, **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "cortex.entry", *args],
        capture_output=True,
        text=True,
        env=full_env,
        input=input,
        timeout=60,
        cwd=cwd,
    )


def help_text(*command: str) -> str:
    """``cortex COMMAND --help`` in this process (what a subprocess prints, without the ~0.5 s
    start of one: help needs neither a home nor the environment)."""
    from click.testing import CliRunner

    from cortex.adapters.cli.main import cli

    result = CliRunner().invoke(cli, [*command, "--help"], prog_name="cortex", obj={})
    assert result.exit_code == 0, (command, result.output)
    return result.output


def ok(result: subprocess.CompletedProcess[str]) -> str:
    """The stdout of a command that must have succeeded."""
    assert result.returncode == 0, result.stderr
    return result.stdout
