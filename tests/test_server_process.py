"""``cortex serve`` as real processes: uvicorn with two workers on a scratch PostgreSQL
database, a tenant and key made by the CLI, a session driven over HTTP, a clean SIGTERM."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
from cortex.adapters.server.app import STARTUP_FAILURE  # noqa: E402
from cortex.services.hosting import ServiceHost  # noqa: E402

CORTEX = Path(sys.executable).parent / "cortex"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def env_for(home: Path) -> dict[str, str]:
    return dict(os.environ) | {"CORTEX_HOME": str(home), "CORTEX_SERVER_SECRET": "s3cret" * 8}


def cli(home: Path, *args: str) -> Any:
    done = subprocess.run(
        [str(CORTEX), "--json", *args], env=env_for(home), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def http(base: str, method: str, path: str, body: Any = None, key: str | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def wait_ready(base: str, proc: subprocess.Popen[bytes], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, "cortex serve exited before it was ready"
        try:
            if http(base, "GET", "/readyz") == {"status": "ready"}:
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    raise AssertionError(f"{base}/readyz did not answer ready in {seconds}s")


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def server(pg_url: str, tmp_path: Path) -> Iterator[tuple[str, Path, subprocess.Popen[bytes]]]:
    with serving(pg_url, tmp_path, "--pool-size", "2") as served:
        yield served


@contextmanager
def serving(
    pg_url: str, tmp_path: Path, *options: str, workers: int = 2
) -> Iterator[tuple[str, Path, subprocess.Popen[bytes]]]:
    """``cortex serve`` with ``workers`` and ``options``: its URL, home and process."""
    home, port = tmp_path / "home", free_port()
    args = ["serve", "--db", pg_url, "--port", str(port), "--workers", str(workers), *options]
    proc = subprocess.Popen(
        [str(CORTEX), *args],
        env=env_for(home),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        yield f"http://127.0.0.1:{port}", home, proc
    finally:
        if group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


def test_serve_runs_a_session_over_http_and_stops_on_sigterm(
    server: tuple[str, Path, subprocess.Popen[bytes]], pg_url: str
) -> None:
    base, home, proc = server
    wait_ready(base, proc)
    key = new_tenant_key(home, pg_url)[1]

    start = {"project": "api", "keywords": ["auth", "refactor"]}
    first = http(base, "POST", "/v1/sessions/start", start, key)
    sid = first["session_id"]
    assert first["preamble"] is None
    for text in ("auth refactor: token rotation", "auth refactor: session cookies"):
        turn = http(base, "POST", f"/v1/sessions/{sid}/turns", {"text": text}, key)
        assert turn == {"session_id": sid, "duplicate": False}
    http(base, "PUT", f"/v1/sessions/{sid}/pins/next", {"content": "finish auth refactor"}, key)
    assert http(base, "POST", "/v1/sessions/end", {"session_id": sid}, key)["end_time"]

    second = http(base, "POST", "/v1/sessions/start", start, key)
    assert second["session_id"] != sid and second["session_ids"] == [sid]
    assert second["preamble"] and "HOT TOPICS: auth, refactor" in second["preamble"]
    assert http(base, "GET", "/v1/metrics/verify", key=key)["ok"] is True

    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(20) == 0
    deadline = time.monotonic() + 10
    while group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not group_alive(proc.pid), "a uvicorn worker outlived its server"


def new_tenant_key(home: Path, pg_url: str) -> tuple[str, str]:
    """A new tenant of the server's database and a ``write`` key of it, made by the CLI."""
    tenant = f"proc-{os.getpid()}-{time.monotonic_ns() % 100000}"
    cli(home, "tenant", "create", tenant, "--db", pg_url)
    return tenant, cli(home, "key", "create", tenant, "--scopes", "write", "--db", pg_url)["key"]


WAITING = ("turn", "pin", "end")


def requests_waiting_on_a_held_session(
    base: str, pg_url: str, key: str, sid: str, blocker: Any, answers: dict[str, Any]
) -> list[threading.Thread]:
    """A turn, a pin and an end of ``sid`` sent while ``blocker`` (a transaction) holds its
    row, once all three wait for that lock; their answers (status, body) go to ``answers``."""
    import psycopg

    blocker.execute("SELECT id FROM session_states WHERE id = %s FOR UPDATE", (sid,))
    sent = {
        "turn": ("POST", f"/v1/sessions/{sid}/turns", {"text": "kubernetes rollout"}),
        "pin": ("PUT", f"/v1/sessions/{sid}/pins/later", {"content": "pinned in shutdown"}),
        "end": ("POST", "/v1/sessions/end", {"session_id": sid}),
    }

    def send(name: str) -> None:
        try:
            answers[name] = (200, http(base, *sent[name][:2], sent[name][2], key))
        except urllib.error.HTTPError as exc:
            body = exc.read()
            answers[name] = (exc.code, json.loads(body) if body.startswith(b"{") else body)
        except (OSError, http.client.HTTPException):  # the connection closed unanswered
            answers[name] = (None, None)

    threads = [threading.Thread(target=send, args=(name,)) for name in WAITING]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 20
    with psycopg.connect(pg_url, autocommit=True) as look:
        while time.monotonic() < deadline:
            count = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            if look.execute(count).fetchone() == (len(WAITING),):
                return threads
            time.sleep(0.05)
    raise AssertionError("the requests did not come to wait for the session's lock")


def assert_refused_and_unchanged(
    answers: dict[str, Any],
    said: str,
    pg_url: str,
    tmp_path: Path,
    tenant: str,
    sid: str,
    before: dict[str, Any],
) -> None:
    """Each waiting request answered the API's 503 saying ``said``, and ``sid`` is as it was
    (``before``): nothing of them was written."""
    for name in WAITING:
        status, body = answers[name]
        assert (status, body["error"]["code"]) == (503, "unavailable"), name
        assert said in body["error"]["message"]
    host = ServiceHost(pg_url, tmp_path / "check")
    try:
        with host.open(tenant) as app:
            assert app.sessions.resolve(sid).to_dict() == before
    finally:
        host.close()


def stop_accepting(port: int, proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to a one-process server, then wait until it takes no new connection (it has
    closed its socket and waits for the requests it holds)."""
    os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except ConnectionRefusedError:
            return
        time.sleep(0.05)
    raise AssertionError("the server still took connections after SIGTERM")


def test_a_sigterm_ends_the_server_while_a_transaction_still_holds_its_requests_session(
    pg_url: str, tmp_path: Path
) -> None:
    """Shutdown waits for the requests in flight, and a request waits for a held session at
    most the lock timeout (twice, for the second in its queue): the server is gone while
    the holder still holds it, each request answered 503 busy, and the session unchanged."""
    import psycopg

    with serving(pg_url, tmp_path, "--lock-timeout", "1") as (base, home, proc):
        wait_ready(base, proc)
        tenant, key = new_tenant_key(home, pg_url)
        sid = http(base, "POST", "/v1/sessions/start", {"project": "api"}, key)["session_id"]
        http(base, "POST", f"/v1/sessions/{sid}/turns", {"text": "auth refactor"}, key)
        before = http(base, "GET", f"/v1/sessions/{sid}", key=key)
        answers: dict[str, Any] = {}
        with psycopg.connect(pg_url) as blocker:
            threads = requests_waiting_on_a_held_session(base, pg_url, key, sid, blocker, answers)
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(60)  # with the session still held
            for thread in threads:
                thread.join(10)
    assert_refused_and_unchanged(answers, "is busy", pg_url, tmp_path, tenant, sid, before)


def test_a_sigterm_gives_up_on_requests_still_waiting_after_the_shutdown_timeout(
    pg_url: str, tmp_path: Path
) -> None:
    """`--shutdown-timeout` bounds a stop: requests that wait on a held session longer than it
    (their lock bound is a minute) are given up on with the API's 503 (not uvicorn's plain
    500), the server is gone while the holder still holds the session, and nothing of them was
    written (their transactions rolled back with the server's connections)."""
    import psycopg

    options = ("--lock-timeout", "60", "--shutdown-timeout", "1")
    with serving(pg_url, tmp_path, *options, workers=1) as (base, home, proc):
        wait_ready(base, proc)
        tenant, key = new_tenant_key(home, pg_url)
        sid = http(base, "POST", "/v1/sessions/start", {"project": "api"}, key)["session_id"]
        before = http(base, "GET", f"/v1/sessions/{sid}", key=key)
        answers: dict[str, Any] = {}
        with psycopg.connect(pg_url) as blocker:
            threads = requests_waiting_on_a_held_session(base, pg_url, key, sid, blocker, answers)
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)  # well before the requests' 60 s lock bound, with the session held
            blocker.rollback()
        for thread in threads:
            thread.join(10)
    # Given up on: the API's 503, to retry with the same request id.
    stopping = "the server is stopping"
    assert_refused_and_unchanged(answers, stopping, pg_url, tmp_path, tenant, sid, before)


def test_requests_in_flight_at_a_sigterm_are_answered_and_written_whole(
    pg_url: str, tmp_path: Path
) -> None:
    """The server stops taking connections at SIGTERM and finishes the requests it holds:
    once the session is released they are answered and their writes are whole."""
    import psycopg

    with serving(pg_url, tmp_path, "--lock-timeout", "60", workers=1) as (base, home, proc):
        wait_ready(base, proc)
        tenant, key = new_tenant_key(home, pg_url)
        sid = http(base, "POST", "/v1/sessions/start", {"project": "api"}, key)["session_id"]
        answers: dict[str, Any] = {}
        with psycopg.connect(pg_url) as blocker:
            threads = requests_waiting_on_a_held_session(base, pg_url, key, sid, blocker, answers)
            stop_accepting(int(base.rpartition(":")[2]), proc)
        proc.wait(60)
        for thread in threads:
            thread.join(10)
    assert answers["end"][0] == 200
    host = ServiceHost(pg_url, tmp_path / "check")
    try:
        with host.open(tenant) as app:
            state = app.sessions.resolve(sid)
    finally:
        host.close()
    assert state.end_time == answers["end"][1]["end_time"]
    # A turn or pin before the end is written whole (in the final record), one after it is
    # refused (409) and leaves nothing.
    assert {answers["turn"][0], answers["pin"][0]} <= {200, 409}
    assert ("kubernetes" in state.hot_topics) == (answers["turn"][0] == 200)
    assert [p.label for p in state.working_memory] == ["later"] * (answers["pin"][0] == 200)


def serve_refused(home: Path, *args: str, secret: str = "s3cret" * 8) -> str:
    """The one line ``cortex serve ARGS`` prints on stderr as it exits 1, before listening."""
    done = subprocess.run(
        [str(CORTEX), "serve", *args, "--port", str(free_port())],
        env=env_for(home) | {"CORTEX_SERVER_SECRET": secret},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 1 and done.stderr.strip().count("\n") == 0, done.stderr
    return done.stderr.strip()


def test_serve_on_postgresql_requires_the_server_secret(pg_url: str, tmp_path: Path) -> None:
    assert "CORTEX_SERVER_SECRET" in serve_refused(tmp_path, "--db", pg_url, secret="")


def test_serve_refuses_a_server_secret_under_32_bytes(pg_url: str, tmp_path: Path) -> None:
    refused = serve_refused(tmp_path, "--db", pg_url, secret="x" * 31)
    assert "CORTEX_SERVER_SECRET is 31 bytes; use at least 32" in refused
    assert "`openssl rand -hex 32`" in refused


def test_a_worker_started_by_uvicorn_refuses_a_short_secret_in_one_line(tmp_path: Path) -> None:
    """A worker process started without `cortex serve` (uvicorn over the app factory, as
    deploy.md shows) refuses a secret under 32 bytes as `cortex serve` does: one line, no
    traceback, and the exit status of a worker that failed to start (3, uvicorn's)."""
    env = env_for(tmp_path) | {
        "CORTEX_SERVER_DB": str(tmp_path / "server.db"),
        "CORTEX_SERVER_SECRET": "x" * 31,
    }
    factory = ["cortex.adapters.server.app:app_from_env", "--factory"]
    done = subprocess.run(
        [sys.executable, "-m", "uvicorn", *factory, "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == STARTUP_FAILURE, done.stderr
    assert done.stderr == (
        "error: CORTEX_SERVER_SECRET is 31 bytes; use at least 32, e.g. `openssl rand -hex 32` "
        "(the same on every server)\n"
    )


def test_uvicorns_own_workers_refusing_a_setting_stop_the_server_non_zero(
    tmp_path: Path,
) -> None:
    """Under uvicorn's `--workers N` (no `cortex serve` to check first) a refused worker
    stops the whole server, exit status non-zero, within seconds: each worker says the one
    line once; uvicorn's parent does not start them again and again."""
    env = env_for(tmp_path) | {
        "CORTEX_SERVER_DB": str(tmp_path / "server.db"),
        "CORTEX_SERVER_POOL": "ten",
    }
    factory = ["cortex.adapters.server.app:app_from_env", "--factory", "--workers", "2"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", *factory, "--port", str(free_port())],
        env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        _, stderr = proc.communicate(timeout=45)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stderr = proc.communicate()[1]
        pytest.fail(f"uvicorn went on starting refused workers:\n{stderr[-2000:]}")
    line = (
        "error: CORTEX_SERVER_POOL='ten' is not a whole number of connections in 1-200; fix "
        "it, or pass `cortex serve --pool-size N`"
    )
    said = [text for text in stderr.splitlines() if not text.startswith("INFO:")]
    assert proc.returncode != 0, stderr
    assert said and set(said) == {line} and len(said) <= 2, stderr  # no traceback, no loop
    assert "died" not in stderr, stderr


CHILD_OF_ANOTHER_PROGRAM = """
import multiprocessing, sys

def serve():
    import uvicorn
    uvicorn.run("cortex.adapters.server.app:app_from_env", factory=True, port=int(sys.argv[1]))

if __name__ == "__main__":
    child = multiprocessing.get_context("spawn").Process(target=serve)
    child.start()
    child.join()
    print("still here", child.exitcode)
"""


def test_a_worker_in_another_programs_child_process_signals_no_parent(tmp_path: Path) -> None:
    """Only uvicorn's own `--workers` supervisor is stopped by a refusal: a program that runs
    the server in a child process of its own gets the child's exit status, and lives on."""
    script = tmp_path / "program.py"
    script.write_text(CHILD_OF_ANOTHER_PROGRAM)
    env = env_for(tmp_path) | {
        "CORTEX_SERVER_DB": str(tmp_path / "server.db"),
        "CORTEX_SERVER_POOL": "ten",
    }
    done = subprocess.run(
        [sys.executable, str(script), str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (0, f"still here {STARTUP_FAILURE}\n"), done.stderr


@contextmanager
def served_on_sqlite(tmp_path: Path, *options: str) -> Iterator[tuple[str, str]]:
    """``cortex serve`` over a new SQLite database with ``options``, ready: its URL and a key
    of its default tenant."""
    db, port = str(tmp_path / "srv.db"), free_port()
    cli(tmp_path, "tenant", "create", "default", "--db", db)
    key = cli(tmp_path, "key", "create", "default", "--db", db)["key"]
    proc = subprocess.Popen(
        [str(CORTEX), "serve", "--db", db, "--port", str(port), *options],
        env=env_for(tmp_path), start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"
        wait_ready(base, proc)
        yield base, key
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


def test_serve_takes_the_rate_limit_from_its_options(tmp_path: Path) -> None:
    with served_on_sqlite(tmp_path, "--rate", "0.01", "--burst", "2") as (base, key):
        assert http(base, "GET", "/v1/sessions", key=key)["sessions"] == []
        http(base, "GET", "/v1/sessions", key=key)
        with pytest.raises(urllib.error.HTTPError) as limited:
            http(base, "GET", "/v1/sessions", key=key)
        assert limited.value.code == 429 and limited.value.headers["Retry-After"]


def test_serve_behind_a_proxy_prefix_writes_its_links_under_the_root_path(tmp_path: Path) -> None:
    """``--root-path``: the proxy strips the prefix, so the API answers at its own paths, and
    the links the server writes (the ``/docs`` page's) carry the prefix the browser sees."""
    with served_on_sqlite(tmp_path, "--root-path", "/cortex") as (base, key):
        assert http(base, "GET", "/v1/sessions", key=key)["sessions"] == []
        with urllib.request.urlopen(f"{base}/docs", timeout=10) as page:
            html = page.read().decode()
        assert "/cortex/docs/static/swagger-ui-bundle.js" in html
        assert "'/cortex/openapi.json'" in html


def test_serve_warns_of_a_tenant_with_invalid_settings_and_serves_the_others(
    tmp_path: Path,
) -> None:
    db, port = str(tmp_path / "srv.db"), free_port()
    cli(tmp_path, "tenant", "create", "default", "--db", db)
    key = cli(tmp_path, "key", "create", "default", "--db", db)["key"]
    settings = tmp_path / "server" / "tenants" / "broken" / "config.toml"
    settings.parent.mkdir(parents=True)
    settings.write_text("session_idle_close_minutes = 1\n")
    proc = subprocess.Popen(
        [str(CORTEX), "serve", "--db", db, "--port", str(port)], env=env_for(tmp_path),
        start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline().strip() == (
            f"warning: tenant 'broken': session_idle_close_minutes=1 (from {settings}) is out "
            "of range; use a value in 5-10080; its requests answer 503 until it is fixed"
        )
        base = f"http://127.0.0.1:{port}"
        wait_ready(base, proc)
        assert http(base, "GET", "/v1/sessions", key=key)["sessions"] == []
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
