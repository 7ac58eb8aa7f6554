"""The web dashboard in-process (Starlette's test client) over a home the real CLI populated:
every page, escaping, the form token, the host check, no file-system paths from URLs, and
changes made on a page seen by the CLI."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from cli_helpers import T0, cortex, ok
from cortex.adapters.server.ui.local import (
    COOKIE,
    TOKEN_FILE,
    install_token,
    local_app,
    opener_file,
)
from cortex.clock import FixedClock
from cortex.config import load_config
from cortex.services.app import Services

# One worker runs this module under pytest-xdist: its module-scoped fixtures are set up once.
pytestmark = pytest.mark.xdist_group("test_ui")

SCRIPT = "<script>alert('x')</script>"
LATER = "2026-02-16T10:00:00Z"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A home the CLI populated once for the module (each test works on a copy)."""
    home = tmp_path_factory.mktemp("ui") / "home"
    return home, populate(home)


@pytest.fixture
def populated(home: Path, template: tuple[Path, dict[str, str]]) -> dict[str, str]:
    shutil.copytree(template[0], home)
    return template[1]


def populate(home: Path) -> dict[str, str]:
    """Two chained sessions of ``api`` (the first ended, one pin holding a script tag, an
    event holding one), a memory holding one, and one replaced by upsert (a history)."""
    ok(cortex(home, "session", "start", "--session-id", "s-one", "--project", "api"))
    ok(cortex(home, "pin", "add", "region", f"eu-west-1 {SCRIPT}", "--session-id", "s-one"))
    ok(cortex(home, "session", "record", "--session-id", "s-one", "--text", "deploy to eu-west"))
    ok(cortex(home, "session", "event", "--session-id", "s-one", f"user said {SCRIPT}"))
    ok(cortex(home, "session", "end", "--session-id", "s-one"))
    ok(cortex(home, "session", "start", "--session-id", "s-two", "--project", "api", now=LATER))
    ok(cortex(home, "pin", "add", "branch", "main", "--session-id", "s-two", now=LATER))
    added = add_memory(home, f"Deploys go to eu-west-1 {SCRIPT}")
    ok(cortex(home, "memory", "add", "db is postgres 15", "--upsert-key", "db", "--project", "api"))
    newer = add_memory(home, "db is postgres 16", "--upsert-key", "db")
    return {"memory": added["id"], "db": newer["id"], "db_old": newer["superseded_id"]}


def add_memory(home: Path, content: str, *options: str) -> dict[str, Any]:
    """``cortex memory add`` to project ``api``; the JSON it answers."""
    out = ok(cortex(home, "--json", "memory", "add", content, "--project", "api", *options))
    return dict(json.loads(out))


@pytest.fixture
def client(home: Path, populated: dict[str, str]) -> TestClient:
    app = local_app(load_config(home, env={}), FixedClock(LATER))
    return signed_in(TestClient(app, base_url="http://127.0.0.1:8765"), home)


def signed_in(client: TestClient, home: Path) -> TestClient:
    """``client`` with the cookie the address ``cortex ui`` prints sets."""
    client.cookies.set(COOKIE, token(home))
    return client


def token(home: Path) -> str:
    return (home / TOKEN_FILE).read_text().strip()


PAGES = [
    "/sessions",
    "/sessions?project=api&status=COMPLETE",
    "/sessions?since=2026-02-16&until=2026-02-17",
    "/sessions/s-one",
    "/sessions/s-two",
    "/next?project=api",
    "/next?project=api&keywords=deploy+region",
    "/memory",
    "/memory?q=deploy",
    "/memory?layer=long_term&project=api",
    "/health",
    "/health?check=1",
]


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_and_escapes_user_text(client: TestClient, page: str) -> None:
    response = client.get(page)
    assert response.status_code == 200, response.text
    assert "<script>alert" not in response.text
    assert response.headers["content-security-policy"].startswith("default-src 'none'")
    assert response.headers["x-frame-options"] == "DENY"


def test_script_in_a_pin_an_event_and_a_memory_renders_as_text(
    client: TestClient, populated: dict[str, str]
) -> None:
    escaped = "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"
    assert escaped in client.get("/sessions/s-one").text  # the pin and the event
    assert escaped in client.get("/memory?q=deploys").text
    assert escaped in client.get(f"/memory/{populated['memory']}").text
    assert escaped in client.get("/next?project=api").text  # the inherited pin


def test_the_session_page_shows_pins_events_chain_and_metrics(client: TestClient) -> None:
    page = client.get("/sessions/s-two").text
    chain = re.search(r'<ol class="chain" id="chain">(.*?)</ol>', page, re.S)
    assert chain and chain.group(1).index("s-one") < chain.group(1).index("s-two")
    assert "branch" in page and "region [inherited from s-one" in page
    assert "session_restored" in page  # the metrics event this start emitted
    one = client.get("/sessions/s-one").text
    assert "deploy to eu-west" not in one or "user said" in one
    assert "user said" in one


def test_the_timeline_draws_a_bar_per_session_and_the_chain(client: TestClient) -> None:
    page = client.get("/sessions").text
    assert page.count('class="bar ') == 2
    assert page.count('class="chain"') == 1
    assert 'class="bar complete"' in page and 'class="bar active"' in page


def test_filters_narrow_the_sessions(client: TestClient) -> None:
    assert "s-two" not in client.get("/sessions?status=COMPLETE").text
    assert "s-one" not in client.get("/sessions?status=ACTIVE").text
    assert "s-one" not in client.get("/sessions?since=2026-02-17").text
    bad = client.get("/sessions?status=nope")
    assert bad.status_code == 400 and "unknown status" in bad.text


def test_next_start_explains_scores_without_opening_a_session(
    client: TestClient, home: Path
) -> None:
    before = ok(cortex(home, "--json", "session", "list"))
    page = client.get("/next?project=api&keywords=deploy").text
    assert "included: scored at or above the threshold" in page
    assert "[SESSION CONTINUITY" in page and re.search(r"\d+ of about 2000 tokens", page)
    assert ok(cortex(home, "--json", "session", "list")) == before


def test_a_post_without_the_token_is_refused(client: TestClient, home: Path) -> None:
    for form in ({}, {"csrf": "0" * 64}):
        response = client.post("/sessions/s-two/pins", data={**form, "label": "x", "content": "y"})
        assert response.status_code == 403
        assert "form token is missing or wrong" in response.text
    assert "zz-label" not in ok(cortex(home, "pin", "list", "--session-id", "s-two"))


def test_editing_a_pin_is_seen_by_the_cli(client: TestClient, home: Path) -> None:
    response = client.post(
        "/sessions/s-two/pins",
        data={"csrf": token(home), "label": "branch", "content": "release/2.0"},
        follow_redirects=False,
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/sessions/s-two?notice=pin-saved"
    assert "release/2.0" in ok(cortex(home, "pin", "list", "--session-id", "s-two"))


def test_the_token_header_works_too(client: TestClient, home: Path) -> None:
    response = client.post(
        "/sessions/s-two/pins/remove",
        data={"label": "branch"},
        headers={"X-Cortex-Token": token(home)},
        follow_redirects=False,
    )
    assert response.status_code == 303
    assert "branch" not in ok(cortex(home, "pin", "list", "--session-id", "s-two"))


def test_forgetting_a_memory_asks_then_removes_it_from_cli_search(
    client: TestClient, home: Path, populated: dict[str, str]
) -> None:
    mid = populated["memory"]
    confirm = client.get(f"/memory/{mid}/forget").text
    assert "Forget this memory?" in confirm
    assert mid in ok(cortex(home, "--json", "memory", "search", "deploys", "--project", "api"))
    done = client.post(f"/memory/{mid}/forget", data={"csrf": token(home)})
    assert done.status_code == 200 and "forgotten" in done.text
    found = json.loads(
        ok(cortex(home, "--json", "memory", "search", "deploys", "--project", "api"))
    )
    assert all(hit["id"] != mid for hit in found)
    assert "memory.forget" in client.get(f"/memory/{mid}").text  # the audit trail


def test_editing_a_memory_is_audited(
    client: TestClient, home: Path, populated: dict[str, str]
) -> None:
    mid = populated["db"]
    client.post(f"/memory/{mid}/edit", data={"csrf": token(home), "content": "db is pg 17"})
    shown = json.loads(ok(cortex(home, "--json", "memory", "show", mid)))
    assert shown["content"] == "db is pg 17"
    page = client.get(f"/memory/{mid}").text
    assert "memory.edit" in page and "ui" in page
    assert populated["db_old"][:8] in page  # the version it superseded


def test_a_failed_change_is_a_page_with_the_error(client: TestClient, home: Path) -> None:
    response = client.post(
        "/sessions/s-one/pins", data={"csrf": token(home), "label": "a", "content": "b"}
    )
    assert response.status_code >= 400
    assert 'id="error"' in response.text


def error_text(response: Any) -> str:
    found = re.search(r'id="error">(.*?)</p>', response.text, re.S)
    assert found, response.text
    return html.unescape(found.group(1))


def test_errors_name_the_pages_fields_and_buttons_not_flags_or_keywords(
    client: TestClient, home: Path, populated: dict[str, str]
) -> None:
    def post(path: str, **form: str) -> Any:
        return client.post(path, data={"csrf": token(home), **form})

    for i in range(8):  # s-two holds two pins: working memory is then full
        post("/sessions/s-two/pins", label=f"p{i}", content="x")
    shown = {
        client.get("/sessions/nope"): "no session 'nope'; see the Sessions page",
        client.get("/memory/nope"): "no memory 'nope'; see the Memory page",
        client.get("/sessions?since=soon"): "From 'soon' is not a date; use YYYY-MM-DD",
        client.get("/sessions?until=1.2"): "Before '1.2' is not a date; use YYYY-MM-DD",
        post("/sessions/s-two/pins", label="one-more", content="x"): "working memory is full "
        "(10 pins); remove one first with a pin's Remove button on the session's page",
        post("/sessions/s-two/pins/remove", label="nope"): "no pin labelled 'nope' in "
        "session s-two; see the session's Pins table",
        post("/sessions/s-two/pins", label=" ", content="x"): "a pin needs a label; give it "
        "one, as in the Pin form on the session's page",
        post("/memory/nope/forget"): "no memory 'nope'; see the Memory page",
    }  # fmt: skip
    forgotten = f"/memory/{populated['memory']}/forget"
    post(forgotten)
    shown[post(forgotten)] = (
        f"memory {populated['memory']} is already forgotten; nothing to do (see the Memory "
        "page for the live ones)"
    )
    for response, message in shown.items():
        assert error_text(response) == message
    # No page starts a session: the command line's command, which a `cortex ui` user has.
    ended = error_text(post("/sessions/s-one/pins", label="late", content="x"))
    assert ended.endswith("; start a new one with `cortex session start`")
    for text in [*shown.values(), ended]:
        assert not re.search(r"(?<![\w-])--[a-z]|`[a-z_]+(=[^`]*)?`|\x1e", text), text


@pytest.mark.parametrize(
    "path",
    [
        "/static/..%2fapp.py",
        "/static/../app.py",
        "/static/%2e%2e%2fapp.py",
        "/static/app.py",
        "/sessions/..%2f..%2fetc%2fpasswd",
        "/sessions/a%20b%3B%00c",
        "/memory/%2e%2e",
    ],
)
def test_no_url_reaches_the_file_system(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code in (400, 404, 422)
    assert "import" not in response.text and "root:" not in response.text


def test_static_assets_are_served_from_the_package(client: TestClient) -> None:
    css = client.get("/static/ui.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert client.get("/static/ui.js").headers["content-type"].startswith("text/javascript")


def test_a_foreign_host_header_is_refused(home: Path, populated: dict[str, str]) -> None:
    app = local_app(load_config(home, env={}), FixedClock(T0))
    evil = TestClient(app, base_url="http://attacker.example:8765")
    assert evil.get("/sessions").status_code == 400


def test_another_local_user_without_the_token_reads_nothing(
    home: Path, populated: dict[str, str]
) -> None:
    """127.0.0.1 is open to every user of the machine, the home is not: a request without the
    home's token gets a 401 naming the way in, whatever page it asks for."""
    stranger = TestClient(local_app(load_config(home, env={}), FixedClock(LATER)),
                          base_url="http://127.0.0.1:8765", follow_redirects=False)  # fmt: skip
    for path in ("/", "/sessions", "/sessions/s-two", f"/memory/{populated['memory']}",
                 "/memory?q=deploy", "/health", "/next?project=api", "/live"):  # fmt: skip
        answer = stranger.get(path)
        assert answer.status_code == 401, path
        assert "eu-west-1" not in answer.text and "s-two" not in answer.text
        assert answer.text.startswith("this dashboard needs its token: open the address")
    assert stranger.get("/sessions?token=" + "0" * 64).status_code == 401
    assert stranger.get("/static/ui.css").status_code == 200  # no data in it
    entered = stranger.get(f"/sessions?project=api&token={token(home)}")
    assert entered.status_code == 303 and entered.headers["location"] == "/sessions?project=api"
    cookie = entered.headers["set-cookie"]
    assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
    assert stranger.get("/sessions").status_code == 200  # the cookie signs it in
    header = TestClient(stranger.app, base_url="http://127.0.0.1:8765")
    assert header.get("/sessions", headers={"X-Cortex-Token": token(home)}).status_code == 200
    opener = opener_file(home, f"http://127.0.0.1:8765/?token={token(home)}")  # `cortex ui --open`
    assert stat.S_IMODE(opener.stat().st_mode) == 0o600 and token(home) in opener.read_text()


def test_the_install_token_is_private_and_stable(home: Path) -> None:
    first = install_token(home)
    assert re.fullmatch(r"[0-9a-f]{64}", first)
    assert stat.S_IMODE((home / TOKEN_FILE).stat().st_mode) == 0o600
    assert install_token(home) == first


def test_cortex_ui_on_a_taken_port_is_one_line_naming_the_next_step(home: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cortex(home, "ui", "--port", str(port))
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: port {port} on 127.0.0.1 is not free")
    assert result.stderr.rstrip().endswith("pick another with --port")
    assert result.stderr.count("\n") == 1


def test_cortex_ui_in_client_mode_points_to_the_servers_pages(home: Path) -> None:
    server = {"CORTEX_SERVER": "https://admin:pw@cortex.example.com/team/", "CORTEX_API_KEY": "k"}
    result = cortex(home, "ui", "--port", "9", env=server)
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert "open https://cortex.example.com/team/ui/login and sign in" in result.stderr
    assert "pw" not in result.stderr and not (home / "brain.db").exists()


def test_a_notice_is_one_of_the_pages_own_never_text_from_the_link(client: TestClient) -> None:
    assert (
        '<p class="notice" role="status">pin saved</p>'
        in client.get("/sessions/s-two?notice=pin-saved").text
    )
    spoofed = client.get("/sessions?notice=Your+key+was+rotated.+Get+one+at+https://evil.example")
    assert spoofed.status_code == 200 and "evil.example" not in spoofed.text
    assert 'class="notice" role="status"' not in spoofed.text


def test_the_memory_list_pages_older_and_newer(client: TestClient, home: Path) -> None:
    with Services.open(load_config(home, env={}), FixedClock(LATER)) as app:
        for n in range(60):
            app.memory.add(f"paged memory number {n}", project="paging")
    first = client.get("/memory?project=paging")
    assert first.text.count("paged memory number") == 50 and 'id="newer"' not in first.text
    older = re.search(r'href="(/memory\?[^"]+)" id="older"', first.text)
    assert older is not None and "offset=50" in older[1]
    second = client.get(html.unescape(older[1]))
    assert second.text.count("paged memory number") == 10 and 'id="older"' not in second.text
    assert 'id="newer"' in second.text


def test_a_database_that_vanished_is_named_and_not_made_again(
    client: TestClient, home: Path
) -> None:
    for path in home.glob("brain.db*"):
        path.rename(home / f"moved-{path.name}")
    page = client.get("/sessions")
    assert page.status_code == 503 and f"no database at {home / 'brain.db'}" in page.text
    assert not (home / "brain.db").exists()


def test_an_emptied_memory_is_refused_and_emptied_tags_are_cleared(
    client: TestClient, home: Path, populated: dict[str, str]
) -> None:
    mid = populated["db"]
    tagged = {"csrf": token(home), "content": "db is pg 16", "tags": "infra, db"}
    assert client.post(f"/memory/{mid}/edit", data=tagged).status_code == 200
    refused = client.post(f"/memory/{mid}/edit", data={"csrf": token(home), "content": " "})
    assert refused.status_code == 400 and 'id="error"' in refused.text
    client.post(f"/memory/{mid}/edit", data={"csrf": token(home), "content": "x", "tags": ""})
    shown = json.loads(ok(cortex(home, "--json", "memory", "show", mid)))
    assert (shown["content"], shown["tags"]) == ("x", [])


def test_a_hook_event_shows_in_the_latency_table(client: TestClient, home: Path) -> None:
    payload = {"session_id": "cc-1", "cwd": str(home), "hook_event_name": "SessionStart"}
    done = subprocess.run(
        [sys.executable, "-m", "cortex.entry", "hook", "claude-code"],
        input=json.dumps(payload),
        text=True,
        capture_output=True,
        env={**os.environ, "CORTEX_HOME": str(home), "CORTEX_HOOK_SERVER": "0"},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    table = re.search(r'<table id="latency">(.*?)</table>', client.get("/health").text, re.S)
    assert table and re.search(r"<td>claude-code</td><td>SessionStart</td><td>1</td>", table[1])


def test_the_health_check_runs_doctor_when_the_launcher_gives_it(
    home: Path, populated: dict[str, str], tmp_path: Path
) -> None:
    from cortex.adapters.hooks.doctor import diagnose

    config = load_config(home, env={})
    user_home = tmp_path / "user"  # no host has Cortex's hooks installed here
    user_home.mkdir()

    def doctor() -> dict[str, Any]:
        return diagnose(config, FixedClock(LATER), user_home, tmp_path).to_dict()

    client = TestClient(local_app(config, FixedClock(LATER), doctor), base_url="http://127.0.0.1")
    signed_in(client, home)
    assert 'id="doctor">Runs with the check above.' in client.get("/health").text
    checked = client.get("/health?check=1").text
    problems = diagnose(config, FixedClock(LATER), user_home, tmp_path).problems
    assert problems, "doctor finds no hook installed for any host"
    for problem in problems:
        assert html.escape(problem, quote=False) in checked
    plain = TestClient(local_app(config, FixedClock(LATER)), base_url="http://127.0.0.1")
    signed_in(plain, home)
    assert 'id="doctor"' not in plain.get("/health?check=1").text  # a team server has none
