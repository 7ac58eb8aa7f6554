"""Storage: the ``Store`` protocol, the shared migration names and one factory.

Backends load lazily: importing ``cortex.store`` imports no backend (nor ``sqlite3``) until
``open_store`` opens one. ``SQLiteStore`` stays importable from here for tools and tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from cortex.errors import ConfigError
from cortex.store.migrations import SCHEMA_V4, migration_names
from cortex.store.protocol import Store

if TYPE_CHECKING:
    from cortex.store.sqlite.store import SQLiteStore

__all__ = ["SCHEMA_V4", "SQLiteStore", "Store", "migration_names", "open_store"]

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
    from cortex.store.sqlite.store import SQLiteStore

    store: Store = SQLiteStore(text, migrate=migrate)  # mypy checks the protocol here
    return store


def __getattr__(name: str) -> Any:
    if name == "SQLiteStore":
        from cortex.store.sqlite.store import SQLiteStore

        return SQLiteStore
    raise AttributeError(f"module 'cortex.store' has no attribute {name!r}")
