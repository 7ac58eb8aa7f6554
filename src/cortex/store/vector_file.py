"""Vectors kept in a file of their own, by model and key: derived data a process can make
again (a model's vector of a word or a text), kept so that the next process need not.

Not the ``Store``: the file holds nothing a memory does not (a vector is the model's alone),
and losing it costs time, never data. So it fails open: a file that cannot be opened, read
or written is not used again by the process, and the caller computes the vectors as if it
were not there; one that another process holds locked past the timeout is skipped that once.
Created 0600 in a 0700 folder. The search keeps its word vectors in ``<home>/cache/words.db``
(``services.embeddings.word_vectors``); the retrieval benchmark its texts' vectors.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

from cortex.errors import StorageError
from cortex.files import ensure_dir

CHUNK = 500
"""Keys looked up a statement (SQLite builds before 3.32 take 999 parameters)."""


class VectorFile:
    """Vectors (float32 bytes) by (model, key) in a SQLite file, shared by the process's
    threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._failed = False
        self._lock = threading.Lock()

    def get(self, model: str, keys: Sequence[str]) -> dict[str, bytes]:
        """The vectors of ``keys`` the file holds."""
        found: dict[str, bytes] = {}
        for start in range(0, len(keys), CHUNK):
            chunk = list(keys[start : start + CHUNK])
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT key, vector FROM model_vectors WHERE model = ? AND key IN ({marks})"
            found.update(self._run(sql, [[model, *chunk]]))
        return found

    def put(self, model: str, vectors: dict[str, bytes]) -> None:
        """Keep ``vectors`` (key -> vector) for the next processes."""
        sql = "INSERT OR IGNORE INTO model_vectors (model, key, vector) VALUES (?, ?, ?)"
        self._run(sql, [(model, key, blob) for key, blob in vectors.items()])

    def _run(self, sql: str, rows: Sequence[Sequence[object]]) -> list[tuple[str, bytes]]:
        """``sql`` once per row of parameters, in one transaction; what a query returns."""
        with self._lock:
            if self._failed:
                return []
            try:
                if self._db is None:
                    self._db = self._open()
                with self._db:
                    if len(rows) == 1:
                        return list(self._db.execute(sql, rows[0]).fetchall())
                    self._db.executemany(sql, rows)
                    return []
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc):  # another process writing: the next call may not
                    self._failed = True
                return []
            except (sqlite3.Error, OSError, StorageError):
                self._failed = True
                return []

    def _open(self) -> sqlite3.Connection:
        ensure_dir(self.path.parent)
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))  # 0600 whatever the umask
        db = sqlite3.connect(self.path, timeout=1.0, check_same_thread=False)
        db.execute(
            "CREATE TABLE IF NOT EXISTS model_vectors (model TEXT NOT NULL, key TEXT NOT NULL, "
            "vector BLOB NOT NULL, PRIMARY KEY (model, key)) WITHOUT ROWID"
        )
        return db
