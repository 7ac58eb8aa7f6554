"""What a session that has ended accepts, on every surface: over HTTP (SQLite and PostgreSQL),
from the command line, and from a client's journal drained after the end.

An ended session keeps its final record: a write to it (a turn, pin, event, checkpoint,
compaction, continue into it) is a 409 ``conflict`` naming the next step and changes nothing;
reads, ending it again, a snapshot of its log, continuing from it and a start with its id
(the resume, which reopens it) still work."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from cli_helpers import cortex  # noqa: E402
from cortex.adapters.server.app import create_app  # noqa: E402
from cortex.config import load_config  # noqa: E402
from cortex.services.app import Services  # noqa: E402
from cortex.services.hosting import ServiceHost  # noqa: E402
from test_server import auth, call, lite_host, new_key  # noqa: E402

NEXT_STEP = "start a new one with `cortex session start`"
HTTP_NEXT_STEP = "start a new one with POST /v1/sessions/start"


@pytest.fixture(params=["sqlite", "postgres"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[TestClient, str]]:
    """The app over a SQLite file (its one tenant) or PostgreSQL (a fresh tenant), and a key."""
    if request.param == "postgres":
        host = ServiceHost(request.getfixturevalue("pg_url"), tmp_path / "data", pool_size=4)
        key = new_key(host)
    else:
        host, key = lite_host(tmp_path)
    try:
        yield TestClient(create_app(host.url, host=host, burst=10_000)), key
    finally:
        host.close()


def refused(client: TestClient, key: str, method: str, path: str, body: Any) -> str:
    """The message of the 409 ``conflict`` the write got."""
    response = client.request(method, path, json=body, headers=auth(key))
    assert response.status_code == 409, (path, response.text)
    error = response.json()["error"]
    assert error["code"] == "conflict", path
    return str(error["message"])


def recorded(client: TestClient, key: str, sid: str) -> tuple[Any, ...]:
    """Everything of the session a write could change."""
    base = f"/v1/sessions/{sid}"
    return (
        call(client, key, "GET", base),
        call(client, key, "GET", f"{base}/events"),
        call(client, key, "GET", f"{base}/checkpoints"),
        call(client, key, "GET", f"{base}/pins"),
    )


def test_writes_to_an_ended_session_are_a_409_and_change_nothing(
    served: tuple[TestClient, str],
) -> None:
    client, key = served
    sid = call(client, key, "POST", "/v1/sessions/start", {"project": "api"})["session_id"]
    call(client, key, "POST", f"/v1/sessions/{sid}/turns", {"text": "auth refactor"})
    call(client, key, "PUT", f"/v1/sessions/{sid}/pins/deploy", {"content": "make deploy"})
    call(client, key, "POST", "/v1/sessions/checkpoint", {"session_id": sid, "reason": "half"})
    ended = call(client, key, "POST", "/v1/sessions/end", {"session_id": sid})
    other = call(client, key, "POST", "/v1/sessions/start", {"project": "api"})["session_id"]
    before = recorded(client, key, sid)  # (marked continued by the start of ``other``)
    late = [
        ("POST", "/v1/sessions/checkpoint", {"session_id": sid, "reason": "late"}),
        ("POST", f"/v1/sessions/{sid}/events", {"content": "late", "request_id": "e-1"}),
        ("POST", f"/v1/sessions/{sid}/precompact", {"trigger": "auto", "summary": "late"}),
        ("POST", f"/v1/sessions/{sid}/postcompact", {"summary": "late"}),
        ("POST", f"/v1/sessions/{sid}/turns", {"text": "late"}),
        ("PUT", f"/v1/sessions/{sid}/pins/late", {"content": "late"}),
        ("DELETE", f"/v1/sessions/{sid}/pins/deploy", None),
        ("POST", f"/v1/sessions/{sid}/continue", {"target_session_id": other}),
    ]
    for method, path, body in late:
        message = refused(client, key, method, path, body)
        assert message == f"session {sid} ended at {ended['end_time']}; {HTTP_NEXT_STEP}"
    assert recorded(client, key, sid) == before
    # What an ended session still takes: reads, a second end, a snapshot of its log, being
    # continued from, and a start with its id (the resume), which reopens it.
    assert call(client, key, "POST", "/v1/sessions/end", {"session_id": sid}) == before[0]
    snap = call(client, key, "POST", f"/v1/sessions/{sid}/snapshots", {"trigger": "manual"})
    assert "checkpoint" in snap["transcript_md"] and "half" in snap["transcript_md"]
    assert recorded(client, key, sid) == before
    cont = call(client, key, "POST", f"/v1/sessions/{other}/continue", {"target_session_id": sid})
    assert cont["session_ids"] == [sid]
    continued = call(client, key, "GET", f"/v1/sessions/{sid}")
    assert (continued["end_time"], continued["continued_by"]) == (ended["end_time"], other)
    call(client, key, "POST", "/v1/sessions/start", {"session_id": sid})
    # the refused request id was not claimed: the same event is taken once the session is open
    event = call(client, key, "POST", f"/v1/sessions/{sid}/events",
                 {"content": "late", "request_id": "e-1"})  # fmt: skip
    assert event["content"] == "late"


def test_a_start_with_keep_ended_leaves_a_session_that_ended_ended(
    served: tuple[TestClient, str],
) -> None:
    """The reopen a client's hook journals offline for a tool or a reply: refused (409) by a
    session that ended normally, changing nothing and using up no request id; an open
    session takes it as a resume, an unknown id is started. (A session crash recovery
    closed is reopened: ``tests/test_client_offline_turns.py``, after the worker's sweep.)"""
    client, key = served

    def start(**body: object) -> Any:
        return call(client, key, "POST", "/v1/sessions/start", body)

    def end_time(sid: str) -> Any:
        return call(client, key, "GET", f"/v1/sessions/{sid}")["end_time"]

    sid = start(project="api")["session_id"]
    assert start(session_id=sid, keep_ended=True)["session_id"] == sid  # open: a resume
    ended = call(client, key, "POST", "/v1/sessions/end", {"session_id": sid})
    before = recorded(client, key, sid)
    body = {"session_id": sid, "keep_ended": True, "request_id": "reopen-1"}
    message = refused(client, key, "POST", "/v1/sessions/start", body)
    assert message == f"session {sid} ended at {ended['end_time']}; {HTTP_NEXT_STEP}"
    assert recorded(client, key, sid) == before
    # a plain start reopens it, and the refused request id was not used up
    assert "duplicate" not in start(session_id=sid, request_id="reopen-1")
    assert end_time(sid) is None
    start(session_id="never-seen", keep_ended=True)
    assert end_time("never-seen") is None


def test_the_command_line_refuses_events_and_checkpoints_of_an_ended_session(
    home: Path,
) -> None:
    started = cortex(home, "--json", "session", "start", "--project", "api")
    sid = json.loads(started.stdout)["session_id"]
    assert cortex(home, "session", "end", "--session-id", sid).returncode == 0
    for args in (
        ("session", "event", "late", "--session-id", sid),
        ("session", "checkpoint", "--summary", "late", "--session-id", sid),
        ("pin", "add", "late", "late note", "--session-id", sid),
    ):
        result = cortex(home, *args)
        assert result.returncode == 1, args
        assert result.stderr.startswith(f"error: session {sid} ended at "), result.stderr
        assert result.stderr.rstrip().endswith(NEXT_STEP) and result.stderr.count("\n") == 1
    shown = json.loads(cortex(home, "--json", "session", "show", sid).stdout)
    assert (shown["checkpoint_count"], shown["working_memory"]) == (0, [])
    with Services.open(load_config(home)) as app:
        assert app.events.events(sid) == []


def test_late_writes_drained_from_the_journal_are_rejected_with_a_trace(
    home: Path, tmp_path: Path
) -> None:
    from test_client_server import free_port, running  # (a real server process's port)

    host, key = lite_host(tmp_path)
    port = free_port()
    env = {"CORTEX_SERVER": f"http://127.0.0.1:{port}", "CORTEX_API_KEY": key}
    with running(host, port):
        started = cortex(home, "--json", "session", "start", "--project", "api", env=env)
    sid = json.loads(started.stdout)["session_id"]
    # The server is down: the end, two late writes and a memory wait in the journal.
    assert cortex(home, "session", "end", "--session-id", sid, env=env).returncode == 0
    with Services.open(load_config(home, env)) as app:  # the Python API in client mode
        app.events.append(sid, "late")
        app.compaction.checkpoint(sid, summary="late")
    assert cortex(home, "memory", "add", "Deploys go to eu-west-1", env=env).returncode == 0
    with running(host, port):
        synced = cortex(home, "--json", "sync", env=env)
        again = cortex(home, "--json", "sync", env=env)  # nothing is retried
    assert synced.returncode == 0, synced.stderr
    report = json.loads(synced.stdout)
    assert (report["sent"], report["left"], report["rejected"]) == (2, 0, 2)
    assert json.loads(again.stdout)["sent"] == json.loads(again.stdout)["rejected"] == 0
    lines = (home / "spool" / "rejected.jsonl").read_text().splitlines()
    kept = [json.loads(line) for line in lines]
    assert [k["entry"]["path"] for k in kept] == [
        f"/v1/sessions/{sid}/events",
        "/v1/sessions/checkpoint",
    ]
    for k in kept:  # the server's refusal, in the terms of this home's reader
        assert k["error"].startswith(f"server {env['CORTEX_SERVER']} refused the request (409): ")
        assert f"session {sid} ended at" in k["error"]
        assert k["error"].endswith("start a new one with `cortex session start`")
    with host.open("default") as app:
        state = app.sessions.get_session(sid)
        assert state is not None and state.end_time is not None
        assert state.checkpoint_count == 0 and app.events.events(sid) == []
        assert [m.content for m in app.memory.list()] == ["Deploys go to eu-west-1"]
    host.close()
