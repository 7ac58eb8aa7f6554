"""Dense vectors per memory and model over SQLite (the optional ``[embeddings]`` extra)."""

from __future__ import annotations

from collections.abc import Sequence

from cortex.core.memory_models import Memory, MemoryFilter
from cortex.store.records import memories_from_rows
from cortex.store.sqlite.db import Database
from cortex.store.sqlite.memories import COLUMNS, filter_sql


class EmbeddingRepository:
    """The ``EmbeddingStore`` part of the protocol; vectors are keyed by memory ``seq``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def save_embeddings(self, model: str, items: Sequence[tuple[str, int, bytes]]) -> None:
        """Store (memory id, dimension, float32 vector bytes) for ``model``."""
        with self._db.transaction():
            self._db.run_many(
                "INSERT OR REPLACE INTO memory_embeddings (memory_seq, model, dim, vector) "
                "SELECT seq, ?, ?, ? FROM memories WHERE id = ?",
                [(model, dim, blob, mid) for mid, dim, blob in items],
            )

    def embedding_vectors(self, model: str, flt: MemoryFilter, now: str) -> list[tuple[str, bytes]]:
        """(memory id, vector) of ``model`` for the memories ``flt`` sees at ``now``, by ``seq``."""
        where, params = filter_sql(flt, now)
        rows = self._db.rows(
            "SELECT m.id, e.vector FROM memory_embeddings e "
            f"JOIN memories m ON m.seq = e.memory_seq WHERE e.model = ? AND {where} "
            "ORDER BY e.memory_seq",
            (model, *params),
        )
        return [(str(mid), bytes(vector)) for mid, vector in rows]

    def memories_without_embedding(self, model: str, *, limit: int) -> list[Memory]:
        """Memories not forgotten that have no vector of ``model`` yet, oldest first."""
        rows = self._db.rows(
            f"SELECT {COLUMNS} FROM memories m WHERE m.deleted_at IS NULL AND NOT EXISTS ("
            "SELECT 1 FROM memory_embeddings e WHERE e.model = ? AND e.memory_seq = m.seq) "
            "ORDER BY m.seq LIMIT ?",
            (model, limit),
        )
        return memories_from_rows(rows)
