"""``cortex tenant`` and ``cortex key`` on a real PostgreSQL database, and a key they make
authenticating through the service."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cli_helpers import cortex as real_cortex
from cli_helpers import ok
from cortex.adapters.cli.main import cli
from cortex.clock import FixedClock
from cortex.core.server_numbers import SERVER_NUMBERS, ServerNumber
from cortex.services.hosting import ServiceHost

CORTEX = Path(sys.executable).parent / "cortex"


def cortex(*args: str) -> dict | list:  # type: ignore[type-arg]
    result = CliRunner().invoke(cli, ["--json", *args], obj={})
    assert result.exit_code == 0, result.output
    return json.loads(result.output)  # type: ignore[no-any-return]


def test_tenant_and_key_commands_manage_the_registry(pg_url: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    name = f"cli-{secrets.token_hex(4)}"
    assert cortex("tenant", "create", name, "--db", pg_url)["tenant"] == name
    assert name in [t["tenant"] for t in cortex("tenant", "list", "--db", pg_url)]
    made = cortex("key", "create", name, "--scopes", "read", "--db", pg_url)
    host = ServiceHost(pg_url, tmp_path)
    try:
        assert host.authenticate(made["key"]) == (name, ("read",))
        listed = cortex("key", "list", "--tenant", name, "--db", pg_url)
        assert [k["key_id"] for k in listed] == [made["key_id"]] and "key" not in listed[0]
        assert cortex("key", "revoke", made["key_id"], "--db", pg_url)["revoked_at"]
        assert cortex("tenant", "revoke", name, "--db", pg_url)["revoked_at"]
    finally:
        host.close()


def refused(home: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Exit code and stderr of the real ``cortex ARGS`` that fails (one line, no traceback)."""
    done = subprocess.run(
        [str(CORTEX), *args],
        env=dict(os.environ) | {"CORTEX_HOME": str(home), "CORTEX_SERVER_DB": ""} | (env or {}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and done.stderr.strip().count("\n") == 0, done.stderr
    return done.returncode, done.stderr.strip()


def test_serve_refuses_a_database_it_could_never_serve_before_listening(tmp_path: Path) -> None:
    port = ["--port", "1"]  # never reached: each is refused before uvicorn starts
    assert refused(tmp_path, "serve", "--db", "", *port) == (
        2, "error: --db is empty; give a postgresql:// URL or a SQLite path"
    )  # fmt: skip
    code, scheme = refused(tmp_path, "serve", "--db", "mysql://x", *port)
    assert code == 1 and "unsupported store URL scheme 'mysql'" in scheme
    code, folder = refused(tmp_path, "serve", "--db", str(tmp_path), *port)
    assert code == 1 and folder == (
        f"error: {tmp_path} is a directory; give the path of a database file"
    )


def test_serve_refuses_an_address_it_could_not_listen_on_before_uvicorn_starts(
    tmp_path: Path,
) -> None:
    """An empty --host (an unset variable) is not every interface, a name that resolves to
    nothing or an address of another machine is one line, not uvicorn's traceback or its log
    and exit code 3, and a taken port is said as ``cortex ui`` says it."""
    args = ("serve", "--db", str(tmp_path / "srv.db"))
    empty = "error: --host is empty; omit it for 127.0.0.1 or give an address to listen on"
    assert refused(tmp_path, *args, "--host", "") == (2, empty)
    assert refused(tmp_path, *args, "--host", " ") == (2, empty)
    code, name = refused(tmp_path, *args, "--host", "..")
    assert code == 2 and name.startswith("error: --host '..' is not an address to listen on (")
    assert name.endswith("); give an IP address of this machine, e.g. 127.0.0.1 or 0.0.0.0")
    assert refused(tmp_path, *args, "--host", "x" * 300)[0] == 2
    assert refused(tmp_path, *args, "--host", "192.0.2.1", "--port", "1") == (
        1, "error: cannot listen on 192.0.2.1 port 1 (Cannot assign requested address); give "
        "an address of this machine with --host, or another --port"
    )  # fmt: skip
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert refused(tmp_path, *args, "--port", str(port)) == (
            1, f"error: port {port} on 127.0.0.1 is not free (Address already in use); pick "
            "another with --port"
        )  # fmt: skip


@pytest.mark.parametrize("number", SERVER_NUMBERS, ids=[n.env for n in SERVER_NUMBERS])
def test_serve_refuses_each_worker_number_out_of_range_before_listening(
    number: ServerNumber[int] | ServerNumber[float], tmp_path: Path
) -> None:
    """A flag, or the variable it is taken from, that a worker would refuse (NaN included,
    which click's ranges let by) stops ``cortex serve`` in one line before uvicorn starts."""
    args = ("serve", "--db", str(tmp_path / "srv.db"), "--port", "1")
    bad = "nan" if number.kind is float else "1.5"
    whole = "a whole number" if number.kind is int else "a number"
    what = f"{whole} of {number.unit} in {number.range_text}"
    assert refused(tmp_path, *args, number.flag, bad) == (
        2, f"error: {number.flag} {bad!r} is not {what}; give a value in that range"
    )  # fmt: skip
    above = str(number.high * 2)
    assert refused(tmp_path, *args, env={number.env: above}) == (
        2,
        f"error: {number.env}={above!r} is not {what}; fix it, or pass "
        f"`cortex serve {number.flag} {number.metavar}`",
    )


def test_an_empty_db_is_refused_and_a_listing_creates_no_database(tmp_path: Path) -> None:
    for args in (("tenant", "create", "acme"), ("tenant", "list"), ("key", "list")):
        assert refused(tmp_path, *args, "--db", "") == (
            2, "error: --db is empty; give a postgresql:// URL or a SQLite path"
        )  # fmt: skip
    typo = tmp_path / "typo" / "dir" / "srv.db"
    for args in (("tenant", "list"), ("key", "list")):
        assert refused(tmp_path, *args, "--db", str(typo)) == (
            1, f"error: no database at {typo}; check the path (`cortex tenant create` makes one)"
        )  # fmt: skip
    assert not (tmp_path / "typo").exists()


def test_a_sqlite_database_takes_tenant_default_only(tmp_path: Path) -> None:
    db = str(tmp_path / "srv.db")
    message = (
        "error: a SQLite server serves tenant 'default' only; use tenant 'default', or a "
        "postgresql:// database for tenant 'acme'"
    )
    assert refused(tmp_path, "tenant", "create", "acme", "--db", db) == (1, message)
    assert cortex("tenant", "create", "default", "--db", db)["tenant"] == "default"
    assert cortex("key", "create", "default", "--db", db)["tenant"] == "default"
    assert refused(tmp_path, "key", "create", "acme", "--db", db) == (1, message)


def test_a_url_of_another_scheme_is_named_as_such_by_every_registry_command(
    tmp_path: Path,
) -> None:
    """Not "no database at mysql://..." nor "a SQLite server serves tenant 'default' only"."""
    message = (
        "error: unsupported store URL scheme 'mysql'; use a SQLite path or a postgresql:// URL"
    )
    for args in (
        ("tenant", "create", "acme"),
        ("tenant", "list"),
        ("tenant", "revoke", "acme"),
        ("key", "create", "acme"),
        ("key", "list"),
        ("key", "revoke", "0123456789ab"),
    ):
        assert refused(tmp_path, *args, "--db", "mysql://db/cortex") == (1, message), args


def test_the_help_of_every_db_option_names_its_variable() -> None:
    """A reader told "Missing option '--db'" finds CORTEX_SERVER_DB in the help."""
    commands = ("serve",), ("tenant", "list"), ("key", "create"), ("server", "import"), ("worker",)
    for args in commands:
        result = CliRunner().invoke(cli, [*args, "--help"], obj={})
        assert "[env var: CORTEX_SERVER_DB" in " ".join(result.output.split()), args


def test_worker_tenant_needs_db(tmp_path: Path) -> None:
    assert refused(tmp_path, "worker", "--tenant", "acme", "--once") == (
        2, "error: --tenant needs --db; give the team server's database, or leave --tenant out"
    )  # fmt: skip


def test_key_create_prints_the_key_alone_on_stdout(tmp_path: Path) -> None:
    """``KEY=$(cortex key create ...)`` holds the key, not the reminder after it."""
    db = str(tmp_path / "srv.db")
    env = {**os.environ, "CORTEX_HOME": str(tmp_path / "home")}
    cortex("tenant", "create", "default", "--db", db)
    run = subprocess.run(
        [str(CORTEX), "key", "create", "default", "--db", db],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    key = run.stdout.strip()
    assert run.stdout.count("\n") == 1 and key.startswith("ctx_")
    assert run.stderr == "(shown once; store it now)\n"
    assert ServiceHost(db, tmp_path).authenticate(key) == ("default", ("read", "write"))


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_tenant_key_and_import_record_the_time_now_gives(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``cortex --now T tenant ...``, ``key ...`` and ``server import`` record T, not the
    system clock's time (nor the CORTEX_NOW the helper sets, which the flag overrides): a
    tenant's and a key's creation and revocation, and an imported task that carries no time
    of its own."""
    if backend == "postgres":
        url, name = request.getfixturevalue("pg_url"), f"now-{secrets.token_hex(4)}"
    else:
        url, name = str(tmp_path / "srv.db"), "default"
    home, secret = tmp_path / "home", "now-test-secret-0123456789abcdefghij"

    def run(now: str, *args: str) -> Any:
        done = real_cortex(
            home, "--now", now, "--json", *args, "--db", url,
            env={"CORTEX_SERVER_SECRET": secret},
        )  # fmt: skip
        return json.loads(ok(done))

    assert run("2026-02-16T09:00:00Z", "tenant", "create", name)["created_at"] == (
        "2026-02-16T09:00:00.000000Z"
    )
    made = run("2026-02-16T10:00:00Z", "key", "create", name)
    assert made["created_at"] == "2026-02-16T10:00:00.000000Z"
    listed = run("2026-02-16T10:30:00Z", "key", "list", "--tenant", name)
    assert [k["created_at"] for k in listed] == ["2026-02-16T10:00:00.000000Z"]
    revoked = run("2026-02-16T11:00:00Z", "key", "revoke", made["key_id"])
    assert revoked["revoked_at"] == "2026-02-16T11:00:00.000000Z"

    source = tmp_path / "laptop"
    ok(real_cortex(source, "session", "start", "--project", "api"))  # makes its brain.db
    pipeline = tmp_path / "state.json"
    pipeline.write_text(json.dumps({"active_tasks": [{"task_id": "t1", "stage": "build"}]}))
    brain = str(source / "brain.db")
    run("2026-02-16T12:00:00Z", "server", "import", brain, "--tenant", name, "--pipeline",
        str(pipeline))  # fmt: skip
    host = ServiceHost(url, tmp_path / "reader", clock=FixedClock("2030-01-01T00:00:00Z"))
    try:
        with host.open(name) as app:
            (task,) = app.store.list_tasks()
    finally:
        host.close()
    assert (task.task_id, task.created_at) == ("t1", "2026-02-16T12:00:00.000000Z")

    revoked_tenant = run("2026-02-16T13:00:00Z", "tenant", "revoke", name)
    assert revoked_tenant["revoked_at"] == "2026-02-16T13:00:00.000000Z"


def test_serve_without_the_server_extra_says_what_to_install_before_starting(
    tmp_path: Path,
) -> None:
    """With FastAPI missing, ``cortex serve`` refuses in one line naming the extra, rather than
    starting uvicorn, whose workers would each fail with a traceback."""
    hide = "import sys; sys.modules['fastapi'] = None; from cortex.entry import run; run()"
    done = subprocess.run(
        [sys.executable, "-c", hide, "serve", "--db", str(tmp_path / "srv.db"), "--port", "1"],
        env=dict(os.environ) | {"CORTEX_HOME": str(tmp_path), "CORTEX_SERVER_DB": ""},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr.strip()) == (
        1,
        "error: the team server needs the server extra (fastapi not installed); "
        "pip install 'cortex-continuity[server]'",
    )
    assert not (tmp_path / "srv.db").exists()  # refused before the database was touched


@pytest.mark.parametrize("prefix", ["cortex", "/cortex/", "/my api", "/"])
def test_serve_refuses_a_root_path_that_is_no_path_prefix(prefix: str, tmp_path: Path) -> None:
    assert refused(tmp_path, "serve", "--db", str(tmp_path / "srv.db"), "--root-path", prefix) == (
        2,
        f"error: --root-path {prefix!r} is no path prefix; give one like /cortex (a leading "
        "slash, none at the end)",
    )
