"""What a hook writes of what it cannot trust: event names and session ids it could not check,
and a home given empty. Real hook processes, in-process and served by the hook server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from secret_corpus import MAKERS
from test_hooks import ENTRIES, hook_process, log_lines, stop_and_wait, wait_for_server

CREDENTIALS = {
    kind: MAKERS[kind]()
    for kind in ("aws-access-key-id", "github-classic", "openai", "jwt", "slack-bot")
}
GLUED_ONTO = ("PreCompact", "Stop", "SessionStart", "UserPromptSubmit", "")


def leaks(secret: str, text: str) -> bool:
    """Whether any 10 characters in a row of ``secret`` are in ``text``."""
    return any(secret[i : i + 10] in text for i in range(len(secret) - 9))


def written(home: Path, stderr: bytes = b"") -> str:
    """What a hook may have written of an event: its log, the host's status, its stderr."""
    status = home / "hooks" / "status" / "claude-code.json"
    found = [*log_lines(home), stderr.decode("utf-8", "replace")]
    return "\n".join([*found, status.read_text() if status.exists() else ""])


def glued(name: str, secret: str, session_id: str = "s1") -> dict[str, str]:
    return {"hook_event_name": name + secret, "session_id": session_id, "cwd": "."}


def shown(name: str, secret: str) -> str:
    """How the log shows the event name ``name + secret`` (cut at 80 characters first)."""
    rest = min(len(name + secret), 80) - len(name)
    return f"<{name!r} and {rest} more characters>" if name else f"<a name of {rest} characters>"


# -- event names -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", CREDENTIALS)
@pytest.mark.parametrize("entry", ENTRIES)
def test_an_unknown_event_name_is_logged_without_what_is_glued_onto_it(
    home: Path, tmp_path: Path, kind: str, entry: str
) -> None:
    secret = CREDENTIALS[kind]
    for name in GLUED_ONTO:
        result = hook_process(home, glued(name, secret), entry=entry, cwd=tmp_path)
        assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
        line = log_lines(home)[-1]
        assert f"claude-code {shown(name, secret)} 's1': not an event Cortex handles" in line
    assert not leaks(secret, written(home))
    status = json.loads((home / "hooks" / "status" / "claude-code.json").read_text())
    assert (status["event"], status["ok"]) == (shown("", secret), False)


def test_an_unknown_event_name_said_on_stderr_keeps_nothing_glued_onto_it(
    home: Path, tmp_path: Path
) -> None:
    home.mkdir()
    (home / "logs").write_text("a file where the log's folder goes")  # the line goes to stderr
    for secret in CREDENTIALS.values():
        result = hook_process(home, glued("PreCompact", secret), cwd=tmp_path)
        assert (result.returncode, result.stdout) == (0, b"")
        (line,) = result.stderr.decode().splitlines()
        assert line.startswith("cortex hook: ") and "<'PreCompact' and " in line
        assert not leaks(secret, written(home, result.stderr))


def test_the_hook_server_logs_an_unknown_event_name_as_the_hook_does(
    home: Path, tmp_path: Path
) -> None:
    env = {"CORTEX_HOOK_SERVER": "1", "CORTEX_HOOK_SERVER_IDLE": "30"}
    end = {"hook_event_name": "SessionEnd", "session_id": "s0"}
    first = hook_process(home, end, cwd=tmp_path, env=env)
    assert first.returncode == 0
    pid = wait_for_server(home)
    try:
        for entry in ENTRIES:
            for secret in CREDENTIALS.values():
                served = hook_process(
                    home, glued("Stop", secret), entry=entry, cwd=tmp_path, env=env
                )
                assert (served.returncode, served.stdout, served.stderr) == (0, b"", b"")
                assert f"claude-code {shown('Stop', secret)} 's1'" in log_lines(home)[-1]
        assert not any(leaks(secret, written(home)) for secret in CREDENTIALS.values())
    finally:
        stop_and_wait(home, pid)


# -- session ids -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", CREDENTIALS)
def test_an_invalid_session_id_is_logged_as_its_length_alone(
    home: Path, tmp_path: Path, kind: str
) -> None:
    secret = CREDENTIALS[kind]
    for session_id in (f"a/b{secret}", f"../{secret}", f"{secret}/x", f"x y{secret}"):
        result = hook_process(home, glued("Stop", "", session_id), cwd=tmp_path)
        assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
        line = log_lines(home)[-1]
        assert f"claude-code Stop -: invalid session id ({len(session_id)} characters" in line
    assert not leaks(secret, written(home))
