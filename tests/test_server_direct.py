"""The direct routes (session start, turns, end served beside FastAPI) answer exactly as the
FastAPI routes do: each request is sent twice, once as ``application/json`` (served directly)
and once as ``application/merge-patch+json`` (FastAPI parses it as JSON too, but the direct
routes leave it to FastAPI), and the two answers must match, errors included."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from cortex.adapters.server.app import create_app  # noqa: E402
from cortex.adapters.server.auth import RateLimiter  # noqa: E402
from cortex.adapters.server.direct import ROUTES, DirectRoute, DirectRoutes  # noqa: E402
from cortex.adapters.server.models import StartIn  # noqa: E402
from cortex.core.tenancy import WRITE  # noqa: E402
from cortex.services.hosting import ServiceHost  # noqa: E402
from test_server import client, host, new_key  # noqa: E402

__all__ = ["client", "host"]  # the fixtures of test_server.py, shared

DIRECT, ROUTED = "application/json", "application/merge-patch+json"


def post(client: TestClient, kind: str, path: str, body: bytes, key: str | None) -> Any:
    headers = {"Content-Type": kind} | ({"Authorization": f"Bearer {key}"} if key else {})
    response = client.post(path, content=body, headers=headers)
    return response.status_code, response.json(), response.headers.get("retry-after")


def both(client: TestClient, path: str, body: bytes, key: str | None) -> tuple[Any, Any]:
    return post(client, DIRECT, path, body, key), post(client, ROUTED, path, body, key)


def test_only_well_formed_posts_of_the_three_routes_are_served_directly(tmp_path: Path) -> None:
    direct = DirectRoutes(
        host=ServiceHost(str(tmp_path / "cortex.db"), tmp_path, pool_size=6),
        limiter=RateLimiter(1, 1),
        render=lambda *_: None,  # type: ignore[arg-type,return-value]
    )

    def scope(path: str, method: str = "POST", kind: bytes = b"application/json") -> Any:
        headers = [(b"content-type", kind), (b"content-length", b"2")]
        return {"type": "http", "method": method, "path": path, "headers": headers}

    # turns leave half of the pool's connections to starts and ends, which take no more
    assert (direct._queue.size, direct._others.size) == (3, 3)  # type: ignore[union-attr]
    served = direct.match(scope("/v1/sessions/s-1/turns"))
    assert served is not None and served == (ROUTES[0], ("s-1",))
    assert direct.match(scope("/v1/sessions/start")) == (ROUTES[1], ())
    assert direct.match(scope("/v1/sessions/end", kind=b"Application/JSON; charset=utf-8"))
    for refused in (
        scope("/v1/sessions/s-1/turns", method="GET"),
        scope("/v1/sessions/s-1/turns", kind=b"text/plain"),
        scope("/v1/sessions/s-1/turns", kind=ROUTED.encode()),
        scope("/v1/sessions/a b/turns"),
        scope("/v1/sessions/s-1\n/turns"),
        scope(f"/v1/sessions/{'x' * 129}/turns"),
        scope("/v1/sessions/s-1/turns/more"),
        scope("/v1/sessions/checkpoint"),
        {**scope("/v1/sessions/start"), "headers": [(b"content-type", b"application/json")]},
    ):
        assert direct.match(refused) is None, refused["path"]


def test_direct_answers_match_fastapis_for_success_and_every_error(
    client: TestClient, host: ServiceHost
) -> None:
    key = new_key(host)
    with host.registry() as app:
        tenant = app.tenants.authenticate(key)[0]
    reader = new_key(host, "read", tenant)
    ids = {}
    for kind in (DIRECT, ROUTED):
        status, started, _ = post(client, kind, "/v1/sessions/start", b'{"project": "api"}', key)
        assert status == 200 and started["session_id"]
        ids[kind] = started["session_id"]
    sid = ids[DIRECT]
    turns = f"/v1/sessions/{sid}/turns"
    for _ in ("applied", "replayed"):
        answers = [post(client, kind, turns, f'{{"text": "auth", "request_id": "r-{n}"}}'.encode(),
                        key) for n, kind in enumerate((DIRECT, ROUTED))]  # fmt: skip
        assert answers[0] == answers[1]
    assert answers[0][1] == {"session_id": sid, "duplicate": True}
    same = [
        (turns, b'{"text": 5}', key),  # fails the model: 422
        (turns, b'{"text": "x", "colour": "red"}', key),  # unknown field: 422
        (turns, b"{not json", key),
        (turns, b'{"text": "x"}', reader),  # 403
        (turns, b'{"text": "x"}', None),  # 401
        (turns, b'{"text": "x"}', "ctx_nosuchkey_0123456789abcdef"),  # 401
        ("/v1/sessions/no-such-session/turns", b'{"text": "x"}', key),  # 404
        ("/v1/sessions/end", b'{"session_id": "no-such-session"}', key),
        ("/v1/sessions/end", b"{}", key),
    ]
    for path, body, who in same:
        direct, routed = both(client, path, body, who)
        assert direct == routed, (path, body)
    ended = [post(client, kind, "/v1/sessions/end", f'{{"session_id": "{ids[kind]}"}}'.encode(),
                  key) for kind in (DIRECT, ROUTED)]  # fmt: skip
    assert [e[0] for e in ended] == [200, 200]
    assert ended[0][1]["state"] == ended[1][1]["state"] == "COMPLETE"
    assert ended[0][1].keys() == ended[1][1].keys()
    with host.registry() as app:
        app.tenants.revoke_key(key.split("_")[1])
    direct, routed = both(client, turns, b'{"text": "after revocation"}', key)
    assert direct == routed and direct[0] == 401  # at once, on the direct route too


def test_direct_routes_keep_the_rate_limit(host: ServiceHost) -> None:
    limited = TestClient(create_app(host.url, host=host, rate_per_second=0.01, burst=2))
    key = new_key(host)
    codes = [post(limited, DIRECT, "/v1/sessions/start", b"{}", key)[0] for _ in range(3)]
    assert codes == [200, 200, 429]
    status, body, retry_after = post(limited, DIRECT, "/v1/sessions/start", b"{}", key)
    assert status == 429 and body["error"]["code"] == "rate_limited"
    assert retry_after is not None and int(retry_after) >= 1


def test_a_known_keys_check_with_the_first_statement_answers_and_changes_as_before(
    client: TestClient, host: ServiceHost
) -> None:
    """A key this process authenticated before is read with the request's first statement
    (with its request id's claim and a start's reads): every refusal is the one FastAPI's
    routes give, checked before a replay, and whatever went with it is rolled back."""
    key = new_key(host)
    tenant = host.authenticate(key)[0]
    reader, watcher = new_key(host, "read", tenant), new_key(host, "read", tenant)
    host.authenticate(reader)  # known too
    start = b'{"project": "ahead", "request_id": "s-1"}'
    status, started, _ = post(client, DIRECT, "/v1/sessions/start", start, key)
    assert status == 200 and host.key_check(key, lambda _: None) is not None
    sid = started["session_id"]
    forged = key[: key.rindex("_") + 1] + "0" * len(key.rsplit("_", 1)[1])  # known id, bad secret
    cases = [
        ("/v1/sessions/start", start, forged, 401),
        ("/v1/sessions/start", b'{"project": "ahead", "request_id": "s-2"}', reader, 403),
        ("/v1/sessions/start", b'{"project": "ahead"}', reader, 403),
        (f"/v1/sessions/{sid}/turns", b'{"text": "x", "request_id": "t-1"}', reader, 403),
        ("/v1/sessions/end", f'{{"session_id": "{sid}", "request_id": "e-1"}}'.encode(), reader,
         403),
    ]  # fmt: skip
    with host.registry() as app:
        app.tenants.revoke_key(key.split("_")[1])
    cases += [
        ("/v1/sessions/start", start, key, 401),  # revoked: refused, not a replay
        ("/v1/sessions/start", b'{"project": "ahead", "request_id": "s-3"}', key, 401),
        (f"/v1/sessions/{sid}/turns", b'{"text": "x", "request_id": "t-2"}', key, 401),
        ("/v1/sessions/end", f'{{"session_id": "{sid}"}}'.encode(), key, 401),
    ]
    for path, body, who, code in cases:
        direct, routed = both(client, path, body, who)
        assert direct == routed and direct[0] == code, (path, body, direct)
    listed = client.get(
        "/v1/sessions?project=ahead", headers={"Authorization": f"Bearer {watcher}"}
    )
    [kept] = listed.json()["sessions"]
    assert kept["session_id"] == sid and kept["state"] == "ACTIVE"  # nothing else changed it


class Seen:
    """A middleware that records the paths of the requests it passes on."""

    def __init__(self, app: Any, paths: list[str]) -> None:
        self.app, self.paths = app, paths

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.paths.append(scope["path"])
        await self.app(scope, receive, send)


def test_direct_routes_are_served_in_front_of_every_middleware_unless_fastapi_traces(
    host: ServiceHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A well-formed start, turn or end passes no middleware (its answer the same bytes and
    headers as FastAPI's route gives); every other request passes them all, and so does every
    request while FastAPI's own OpenTelemetry instrumentation is on, the direct routes then
    served inside them."""
    app = create_app(host.url, host=host, burst=10_000, rate_per_second=10_000)
    paths: list[str] = []
    app.add_middleware(Seen, paths=paths)
    served = TestClient(app)
    key = new_key(host)
    _, started, _ = post(served, DIRECT, "/v1/sessions/start", b'{"project": "api"}', key)
    turns = f"/v1/sessions/{started['session_id']}/turns"
    post(served, DIRECT, turns, b'{"text": "x", "request_id": "once"}', key)
    assert paths == []
    replays = []
    for kind in (DIRECT, ROUTED):
        headers = {"Content-Type": kind, "Authorization": f"Bearer {key}"}
        replays.append(served.post(turns, content=b'{"text": "x", "request_id": "once"}',
                                   headers=headers))  # fmt: skip
    assert paths == [turns]  # the routed one
    assert replays[0].content == replays[1].content
    assert replays[0].headers.items() == replays[1].headers.items()
    assert post(served, DIRECT, turns, b'{"text": 5}', key)[0] == 422  # its model: FastAPI's
    assert paths == [turns, turns]
    monkeypatch.setattr(type(app), "_traced", lambda _: True)
    status, answer, _ = post(served, DIRECT, turns, b'{"text": "traced"}', key)
    assert (status, answer["duplicate"], paths) == (200, False, [turns] * 3)


@pytest.mark.parametrize("bug", ["raises", "answers a NaN"])
def test_an_unexpected_error_of_a_direct_route_is_the_500_of_every_route(
    host: ServiceHost, bug: str
) -> None:
    def broken(*_: Any) -> Any:
        if bug == "raises":
            raise RuntimeError("a bug")
        return {"score": float("nan")}  # JSON has no such number: JSONResponse refuses it

    app = create_app(host.url, host=host)
    assert app.direct is not None
    app.direct.routes = (DirectRoute(re.compile(r"/v1/sessions/start"), StartIn, WRITE, broken),)
    served, key = TestClient(app, raise_server_exceptions=False), new_key(host)
    status, answer, _ = post(served, DIRECT, "/v1/sessions/start", b"{}", key)
    kind = "RuntimeError" if bug == "raises" else "ValueError"
    assert status == 500
    assert answer == {"error": {"code": "internal", "message": f"unexpected {kind}; see "
                                "the server log"}}  # fmt: skip
    with pytest.raises((RuntimeError, ValueError)):  # raised on to the server's log
        post(TestClient(app), DIRECT, "/v1/sessions/start", b"{}", key)


def test_a_direct_routes_body_over_the_limit_is_the_413_of_every_route(host: ServiceHost) -> None:
    app = create_app(host.url, host=host, max_body_bytes=64)
    key = new_key(host)
    body = b'{"project": "' + b"a" * 60 + b'"}'
    for kind in (DIRECT, ROUTED):
        status, answer, _ = post(TestClient(app), kind, "/v1/sessions/start", body, key)
        assert (status, answer["error"]["code"]) == (413, "payload_too_large")
