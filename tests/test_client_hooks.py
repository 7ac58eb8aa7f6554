"""Hooks in client mode, as real processes: the server down costs no turn and no long wait;
`cortex sync` then delivers the events in order."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

from fake_server import serve
from test_hooks import child_env, run_hook

KEY = "ctx_k1_s3cret"


def client_env(url: str) -> dict[str, str]:
    return {"CORTEX_SERVER": url, "CORTEX_API_KEY": KEY, "CORTEX_SERVER_TIMEOUT_SECONDS": "1"}


def events(session: str, cwd: Path) -> list[dict[str, object]]:
    base = {"session_id": session, "cwd": str(cwd)}
    return [
        {**base, "hook_event_name": "SessionStart", "source": "startup"},
        {**base, "hook_event_name": "UserPromptSubmit", "prompt": "fix the login bug"},
        {**base, "hook_event_name": "SessionEnd", "reason": "exit"},
    ]


def test_hooks_with_the_server_down_exit_0_fast_spool_then_sync_delivers(
    home: Path, tmp_path: Path
) -> None:
    with serve() as (url, _):
        pass  # a port nobody listens on any more
    for payload in events("s1", tmp_path):
        began = time.monotonic()
        result = run_hook(home, payload, env=client_env(url), cwd=tmp_path)
        assert result.returncode == 0 and time.monotonic() - began < 8
        assert result.stderr == b""
    # hooks.log says it once for the outage (the first write, which found the journal
    # empty), naming the next step; not once an event, nor once a write.
    (logged,) = (home / "logs/hooks.log").read_text().splitlines()
    said = logged.split("engine: ", 1)[1]
    assert said.startswith(f"server {url} is unavailable (") and said.endswith(
        "writes are kept in the local journal until `cortex sync` or the next call delivers them"
    )
    spooled = [json.loads(line) for line in (home / "spool/journal.jsonl").read_text().splitlines()]
    # The start, the prompt's restore pass (a start with its words, as online), the turn.
    assert [e["path"] for e in spooled] == [
        "/v1/sessions/start",
        "/v1/sessions/start",
        "/v1/sessions/s1/turns",
        "/v1/sessions/end",
    ]
    assert "fix the login bug" in spooled[1]["body"]["keywords"]
    assert spooled[2]["body"]["text"] == "fix the login bug"
    port = int(url.rsplit(":", 1)[1])
    with serve(port=port) as (live, peer):
        synced = subprocess.run(
            [sys.executable, "-m", "cortex.entry", "--json", "sync"],
            capture_output=True,
            text=True,
            env=child_env(home, **client_env(live)),
            timeout=60,
        )
    assert synced.returncode == 0, synced.stderr
    assert json.loads(synced.stdout)["sent"] == 4
    assert peer.paths() == [e["path"] for e in spooled]
    assert peer.applied == [e["body"]["request_id"] for e in spooled]


def test_a_silent_server_costs_a_hook_one_timeout_at_most(home: Path, tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)  # accepts connections, never answers
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        env = {**client_env(url), "CORTEX_SERVER_TIMEOUT_SECONDS": "0.5"}
        for payload in events("s2", tmp_path)[:2]:
            began = time.monotonic()
            result = run_hook(home, payload, env=env, cwd=tmp_path)
            assert result.returncode == 0 and time.monotonic() - began < 4
    finally:
        listener.close()
    lines = (home / "spool/journal.jsonl").read_text().splitlines()
    assert len(lines) == 3  # the start, the prompt's restore pass and its turn


def test_sync_with_the_server_still_down_exits_1_in_one_line(home: Path, tmp_path: Path) -> None:
    with serve() as (url, _):
        pass
    run_hook(home, events("s3", tmp_path)[0], env=client_env(url), cwd=tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "cortex.entry", "sync"],
        capture_output=True,
        text=True,
        env=child_env(home, **client_env(url)),
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stdout.strip() == "sent 0, left 1, rejected 0"
    assert len(result.stderr.strip().splitlines()) == 1 and "still waiting" in result.stderr
    assert "s3cret" not in result.stdout + result.stderr
