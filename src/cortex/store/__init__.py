"""Storage: the ``Store`` protocol, the shared migration names and one factory.

Backends load lazily: importing ``cortex.store`` imports no backend (nor ``sqlite3``, nor
psycopg) until ``open_store`` opens one. ``SQLiteStore`` stays importable from here for tools
and tests. The protocols (``cortex.store.protocol``) are for the type checker: modules import
them under ``TYPE_CHECKING``, and from here they load at first use.
"""

from __future__ import annotations

from pathlib import Path

import cortex.codecache  # noqa: F401 - before the models: their dataclass methods come compiled
from cortex.errors import ConfigError
from cortex.store.migrations import SCHEMA_V4, migration_names

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

    from cortex.store.protocol import SharedStore, Store
    from cortex.store.sqlite.store import SQLiteStore

__all__ = [
    "DEFAULT_TENANT",
    "SCHEMA_V4",
    "SQLiteStore",
    "SharedStore",
    "Store",
    "migration_names",
    "open_shared_store",
    "open_store",
    "open_store_copy",
    "postgres_url",
]

_POSTGRES_SCHEMES = ("postgresql://", "postgres://")
DEFAULT_TENANT = "default"
"""The tenant of a store opened without one: a SQLite file holds one person's data, always it."""


def postgres_url(url: str | Path) -> bool:
    """True for a PostgreSQL URL, False for a SQLite path (or ``:memory:``).

    Raises:
        ConfigError: ``url`` is a URL of another scheme (``mysql://...``).
    """
    text = str(url)
    if text.startswith(_POSTGRES_SCHEMES):
        return True
    if "://" in text:
        scheme = text.split("://", 1)[0]
        raise ConfigError(
            f"unsupported store URL scheme {scheme!r}; use a SQLite path or a postgresql:// URL"
        )
    return False


def open_store(
    url: str | Path,
    *,
    migrate: bool = True,
    tenant: str = DEFAULT_TENANT,
    migrate_max_bytes: int | None = None,
    busy_timeout_ms: int | None = None,
) -> Store:
    """Open the store at ``url``: a SQLite file path, ``:memory:`` or a PostgreSQL URL.

    Args:
        url: where the store lives.
        migrate: apply pending migrations before returning (the default).
        tenant: whose data the store holds (PostgreSQL only; SQLite has just the default).
        migrate_max_bytes: with ``migrate``, the largest SQLite file migrated here; a larger
            one with migrations pending raises ``MigrationDeferredError`` (a PostgreSQL
            database is always migrated).
        busy_timeout_ms: SQLite only: how long a write waits for another process's write
            lock before it fails (None: the store's default, 5 s).

    Returns:
        A ``Store``; the caller closes it.

    Raises:
        ConfigError: ``url`` names a backend this install cannot open, or ``tenant`` is
            not the default on SQLite.
        StorageError: the database cannot be created, opened or migrated.
        MigrationDeferredError: migrations are pending on a file over ``migrate_max_bytes``.
    """
    text = str(url)
    if postgres_url(text):
        return _open_postgres(text, tenant, migrate)
    if tenant != DEFAULT_TENANT:
        raise ConfigError(
            f"tenant {tenant!r} needs a postgresql:// store; a SQLite file holds one "
            f"person's data (tenant {DEFAULT_TENANT!r})"
        )
    from cortex.store.sqlite.store import SQLiteStore

    # mypy checks the protocol here
    if busy_timeout_ms is None:
        store: Store = SQLiteStore(text, migrate=migrate, migrate_max_bytes=migrate_max_bytes)
    else:
        store = SQLiteStore(
            text,
            migrate=migrate,
            migrate_max_bytes=migrate_max_bytes,
            busy_timeout_ms=busy_timeout_ms,
        )
    return store


def open_store_copy(path: str | Path) -> Store:
    """An in-memory store holding a copy of the SQLite database at ``path``, read without
    writing anything beside it and migrated in memory (``SQLiteStore.copy_of``): what a home
    this process cannot write can still be read for. Its writes go nowhere.

    Raises:
        StorageError: the file cannot be read (whole and unchanged) without writing.
    """
    from cortex.store.sqlite.store import SQLiteStore

    store: Store = SQLiteStore.copy_of(path)  # mypy checks the protocol here
    return store


def _open_postgres(url: str, tenant: str, migrate: bool) -> Store:
    """A ``PostgresStore``; psycopg is imported only now, and only if installed."""
    try:
        from cortex.store.postgres import PostgresStore
    except ImportError as exc:
        if exc.name not in ("psycopg", "psycopg_pool") and "psycopg" not in str(exc):
            raise
        raise ConfigError(
            "PostgreSQL support is not installed; run pip install 'cortex-continuity[postgres]'"
        ) from exc
    store: Store = PostgresStore(url, tenant, migrate=migrate)  # mypy checks the protocol here
    return store


def open_shared_store(
    url: str, *, pool_size: int = 10, lock_timeout: float | None = None
) -> SharedStore:
    """The migrated default-tenant store of a PostgreSQL database, owning a pool of
    ``pool_size`` connections that ``for_tenant`` stores share (a server process's), whose
    statements wait at most ``lock_timeout`` seconds for a lock (None: no bound)."""
    if not url.startswith(_POSTGRES_SCHEMES):
        raise ConfigError(
            f"a shared store needs a postgresql:// URL, not {url!r}; give one like "
            "postgresql://cortex@localhost/cortex"
        )
    try:
        from cortex.store.postgres import PostgresStore
    except ImportError as exc:
        raise ConfigError(
            "PostgreSQL support is not installed; run pip install 'cortex-continuity[postgres]'"
        ) from exc
    store: SharedStore = PostgresStore(
        url, DEFAULT_TENANT, pool_size=pool_size, lock_timeout=lock_timeout
    )
    return store


def __getattr__(name: str) -> Any:
    """``SQLiteStore`` and the protocols, imported at first use: the protocols are for type
    checking (the modules that name them import them under ``TYPE_CHECKING``), and defining
    their few hundred methods cost every process ~0.4 ms for nothing."""
    if name == "SQLiteStore":
        from cortex.store.sqlite.store import SQLiteStore

        return SQLiteStore
    if name in ("SharedStore", "Store"):
        from cortex.store import protocol

        return getattr(protocol, name)
    raise AttributeError(f"module 'cortex.store' has no attribute {name!r}")
