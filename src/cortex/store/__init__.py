"""Storage: the ``Store`` protocol, its SQLite implementation, migrations and one factory."""

from __future__ import annotations

from pathlib import Path

from cortex.errors import ConfigError
from cortex.store.migrations import MIGRATIONS, SCHEMA_V4, Migration, migration_names
from cortex.store.protocol import Store
from cortex.store.sqlite.store import SQLiteStore

__all__ = [
    "MIGRATIONS",
    "SCHEMA_V4",
    "Migration",
    "SQLiteStore",
    "Store",
    "migration_names",
    "open_store",
]

_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def open_store(url: str | Path, *, migrate: bool = True) -> Store:
    """Open the store at ``url``: a SQLite file path or ``:memory:``.

    Args:
        url: where the store lives.
        migrate: apply pending migrations before returning (the default).

    Returns:
        A ``Store``; the caller closes it.

    Raises:
        ConfigError: ``url`` names a backend this install cannot open.
        StorageError: the database cannot be created, opened or migrated.
    """
    text = str(url)
    if text.startswith(_POSTGRES_SCHEMES):
        raise ConfigError("PostgreSQL support is not installed in this version; use a SQLite path")
    if "://" in text:
        scheme = text.split("://", 1)[0]
        raise ConfigError(f"unsupported store URL scheme {scheme!r}; use a SQLite path")
    return SQLiteStore(text, migrate=migrate)
