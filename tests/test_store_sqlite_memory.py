"""SQLiteStore keeps the memory-lifecycle part of the Store contract, and what only SQLite has."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from cortex.core.memory_models import MemoryFilter
from cortex.store import SQLiteStore
from cortex.store.migrations import fts5_available
from store_contract import NOW, MemoryStoreContract, memory


class TestSQLiteMemoryContract(MemoryStoreContract):
    @pytest.fixture
    def store(self, sqlite_store: SQLiteStore) -> SQLiteStore:
        return sqlite_store


def test_fts5_is_available_here() -> None:
    assert fts5_available(sqlite3.connect(":memory:"))


def test_search_plan_uses_the_fts_index_and_the_primary_key(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "brain.db") as store:
        conn = store.connection
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT rowid, rank FROM memories_fts WHERE memories_fts MATCH ? "
            "ORDER BY rank LIMIT 10",
            ('"x"',),
        ).fetchall()
        assert any("VIRTUAL TABLE INDEX" in row[-1] for row in plan)
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM memories m WHERE m.seq IN (1, 2) "
            "AND m.deleted_at IS NULL"
        ).fetchall()
        assert any("INTEGER PRIMARY KEY" in row[-1] for row in plan)


def test_search_widens_candidates_when_filters_reject_the_best(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "brain.db") as store:
        other = [
            memory(f"o{i}", "redis redis redis", scope="project", project="web") for i in range(300)
        ]
        store.add_memories([*other, memory("mine", "redis once among many other words here")])
        found = store.search_memories('"redis"', MemoryFilter(project="api"), NOW, limit=5)
        assert [m.id for m, _ in found] == ["mine"]


def test_a_database_without_the_fts_table_falls_back(tmp_path: Path) -> None:
    db = tmp_path / "brain.db"
    with SQLiteStore(db) as store:
        # As m006 leaves a database on a SQLite built without FTS5: no index, no triggers.
        for name in ("memories_fts_ai", "memories_fts_ad", "memories_fts_au"):
            store.connection.execute(f"DROP TRIGGER {name}")
        store.connection.execute("DROP TABLE memories_fts")
    with SQLiteStore(db) as store:
        store.add_memories([memory("a", "kubernetes")])
        assert store.has_fts() is False
        assert store.search_memories('"kubernetes"', MemoryFilter(), NOW, limit=5) == []
        assert [m.id for m in store.like_memories(["%kube%"], MemoryFilter(), NOW, limit=5)] == [
            "a"
        ]
