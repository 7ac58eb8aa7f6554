"""The HTTP API against its own OpenAPI document (Schemathesis), on a real server (uvicorn on a
loopback port) over SQLite and over PostgreSQL: generated requests for every operation, valid
and invalid, never make the server fail (no 5xx) and get JSON in the documented shape; a
request without a key gets nothing; another tenant's key, sent with this tenant's ids, reads
and changes nothing of it. Each run is derandomized and small (a fixed set of examples, the
same on every run), so it fits the suite's time; `docs/server.md` says how to fuzz longer by
hand. Below them, the exact requests of the defects such runs found."""

from __future__ import annotations

import json
import re
import secrets
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)
from starlette.routing import compile_path  # noqa: E402

from cortex.clock import FixedClock  # noqa: E402
from cortex.services.hosting import ServiceHost  # noqa: E402
from test_client_server import free_port, running  # noqa: E402

# One worker runs this module under pytest-xdist: its module-scoped servers start once.
pytestmark = pytest.mark.xdist_group("test_server_schema")

EXAMPLES = 6
"""Generated requests per operation and run (each a fixed one: the runs are derandomized)."""
T1 = "2026-02-16T09:00:00Z"
CONFORMANCE = (status_code_conformance, content_type_conformance, response_schema_conformance)
"""The status is one the operation documents, and the body is of its content type and in its
schema (the success body's as much as an error's)."""


def fuzz_settings(examples: int = EXAMPLES) -> Any:
    return settings(
        max_examples=examples,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


@dataclass
class Served:
    """A running server, its host, and an admin key of each of its tenants (SQLite serves
    ``default`` only)."""

    url: str
    host: ServiceHost
    keys: dict[str, str] = field(default_factory=dict)

    def key(self, index: int = 0) -> str:
        return list(self.keys.values())[index]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    data = tmp_path_factory.mktemp("served")
    postgres = request.param == "postgres"
    db = str(request.getfixturevalue("pg_url")) if postgres else str(data / "brain.db")
    host = ServiceHost(db, data / "server", pool_size=4)
    tenants = [f"fuzz-{secrets.token_hex(4)}" for _ in "ab"] if postgres else ["default"]
    with host.registry() as app:
        keys = {}
        for tenant in tenants:
            app.tenants.create_tenant(tenant)
            keys[tenant] = app.tenants.create_key(tenant, "admin")[1]
    try:
        with running(host, free_port()) as url:
            yield Served(url, host, keys)
    finally:
        host.close()


def http(url: str, method: str, path: str, body: Any = None, key: str | None = None) -> Any:
    """(status, JSON body, headers) of one request."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read()), response.headers
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), exc.headers


def ok(url: str, method: str, path: str, body: Any = None, key: str | None = None) -> Any:
    status, answer, _ = http(url, method, path, body, key)
    assert status == 200, answer
    return answer


def each_operation(
    served: Served, check: Callable[[Any], None], examples: int = EXAMPLES
) -> dict[str, str]:
    """``check`` on the generated cases of every operation of the document; the failures by
    operation. (Schemathesis's pytest plugin does not run under this pytest: each
    operation's strategy is driven by Hypothesis here.)"""
    schema = schemathesis.openapi.from_url(f"{served.url}/openapi.json")
    failures: dict[str, str] = {}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 30
    for operation in operations:

        @given(case=operation.as_strategy())
        @fuzz_settings(examples)
        def run(case: Any) -> None:
            check(case)

        try:
            run()
        except (AssertionError, BaseExceptionGroup) as exc:  # reported together below
            failures[operation.label] = str(exc)[:2000]
    return failures


def report(failures: dict[str, str]) -> str:
    return "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())


def test_generated_requests_never_fail_the_server(served: Served) -> None:
    headers = {"Authorization": f"Bearer {served.key()}"}
    ids = seed(served, served.key())
    picks = iter(range(1_000_000))

    def check(case: Any) -> None:
        if (pick := next(picks)) % 2:  # every other case on records that exist
            name_records(case, ids, pick)
        # Every check Schemathesis has (the status, content type and body of each answer
        # against the document's, success and error alike, among them) but one: a body the
        # schema allows may still be refused with a documented 400 (an unknown session, '..'
        # in an id, a type the service refuses), which is not a failure.
        case.call_and_validate(headers=headers, excluded_checks=[positive_data_acceptance])

    assert (failures := each_operation(served, check)) == {}, report(failures)


def test_generated_requests_without_a_key_get_nothing(served: Served) -> None:
    def check(case: Any) -> None:
        response = case.call()
        if case.path.startswith("/v1/"):
            # Refused before the key is read (a body too large, not JSON, or outside the
            # schema; a method the path does not take), else 401; never an answer.
            assert response.status_code in (401, 405, 413, 415, 422), response.text
        else:
            assert response.status_code < 500, response.text

    assert (failures := each_operation(served, check, examples=3)) == {}, report(failures)


A_WORD = "quokkamarker"
"""In everything tenant A writes; never in an answer to tenant B."""


def seed(served: Served, key: str) -> dict[str, list[str]]:
    """Records of every kind in the tenant of ``key`` (an ended session with a turn, pin,
    checkpoint, event and snapshot; an open session; a memory; a task): their ids (and
    prefixes) by the parameter that names them."""
    url = served.url
    start = {"project": f"{A_WORD}-api", "keywords": [A_WORD]}
    sid = ok(url, "POST", "/v1/sessions/start", start, key)["session_id"]
    ok(url, "POST", f"/v1/sessions/{sid}/turns", {"text": f"{A_WORD} turn"}, key)
    ok(url, "PUT", f"/v1/sessions/{sid}/pins/deploy", {"content": f"{A_WORD} pin"}, key)
    ok(url, "POST", "/v1/sessions/checkpoint", {"session_id": sid, "reason": A_WORD}, key)
    ok(url, "POST", f"/v1/sessions/{sid}/events", {"content": f"{A_WORD} event"}, key)
    ok(url, "POST", f"/v1/sessions/{sid}/snapshots", {"slug": "seeded"}, key)
    memory = {"content": f"{A_WORD} memory", "upsert_key": "region", "tags": [A_WORD]}
    mid = ok(url, "POST", "/v1/memories/add", memory, key)["id"]
    ok(url, "PUT", "/v1/tasks/task-a1", {"title": f"{A_WORD} task"}, key)
    ok(url, "POST", "/v1/sessions/end", {"session_id": sid}, key)
    open_sid = ok(url, "POST", "/v1/sessions/start", start, key)["session_id"]
    return {"session_id": [sid, open_sid, sid[:8]], "memory_id": [mid, mid[:8]],
            "task_id": ["task-a1"], "label": ["deploy"]}  # fmt: skip


def snapshot_of(served: Served, key: str, ids: dict[str, list[str]]) -> Any:
    """What tenant A holds, to compare before and after tenant B's requests."""
    url = served.url
    sessions = [ok(url, "GET", f"/v1/sessions/{sid}", key=key) for sid in ids["session_id"][:2]]
    return (
        sessions,
        ok(url, "GET", f"/v1/memories/{ids['memory_id'][0]}", key=key),
        ok(url, "GET", "/v1/tasks", key=key),
    )


NAMING_FIELDS = {"session_id": "session_id", "target_session_id": "session_id", "id": "memory_id"}
"""Body fields that name a record (a start's ``session_id`` is left as generated: it opens a
session of that id)."""


def name_records(case: Any, ids: dict[str, list[str]], pick: int) -> None:
    """``case`` with its path parameters and body fields that name a record set to one of
    ``ids`` (whole ids and prefixes), ``pick`` choosing which."""
    for name in list(case.path_parameters or {}):
        if name in ids:
            case.path_parameters[name] = ids[name][pick % len(ids[name])]
    if isinstance(case.body, dict) and not case.path.endswith("/start"):
        for name, kind in NAMING_FIELDS.items():
            if name in case.body:
                case.body[name] = ids[kind][pick % len(ids[kind])]


def test_another_tenants_generated_requests_see_and_change_nothing(served: Served) -> None:
    if len(served.keys) < 2:
        pytest.skip("a SQLite server serves one tenant")
    key_a, key_b = served.key(0), served.key(1)
    ids = seed(served, key_a)
    before = snapshot_of(served, key_a, ids)
    headers = {"Authorization": f"Bearer {key_b}"}
    picks = iter(range(1_000_000))

    def check(case: Any) -> None:
        name_records(case, ids, next(picks))  # tenant A's
        response = case.call(headers=headers)
        sent = json.dumps([case.path_parameters, case.body], default=str)
        text = response.text
        assert response.status_code < 500, text
        assert A_WORD not in text, f"{case.method} {case.formatted_path}: {text[:500]}"
        shown = [i for v in ids.values() for i in v if len(i) > 8 and i in text and i not in sent]
        assert not shown, f"{case.method} {case.formatted_path} shows {shown}: {text[:500]}"

    assert (failures := each_operation(served, check, examples=4)) == {}, report(failures)
    assert snapshot_of(served, key_a, ids) == before


@dataclass
class Success:
    """Successful requests, each checked against the document: the operations they covered
    and the answers (by operation) they got."""

    served: Served
    schema: Any
    key: str
    seen: dict[str, list[Any]] = field(default_factory=dict)

    def __call__(self, method: str, path: str, body: Any = None, **query: Any) -> Any:
        """The answer of ``method path`` (a concrete path), once its status, content type
        and body are held to the document's 200; the path template is the concrete one's
        (``/v1/sessions/start``, not ``/v1/sessions/{session_id}``)."""
        operation, params = self.operation(method, path)
        sent = {} if body is None else {"body": body, "media_type": "application/json"}
        case = operation.Case(path_parameters=params, query=query or None, **sent)
        response = case.call_and_validate(
            headers={"Authorization": f"Bearer {self.key}"}, checks=list(CONFORMANCE)
        )
        assert response.status_code == 200, (method, path, response.text)
        answer = response.json()
        self.seen.setdefault(operation.label, []).append(answer)
        return answer

    def operation(self, method: str, path: str) -> tuple[Any, dict[str, str]]:
        found = []
        for template in self.schema.raw_schema["paths"]:
            match = compile_path(template)[0].match(path)
            if match is not None and method.lower() in self.schema.raw_schema["paths"][template]:
                found.append((template.count("{"), template, match.groupdict()))
        assert found, f"{method} {path} is not in the document"
        _, template, params = min(found)
        return self.schema[template][method.upper()], params


def test_every_operation_answers_its_documented_success_body(served: Served) -> None:
    """Each operation's 200, with its optional parts (an inherited pin, a session block, a
    moved task, links), and each change's replay of its ``request_id``, in the shape the
    document declares: every field, none more, of its type."""
    schema = schemathesis.openapi.from_url(f"{served.url}/openapi.json")
    call = Success(served, schema, served.key())
    first = call("POST", "/v1/sessions/start", {"project": "api", "keywords": ["deploy"]})
    sid = first["session_id"]
    call("POST", f"/v1/sessions/{sid}/turns", {"text": "deploy fix", "request_id": "t1"})
    call("PUT", f"/v1/sessions/{sid}/pins/deploy", {"content": "make deploy", "critical": True})
    call("POST", "/v1/sessions/checkpoint", {"session_id": sid, "reason": "r", "decisions": ["d"]})
    call("POST", f"/v1/sessions/{sid}/events", {"content": "hello", "role": "assistant"})
    call("POST", f"/v1/sessions/{sid}/precompact", {"summary": "so far"})
    call("POST", f"/v1/sessions/{sid}/postcompact", {"summary": "compacted"})
    call("POST", f"/v1/sessions/{sid}/snapshots", {"slug": "kept"})
    call("POST", "/v1/memories/add", {"content": "Deploys go to eu-west-1", "upsert_key": "rg"})
    added = call("POST", "/v1/memories/add", {"content": "Deploys go to us-east-1",
                                               "upsert_key": "rg", "tags": ["ops"]})  # fmt: skip
    assert added["superseded_id"]
    mid = added["id"]
    rule = call("POST", "/v1/memories/add", {"content": "Never force-push main", "layer": "rule"})
    for _ in "ab":  # twins: a consolidation merges them
        call("POST", "/v1/memories/add", {"content": "The staging database is db-stage-2"})
    with served.host.open(list(served.keys)[0]) as app:  # no endpoint adds a procedure
        app.procedures.add("Deploy the API", ["run make deploy", "watch the deploy dashboard"])
    call("POST", "/v1/memories/edit", {"id": mid, "tags": ["ops", "deploy"]})
    call("PUT", "/v1/tasks/task-1", {"title": "Rotate keys", "project": "api"})
    moved = call("PUT", "/v1/tasks/task-1", {"title": "Rotate keys", "project": "web"})
    assert moved["moved_from"] == "api"
    call("PUT", "/v1/tasks/task-2", {"title": "Ship the deploy fix"})
    assert call("POST", "/v1/sessions/end", {"session_id": sid})["pending_tasks"]
    second = call("POST", "/v1/sessions/start", {"project": "api", "keywords": ["deploy"],
                                                 "explain": True})  # fmt: skip
    assert second["explain"] and second["inherited_pins"][0]["sourceSessionId"] == sid
    sid2 = second["session_id"]
    call("POST", f"/v1/sessions/{sid2}/continue", {"target_session_id": sid})
    context = call("POST", "/v1/context/get", {"session_id": sid, "query": "deploy",
                                               "include_session_summary": True})  # fmt: skip
    assert context["session"] and context["session_summary"] and context["rules"]
    assert context["procedures"] and context["memories"]
    assert call("POST", "/v1/memories/search", {"query": "deploys"})["results"]
    call("POST", "/v1/memories/list", {"include_history": True})
    assert call("GET", f"/v1/memories/{mid}")["links"]
    assert call("POST", "/v1/memories/consolidate", {"dry_run": True})["actions"]
    for path in ("", "/checkpoints", "/snapshot", "/snapshots", "/events", "/chain", "/pins"):
        call("GET", f"/v1/sessions/{sid}{path}")
    call("GET", "/v1/sessions", project="api")
    call("GET", "/v1/sessions", open="true")
    call("GET", "/v1/tasks")
    call("POST", "/v1/tasks/task-1/done")
    call("GET", "/v1/metrics/verify")
    call("DELETE", f"/v1/sessions/{sid2}/pins/deploy")
    call("DELETE", f"/v1/memories/{mid}", {"request_id": "forget-1"})
    call("GET", "/healthz")
    call("GET", "/readyz")
    replays = [  # each change's second request of one request_id: {"duplicate": true}
        ("POST", "/v1/sessions/start", {"project": "api"}),
        ("POST", f"/v1/sessions/{sid2}/turns", {"text": "again"}),
        ("PUT", f"/v1/sessions/{sid2}/pins/p", {"content": "c"}),
        ("DELETE", f"/v1/sessions/{sid2}/pins/p", {}),
        ("POST", "/v1/sessions/checkpoint", {"session_id": sid2}),
        ("POST", f"/v1/sessions/{sid2}/events", {"content": "e"}),
        ("POST", f"/v1/sessions/{sid2}/precompact", {}),
        ("POST", f"/v1/sessions/{sid2}/postcompact", {}),
        ("POST", f"/v1/sessions/{sid2}/snapshots", {}),
        ("POST", f"/v1/sessions/{sid2}/continue", {"target_session_id": sid}),
        ("POST", "/v1/memories/add", {"content": "m"}),
        ("POST", "/v1/memories/edit", {"id": rule["id"], "content": "Never push main"}),
        ("POST", "/v1/memories/consolidate", {"dry_run": True}),
        ("PUT", "/v1/tasks/task-3", {"title": "t"}),
        ("POST", "/v1/tasks/task-3/done", {}),
        ("POST", "/v1/sessions/end", {"session_id": sid2}),
    ]
    for number, (method, path, body) in enumerate(replays):
        body = body | {"request_id": f"replay-{number}"}
        call(method, path, body)
        assert call(method, path, body)["duplicate"] is True, (method, path)
    forget = {"request_id": "forget-1"}  # forgotten above
    assert call("DELETE", f"/v1/memories/{mid}", forget) == {"duplicate": True}
    operations = {o.ok().label for o in schema.get_all_operations()}
    assert operations == set(call.seen), operations ^ set(call.seen)


# -- the exact requests of what fuzzing found ----------------------------------------------------
def test_a_405_allows_every_method_of_its_path(served: Served) -> None:
    """Starlette's ``Allow`` named the methods of the path's first route only: ``GET`` for a
    memory's path, whose ``DELETE`` is another route."""
    status, answer, headers = http(served.url, "OPTIONS", "/v1/memories/abcd", key=served.key())
    assert (status, answer["error"]["code"]) == (405, "method_not_allowed")
    assert headers["Allow"] == "DELETE, GET"
    paths = ok(served.url, "GET", "/openapi.json")["paths"]
    for template, operations in paths.items():
        path = re.sub(r"\{[a-z_]+\}", "abcd", template)
        allowed = ", ".join(sorted(m.upper() for m in operations))
        # A method another template serves at this path (`GET /v1/sessions/start` shows the
        # session 'start') is answered, not refused.
        served_here = {m.upper() for t, o in paths.items() if compile_path(t)[0].match(path)
                       for m in o}  # fmt: skip
        for method in {"GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"} - served_here:
            status, _, headers = http(served.url, method, path, key=served.key())
            assert (status, headers["Allow"]) == (405, allowed), (method, path)


@pytest.fixture
def clocked(pg_url: str, tmp_path: Path) -> Iterator[tuple[str, str, FixedClock]]:
    """A server on PostgreSQL whose clock the test moves: its URL, a key, the clock."""
    clock = FixedClock(T1)
    host = ServiceHost(pg_url, tmp_path / "server", pool_size=4, clock=clock)
    tenant = f"fuzz-{secrets.token_hex(4)}"
    with host.registry() as app:
        app.tenants.create_tenant(tenant)
        key = app.tenants.create_key(tenant, "write")[1]
    try:
        with running(host, free_port()) as url:
            yield url, key, clock
    finally:
        host.close()


def test_a_start_postgresql_cannot_store_is_refused_whole(
    clocked: tuple[str, str, FixedClock],
) -> None:
    """A NUL in the start's agent id failed its session's write, which went with the metrics
    write: the error was taken for the metrics' (best effort, logged), and the transaction
    committed the rest (a lapsed session's crash recovery) without the session, answering
    200 with the id of a session that was never stored."""
    url, key, clock = clocked
    ok(url, "POST", "/v1/sessions/start", {"session_id": "lapsed", "project": "api"}, key)
    clock.advance(hours=1)  # its lease lapsed: the next start recovers it
    start = {"session_id": "nul-agent", "project": "api", "agent_id": "x\u0000y"}
    status, answer, _ = http(url, "POST", "/v1/sessions/start", start, key)
    assert (status, answer["error"]["code"]) == (400, "validation_error")
    assert answer["error"]["message"].startswith('"agent_id" holds a NUL')  # (decision NN)
    assert http(url, "GET", "/v1/sessions/nul-agent", key=key)[0] == 404
    lapsed = ok(url, "GET", "/v1/sessions/lapsed", key=key)
    assert (lapsed["state"], lapsed["end_time"]) == ("ACTIVE", None)  # not half recovered


def test_a_start_with_a_task_slug_no_folder_can_take_is_refused(served: Served) -> None:
    """A start took any text as its task slug, stored it, and every checkpoint of that
    session (crash recovery's too) then failed to reach the task's folder, a warning each
    time in the server's log."""
    for slug, status in (("a/b", 422), ("a..b", 400)):
        start = {"session_id": "slugged", "task_slug": slug}
        code, answer, _ = http(served.url, "POST", "/v1/sessions/start", start, served.key())
        assert (code, answer["error"]["code"]) == (status, "validation_error")
        assert re.search("task[_ ]slug", answer["error"]["message"]), answer
        assert http(served.url, "GET", "/v1/sessions/slugged", key=served.key())[0] == 404
    start = {"session_id": "slugged", "task_slug": "feat-user-auth"}
    assert ok(served.url, "POST", "/v1/sessions/start", start, served.key())
