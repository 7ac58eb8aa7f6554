"""Hooks in client mode whose home they cannot write (a read-only folder or mount), against
the real team server: a start restores from the server and turns reach it while it is up;
with the server down a write the journal cannot keep is said lost in one line, and the hook
exits 0 with nothing written in the home."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
from cortex.store import open_store  # noqa: E402
from test_client_offline_turns import T1, Server  # noqa: E402
from test_hooks import context_of, event, hook_process, make_repo  # noqa: E402
from test_hooks_read_only import contents, read_only  # noqa: E402

LOST = (
    "and the client journal cannot keep the write (cannot create directory {spool} ({why})): "
    "it is lost; make the Cortex home writable, or point CORTEX_HOME at a writable home"
)


@pytest.mark.parametrize("way", ["modes", "mount"])
def test_a_client_hook_in_a_read_only_home_talks_to_the_server_and_says_a_lost_write(
    tmp_path: Path, home: Path, way: str
) -> None:
    server = Server(str(tmp_path / "server.db"), tmp_path / "operator")
    repo = make_repo(tmp_path / "radio")
    env = {"CORTEX_SERVER": server.url, "CORTEX_API_KEY": server.key}

    def hook(prefix: list[str], name: str, **fields: object) -> tuple[bytes, str]:
        result = hook_process(
            home, event(name, "s2", repo, **fields), prefix=tuple(prefix), now=T1, env=env
        )
        assert result.returncode == 0
        return result.stdout, result.stderr.decode()

    try:
        with server.up(T1):
            for name, fields in [
                ("SessionStart", {"source": "startup"}),
                ("UserPromptSubmit", {"prompt": "fix the flaky auth test"}),
                ("SessionEnd", {}),
            ]:
                hook_process(home, event(name, "s1", repo, **fields), now=T1, env=env)
        if way == "modes":
            (home / "logs").mkdir()  # a folder of its own left writable: the line goes there
        before = contents(home)
        with read_only(home, way) as prefix:
            with server.up(T1):
                start = hook_process(
                    home, event("SessionStart", "s2", repo, source="startup"),
                    prefix=tuple(prefix), now=T1, env=env,
                )  # fmt: skip
                assert "flaky" in context_of(start, "SessionStart") and start.stderr == b""
                assert hook(prefix, "UserPromptSubmit", prompt="tune the antenna") == (b"", "")
                assert hook(prefix, "Stop", last_assistant_message="done") == (b"", "")
            out, err = hook(prefix, "UserPromptSubmit", prompt="wind the balun")
        assert out == b"" and server.key not in err
        why = "Permission denied" if way == "modes" else "Read-only file system"
        lost = LOST.format(spool=home / "spool", why=why)
        if way == "modes":
            assert err == ""
            (line,) = (home / "logs/hooks.log").read_text().splitlines()
        else:
            (line,) = err.splitlines()
        assert f"claude-code UserPromptSubmit 's2': StorageError: server {server.url} " in line
        assert f"server {server.url} is unavailable (" in line and "Connection refused" in line
        assert line.endswith(lost), line
        after = contents(home)
        assert not {"brain.db", "spool"} & set(after)  # no store, no journal began
        assert {n for n in after if after[n] != before.get(n, b"-")} <= {
            "hooks/latency.jsonl", "hooks/sessions/s2.json", "hooks/status/claude-code.json",
            "logs/hooks.log",
        }  # fmt: skip
        served = open_store(str(tmp_path / "server.db"))
        try:
            state = served.get_session("s2")
            assert state is not None and "antenna" in state.hot_topics
            assert "balun" not in state.hot_topics
        finally:
            served.close()
    finally:
        server.host.close()


def test_the_first_write_of_an_outage_names_the_servers_own_failure(
    tmp_path: Path, home: Path
) -> None:
    """A prompt's hook first reads from the server (the session), then writes: the read meets
    the outage, the write fails fast behind it, and the one line hooks.log gets for the outage
    names why the server failed, not only that it failed moments ago."""
    server = Server(str(tmp_path / "server.db"), tmp_path / "operator")
    repo = make_repo(tmp_path / "radio")
    env = {"CORTEX_SERVER": server.url, "CORTEX_API_KEY": server.key}
    try:
        with server.up(T1):
            start = event("SessionStart", "s1", repo, source="startup")
            assert hook_process(home, start, now=T1, env=env).returncode == 0
        prompt = event("UserPromptSubmit", "s1", repo, prompt="wind the balun")
        assert hook_process(home, prompt, now=T1, env=env).returncode == 0
    finally:
        server.host.close()
    (line,) = (home / "logs/hooks.log").read_text().splitlines()
    said = line.split("engine: ", 1)[1]
    assert said.startswith(f"server {server.url} is unavailable ("), said
    assert "Connection refused" in said and "moments ago" in said
    assert said.endswith(
        "writes are kept in the local journal until `cortex sync` or the next call delivers them"
    )
    assert [json.loads(e)["path"] for e in (home / "spool/journal.jsonl").open()] == [
        "/v1/sessions/start",
        "/v1/sessions/s1/turns",
    ]
