"""The HTTP API over real PostgreSQL (FastAPI's TestClient): every endpoint, tenant
isolation, scopes, revocation, limits, error shapes and idempotent replays."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from cortex.adapters.server.app import create_app  # noqa: E402
from cortex.services.hosting import ServiceHost  # noqa: E402

# One worker runs this module under pytest-xdist: its module-scoped fixtures are set up once.
pytestmark = pytest.mark.xdist_group("test_server")


@pytest.fixture(scope="module")
def host(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceHost]:
    served = ServiceHost(pg_url, tmp_path_factory.mktemp("data"), pool_size=4)
    yield served
    served.close()


@pytest.fixture(scope="module")
def client(host: ServiceHost) -> TestClient:
    return TestClient(create_app(host.url, host=host, burst=10_000, rate_per_second=10_000))


def new_key(host: ServiceHost, scopes: str = "write", tenant: str | None = None) -> str:
    with host.registry() as app:
        if tenant is None:
            tenant = f"t-{secrets.token_hex(5)}"
            app.tenants.create_tenant(tenant)
        return app.tenants.create_key(tenant, scopes)[1]


def lite_host(tmp_path: Path) -> tuple[ServiceHost, str]:
    """A server host on a SQLite file (its one tenant, ``default``) and a write key of it."""
    lite = ServiceHost(str(tmp_path / "brain.db"), tmp_path / "data")
    with lite.registry() as app:
        app.tenants.create_tenant("default")
    return lite, new_key(lite, tenant="default")


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def call(client: TestClient, key: str, method: str, path: str, body: Any = None) -> Any:
    response = client.request(method, path, json=body, headers=auth(key))
    assert response.status_code == 200, response.text
    return response.json()


def seed(client: TestClient, key: str) -> tuple[str, str]:
    """A session with a pin, a turn and a checkpoint, and a memory: (session id, memory id)."""
    sid = call(client, key, "POST", "/v1/sessions/start", {"project": "api"})["session_id"]
    call(client, key, "POST", f"/v1/sessions/{sid}/turns", {"text": "auth refactor in api"})
    call(client, key, "PUT", f"/v1/sessions/{sid}/pins/deploy", {"content": "make deploy"})
    call(client, key, "POST", "/v1/sessions/checkpoint", {"session_id": sid, "reason": "half"})
    added = call(
        client, key, "POST", "/v1/memories/add", {"content": "Deploys go to eu-west-1",
                                                  "project": "api", "upsert_key": "region"}
    )  # fmt: skip
    return sid, added["id"]


def test_every_endpoint_answers_its_happy_path(client: TestClient, host: ServiceHost) -> None:
    key = new_key(host)
    sid, mid = seed(client, key)
    assert call(client, key, "GET", f"/v1/sessions/{sid}")["session_id"] == sid
    assert [p["label"] for p in call(client, key, "GET", f"/v1/sessions/{sid}/pins")["pins"]] == [
        "deploy"
    ]
    listed = call(client, key, "GET", "/v1/sessions?project=api&limit=5&offset=0")["sessions"]
    assert [s["session_id"] for s in listed] == [sid]
    snap = call(client, key, "GET", f"/v1/sessions/{sid}/snapshot")
    assert snap["session_id"] == sid and "half" in snap["transcript_md"]
    context = call(client, key, "POST", "/v1/context/get", {"session_id": sid, "query": "deploy"})
    assert "eu-west-1" in context["text"] and context["latest_checkpoint_id"]
    hits = call(client, key, "POST", "/v1/memories/search", {"query": "deploys", "project": "api"})
    assert hits["results"][0]["id"] == mid
    change = {"upsert_key": "region", "project": "api", "tags": ["infra"]}
    edited = call(client, key, "POST", "/v1/memories/edit", change)
    assert edited["id"] == mid and edited["tags"] == ["infra"]
    assert call(client, key, "GET", f"/v1/memories/{mid}")["content"] == "Deploys go to eu-west-1"
    ended = call(client, key, "POST", "/v1/sessions/end", {"session_id": sid})
    assert ended["end_time"]
    nxt = call(client, key, "POST", "/v1/sessions/start", {"project": "api"})["session_id"]
    cont = call(client, key, "POST", f"/v1/sessions/{nxt}/continue", {"target_session_id": sid})
    assert cont["session_id"] == nxt
    chain = call(client, key, "GET", f"/v1/sessions/{nxt}/chain?depth=5")["sessions"]
    assert chain[-1]["session_id"] == nxt
    removed = call(client, key, "DELETE", f"/v1/sessions/{nxt}/pins/deploy")
    assert removed["content"] == "make deploy"
    listed = call(client, key, "POST", "/v1/memories/list", {"project": "api"})["memories"]
    assert [m["id"] for m in listed] == [mid]
    gone = call(client, key, "DELETE", f"/v1/memories/{mid}")
    assert gone["deleted"] is True and gone["id"] == mid and gone["deleted_at"]
    assert call(client, key, "POST", "/v1/memories/list", {"project": "api"})["memories"] == []
    assert call(client, key, "GET", "/v1/metrics/verify")["ok"] is True


def test_consolidate_endpoint_is_tenant_scoped_and_needs_write(
    client: TestClient, host: ServiceHost
) -> None:
    key_a, key_b = new_key(host), new_key(host)
    for content in ("User prefers tabs", "user prefers tabs.", "The user prefers TABS"):
        call(client, key_a, "POST", "/v1/memories/add", {"content": content})
    call(client, key_b, "POST", "/v1/memories/add", {"content": "User prefers tabs"})
    shadow = call(client, key_a, "POST", "/v1/memories/consolidate", {"dry_run": True})
    assert (shadow["mode"], shadow["applied"], shadow["merged_count"]) == ("shadow", False, 2)
    applied = call(client, key_a, "POST", "/v1/memories/consolidate", {"request_id": "c-1"})
    assert (applied["mode"], applied["input_count"], applied["merged_count"]) == ("apply", 3, 2)
    replay = call(client, key_a, "POST", "/v1/memories/consolidate", {"request_id": "c-1"})
    assert replay == {"duplicate": True}
    hits = call(client, key_a, "POST", "/v1/memories/search", {"query": "tabs"})["results"]
    assert len(hits) == 1
    # The other tenant's identical memory was neither read nor merged.
    other = call(client, key_b, "POST", "/v1/memories/consolidate", {})
    assert (other["input_count"], other["merged_count"]) == (1, 0)
    reader = new_key(host, "read")
    response = client.post("/v1/memories/consolidate", json={}, headers=auth(reader))
    assert response.status_code == 403
    for body in ({"dry_run": "x"}, {"project": 5}, {"extra": 1}, {"request_id": "bad id!"},
                 {"project": "p" * 201}, [], "x"):  # fmt: skip
        bad = client.post("/v1/memories/consolidate", json=body, headers=auth(key_a))
        assert bad.status_code == 422, body
        assert bad.json()["error"]["code"] == "validation_error"


def test_endpoints_take_unique_id_prefixes(client: TestClient, host: ServiceHost) -> None:
    key = new_key(host)
    sid, mid = seed(client, key)
    assert call(client, key, "GET", f"/v1/sessions/{sid[:8]}")["session_id"] == sid
    pins = call(client, key, "GET", f"/v1/sessions/{sid[:8]}/pins")["pins"]
    assert [p["label"] for p in pins] == ["deploy"]
    assert call(client, key, "GET", f"/v1/memories/{mid[:8]}")["id"] == mid
    assert call(client, key, "POST", "/v1/sessions/end", {"session_id": sid[:8]})["end_time"]


def snapshot_of(client: TestClient, key: str, sid: str, mid: str) -> Any:
    return (
        call(client, key, "GET", f"/v1/sessions/{sid}"),
        call(client, key, "GET", f"/v1/memories/{mid}"),
    )


def test_another_tenant_can_neither_read_nor_change_a_tenants_records(
    client: TestClient, host: ServiceHost
) -> None:
    key_a, key_b = new_key(host), new_key(host)
    sid, mid = seed(client, key_a)
    call(client, key_a, "PUT", "/v1/tasks/t-a", {"title": "a's task"})
    before = snapshot_of(client, key_a, sid, mid)
    attempts = [
        ("POST", "/v1/tasks/t-a/done", {}),
        ("GET", f"/v1/sessions/{sid}", None),
        ("GET", f"/v1/sessions/{sid}/pins", None),
        ("GET", f"/v1/sessions/{sid}/chain", None),
        ("GET", f"/v1/sessions/{sid}/snapshot", None),
        ("POST", f"/v1/sessions/{sid}/turns", {"text": "intruder"}),
        ("PUT", f"/v1/sessions/{sid}/pins/x", {"content": "intruder"}),
        ("DELETE", f"/v1/sessions/{sid}/pins/deploy", None),
        ("POST", "/v1/sessions/end", {"session_id": sid}),
        ("POST", "/v1/sessions/checkpoint", {"session_id": sid}),
        ("POST", "/v1/context/get", {"session_id": sid}),
        ("GET", f"/v1/memories/{mid}", None),
        ("POST", "/v1/memories/edit", {"id": mid, "content": "intruder"}),
        ("DELETE", f"/v1/memories/{mid}", None),
    ]
    for method, path, body in attempts:
        response = client.request(method, path, json=body, headers=auth(key_b))
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["error"]["code"] == "not_found"
    other = call(client, key_b, "POST", "/v1/sessions/start", {"project": "api"})["session_id"]
    response = client.post(
        f"/v1/sessions/{other}/continue", json={"target_session_id": sid}, headers=auth(key_b)
    )
    assert response.status_code == 404
    assert call(client, key_b, "POST", "/v1/memories/search", {"query": "deploy"}) == {
        "results": []
    }
    assert call(client, key_b, "GET", "/v1/sessions")["sessions"][0]["session_id"] == other
    assert call(client, key_b, "GET", "/v1/tasks") == {"tasks": []}
    # The same task id in another tenant is that tenant's own task.
    call(client, key_b, "PUT", "/v1/tasks/t-a", {"title": "b's task", "stage": "done"})
    assert snapshot_of(client, key_a, sid, mid) == before
    a_tasks = call(client, key_a, "GET", "/v1/tasks")["tasks"]
    assert [(t["title"], t["stage"]) for t in a_tasks] == [("a's task", "build")]


def test_read_keys_cannot_write_and_revoked_keys_stop_at_once(
    client: TestClient, host: ServiceHost
) -> None:
    writer = new_key(host, "write")
    sid, _ = seed(client, writer)
    with host.registry() as app:
        tenant = app.tenants.authenticate(writer)[0]
    reader = new_key(host, "read", tenant)
    assert call(client, reader, "GET", f"/v1/sessions/{sid}")["session_id"] == sid
    response = client.post(f"/v1/sessions/{sid}/turns", json={"text": "x"}, headers=auth(reader))
    assert response.status_code == 403 and response.json()["error"]["code"] == "forbidden"
    with host.registry() as app:
        app.tenants.revoke_key(writer.split("_")[1])
    response = client.get(f"/v1/sessions/{sid}", headers=auth(writer))
    assert response.status_code == 401 and response.json()["error"]["code"] == "unauthorized"
    assert client.get("/v1/sessions").status_code == 401


def test_bad_input_gets_the_error_shape_never_a_500(client: TestClient, host: ServiceHost) -> None:
    key = new_key(host)
    headers = auth(key) | {"Content-Type": "application/json"}
    malformed = client.post("/v1/sessions/start", content=b"{not json", headers=headers)
    assert malformed.status_code == 422
    assert malformed.json()["error"]["code"] == "validation_error"
    big = client.post("/v1/memories/add", content=b"x" * (1024 * 1024 + 1), headers=headers)
    assert big.status_code == 413 and big.json()["error"]["code"] == "payload_too_large"
    long = client.post("/v1/memories/add", json={"content": "x " * 50_000}, headers=auth(key))
    assert long.status_code == 200  # kept, cut with a marker, as a local home keeps it
    assert long.json()["content"].endswith("\n[truncated: 99,999 bytes, the first 65,487 kept]")
    bad_id = client.post("/v1/memories/add", json={"content": "x", "request_id": "a b"},
                         headers=auth(key))  # fmt: skip
    assert bad_id.status_code == 422
    missing = client.get("/v1/nowhere", headers=auth(key))
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    for unreadable in (
        '{"tags": ' + "[" * 5000 + "]" * 5000 + "}",
        '{"limit": ' + "1" * 5000 + "}",
    ):
        answer = client.post("/v1/memories/list", content=unreadable.encode(), headers=headers)
        assert answer.status_code == 422, answer.text  # as a syntax error is
        assert answer.json()["error"]["message"].startswith("body: JSON this server cannot read")


def test_a_replayed_request_id_changes_nothing(client: TestClient, host: ServiceHost) -> None:
    key = new_key(host)
    body = {"content": "Use tabs", "request_id": "req-1"}
    first = call(client, key, "POST", "/v1/memories/add", body)
    assert "duplicate" not in first
    assert call(client, key, "POST", "/v1/memories/add", body) == {"duplicate": True}
    hits = call(client, key, "POST", "/v1/memories/search", {"query": "tabs"})["results"]
    assert [h["id"] for h in hits] == [first["id"]]
    sid = call(client, key, "POST", "/v1/sessions/start", {})["session_id"]
    turn = {"text": "hello", "request_id": "turn-1"}
    assert call(client, key, "POST", f"/v1/sessions/{sid}/turns", turn)["duplicate"] is False
    assert call(client, key, "POST", f"/v1/sessions/{sid}/turns", turn)["duplicate"] is True
    start = {"project": "replayed", "request_id": "start-1"}
    opened = call(client, key, "POST", "/v1/sessions/start", start)["session_id"]
    assert call(client, key, "POST", "/v1/sessions/start", start) == {"duplicate": True}
    listed = call(client, key, "GET", "/v1/sessions?project=replayed")["sessions"]
    assert [s["session_id"] for s in listed] == [opened]  # the replay opened none
    end = {"session_id": opened, "request_id": "end-1"}
    assert call(client, key, "POST", "/v1/sessions/end", end)["session_id"] == opened
    assert call(client, key, "POST", "/v1/sessions/end", end) == {"duplicate": True}


def test_rate_limit_answers_429_with_retry_after(host: ServiceHost) -> None:
    limited = TestClient(create_app(host.url, host=host, rate_per_second=0.01, burst=2))
    key = new_key(host)
    codes = [limited.get("/v1/sessions", headers=auth(key)).status_code for _ in range(3)]
    assert codes == [200, 200, 429]
    response = limited.get("/v1/sessions", headers=auth(key))
    assert response.json()["error"]["code"] == "rate_limited"
    assert int(response.headers["Retry-After"]) >= 1


def test_probes_and_openapi(client: TestClient, tmp_path: Path) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}
    assert "/v1/sessions/start" in client.get("/openapi.json").json()["paths"]
    down = TestClient(create_app("postgresql://postgres@127.0.0.1:1/none", data_dir=tmp_path))
    assert down.get("/healthz").status_code == 200
    response = down.get("/readyz")
    assert response.status_code == 503 and response.json()["error"]["code"] == "unavailable"


def test_offsets_past_the_bound_are_a_422_on_postgresql_and_sqlite(
    client: TestClient, host: ServiceHost, tmp_path: Path
) -> None:
    lite, lite_key = lite_host(tmp_path)
    lite_client = TestClient(create_app(lite.url, host=lite))
    for served, key in ((client, new_key(host)), (lite_client, lite_key)):
        for offset in (1_000_001, 10**20):
            response = served.post("/v1/memories/list", json={"offset": offset}, headers=auth(key))
            assert response.status_code == 422, response.text
            assert "less than or equal to 1000000" in response.json()["error"]["message"]
    lite.close()


def test_an_unreachable_database_is_a_503_naming_no_host_user_or_database(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = "postgresql://someone@127.0.0.1:1/secret_db_name"
    down = TestClient(create_app(url, data_dir=tmp_path, secret="x" * 32))
    for response in (
        down.get("/readyz"),
        down.get("/v1/sessions", headers=auth("ctx_0123456789ab_" + "x" * 43)),
    ):
        assert response.status_code == 503, response.text
        error = response.json()["error"]
        assert error["code"] == "unavailable" and "retry" in error["message"]
        for detail in ("127.0.0.1", "someone", "secret_db_name", ":1"):
            assert detail not in response.text
    assert "secret_db_name" in caplog.text  # the cause is in the server's log


def test_an_unexpected_database_error_is_a_503_naming_no_database_logged_with_a_next_step(
    fresh_database: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An error of PostgreSQL no other line covers (an internal error, a trigger an operator
    added): the client gets the store errors' 503, the server's log the cause and what to do."""
    import psycopg

    from cortex.services.hosting import UNAVAILABLE
    from cortex.store.postgres.db import redacted

    host = ServiceHost(fresh_database, tmp_path, secret="x" * 32)
    try:
        client = TestClient(create_app(fresh_database, host=host))
        key = new_key(host)
        with psycopg.connect(fresh_database, autocommit=True) as conn:
            conn.execute(
                "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'boom' USING ERRCODE = 'XX000'; END $$"
            )
            conn.execute(
                "CREATE TRIGGER boom BEFORE INSERT ON session_states "
                "FOR EACH ROW EXECUTE FUNCTION boom()"
            )
        response = client.post("/v1/sessions/start", json={"project": "p"}, headers=auth(key))
        assert response.status_code == 503, response.text
        assert response.json()["error"]["message"] == UNAVAILABLE
        for detail in ("127.0.0.1", fresh_database.rsplit("/", 1)[1], "boom"):
            assert detail not in response.text
        assert (
            f"database unavailable: database {redacted(fresh_database)} failed (boom); retry, "
            "and if it fails again see PostgreSQL's log for the statement and its cause"
        ) in caplog.text
    finally:
        host.close()


def test_a_body_not_sent_as_json_is_a_415_naming_the_content_type(
    client: TestClient, host: ServiceHost
) -> None:
    key = new_key(host)
    form = auth(key) | {"Content-Type": "application/x-www-form-urlencoded"}  # what curl -d sends
    for path in ("/v1/sessions/start", "/v1/memories/add"):
        response = client.post(path, content=b'{"content": "x"}', headers=form)
        assert response.status_code == 415, response.text
        assert response.json()["error"] == {
            "code": "unsupported_media_type",
            "message": "send the body as JSON, with Content-Type: application/json",
        }
    call(client, key, "PUT", "/v1/tasks/t-1", {"title": "Rotate keys"})
    done = client.post("/v1/tasks/t-1/done", headers=auth(key))  # no body at all
    assert done.status_code == 200 and done.json()["pending"] is False


def test_openapi_declares_bearer_auth_and_every_error_status_answered(
    client: TestClient, host: ServiceHost
) -> None:
    schema = client.get("/openapi.json").json()
    assert schema["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key from `cortex key create`: ctx_<key id>_<secret>.",
    }
    for path, operations in schema["paths"].items():
        for operation in operations.values():
            assert (operation.get("security") == [{"bearer": []}]) == path.startswith("/v1/")
            # a probe takes no body: never a 415
            assert "405" in operation["responses"]
            assert ("415" in operation["responses"]) == path.startswith("/v1/")
    wrong = client.patch("/v1/tasks/t-1", headers=auth(new_key(host)))
    assert wrong.status_code == 405 and wrong.headers["allow"] == "PUT"
    assert wrong.json()["error"]["code"] == "method_not_allowed"


def test_every_operation_documents_its_200_body_field_by_field(client: TestClient) -> None:
    """Each 200 is a model (or a change's model or duplicate) whose fields are all declared and
    no other allowed: not FastAPI's ``object`` of anything a ``dict`` return gives."""
    schema = client.get("/openapi.json").json()
    models = schema["components"]["schemas"]

    def resolved(ref: dict[str, Any]) -> dict[str, Any]:
        return dict(models[ref["$ref"].rpartition("/")[2]])

    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            body = operation["responses"]["200"]["content"]["application/json"]["schema"]
            choices = body.get("anyOf", [body])
            assert all(set(c) == {"$ref"} for c in choices), (method, path, body)
            for model in map(resolved, choices):
                assert model["additionalProperties"] is False, (method, path)
                assert model["required"] and set(model["required"]) <= set(model["properties"])
    assert resolved({"$ref": "Duplicate"})["properties"]["duplicate"]["const"] is True


def test_every_error_code_the_server_gives_is_in_the_documented_enum(client: TestClient) -> None:
    from cortex.adapters.server import app

    enum = client.get("/openapi.json").json()["components"]["schemas"]["ErrorDetail"]
    given = {code for _, code in app._CODES} | set(app._HTTP_CODES.values()) | {"internal"}
    assert given == set(enum["properties"]["code"]["enum"])
    assert enum["additionalProperties"] is False


def test_401_names_the_bearer_token_in_words_redaction_keeps(client: TestClient) -> None:
    for headers in ({}, auth("ctx_0123456789ab_" + "x" * 43)):
        response = client.get("/v1/sessions", headers=headers)
        assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
        message = response.json()["error"]["message"]
        assert "REDACTED" not in message and "`cortex key create" in message
        assert "Bearer token in the Authorization header" in message
