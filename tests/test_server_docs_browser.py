"""The API page (``/docs``) in a real browser with no network but the server: headless
Chromium (Playwright) against ``cortex serve`` in a subprocess, every request to another
origin refused. The page renders the API's operations, its Authorize button takes an API key,
and a call made from the page carries it.

The browser is Debian's ``chromium``. Without it this test skips on a developer's machine
and fails when ``CORTEX_TEST_BROWSER=1`` (CI sets it), as the dashboard's browser tests do.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
from test_server_process import cli, serving, wait_ready  # noqa: E402
from test_ui_browser import chromium  # noqa: E402

# One worker runs this module under pytest-xdist: its module-scoped fixtures are set up once.
pytestmark = pytest.mark.xdist_group("test_server_docs_browser")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """``cortex serve`` over a SQLite file with one tenant: its URL and a ``read`` key."""
    root = tmp_path_factory.mktemp("docs-browser")
    db, home = str(root / "brain.db"), root / "home"
    cli(home, "tenant", "create", "default", "--db", db)
    key = str(cli(home, "key", "create", "default", "--scopes", "read", "--db", db)["key"])
    with serving(db, root, workers=1) as (base, _, process):
        wait_ready(base, process)
        yield base, key


def offline_page(browser: Any, base: str) -> tuple[Any, list[str], list[str]]:
    """A page that reaches ``base`` and nothing else; the URLs it was refused, its errors."""
    page = browser.new_page()
    refused: list[str] = []
    errors: list[str] = []

    def only_the_server(route: Any) -> None:
        if route.request.url.startswith(base + "/"):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    page.route("**/*", only_the_server)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(15_000)
    return page, refused, errors


def test_the_api_page_works_with_nothing_but_the_server(
    browser: Any, served: tuple[str, str]
) -> None:
    base, key = served
    page, refused, errors = offline_page(browser, base)
    try:
        assert page.goto(base + "/docs").status == 200
        listing = page.locator(".opblock-get").filter(
            has=page.locator(".opblock-summary-path[data-path='/v1/sessions']")
        )
        listing.wait_for(state="visible")  # the operations list rendered
        assert page.locator(".opblock").count() > 20
        assert "GET/v1/sessions" in listing.locator(".opblock-summary").inner_text().replace(
            "\n", ""
        )

        page.click(".auth-wrapper button.authorize")  # the bearer scheme's Authorize dialog
        page.fill(".modal-ux input", key)
        page.click(".modal-ux button.authorize")
        page.click(".modal-ux button.btn-done")

        listing.locator(".opblock-summary").click()
        listing.locator("button.try-out__btn").click()
        with page.expect_request(lambda r: r.url.startswith(base + "/v1/sessions")) as sent:
            listing.locator("button.execute").click()
        assert sent.value.headers["authorization"] == f"Bearer {key}"
        status = listing.locator(".live-responses-table tr.response .response-col_status")
        assert status.inner_text().strip() == "200"
    finally:
        page.close()
    assert refused == []  # nothing was asked of another origin
    assert errors == []
