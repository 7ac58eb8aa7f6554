"""The SQLite backend: the embedded default store."""

from cortex.store.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore"]
