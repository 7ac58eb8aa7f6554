"""A hook given an empty home (``--home ""``, a ``CORTEX_HOME`` of spaces): real hook processes,
the console script's and the hook client's, with and without the hook server, each with its
own ``HOME`` (so that the default home it must not fall back to is a test folder)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from test_hooks import ENTRIES, child_env, hook_process


@pytest.mark.parametrize(
    ("options", "variable", "named"),
    [
        (("--home", ""), None, "--home"),
        (("--home=",), None, "--home"),
        (("--home", "  "), None, "--home"),
        (("--home", ""), "/somewhere/else", "--home"),  # an empty --home is no fallback to it
        ((), "  ", "CORTEX_HOME"),
    ],
)
@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("server", ["0", "1"])
def test_an_empty_home_stores_nothing_anywhere(
    tmp_path: Path,
    options: tuple[str, ...],
    variable: str | None,
    named: str,
    entry: str,
    server: str,
) -> None:
    user, project = tmp_path / "user", tmp_path / "project"
    user.mkdir()
    project.mkdir()
    env = {"HOME": str(user), "CORTEX_HOOK_SERVER": server}
    if variable is not None:
        env["CORTEX_HOME"] = variable
    payload = {"hook_event_name": "SessionStart", "session_id": "s1", "cwd": "."}
    result = hook_process(None, payload, entry=entry, options=options, cwd=project, env=env)
    assert (result.returncode, result.stdout) == (0, b"")
    assert result.stderr.decode() == (
        f"cortex hook: {named} is empty; omit it for the default home or give a directory "
        "(nothing recorded)\n"
    )
    assert list(user.iterdir()) == [] and list(project.iterdir()) == []


@pytest.mark.parametrize("entry", ENTRIES)
def test_an_empty_cortex_home_is_the_default_home_as_on_the_command_line(
    tmp_path: Path, entry: str
) -> None:
    user, project = tmp_path / "user", tmp_path / "project"
    user.mkdir()
    project.mkdir()
    payload = {"hook_event_name": "SessionStart", "session_id": "s1", "cwd": "."}
    env = {"HOME": str(user), "CORTEX_HOME": ""}
    result = hook_process(None, payload, entry=entry, cwd=project, env=env)
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert (user / ".cortex" / "brain.db").is_file() and list(project.iterdir()) == []
    listed = subprocess.run(
        [sys.executable, "-m", "cortex.entry", "--json", "session", "list"],
        capture_output=True,
        text=True,
        env={**child_env(user / ".cortex"), "HOME": str(user), "CORTEX_HOME": ""},
        timeout=60,
    )
    assert [s["session_id"] for s in json.loads(listed.stdout)] == ["s1"]
