"""``cortex serve`` (the team server), ``cortex tenant`` and ``cortex key`` (its registry).

Management works on the database directly (``--db``), never over HTTP. ``serve`` replaces
its process with uvicorn over the server's app factory (so the CLI never imports FastAPI, and
a SIGTERM to it reaches uvicorn, which stops its workers).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from cortex.adapters.cli.runtime import (
    CONTEXT,
    Runtime,
    UsageLine,
    check_listen,
    database,
    filled,
    listen_address,
    number_option,
    pass_rt,
    server_host,
)
from cortex.core.server_numbers import (
    BURST,
    DATA_ENV,
    DB_ENV,
    LOCK_TIMEOUT,
    POOL,
    RATE,
    SECRET_ENV,
    TURN_BATCHES,
)
from cortex.errors import ConfigError
from cortex.services.app import Services
from cortex.services.hosting import check_server_secret

DB = click.option(
    "--db",
    "db_url",
    required=True,
    envvar=DB_ENV,
    show_envvar=True,
    callback=database,
    help="postgresql:// URL of the server's database (or a SQLite path).",
)


def _registry(
    rt: Runtime, db_url: str, *, tenant: str | None = None, read: bool = False
) -> Services:
    """The registry of ``db_url``; for a change to ``tenant``, once the database can serve it;
    to ``read`` only, once the database exists (a listing never creates one); at the
    command's time (the times of a creation or revocation follow ``--now``)."""
    host = server_host(rt, db_url)  # (a URL of another scheme is refused here, as such)
    if tenant is not None:
        host.check_served(tenant)
    # os.path.exists: False, not OSError, for a path the system refuses (a name too long)
    if read and not host.postgres and not os.path.exists(db_url):
        raise ConfigError(
            f"no database at {db_url}; check the path (`cortex tenant create` makes one)"
        )
    app = host.registry()
    click.get_current_context().call_on_close(app.close)
    return app


@click.command("serve", context_settings=CONTEXT)
@DB
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    callback=listen_address,
    help="Address to listen on (0.0.0.0: every interface).",
)
@click.option("--port", default=8077, show_default=True, type=click.IntRange(1, 65535))
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64))
@number_option(POOL, "PostgreSQL connections per worker process")
@number_option(TURN_BATCHES, "Batches of captured turns a worker writes at once, each one "
         "transaction (PostgreSQL; 0: a transaction per turn)")  # fmt: skip
@number_option(RATE, "Requests a second each API key may make on average, per worker process "
         "(the dashboard's included)")  # fmt: skip
@number_option(BURST, "Requests each API key may make at once, per worker process")
@number_option(LOCK_TIMEOUT, "How long a request waits for a session another request or "
         "transaction holds, then answers 503 with Retry-After (PostgreSQL)")  # fmt: skip
@click.option("--shutdown-timeout", default=30, show_default=True, metavar="SECONDS",
              type=click.IntRange(1, 3600),
              help="Seconds a SIGTERM waits for the requests in flight; those still running "
              "then are dropped unanswered (their transactions roll back; clients retry them "
              "with their request ids).")  # fmt: skip
@click.option("--root-path", default="", metavar="PATH", callback=lambda _c, _p, v: _root_path(v),
              help="The path prefix a reverse proxy serves the API under (e.g. /cortex), for "
              "the links the server writes (the /docs page's).")  # fmt: skip
@click.option("--access-log", is_flag=True,
              help="Log every request to stdout (off: it costs CPU on every request).")  # fmt: skip
@pass_rt
def serve(
    rt: Runtime,
    db_url: str,
    host: str,
    port: int,
    workers: int,
    pool_size: int,
    turn_batches: int,
    rate: float,
    burst: int,
    lock_timeout: float,
    shutdown_timeout: int,
    root_path: str,
    access_log: bool,
) -> None:
    """Run the HTTP API (uvicorn) over the database; rate limits are per worker process.

    On PostgreSQL, CORTEX_SERVER_SECRET (from the environment, never a flag) must hold the
    server secret every tenant's metrics key is derived from: give every server the same one.

    \b
    Example:
      CORTEX_SERVER_SECRET=$(cat /run/secrets/cortex) \\
        cortex serve --db postgresql://cortex@db/cortex --host 0.0.0.0 --workers 4
      cortex serve --db postgresql://cortex@db/cortex --access-log   # a line per request
      cortex serve --db postgresql://cortex@db/cortex --rate 200 --burst 400
      cortex serve --db postgresql://cortex@db/cortex --shutdown-timeout 10
      cortex serve --db postgresql://cortex@db/cortex --root-path /cortex   # behind a proxy
    """
    # Here, as one line: a worker process would print a traceback.
    _check_server_extra()
    how = "export the server secret (e.g. `openssl rand -hex 32`, the same on every server) "
    check_server_secret(db_url, rt.env.get(SECRET_ENV), how + "before `cortex serve`")
    check = server_host(rt, db_url)
    try:
        check.check_database()  # as one line too: uvicorn would start and fail every request
        for problem in check.invalid_configs():  # served 503 until fixed; the others serve
            click.echo(f"warning: {problem}; its requests answer 503 until it is fixed", err=True)
    finally:
        check.close()
    env = dict(rt.env) | {
        DB_ENV: db_url,
        DATA_ENV: str(rt.config.home / "server"),
        POOL.env: str(pool_size),
        TURN_BATCHES.env: str(turn_batches),
        RATE.env: repr(rate),
        BURST.env: str(burst),
        LOCK_TIMEOUT.env: repr(lock_timeout),
    }
    check_listen(host, port)
    args = ["--factory", "cortex.adapters.server.app:app_from_env", "--host", host]
    args += ["--port", str(port), "--workers", str(workers)]
    args += ["--timeout-graceful-shutdown", str(shutdown_timeout)]
    args += ["--root-path", root_path] if root_path else []
    args += [] if access_log else ["--no-access-log"]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "uvicorn", *args], env)


def _root_path(value: str) -> str:
    """``--root-path`` as uvicorn takes it: empty, or ``/`` and a path with no trailing one."""
    if value and (
        not value.startswith("/") or value.endswith("/") or any(c.isspace() for c in value)
    ):
        raise UsageLine(
            f"--root-path {value!r} is no path prefix; give one like /cortex (a leading slash, "
            "none at the end)"
        )
    return value


def _check_server_extra() -> None:
    """Refuse in one line when the server's packages are missing (uvicorn would start and
    its workers fail with a traceback, or ``python -m uvicorn`` would not be found)."""
    from importlib.util import find_spec

    missing = [name for name in ("fastapi", "uvicorn") if find_spec(name) is None]
    if missing:
        raise ConfigError(
            f"the team server needs the server extra ({' and '.join(missing)} not installed); "
            "pip install 'cortex-continuity[server]'"
        )


@click.group(context_settings=CONTEXT)
def tenant() -> None:
    """The server's tenants: create, list, revoke.

    \b
    Example:
      cortex tenant create acme --db postgresql://cortex@db/cortex
    """


@tenant.command("create", context_settings=CONTEXT)
@click.argument("name")
@DB
@pass_rt
def tenant_create(rt: Runtime, name: str, db_url: str) -> None:
    """Register a tenant (a-z, 0-9, '_' and '-').

    \b
    Example:
      cortex tenant create acme --db postgresql://cortex@db/cortex
    """
    record = _registry(rt, db_url, tenant=name).tenants.create_tenant(name)
    rt.emit(record.to_dict(), f"created tenant {record.tenant}")


@tenant.command("list", context_settings=CONTEXT)
@DB
@pass_rt
def tenant_list(rt: Runtime, db_url: str) -> None:
    """List every tenant, revoked ones too.

    \b
    Example:
      cortex --json tenant list --db postgresql://cortex@db/cortex
    """
    found = _registry(rt, db_url, read=True).tenants.list_tenants()
    rt.emit(
        [t.to_dict() for t in found],
        "\n".join(f"{t.tenant}  {t.created_at}  {t.revoked_at or 'live'}" for t in found)
        or "no tenants",
    )


@tenant.command("revoke", context_settings=CONTEXT)
@click.argument("name")
@DB
@pass_rt
def tenant_revoke(rt: Runtime, name: str, db_url: str) -> None:
    """Revoke a tenant: every key of it fails from its next request on (data is kept).

    \b
    Example:
      cortex tenant revoke acme --db postgresql://cortex@db/cortex
    """
    record = _registry(rt, db_url).tenants.revoke_tenant(name)
    rt.emit(record.to_dict(), f"revoked tenant {record.tenant}")


@click.group(context_settings=CONTEXT)
def key() -> None:
    """API keys of the server's tenants: create (shown once), list, revoke.

    \b
    Example:
      cortex key create acme --scopes read,write --db postgresql://cortex@db/cortex
    """


@key.command("create", context_settings=CONTEXT)
@click.argument("tenant_name")
@click.option("--scopes", default="read,write", show_default=True, help="read, write, admin.")
@click.option("--label", default="", help="What the key is for.")
@DB
@pass_rt
def key_create(rt: Runtime, tenant_name: str, scopes: str, label: str, db_url: str) -> None:
    """Create an API key; it is printed this once and only its hash is stored.

    \b
    Example:
      cortex key create acme --scopes read --label ci --db postgresql://cortex@db/cortex
    """
    registry = _registry(rt, db_url, tenant=tenant_name)
    record, plaintext = registry.tenants.create_key(tenant_name, scopes, label=label)
    rt.emit(record.to_dict() | {"key": plaintext}, plaintext)
    if not rt.as_json:  # on stderr, so that KEY=$(cortex key create ...) holds the key alone
        click.echo("(shown once; store it now)", err=True)


@key.command("list", context_settings=CONTEXT)
@click.option(
    "--tenant",
    "tenant_name",
    help="Only this tenant's keys.",
    callback=filled("every tenant's keys", "a tenant name"),
)
@DB
@pass_rt
def key_list(rt: Runtime, tenant_name: str | None, db_url: str) -> None:
    """List keys (never their secrets).

    \b
    Example:
      cortex key list --tenant acme --db postgresql://cortex@db/cortex
    """
    found = _registry(rt, db_url, read=True).tenants.list_keys(tenant_name)
    rt.emit(
        [k.to_dict() for k in found],
        "\n".join(
            f"{k.key_id}  {k.tenant}  {','.join(k.scopes)}  {k.revoked_at or 'live'}  {k.label}"
            for k in found
        )
        or "no keys",
    )


@key.command("revoke", context_settings=CONTEXT)
@click.argument("key_id")
@DB
@pass_rt
def key_revoke(rt: Runtime, key_id: str, db_url: str) -> None:
    """Revoke a key by its id: it fails from its next request on.

    \b
    Example:
      cortex key revoke 3f2a9c1e0b7d --db postgresql://cortex@db/cortex
    """
    record = _registry(rt, db_url).tenants.revoke_key(key_id)
    rt.emit(record.to_dict(), f"revoked key {record.key_id}")


@click.group("server", context_settings=CONTEXT)
def server() -> None:
    """Server data: import a local brain.db into a tenant.

    \b
    Example:
      cortex server import ~/.cortex/brain.db --tenant acme --db postgresql://cortex@db/cortex
    """


@server.command("import", context_settings=CONTEXT)
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--tenant", "tenant_name", required=True, help="The tenant to import into.")
@click.option(
    "--pipeline",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The pipeline state file whose tasks to import (default: the one of the home that "
    "holds the brain.db).",
)
@DB
@pass_rt
def server_import(
    rt: Runtime, path: Path, tenant_name: str, pipeline: Path | None, db_url: str
) -> None:
    """Copy everything of a local SQLite brain.db into a tenant, once (a re-run adds nothing).

    Sessions, memories (with their supersession links), memory links, session events,
    snapshots, checkpoints, compaction events and audit rows are copied verbatim. Metrics
    events are re-chained under the tenant's key (derived from CORTEX_SERVER_SECRET, which
    must be set): same names, sessions, payloads and times, new seq and hashes, so that
    `metrics verify` passes on the server. The home's pipeline tasks become the tenant's
    tasks (one the tenant already holds stays as it is). A file no Cortex made (an empty one,
    another program's SQLite file) is refused, and no table is added to it. Progress goes to
    stderr; --json prints the counts.

    \b
    Example:
      CORTEX_SERVER_SECRET=... cortex --json server import ~/.cortex/brain.db \\
        --tenant acme --db postgresql://cortex@db/cortex
    """
    from cortex.services.transfer import import_file

    secret = rt.env.get(SECRET_ENV)
    if not secret:
        raise ConfigError(
            f"{SECRET_ENV} is not set; export the servers' secret (metrics are re-chained "
            "under the tenant's key derived from it)"
        )
    host = server_host(rt, db_url, secret=secret)

    def progress(table: str, done: int) -> None:
        click.echo(f"import: {table}: {done} rows", err=True)

    path = path.expanduser()
    tasks = pipeline.expanduser() if pipeline else _home_pipeline(rt, path)
    summary = import_file(path, host, tenant_name, progress, tasks)
    counts = summary.to_dict()
    rt.emit(
        {"tenant": tenant_name, "source": str(path), "tables": counts},
        "\n".join(f"{t}: {c['added']} added of {c['read']}" for t, c in counts.items()),
    )


def _home_pipeline(rt: Runtime, db: Path) -> Path:
    """The pipeline file of the home that holds ``db``: this home's settings when it is this
    home's database, else those of its directory."""
    from cortex.config import load_config

    if db.resolve() == rt.config.db_path.resolve():
        return rt.config.pipeline_state_path
    return load_config(db.parent, env={}).pipeline_state_path


def register(group: click.Group) -> None:
    """Add ``serve``, ``tenant``, ``key`` and ``server`` to the CLI."""
    for command in (serve, tenant, key, server):
        group.add_command(command)
