"""The task endpoints over real PostgreSQL: add, update, list, done; what the tenant's session
starts and turns carry; scopes, revoked keys, bad input and replays. (Another tenant's view of
a task is in ``test_server.py``'s cross-tenant test.)"""

# ruff: noqa: F811  (the tests take test_server's module fixtures, imported below, by name)
from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from cortex.services.hosting import ServiceHost  # noqa: E402
from secret_corpus import CORPUS  # noqa: E402
from test_server import auth, call, client, host, new_key  # noqa: E402, F401

PROJECT = "git:example.com/team/api"


def titles(client: TestClient, key: str, query: str = "") -> list[tuple[str, str, bool]]:
    found = call(client, key, "GET", f"/v1/tasks{query}")["tasks"]
    return [(t["task_id"], t["stage"], t["pending"]) for t in found]


def test_add_update_list_and_done(client: TestClient, host: ServiceHost) -> None:
    key = new_key(host)
    added = call(client, key, "PUT", "/v1/tasks/t-1", {"title": "Wire CAT", "project": PROJECT})
    assert added == {"task_id": "t-1", "title": "Wire CAT", "stage": "build", "pending": True,
                     "updated_at": added["updated_at"], "project": PROJECT}  # fmt: skip
    call(client, key, "PUT", "/v1/tasks/t-2", {"title": "Rotate keys", "stage": "Design"})
    call(client, key, "PUT", "/v1/tasks/t-3", {"title": "Site", "project": "git:other"})
    # An update without a project keeps the task's; "" makes it every project's.
    updated = call(client, key, "PUT", "/v1/tasks/t-1", {"title": "Wire CAT control",
                                                         "stage": "verify"})  # fmt: skip
    assert (updated["title"], updated["stage"], updated["project"]) == (
        "Wire CAT control", "verify", PROJECT)  # fmt: skip
    assert titles(client, key) == [
        ("t-1", "verify", True), ("t-2", "design", False), ("t-3", "build", True)]  # fmt: skip
    assert titles(client, key, "?pending=true") == [("t-1", "verify", True), ("t-3", "build", True)]
    assert titles(client, key, f"?project={PROJECT}") == [
        ("t-1", "verify", True), ("t-2", "design", False)]  # fmt: skip
    call(client, key, "PUT", "/v1/tasks/t-3", {"title": "Site", "project": ""})
    assert "project" not in call(client, key, "GET", "/v1/tasks?pending=true")["tasks"][1]
    done = call(client, key, "POST", "/v1/tasks/t-1/done", {})
    assert (done["stage"], done["pending"], done["title"]) == ("done", False, "Wire CAT control")
    assert titles(client, key, "?pending=true") == [("t-3", "build", True)]


def test_titles_are_redacted(client: TestClient, host: ServiceHost) -> None:
    key = new_key(host)
    for n, (_, secret, text) in enumerate(CORPUS[:8]):
        call(client, key, "PUT", f"/v1/tasks/s-{n}", {"title": text[:500]})
        listed = client.get("/v1/tasks", headers=auth(key)).text
        assert secret not in listed, text


def preamble(client: TestClient, key: str) -> str:
    started = call(client, key, "POST", "/v1/sessions/start", {"project": PROJECT})
    return str(started.get("preamble") or "")


def test_the_tenants_session_starts_and_turns_carry_its_tasks(
    client: TestClient, host: ServiceHost
) -> None:
    key, other = new_key(host), new_key(host)
    call(client, key, "PUT", "/v1/tasks/task-7", {"title": "CAT control", "project": PROJECT})
    call(client, key, "PUT", "/v1/tasks/task-8", {"title": "Elsewhere", "project": "git:other"})
    first = call(client, key, "POST", "/v1/sessions/start", {"project": PROJECT})["session_id"]
    call(client, key, "POST", f"/v1/sessions/{first}/turns", {"text": "working on CAT"})
    record = call(client, key, "GET", f"/v1/sessions/{first}")
    assert [t["task_id"] for t in record["pending_tasks"]] == ["task-7"]
    call(client, key, "POST", "/v1/sessions/end", {"session_id": first})
    assert "- [task-7] CAT control (last stage: build" in preamble(client, key)
    assert "task-7" not in preamble(client, other)  # another tenant's tasks never show
    call(client, key, "POST", "/v1/tasks/task-7/done", {})
    assert "task-7" not in preamble(client, key)


def test_scopes_and_revoked_keys(client: TestClient, host: ServiceHost) -> None:
    writer = new_key(host)
    call(client, writer, "PUT", "/v1/tasks/t-1", {"title": "A"})
    with host.registry() as app:
        tenant = app.tenants.authenticate(writer)[0]
    reader = new_key(host, "read", tenant)
    assert titles(client, reader) == [("t-1", "build", True)]
    for method, path, body in (("PUT", "/v1/tasks/t-2", {"title": "B"}),
                               ("POST", "/v1/tasks/t-1/done", {})):  # fmt: skip
        response = client.request(method, path, json=body, headers=auth(reader))
        assert response.status_code == 403 and response.json()["error"]["code"] == "forbidden"
    assert titles(client, writer) == [("t-1", "build", True)]
    with host.registry() as app:
        app.tenants.revoke_key(writer.split("_")[1])
    response = client.put("/v1/tasks/t-3", json={"title": "C"}, headers=auth(writer))
    assert response.status_code == 401 and response.json()["error"]["code"] == "unauthorized"
    assert client.get("/v1/tasks").status_code == 401


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("PUT", "/v1/tasks/t-1", {"title": "A", "stage": "bogus"}, 422, "validation_error"),
        ("PUT", "/v1/tasks/t-1", {"title": ""}, 422, "validation_error"),
        ("PUT", "/v1/tasks/t-1", {"title": "x" * 501}, 422, "validation_error"),
        ("PUT", "/v1/tasks/t-1", {"title": "A", "owner": "x"}, 422, "validation_error"),
        ("PUT", "/v1/tasks/a..b", {"title": "A"}, 400, "validation_error"),
        ("PUT", "/v1/tasks/.hidden", {"title": "A"}, 422, "validation_error"),
        ("POST", "/v1/tasks/nope/done", {}, 404, "not_found"),
        ("GET", "/v1/tasks?pending=maybe", None, 422, "validation_error"),
    ],
)
def test_bad_input_gets_a_stable_error(
    client: TestClient, host: ServiceHost, method: str, path: str, body: Any, status: int, code: str
) -> None:
    response = client.request(method, path, json=body, headers=auth(new_key(host)))
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code


def test_a_replayed_request_id_changes_nothing(client: TestClient, host: ServiceHost) -> None:
    key = new_key(host)
    body = {"title": "First", "request_id": "task-req-1"}
    assert "duplicate" not in call(client, key, "PUT", "/v1/tasks/t-1", body)
    call(client, key, "PUT", "/v1/tasks/t-1", {"title": "Second"})
    assert call(client, key, "PUT", "/v1/tasks/t-1", body) == {"duplicate": True}
    assert call(client, key, "GET", "/v1/tasks")["tasks"][0]["title"] == "Second"
    done = {"request_id": "task-req-2"}
    assert call(client, key, "POST", "/v1/tasks/t-1/done", done)["stage"] == "done"
    assert call(client, key, "POST", "/v1/tasks/t-1/done", done) == {"duplicate": True}
