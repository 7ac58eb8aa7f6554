"""Text no store holds as given (a NUL, which PostgreSQL refuses; a lone surrogate, which UTF-8
cannot encode) gets the same answer on SQLite and PostgreSQL, through the services and the
HTTP API: free text is stored with U+FFFD in its place, a name is refused naming its field."""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cortex.config import load_config
from cortex.core.plaintext import plain, storable, storable_value
from cortex.errors import ValidationError
from cortex.services.app import Services

NUL, LONE = "a\x00b", "a\ud83db"
STORED = "a\ufffdb"


@pytest.mark.parametrize(
    ("given", "made"),
    [
        ("plain", "plain"),
        (NUL, STORED),
        (LONE, STORED),
        ("\ud83d\ude00", "\U0001f600"),  # a pair, as a JSON escape gives it: its character
        ("\x00\udfff", "\ufffd\ufffd"),
    ],
)
def test_storable_replaces_what_no_store_holds(given: str, made: str) -> None:
    assert storable(given) == made
    assert storable_value({given: [given, (given,), 1, None]}) == {made: [made, (made,), 1, None]}


@pytest.mark.parametrize("bad", [NUL, LONE])
def test_plain_refuses_a_name_naming_the_parameter(bad: str) -> None:
    assert plain("api", "project") == "api"
    assert plain(None, "project") is None
    with pytest.raises(ValidationError) as refused:
        plain(bad, "project")
    assert str(refused.value) == (
        "`project` holds a NUL or a lone surrogate, which Cortex does not keep in a name; "
        "send it as plain text"
    )


@pytest.fixture(params=["sqlite", "postgres"])
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Services]:
    """Every service over a SQLite home, or over a fresh PostgreSQL tenant."""
    if request.param == "sqlite":
        with Services.open(load_config(tmp_path / "home", {}, {})) as services:
            yield services
        return
    from cortex.services.hosting import ServiceHost

    host = ServiceHost(request.getfixturevalue("pg_url"), tmp_path / "data", pool_size=2)
    try:
        tenant = f"t-{secrets.token_hex(5)}"
        with host.registry() as registry:
            registry.tenants.create_tenant(tenant)
        services = host.open(tenant)
        try:
            yield services
        finally:
            services.close()
    finally:
        host.close()


def ADD_PIN(app: Services, sid: str, bad: str) -> object:  # noqa: N802
    return app.sessions.add_pin(f"x{bad}", "value", sid)


NAMES: list[tuple[str, Callable[[Services, str, str], object]]] = [
    ("session_id", lambda s, sid, bad: s.sessions.on_session_start(bad, project="api")),
    ("channel", lambda s, sid, bad: s.sessions.on_session_start(None, bad, project="api")),
    ("project", lambda s, sid, bad: s.sessions.on_session_start(project=bad)),
    ("project_name", lambda s, sid, bad: s.sessions.on_session_start(project_name=bad)),
    ("agent_id", lambda s, sid, bad: s.sessions.on_session_start(agent_id=bad)),
    ("user_id", lambda s, sid, bad: s.sessions.on_session_start(user_id=bad)),
    ("parent_session", lambda s, sid, bad: s.sessions.on_session_start(parent_session=bad)),
    ("learning_id", lambda s, sid, bad: s.sessions.record(sid, learning_id=bad)),
    ("label", ADD_PIN),
    ("label", lambda s, sid, bad: s.sessions.remove_pin(bad, sid)),
    ("project", lambda s, sid, bad: s.sessions.list_sessions(project=bad)),
    ("task_id", lambda s, sid, bad: s.tasks.add(bad, "title")),
    ("project", lambda s, sid, bad: s.tasks.add("t1", "title", project=bad)),
    ("project", lambda s, sid, bad: s.tasks.list_tasks(project=bad)),
    ("user_id", lambda s, sid, bad: s.memory.list(user_id=bad)),
    ("user_id", lambda s, sid, bad: s.memory.get_context(user_id=bad)),
]


@pytest.mark.parametrize("bad", [NUL, LONE], ids=["nul", "lone-surrogate"])
@pytest.mark.parametrize(("field", "call"), NAMES, ids=[f"{i}-{n[0]}" for i, n in enumerate(NAMES)])
def test_a_name_no_store_holds_is_refused_naming_it(
    app: Services, bad: str, field: str, call: Callable[[Services, str, str], object]
) -> None:
    sid = app.sessions.on_session_start(project="api").session_id
    before = app.sessions.get_session(sid)
    with pytest.raises(ValidationError) as refused:
        call(app, sid, bad)
    expected = f"`{field}` holds a NUL or a lone surrogate"
    if call is ADD_PIN and bad == NUL:  # a control character, which a new label never holds
        expected = "a pin label cannot hold control characters (U+0000)"
    assert str(refused.value).startswith(expected)
    assert app.sessions.get_session(sid) == before
    assert [s.session_id for s in app.sessions.list_sessions()] == [sid]


@pytest.mark.parametrize("bad", [NUL, LONE], ids=["nul", "lone-surrogate"])
def test_free_text_is_stored_with_the_replacement_character(app: Services, bad: str) -> None:
    sid = app.sessions.on_session_start(project="api", workdir=f"/src/{bad}", keywords=[bad])
    sid_ = sid.session_id
    app.sessions.record(
        sid_, text=bad, workdir=bad, categories=[bad], tool_name=bad,
        tool_input={bad: bad}, files=[bad],
    )  # fmt: skip
    assert app.sessions.add_pin("note", bad, sid_).content == STORED
    assert [p.content for p in app.sessions.list_pins(sid_)] == [STORED]
    assert app.events.append(sid_, bad).content == STORED
    checkpoint = app.compaction.checkpoint(
        sid_, summary=bad, decisions=[bad], next_steps=[bad], resume_instructions=bad
    )
    stored = app.compaction.checkpoints(sid_, limit=1)[0]
    assert stored == checkpoint
    assert (stored.summary, stored.next_steps, stored.resume_instructions) == (
        STORED, (STORED,), STORED,
    )  # fmt: skip
    assert {"decision": STORED} in stored.state["decisions"]
    assert app.tasks.add("t1", bad)["title"] == STORED
    assert [t["title"] for t in app.tasks.list_tasks()] == [STORED]
    texts = [e.content for e in app.events.events(sid_)]
    assert STORED in texts
    assert all("\x00" not in text for text in texts)
    app.sessions.on_session_end(sid_)


@pytest.mark.parametrize("bad", [NUL, LONE], ids=["nul", "lone-surrogate"])
def test_a_memory_filter_finds_what_a_memory_stored(app: Services, bad: str) -> None:
    """A memory's project and tags are stored storable (as its text is): a filter holding the
    same text finds it."""
    added = app.memory.add(f"fact {bad}", project=bad, tags=[bad]).memory
    assert added.content == f"fact {STORED}" and added.project == STORED
    assert [m.id for m in app.memory.list(project=bad)] == [added.id]
    assert [m.id for m in app.memory.list(project=bad, tags=[bad])] == [added.id]


# -- the HTTP API ------------------------------------------------------------------------------

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

import test_server_ended  # noqa: E402

Served = tuple[TestClient, str]
served = test_server_ended.served
"""The app over a SQLite file or a fresh PostgreSQL tenant, and a key (each test runs on both)."""


REFUSED = [
    ("/v1/sessions/start", {"agent_id": "X"}, "agent_id"),
    ("/v1/sessions/start", {"channel": "X"}, "channel"),
    ("/v1/sessions/start", {"project": "X"}, "project"),
    ("/v1/sessions/start", {"project_name": "X"}, "project_name"),
    ("/v1/sessions/start", {"user_id": "X"}, "user_id"),
    ("/v1/sessions/{sid}/turns", {"learning_id": "X"}, "learning_id"),
    ("/v1/memories/list", {"user_id": "X"}, "user_id"),
]
STORED_TEXT = [
    ("/v1/sessions/{sid}/events", {"content": "X"}, "content"),
    ("/v1/tasks/t1", {"title": "X"}, "title"),
    ("/v1/sessions/{sid}/pins/note", {"content": "X"}, "content"),
    ("/v1/sessions/checkpoint", {"session_id": "{sid}", "reason": "X"}, "summary"),
]


def send(client: TestClient, key: str, method: str, path: str, body: dict[str, Any]) -> Any:
    """The response to ``body`` sent as JSON text: a lone surrogate goes as its escape."""
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    return client.request(method, path, content=json.dumps(body), headers=headers)


def filled(body: dict[str, Any], bad: str, sid: str) -> dict[str, Any]:
    return {k: bad if v == "X" else sid if v == "{sid}" else v for k, v in body.items()}


@pytest.mark.parametrize(("path", "body", "field"), REFUSED)
def test_over_http_a_name_holding_a_nul_is_refused_naming_it(
    served: Served, path: str, body: dict[str, Any], field: str, caplog: pytest.LogCaptureFixture
) -> None:
    client, key = served
    sid = send(client, key, "POST", "/v1/sessions/start", {"project": "api"}).json()["session_id"]
    with caplog.at_level(logging.WARNING):
        answer = send(client, key, "POST", path.format(sid=sid), filled(body, NUL, sid))
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "validation_error"
    assert error["message"] == (
        f'"{field}" holds a NUL or a lone surrogate, which Cortex does not keep in a name; '
        "send it as plain text"
    )
    assert "not recorded" not in caplog.text and "pipeline" not in caplog.text
    listed = send(client, key, "GET", "/v1/sessions", {}).json()["sessions"]
    assert [s["session_id"] for s in listed] == [sid]


@pytest.mark.parametrize(("path", "body", "field"), STORED_TEXT)
def test_over_http_free_text_holding_a_nul_is_stored_replaced(
    served: Served, path: str, body: dict[str, Any], field: str
) -> None:
    client, key = served
    sid = send(client, key, "POST", "/v1/sessions/start", {"project": "api"}).json()["session_id"]
    method = "PUT" if "/pins/" in path or "/tasks/" in path else "POST"
    answer = send(client, key, method, path.format(sid=sid), filled(body, NUL, sid))
    assert answer.status_code == 200, answer.text
    assert answer.json()[field] == STORED


@pytest.mark.parametrize(("path", "body", "field"), REFUSED + STORED_TEXT)
def test_over_http_a_lone_surrogate_is_refused_by_the_schema_naming_the_field(
    served: Served, path: str, body: dict[str, Any], field: str
) -> None:
    """A JSON string holding a lone surrogate is no valid string to the API's schema: a 422
    naming the field, on either backend, before any service runs."""
    client, key = served
    sid = send(client, key, "POST", "/v1/sessions/start", {"project": "api"}).json()["session_id"]
    method = "PUT" if "/pins/" in path or "/tasks/" in path else "POST"
    answer = send(client, key, method, path.format(sid=sid), filled(body, LONE, sid))
    assert answer.status_code == 422, answer.text
    named = next(k for k, v in body.items() if v == "X")
    assert answer.json()["error"]["message"].startswith(f"body.{named}: Input should be")
