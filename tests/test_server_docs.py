"""The API page (``/docs``) on a real server (uvicorn on a loopback port, over SQLite): it
names only files of the server's own origin, the server answers each with its type and
without a key, nothing under ``/docs/static/`` reaches another file, and ``/redoc`` (a CDN's
page) is off. Without Swagger UI 5 installed, ``/docs`` says what to install."""

from __future__ import annotations

import http.client
import json
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("swagger_ui_bundle")
from fastapi.testclient import TestClient  # noqa: E402

from cortex.adapters.server.apidocs import swagger_folder  # noqa: E402
from cortex.adapters.server.app import create_app  # noqa: E402
from cortex.services.hosting import ServiceHost  # noqa: E402
from test_client_server import free_port, running  # noqa: E402

# One worker runs this module under pytest-xdist: its module-scoped server starts once.
pytestmark = pytest.mark.xdist_group("test_server_docs")

TYPES = {
    "swagger-ui-bundle.js": ("text/javascript", "application/javascript"),
    "swagger-ui.css": ("text/css",),
    "favicon-32x32.png": ("image/png",),
}
"""Each file the page loads, and the content types it may be served as (Python's
``mimetypes`` names JavaScript either way, by version and by the system's table)."""


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("docs")
    host = ServiceHost(str(data / "brain.db"), data / "server")
    with host.registry() as app:
        app.tenants.create_tenant("default")
    try:
        with running(host, free_port()) as url:
            yield url
    finally:
        host.close()


def get(base: str, path: str, **headers: str) -> tuple[int, str, bytes]:
    """(status, content type, body) of a GET of ``path`` sent as it is written (no client
    normalises its ``..`` or its escapes first)."""
    parts = urlsplit(base)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        return response.status, response.getheader("content-type", ""), response.read()
    finally:
        connection.close()


class References(HTMLParser):
    """Every URL a page's tags name (``src``, ``href``)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [value for name, value in attrs if name in ("src", "href") and value]


def references(page: str) -> list[str]:
    parser = References()
    parser.feed(page)
    return parser.urls


def test_the_page_names_only_files_of_its_own_origin_and_each_is_served(base: str) -> None:
    status, kind, body = get(base, "/docs")
    assert (status, kind) == (200, "text/html; charset=utf-8")
    page = body.decode()
    urls = references(page)
    assert sorted(urls) == sorted(f"/docs/static/{name}" for name in TYPES)
    assert "://" not in page and "//" not in "".join(urls)  # no other origin, however written
    assert "url: '/openapi.json'" in page
    folder = swagger_folder()
    assert isinstance(folder, Path)
    for url in urls:
        status, kind, body = get(base, url)
        assert status == 200, url
        assert kind.split(";")[0] in TYPES[url.rsplit("/", 1)[1]], (url, kind)
        assert body == (folder / url.rsplit("/", 1)[1]).read_bytes()


def test_the_page_its_files_and_the_document_need_no_key_as_v1_does(base: str) -> None:
    for path in ["/docs", "/openapi.json", *(f"/docs/static/{name}" for name in TYPES)]:
        assert get(base, path)[0] == 200, path
    status, _, body = get(base, "/v1/sessions")
    assert status == 401 and json.loads(body)["error"]["code"] == "unauthorized"
    schema = json.loads(get(base, "/openapi.json")[2])  # what the Authorize button offers
    assert schema["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert not [p for p in schema["paths"] if p.startswith("/docs")]


@pytest.mark.parametrize(
    "path",
    [
        "/docs/static/../../apidocs.py",
        "/docs/static/../../../../../../etc/passwd",
        "/docs/static/%2e%2e/%2e%2e/apidocs.py",
        "/docs/static/..%2f..%2f__init__.py",
        "/docs/static/%2fetc%2fpasswd",
        "/docs/static//etc/passwd",
        "/docs/static/..\\..\\__init__.py",
        "/docs/static/./swagger-ui.css/..%2f..%2f__init__.py",
        "/docs/static/index.html",  # in the folder, but not a file the page loads
        "/docs/static/swagger-ui-bundle.js.map",
        "/docs/static/",
        "/redoc",  # FastAPI's second page, from a CDN: off
        "/docs/oauth2-redirect",
    ],
)
def test_nothing_else_is_served_under_the_page(base: str, path: str) -> None:
    status, kind, body = get(base, path)
    assert (status, kind) == (404, "application/json"), (path, body[:200])
    assert json.loads(body)["error"]["code"] == "not_found"


def test_a_file_named_by_a_path_with_dots_is_the_file_itself(base: str) -> None:
    """A path that normalises to one of the page's files is that file: no escape, no other."""
    assert get(base, "/docs/static/x/../swagger-ui.css")[:2] == (200, "text/css; charset=utf-8")


def test_behind_a_proxy_prefix_the_page_names_its_files_under_it(tmp_path: Path) -> None:
    host = ServiceHost(str(tmp_path / "brain.db"), tmp_path / "server")
    try:
        client = TestClient(create_app(host.url, host=host), root_path="/cortex")
        page = client.get("/cortex/docs").text  # the path as the proxy passes it on (ASGI)
        urls = references(page)
        assert sorted(urls) == sorted(f"/cortex/docs/static/{name}" for name in TYPES)
        assert "url: '/cortex/openapi.json'" in page
        assert [client.get(url).status_code for url in urls] == [200] * len(urls)
    finally:
        host.close()


def stand_in_bundle(root: Path, version: str) -> Path:
    """A package ``swagger_ui_bundle`` whose Swagger UI is ``version`` (as the older
    ``swagger-ui-bundle``, which installs the same module, ships 4.15.5)."""
    package = root / "swagger_ui_bundle"
    (package / "vendor" / f"swagger-ui-{version}").mkdir(parents=True)
    (package / "__init__.py").write_text(
        "from pathlib import Path\n"
        f"swagger_ui_path = Path(__file__).parent / 'vendor' / 'swagger-ui-{version}'\n"
    )
    return root


@pytest.mark.parametrize(
    ("installed", "said"),
    [
        (None, "needs the swagger-ui-bundle-v2 package; pip install 'cortex-continuity[server]'"),
        ("4.15.5", "holds swagger-ui-4.15.5; pip install --force-reinstall swagger-ui-bundle-v2"),
    ],
)
def test_without_swagger_ui_5_the_page_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, installed: str | None, said: str
) -> None:
    monkeypatch.delitem(sys.modules, "swagger_ui_bundle", raising=False)
    if installed is None:
        monkeypatch.setitem(sys.modules, "swagger_ui_bundle", None)  # as if not installed
    else:
        monkeypatch.syspath_prepend(str(stand_in_bundle(tmp_path / "site", installed)))
    host = ServiceHost(str(tmp_path / "brain.db"), tmp_path / "server")
    try:
        client = TestClient(create_app(host.url, host=host))
        answer = client.get("/docs")
        assert answer.status_code == 404
        message = answer.json()["error"]["message"]
        assert said in message and message.endswith("(/openapi.json is served without it)")
        assert client.get("/docs/static/swagger-ui.css").status_code == 404
        assert client.get("/openapi.json").status_code == 200
    finally:
        host.close()
