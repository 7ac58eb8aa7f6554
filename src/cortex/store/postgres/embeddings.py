"""Dense vectors of one tenant's memories, per model (float32 little-endian, as ``BYTEA``)."""

from __future__ import annotations

from collections.abc import Sequence

from cortex.core.memory_models import Memory, MemoryFilter
from cortex.store.postgres.db import Runner
from cortex.store.postgres.memories import SELECT, filter_sql
from cortex.store.records import memory_from_row

_MAX_PROBLEMS = 50


class EmbeddingRepository:
    """The memory embeddings of one tenant."""

    def __init__(self, db: Runner) -> None:
        self.db = db

    def save(self, model: str, items: Sequence[tuple[str, int, bytes]]) -> None:
        """Store (memory id, dimension, vector bytes) rows for ``model``, replacing old ones."""
        self.db.executemany(
            "INSERT INTO memory_embeddings (tenant_id, memory_seq, model, dim, vector) "
            "SELECT tenant_id, seq, %s, %s, %s FROM memories WHERE tenant_id = %s AND id = %s "
            "ON CONFLICT (tenant_id, model, memory_seq) "
            "DO UPDATE SET dim = EXCLUDED.dim, vector = EXCLUDED.vector",
            [(model, dim, blob, self.db.tenant, mid) for mid, dim, blob in items],
        )

    def vectors(self, model: str, flt: MemoryFilter, now: str) -> list[tuple[str, bytes]]:
        """(memory id, vector) of ``model`` for the memories ``flt`` sees at ``now``, by ``seq``."""
        where, params = filter_sql(flt, now)
        rows = self.db.rows(
            "SELECT m.id, e.vector FROM memory_embeddings e JOIN memories m "
            "ON m.tenant_id = e.tenant_id AND m.seq = e.memory_seq "
            f"WHERE e.tenant_id = %s AND e.model = %s AND {where} ORDER BY m.seq",
            (self.db.tenant, model, *params),
        )
        return [(str(mid), bytes(vector)) for mid, vector in rows]

    def missing(self, model: str, *, limit: int) -> list[Memory]:
        """Undeleted memories with no vector of ``model`` yet, oldest first."""
        rows = self.db.rows(
            f"SELECT {SELECT} FROM memories m WHERE m.tenant_id = %s AND m.deleted_at IS NULL "
            "AND NOT EXISTS (SELECT 1 FROM memory_embeddings e WHERE e.tenant_id = m.tenant_id "
            "AND e.model = %s AND e.memory_seq = m.seq) ORDER BY m.seq LIMIT %s",
            (self.db.tenant, model, limit),
        )
        return [memory_from_row(r) for r in rows]

    def problems(self) -> list[str]:
        """Vectors whose length does not match their dimension (four bytes a component)."""
        rows = self.db.rows(
            "SELECT m.id, e.model, e.dim, length(e.vector) FROM memory_embeddings e "
            "JOIN memories m ON m.tenant_id = e.tenant_id AND m.seq = e.memory_seq "
            "WHERE e.tenant_id = %s AND length(e.vector) <> 4 * e.dim ORDER BY m.seq LIMIT %s",
            (self.db.tenant, _MAX_PROBLEMS),
        )
        return [
            f"memory {mid}: {model} vector has {size} bytes, not 4 x {dim}"
            for mid, model, dim, size in rows
        ]
