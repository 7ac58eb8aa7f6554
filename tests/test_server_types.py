"""Request bodies take the JSON types ``/openapi.json`` declares and no others: a string for an
integer, a number, a boolean or an array, or a number for a boolean, is a 422 naming the field
(never converted), on the direct routes and FastAPI's alike; what JSON has no type for (a
date-time, an enum) is a string as before, and query parameters still parse."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from cortex.adapters.server.app import create_app  # noqa: E402
from test_server import auth, call, lite_host  # noqa: E402


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[TestClient, str]]:
    host, key = lite_host(tmp_path)
    try:
        yield TestClient(create_app(host.url, host=host, burst=10_000)), key
    finally:
        host.close()


def test_a_value_of_another_json_type_is_a_422_naming_the_field(
    served: tuple[TestClient, str],
) -> None:
    client, key = served
    sid = call(client, key, "POST", "/v1/sessions/start", {"project": "api"})["session_id"]
    wrong: list[tuple[str, str, dict[str, Any], str, str]] = [
        # (method, path, body, field, the type it should be)
        ("POST", "/v1/sessions/start", {"explain": "true"}, "explain", "boolean"),
        ("POST", "/v1/sessions/start", {"explain": 1}, "explain", "boolean"),
        ("POST", f"/v1/sessions/{sid}/turns", {"weight": "2"}, "weight", "number"),
        ("POST", f"/v1/sessions/{sid}/turns", {"text": 5}, "text", "string"),
        (
            "PUT",
            f"/v1/sessions/{sid}/pins/a",
            {"content": "x", "critical": "false"},
            "critical",
            "boolean",
        ),  # fmt: skip
        (
            "PUT",
            f"/v1/sessions/{sid}/pins/a",
            {"content": "x", "confidence": "0.5"},
            "confidence",
            "number",
        ),  # fmt: skip
        (
            "PUT",
            f"/v1/sessions/{sid}/pins/a",
            {"content": "x", "confidence": True},
            "confidence",
            "number",
        ),  # fmt: skip
        (
            "POST",
            f"/v1/sessions/{sid}/events",
            {"content": "x", "meaningful": 0},
            "meaningful",
            "boolean",
        ),  # fmt: skip
        ("POST", "/v1/memories/search", {"query": "x", "limit": "5"}, "limit", "integer"),
        ("POST", "/v1/memories/search", {"query": "x", "limit": 5.5}, "limit", "integer"),
        ("POST", "/v1/memories/search", {"query": "x", "limit": True}, "limit", "integer"),
        ("POST", "/v1/memories/search", {"query": "x", "expand": "false"}, "expand", "boolean"),
        ("POST", "/v1/memories/list", {"offset": "10"}, "offset", "integer"),
        ("POST", "/v1/context/get", {"budget_tokens": "100"}, "budget_tokens", "integer"),
        (
            "POST",
            "/v1/memories/add",
            {"content": "x", "confidence": "1"},
            "confidence",
            "number",
        ),  # fmt: skip
        ("POST", "/v1/memories/consolidate", {"dry_run": "false"}, "dry_run", "boolean"),
        ("PUT", "/v1/tasks/t-1", {"title": 5}, "title", "string"),
        # an array is never a string (nor a comma list), and its items keep their type too
        ("POST", "/v1/sessions/start", {"keywords": "deploy"}, "keywords", "list"),
        ("POST", "/v1/sessions/start", {"keywords": ["deploy", 1]}, "keywords.1", "string"),
        ("POST", f"/v1/sessions/{sid}/turns", {"files": "src/app.py"}, "files", "list"),
        ("POST", f"/v1/sessions/{sid}/turns", {"tool_input": "ls"}, "tool_input", "dictionary"),
        ("POST", "/v1/memories/add", {"content": "x", "tags": "a,b"}, "tags", "list"),
        ("POST", "/v1/memories/search", {"query": "x", "types": "note"}, "types", "list"),
    ]
    for method, path, body, field, kind in wrong:
        response = client.request(method, path, json=body, headers=auth(key))
        assert response.status_code == 422, (path, body, response.text)
        message = response.json()["error"]["message"]
        assert response.json() == {"error": {"code": "validation_error", "message": message}}
        assert message == (
            f"body.{field}: Input should be a valid {kind}; fix the request (see /openapi.json)"
        ), (path, body)
    # nothing of them was applied: no pin, no event, no memory, no consolidation, no task
    assert call(client, key, "GET", f"/v1/sessions/{sid}/pins")["pins"] == []
    assert call(client, key, "GET", f"/v1/sessions/{sid}/events")["events"] == []
    assert call(client, key, "POST", "/v1/memories/list", {})["memories"] == []
    assert call(client, key, "GET", "/v1/tasks")["tasks"] == []


def test_the_forms_the_document_allows_are_still_taken(served: tuple[TestClient, str]) -> None:
    client, key = served
    sid = call(client, key, "POST", "/v1/sessions/start", {"explain": False})["session_id"]
    # an integer for a number, and an integer written 5.0 (JSON Schema's integer too)
    call(client, key, "POST", f"/v1/sessions/{sid}/turns", {"text": "hello", "weight": 2})
    pin = call(client, key, "PUT", f"/v1/sessions/{sid}/pins/a", {"content": "x",
               "confidence": 1, "critical": True})  # fmt: skip
    assert (pin["confidence"], pin["importance"]) == (1.0, "CRITICAL")
    call(client, key, "POST", "/v1/memories/add", {"content": "Deploys go to eu-west-1"})
    found = call(client, key, "POST", "/v1/memories/search", {"query": "deploys", "limit": 5.0})
    assert len(found["results"]) == 1
    listed = call(client, key, "POST", "/v1/memories/list", {"limit": 10.0, "offset": 0.0})
    assert len(listed["memories"]) == 1
    # what JSON has no type for: a date-time as an ISO 8601 string, an enum as its value
    frozen = {"content": "Freeze until Friday", "expires_at": "2999-01-01T00:00:00Z"}
    later = call(client, key, "POST", "/v1/memories/add", frozen | {"scope": "global"})
    assert (later["expires_at"], later["scope"]) == ("2999-01-01T00:00:00.000000Z", "global")
    # query parameters arrive as strings and parse as before
    assert call(client, key, "GET", "/v1/sessions?limit=5&offset=0&open=true")["sessions"]
    assert call(client, key, "GET", f"/v1/sessions/{sid}/events?limit=3&meaningful_only=true")
    assert call(client, key, "GET", f"/v1/sessions/{sid}/chain?depth=2")["sessions"]
    assert call(client, key, "GET", "/v1/tasks?pending=false")["tasks"] == []
    response = client.get("/v1/sessions?limit=five", headers=auth(key))
    assert response.status_code == 422
    assert response.json()["error"]["message"].startswith("query.limit: ")
