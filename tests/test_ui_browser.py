"""The dashboard in a real browser: headless Chromium (Playwright) against ``cortex ui`` in a
subprocess, over a home the real CLI and the real Claude Code hook populated.

The browser is Debian's ``chromium``. Without it these tests skip on a developer's machine
and fail when ``CORTEX_TEST_BROWSER=1`` (CI sets it), so CI never passes by skipping them.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

# One worker runs this module under pytest-xdist: its module-scoped fixtures are set up once.
pytestmark = pytest.mark.xdist_group("test_ui_browser")

CHROMIUM = os.environ.get("CORTEX_TEST_CHROMIUM", "/usr/bin/chromium")
REQUIRED_ENV = "CORTEX_TEST_BROWSER"
SCRIPT = "<script>window.pwned = 1</script>"

playwright_api = pytest.importorskip("playwright.sync_api")


def _unavailable(reason: str) -> None:
    if os.environ.get(REQUIRED_ENV) == "1":
        pytest.fail(f"{reason}; CI needs it ({REQUIRED_ENV}=1): apt-get install chromium")
    pytest.skip(reason)


def child_env(home: Path, **extra: str) -> dict[str, str]:
    """A process's environment: ours without Cortex's or Claude's vars, the real clock."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CORTEX_", "CLAUDE_"))}
    return {**env, "CORTEX_HOME": str(home), "CORTEX_HOOK_SERVER": "0", **extra}


def cli(home: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "cortex.entry", *args],
        capture_output=True,
        text=True,
        env=child_env(home),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def hook(home: Path, payload: dict[str, Any]) -> None:
    """One ``cortex hook claude-code`` process, as Claude Code runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "cortex.entry", "hook", "claude-code"],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=child_env(home),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def claude_event(name: str, session: str, cwd: Path, **fields: Any) -> dict[str, Any]:
    return {
        "session_id": session,
        "transcript_path": f"/tmp/{session}.jsonl",
        "cwd": str(cwd),
        "hook_event_name": name,
        **fields,
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """``cortex ui`` on a free port over a populated home; stopped (by its pid) at the end."""
    if not Path(CHROMIUM).exists():
        _unavailable(f"no Chromium at {CHROMIUM}")
    root = tmp_path_factory.mktemp("browser")
    home, project = root / "home", root / "radio"
    project.mkdir()
    cli(home, "session", "start", "--session-id", "b-one", "--project", "api")
    cli(home, "pin", "add", "region", "eu-west-1", "--session-id", "b-one")
    cli(home, "session", "end", "--session-id", "b-one")
    cli(home, "session", "start", "--session-id", "b-two", "--project", "api")
    cli(home, "pin", "add", "branch", "main", "--session-id", "b-two")
    added = json.loads(
        cli(
            home, "--json", "memory", "add", f"Deploys go to eu-west-1 {SCRIPT}", "--project", "api"
        )
    )
    cli(home, "memory", "add", "The staging database is postgres 16", "--project", "api")
    hook(home, claude_event("SessionStart", "cc-live", project, source="startup"))
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "cortex.entry", "ui", "--port", str(port)],
        env=child_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base, server)
        yield {"base": base, "home": home, "project": project, "memory": added["id"]}
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


def _wait_ready(base: str, server: subprocess.Popen[bytes], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(
                f"cortex ui exited: {server.stderr.read().decode() if server.stderr else ''}"
            )
        try:
            with urllib.request.urlopen(base + "/static/ui.css", timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    pytest.fail("cortex ui did not answer within 30 s")


@contextmanager
def chromium() -> Iterator[Any]:
    """Debian's Chromium, headless, under Playwright (skipped, or failed in CI, without it)."""
    if not Path(CHROMIUM).exists():
        _unavailable(f"no Chromium at {CHROMIUM}")
    with playwright_api.sync_playwright() as p:
        try:
            launched = p.chromium.launch(
                executable_path=CHROMIUM,
                args=["--headless", "--no-sandbox", "--disable-background-networking"],
            )
        except Exception as exc:  # noqa: BLE001 - any launch failure means no browser here
            _unavailable(f"Chromium did not start: {exc}")
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def browser(site: dict[str, Any]) -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Any, site: dict[str, Any]) -> Iterator[Any]:
    context = browser.new_context()
    token = (site["home"] / "ui.token").read_text().strip()  # as the printed address sets it
    context.add_cookies([{"name": "cortex_ui_token", "value": token, "url": site["base"]}])
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    opened.set_default_timeout(10_000)
    yield opened
    context.close()
    assert errors == []  # no script error on any page


def test_every_page_opens(page: Any, site: dict[str, Any]) -> None:
    base = site["base"]
    for path, heading in [
        ("/sessions", "Sessions"),
        ("/sessions/b-two", "Session b-two"),
        ("/next?project=api", "Next start, explained"),
        ("/memory", "Memory"),
        (f"/memory/{site['memory']}", f"Memory {site['memory']}"),
        ("/health", "Health"),
    ]:
        response = page.goto(base + path)
        assert response.status == 200, path
        assert page.locator("h1").inner_text() == heading
    page.goto(base + "/sessions")
    assert page.locator("svg.timeline rect.bar").count() >= 3
    page.goto(base + "/health")
    assert "SessionStart" in page.locator("#latency").inner_text()  # the hook's own timing
    page.click("#run-check")
    assert "metrics verify: OK" in page.locator("#verify").inner_text()


def test_search_finds_a_memory_and_shows_its_script_as_text(
    page: Any, site: dict[str, Any]
) -> None:
    page.goto(site["base"] + "/memory")
    page.fill("#q", "deploys")
    page.click("form[role=search] button")
    first = page.locator("#memories tbody tr").first
    assert SCRIPT in first.inner_text()
    assert page.evaluate("window.pwned") is None  # rendered as text, never run


def test_editing_a_pin_is_seen_by_the_cli(page: Any, site: dict[str, Any]) -> None:
    page.goto(site["base"] + "/sessions/b-two")
    field = page.get_by_label("content of branch")
    field.fill("release/2.0")
    field.press("Enter")
    page.wait_for_url(re.compile(r"notice=pin-saved"))
    assert page.get_by_label("content of branch").input_value() == "release/2.0"
    assert "release/2.0" in cli(site["home"], "pin", "list", "--session-id", "b-two")


def test_forgetting_a_memory_removes_it_from_cli_search(page: Any, site: dict[str, Any]) -> None:
    home = site["home"]
    before = json.loads(cli(home, "--json", "memory", "search", "staging", "--project", "api"))
    target = before[0]["id"]
    page.goto(f"{site['base']}/memory/{target}")
    page.click("#forget")
    assert "Forget this memory?" in page.locator("form.confirm").inner_text()
    page.click("#confirm-forget")
    page.wait_for_url(re.compile(r"/memory\?notice="))
    after = json.loads(cli(home, "--json", "memory", "search", "staging", "--project", "api"))
    assert all(hit["id"] != target for hit in after)


def test_a_turn_and_a_session_recorded_by_the_hook_appear_live(
    page: Any, site: dict[str, Any]
) -> None:
    page.goto(site["base"] + "/sessions/cc-live")
    page.wait_for_selector("body[data-live-ready='1']")
    assert "zebrafish" not in page.locator("dl.facts").inner_text()
    prompt = claude_event(
        "UserPromptSubmit", "cc-live", site["project"], prompt="zebrafish antenna"
    )
    hook(site["home"], prompt)
    page.locator("dl.facts", has_text="zebrafish").wait_for(timeout=15_000)
    page.goto(site["base"] + "/sessions")
    page.wait_for_selector("body[data-live-ready='1']")
    hook(site["home"], claude_event("SessionStart", "cc-next", site["project"], source="startup"))
    page.wait_for_selector("#sessions a.sid:text('cc-next')", timeout=15_000)
