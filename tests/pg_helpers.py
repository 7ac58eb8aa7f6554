"""PostgreSQL for the tests: a scratch database per test run, a fresh tenant per test.

The server is ``CORTEX_TEST_POSTGRES_URL`` (default: the local one, user ``postgres``).
Where it cannot be reached the PostgreSQL tests skip, saying why, unless
``CORTEX_TEST_POSTGRES=1`` (CI sets it): then they fail, so CI never passes by skipping them.
Test modules import the fixtures they use from here.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, NoReturn
from urllib.parse import urlsplit

import pytest

if TYPE_CHECKING:
    from cortex.store.postgres import PostgresStore

URL_ENV = "CORTEX_TEST_POSTGRES_URL"
REQUIRED_ENV = "CORTEX_TEST_POSTGRES"
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def server_url() -> str:
    """The maintenance database of the test server (where databases are created)."""
    return os.environ.get(URL_ENV) or DEFAULT_URL


def unavailable(reason: str) -> NoReturn:
    """Skip, or fail when CI requires PostgreSQL."""
    if os.environ.get(REQUIRED_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRED_ENV}=1 requires PostgreSQL)", pytrace=False)
    pytest.skip(f"{reason}; set {URL_ENV} to a server, or {REQUIRED_ENV}=1 to fail instead")


def database_url(name: str) -> str:
    """The URL of database ``name`` on the test server."""
    return urlsplit(server_url())._replace(path=f"/{name}").geturl()


def admin(sql: str) -> None:
    """Run one statement on the maintenance database (CREATE/DROP DATABASE)."""
    import psycopg

    with psycopg.connect(server_url(), autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql)


def new_database() -> str:
    """Create an empty scratch database; return its name."""
    name = f"cortex_test_{secrets.token_hex(5)}"
    admin(f'CREATE DATABASE "{name}"')
    return name


def drop_database(name: str) -> None:
    admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_driver() -> None:
    """psycopg and psycopg_pool, installed (the ``postgres`` extra)."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        unavailable("psycopg is not installed (pip install -e '.[dev,postgres]')")


@pytest.fixture(scope="session")
def pg_url(pg_driver: None) -> Iterator[str]:
    """A scratch database for this test run, dropped at its end."""
    import psycopg

    try:
        psycopg.connect(server_url(), connect_timeout=3).close()
    except psycopg.Error as exc:
        unavailable(f"PostgreSQL at {server_url()} is unreachable: {' '.join(str(exc).split())}")
    name = new_database()
    try:
        yield database_url(name)
    finally:
        drop_database(name)


@pytest.fixture(scope="session")
def pg_root(pg_url: str) -> Iterator[PostgresStore]:
    """The run's store: it migrates the scratch database once and owns the shared pool."""
    from cortex.store.postgres import PostgresStore

    store = PostgresStore(pg_url, "root")
    yield store
    store.close()


@pytest.fixture
def pg_store(pg_root: PostgresStore) -> PostgresStore:
    """A store of a tenant no other test uses: a clean state without truncating anything."""
    return pg_root.for_tenant(f"test-{secrets.token_hex(6)}")


@pytest.fixture
def fresh_database(pg_url: str) -> Iterator[str]:
    """The URL of an empty database of its own (for migration tests), dropped afterwards."""
    name = new_database()
    try:
        yield database_url(name)
    finally:
        drop_database(name)


def waiting_or_done(thread: threading.Thread, url: str, timeout: float = 10) -> bool:
    """Wait until ``thread`` ended, or until a connection of database ``url`` waits for a lock
    (a writer it started is held by another transaction); True when one waits.

    What a race test needs to interleave two transactions exactly, with no sleeps: on the code
    that locks, the second writer is seen waiting; on the code that does not, it ends."""
    import psycopg

    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        while thread.is_alive() and time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchone()
            if row is not None and row[0] > 0:
                return True
            time.sleep(0.01)
    assert not thread.is_alive(), "the writer neither ended nor waited for a lock"
    return False


class Holder:
    """A transaction of another connection (an operator's psql, a stuck request) holding one
    session's row locked until ``release``."""

    def __init__(self, url: str, tenant: str, session_id: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url)
        found = self.conn.execute(
            "SELECT id FROM session_states WHERE tenant_id = %s AND id = %s FOR UPDATE",
            (tenant, session_id),
        ).fetchall()
        assert found == [(session_id,)]

    def release(self) -> None:
        self.conn.rollback()
        self.conn.close()
