"""The dashboard on the team server over real PostgreSQL: each API key sees its own tenant's
pages only, signs in through a cookie, and needs the write scope and its own form token to
change anything."""

from __future__ import annotations

import html
import secrets
import threading
import time
from collections.abc import Iterator

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from cortex.adapters.server.app import create_app  # noqa: E402
from cortex.adapters.server.ui.tenant import COOKIE, form_token  # noqa: E402
from cortex.services.hosting import ServiceHost  # noqa: E402

# One worker runs this module under pytest-xdist: its module-scoped fixtures are set up once.
pytestmark = pytest.mark.xdist_group("test_ui_tenants")


@pytest.fixture(scope="module")
def host(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceHost]:
    served = ServiceHost(pg_url, tmp_path_factory.mktemp("data"), pool_size=4)
    yield served
    served.close()


def tenant_with_key(host: ServiceHost, scopes: str = "write") -> tuple[str, str]:
    with host.registry() as app:
        tenant = f"t-{secrets.token_hex(5)}"
        app.tenants.create_tenant(tenant)
        return tenant, app.tenants.create_key(tenant, scopes)[1]


def browser(host: ServiceHost) -> TestClient:
    app = create_app(host.url, host=host, burst=10_000, rate_per_second=10_000)
    return TestClient(app, base_url="http://testserver")


def seed(host: ServiceHost, tenant: str, marker: str) -> tuple[str, str]:
    """A session with a pin and a memory in ``tenant``, each naming ``marker``."""
    with host.open(tenant) as app:
        sid = app.sessions.on_session_start(project="api").session_id
        app.sessions.add_pin("note", f"pin of {marker}", sid)
        mid = app.memory.add(f"memory of {marker}", project="api").memory.id
    return sid, mid


def signed_in(host: ServiceHost, key: str) -> TestClient:
    client = browser(host)
    response = client.post("/ui/login", data={"key": key}, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/ui/sessions"
    assert "httponly" in response.headers["set-cookie"].lower()
    return client


def test_another_sites_page_cannot_sign_a_visitor_in_or_out(host: ServiceHost) -> None:
    """Sign-in and sign-out come before any form token: a hostile page posting the
    attacker's key would sign its visitor into the attacker's tenant (notes the visitor then
    writes land there). A browser says where a request came from; another site's is refused."""
    _tenant, key = tenant_with_key(host, "read")
    client = browser(host)
    for headers in (
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},  # a sibling subdomain is another site's page too
        {"Origin": "https://evil.example"},
        {"Origin": "null"},  # a sandboxed frame
    ):
        refused = client.post(
            "/ui/login", data={"key": key}, headers=headers, follow_redirects=False
        )
        assert refused.status_code == 403 and "set-cookie" not in refused.headers
        assert "may not sign in or out here" in refused.text
        out = client.post("/ui/logout", headers=headers, follow_redirects=False)
        assert out.status_code == 403 and "set-cookie" not in out.headers
    for headers in (
        {"Sec-Fetch-Site": "same-origin"},
        {"Origin": "http://testserver"},
        {},  # a script, or a browser that sends neither
    ):
        response = client.post(
            "/ui/login", data={"key": key}, headers=headers, follow_redirects=False
        )
        assert response.status_code == 303 and COOKIE in response.headers["set-cookie"]
    out = client.post("/ui/logout", headers={"Sec-Fetch-Site": "same-origin"})
    assert out.status_code == 200 and "/ui/login" in str(out.url)


def test_the_key_cookie_is_secure_over_https(host: ServiceHost) -> None:
    """Signed in over HTTPS (directly, or behind a proxy uvicorn trusts), the cookie holding
    the API key is never sent over plain HTTP, where anyone on the path would read the key."""
    _tenant, key = tenant_with_key(host, "read")
    app = create_app(host.url, host=host, burst=10_000, rate_per_second=10_000)
    secure = TestClient(app, base_url="https://testserver")
    response = secure.post("/ui/login", data={"key": key}, follow_redirects=False)
    assert response.status_code == 303
    assert "secure" in response.headers["set-cookie"].lower()
    plain = browser(host).post("/ui/login", data={"key": key}, follow_redirects=False)
    assert "secure" not in plain.headers["set-cookie"].lower()  # a plain-HTTP test server


def test_each_key_sees_its_own_tenant_only(host: ServiceHost) -> None:
    a, key_a = tenant_with_key(host)
    b, key_b = tenant_with_key(host)
    sid_a, mid_a = seed(host, a, "alpha")
    sid_b, mid_b = seed(host, b, "bravo")
    client = signed_in(host, key_a)
    listing = client.get("/ui/sessions").text
    assert sid_a[:8] in listing and sid_b[:8] not in listing
    assert f"tenant {a}" in listing
    assert "pin of alpha" in client.get(f"/ui/sessions/{sid_a}").text
    hidden = client.get(f"/ui/sessions/{sid_b}")
    assert hidden.status_code == 404
    assert f"no session {sid_b!r}; see the Sessions page" in html.unescape(hidden.text)
    assert client.get(f"/ui/memory/{mid_b}").status_code == 404
    found = client.get("/ui/memory?q=memory").text
    assert "memory of alpha" in found and "bravo" not in found
    for page in ("/ui/next?project=api", "/ui/health", "/ui/health?check=1", "/ui/memory"):
        shown = client.get(page)
        assert shown.status_code == 200 and "bravo" not in shown.text and sid_b not in shown.text
    other = signed_in(host, key_b)
    assert "memory of bravo" in other.get(f"/ui/memory/{mid_b}").text


def test_without_a_key_every_page_asks_to_sign_in(host: ServiceHost) -> None:
    client = browser(host)
    for page in ("/ui/sessions", "/ui/memory", "/ui/health", "/ui/live"):
        response = client.get(page, follow_redirects=False)
        assert response.status_code == 303 and response.headers["location"] == "/ui/login"
    refused = client.post("/ui/login", data={"key": "ctx_nope_nope"})
    assert refused.status_code == 401 and 'id="error"' in refused.text


def test_changes_need_this_keys_token_and_the_write_scope(host: ServiceHost) -> None:
    a, key_a = tenant_with_key(host)
    _, mid = seed(host, a, "alpha")
    writer = signed_in(host, key_a)
    with host.registry() as app:
        reader_key = app.tenants.create_key(a, "read")[1]
    reader = signed_in(host, reader_key)
    _, other_key = tenant_with_key(host)
    # Another key's token (a page of another tenant) does not pass.
    stolen = writer.post(f"/ui/memory/{mid}/forget", data={"csrf": form_token(other_key)})
    assert stolen.status_code == 403
    read_only = reader.post(f"/ui/memory/{mid}/forget", data={"csrf": form_token(reader_key)})
    assert read_only.status_code == 403 and "changes need write" in read_only.text
    with host.open(a) as app:
        assert app.memory.get(mid).deleted_at is None
    done = writer.post(f"/ui/memory/{mid}/forget", data={"csrf": form_token(key_a)})
    assert done.status_code == 200
    with host.open(a) as app:
        assert app.memory.get(mid).deleted_at is not None


def test_a_revoked_key_is_signed_out_at_once(host: ServiceHost) -> None:
    a, key = tenant_with_key(host)
    client = signed_in(host, key)
    assert client.get("/ui/sessions").status_code == 200
    with host.registry() as app:
        key_id = next(k.key_id for k in app.tenants.list_keys(a))
        app.tenants.revoke_key(key_id)
    response = client.get("/ui/sessions", follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/ui/login"


def test_pages_spend_the_keys_rate_limit_and_sign_ins_a_bucket_per_client(
    host: ServiceHost,
) -> None:
    _, key = tenant_with_key(host)
    app = create_app(host.url, host=host, burst=3, rate_per_second=0.001)
    client = TestClient(app, base_url="http://testserver")
    assert client.post("/ui/login", data={"key": key}, follow_redirects=False).status_code == 303
    assert [client.get("/ui/sessions").status_code for _ in range(3)] == [200, 200, 200]
    limited = client.get("/ui/memory?q=x")
    assert limited.status_code == 429 and limited.headers["retry-after"]
    assert "rate limit" in limited.text
    api = client.get("/v1/sessions", headers={"Authorization": f"Bearer {key}"})
    assert api.status_code == 429  # one bucket for the key, whichever surface it calls
    guesses = [client.post("/ui/login", data={"key": "ctx_0_x"}).status_code for _ in range(3)]
    assert guesses == [401, 401, 429]  # the first sign-in above spent one token


def test_a_live_stream_ends_once_its_key_is_revoked(
    host: ServiceHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cortex.adapters.server.ui import live

    monkeypatch.setattr(live, "POLL_SECONDS", 0.05)
    a, key = tenant_with_key(host, "read")
    client = signed_in(host, key)
    answers: list[str] = []
    streaming = threading.Thread(
        target=lambda: answers.append(client.get("/ui/live").text), daemon=True
    )
    streaming.start()
    time.sleep(0.3)
    assert streaming.is_alive()  # the stream is open and polling
    with host.registry() as app:
        app.tenants.revoke_key(next(k.key_id for k in app.tenants.list_keys(a)))
    streaming.join(10)
    assert not streaming.is_alive(), "the stream of a revoked key kept running"
    assert answers and answers[0].startswith("retry: 2000")


def test_the_health_page_does_not_show_the_shared_database(host: ServiceHost) -> None:
    _, key = tenant_with_key(host, "read")
    page = signed_in(host, key).get("/ui/health")
    assert page.status_code == 200 and "Sessions" in page.text
    database = host.url.rsplit("/", 1)[1]
    assert database not in page.text and "127.0.0.1" not in page.text
