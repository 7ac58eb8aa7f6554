"""What only SQLiteStore has for memories: FTS5, its search plan, and SQLite-only methods.

The memory part of the contract itself runs in test_store_contract.py.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cortex.core.history_models import Checkpoint
from cortex.core.memory_models import MemoryFilter, MemoryLink
from cortex.store import SQLiteStore
from cortex.store.sqlite.migrations import fts5_available
from store_contract import session, t
from store_contract_memory import NOW, check_batch_upserts, memory


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    with SQLiteStore(tmp_path / "brain.db") as opened:
        yield opened


def test_batch_upserts_in_statements_of_a_few_rows(store: SQLiteStore) -> None:
    # A low limit on a statement's parameters: six keys a lookup, two rows an INSERT.
    store.connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 40)
    check_batch_upserts(store)


def test_fts5_is_available_here() -> None:
    assert fts5_available(sqlite3.connect(":memory:"))


def test_search_plan_uses_the_fts_index_and_the_primary_key(store: SQLiteStore) -> None:
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


def test_full_text_ranks_by_bm25_lower_is_better(store: SQLiteStore) -> None:
    store.add_memories(
        [memory("a", "redis broke starlette under load"), memory("b", "redis cache warmed")]
    )
    found = store.full_text('"redis" OR "starlette"', MemoryFilter(), NOW, limit=5)
    assert [m.id for m, _ in found] == ["a", "b"]
    assert found[0][1] < found[1][1] < 0
    relevance = store.search_memories(["redis", "starlette"], MemoryFilter(), NOW, limit=5)
    assert [r for _, r in relevance] == [1.0, found[1][1] / found[0][1]]


def test_search_widens_candidates_when_filters_reject_the_best(store: SQLiteStore) -> None:
    other = [
        memory(f"o{i}", "redis redis redis", scope="project", project="web") for i in range(300)
    ]
    store.add_memories([*other, memory("mine", "redis once among many other words here")])
    found = store.full_text('"redis"', MemoryFilter(project="api"), NOW, limit=5)
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
        assert store.full_text('"kubernetes"', MemoryFilter(), NOW, limit=5) == []
        assert [m.id for m in store.like_memories(["%kube%"], MemoryFilter(), NOW, limit=5)] == [
            "a"
        ]
        found = store.search_memories(["kubernetes"], MemoryFilter(), NOW, limit=5)
        assert [(m.id, r) for m, r in found] == [("a", 0.0)]


def test_like_patterns_match_content_and_tags(store: SQLiteStore) -> None:
    store.add_memories([memory("a", "kubernetes 50% done"), memory("b", "other", tags=("k8s",))])
    assert [m.id for m in store.like_memories(["%bernet%"], MemoryFilter(), NOW, limit=5)] == ["a"]
    assert [m.id for m in store.like_memories(["%k8s%"], MemoryFilter(), NOW, limit=5)] == ["b"]
    assert store.like_memories([], MemoryFilter(), NOW, limit=5) == []


def test_term_counts_and_bounded_like(store: SQLiteStore) -> None:
    store.add_memories([memory(f"m{i}", f"redis note {i}") for i in range(5)])
    store.add_memories([memory("x", "kafka only")])
    assert store.memory_count_estimate() >= 6
    assert store.term_doc_counts(["redis", "kafka", "none"], 3) == {
        "redis": 4,
        "kafka": 1,
        "none": 0,
    }
    old = store.like_memories(["%redis%"], MemoryFilter(), NOW, limit=9, newest=3)
    assert [m.id for m in old] == ["m4", "m3"]


def test_links_of_every_kind_one_hop_live_only(store: SQLiteStore) -> None:
    store.add_memories([memory(i, i) for i in ("a", "b", "c", "d")])
    store.add_memory_link(MemoryLink("a", "b", "relates", t(16)))
    store.add_memory_link(MemoryLink("c", "a", "conflicts", t(16)))
    store.add_memory_link(MemoryLink("a", "d", "relates", t(16)))
    store.delete_memory("d", t(16))
    found = sorted(
        (seed, kind, m.id) for seed, kind, m in store.linked_memories(["a"], MemoryFilter(), NOW)
    )
    assert found == [("a", "conflicts", "c"), ("a", "relates", "b")]


def test_sqlite_only_reads(store: SQLiteStore) -> None:
    store.add_memories([memory("a", "x"), memory("b", "y", scope="project", project="api")])
    store.save_embeddings("m", [("a", 2, b"\x00\x00\x80?\x00\x00\x00\x00")])
    assert [m.id for m in store.memories_without_embedding("m", limit=5)] == ["b"]
    assert store.count_memories(MemoryFilter(), NOW) == 1
    assert store.count_memories(MemoryFilter(all_projects=True), NOW) == 2
    store.save_session(session("s1", t(16)))
    first = Checkpoint("c1", "s1", t(16, 9), "manual", "one", {"pins": [{"label": "x"}]})
    store.save_checkpoint(first)
    assert store.get_checkpoint("c1") == first
    assert store.get_checkpoint("missing") is None


def test_a_supersede_leaves_the_layer_index_alone(store: SQLiteStore) -> None:
    # The layer index holds every memory not deleted: replacing one leaves its entry (no
    # random index page for the old row), and listings skip it by its row.
    conn = store.connection
    store.add_memories([memory("a", "v1", upsert_key="k"), memory("c", "other")])
    assert store.add_memories([memory("b", "v2", upsert_key="k", created_at=t(17))]) == ["a"]

    def indexed() -> list[str]:
        rows = conn.execute(
            "SELECT id FROM memories INDEXED BY idx_memories_layer_undeleted "
            "WHERE memory_layer = 'long_term' AND deleted_at IS NULL ORDER BY seq"
        )
        return [str(r[0]) for r in rows]

    assert indexed() == ["c", "a", "b"]  # a batch stores its unkeyed rows first
    assert [m.id for m in store.list_memories(MemoryFilter(), NOW)] == ["b", "c"]
    history = MemoryFilter(include_history=True)
    assert [m.id for m in store.list_memories(history, NOW)] == ["b", "a", "c"]
    assert store.count_memories(MemoryFilter(), NOW) == 2
    assert store.delete_memory("c", t(17))
    assert indexed() == ["a", "b"]
    where = "m.deleted_at IS NULL AND m.superseded_at IS NULL AND m.memory_layer IN ('rule')"
    plan = conn.execute(
        f"EXPLAIN QUERY PLAN SELECT id FROM memories m WHERE {where} ORDER BY m.seq DESC"
    ).fetchall()
    assert [row[-1] for row in plan] == [
        "SEARCH m USING INDEX idx_memories_layer_undeleted (memory_layer=?)"
    ]
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'index'")}
    assert "idx_memories_layer_undeleted" in names
    dropped = {"idx_memories_live_layer", "idx_memories_confirmed", "idx_memories_layer_expires"}
    assert not names & dropped


# -- a large store's search: a bounded pool, every term in every candidate's score ------------
POOL_MEMORIES = [
    ("a", "Deploying the API: deploy twice, deploy again", ("deploy",)),
    ("b", "the foo_bar helper of the café", ("ops",)),
    ("c", "cafe foo bar, bar foo", ()),
    ("d", "nothing relevant here at all", ()),
    ("e", "deploy", ("cafe", "foo_bar")),
    ("f", "a long note that mentions deploy once among many other words of no interest", ()),
]


def test_pool_scores_are_fts5s_own_bm25(tmp_path: Path) -> None:
    from cortex.core.retrieval import fts_query
    from cortex.store.sqlite.bm25 import PoolScorer
    from cortex.store.sqlite.db import Database

    with SQLiteStore(tmp_path / "brain.db") as store:
        store.add_memories([memory(i, text, tags=tags) for i, text, tags in POOL_MEMORIES])
        seqs = dict(store.connection.execute("SELECT id, seq FROM memories").fetchall())
        # stems (deploying), tags at half weight, repeats, diacritics (café), a phrase (foo_bar)
        terms = ["deploy", "cafe", "foo_bar", "again"]
        exact = dict(
            store.connection.execute(
                "SELECT rowid, rank FROM memories_fts WHERE memories_fts MATCH ?",
                (fts_query(terms),),
            ).fetchall()
        )
    scorer = PoolScorer(Database(tmp_path / "brain.db"))
    rows, tokens = scorer.totals()
    assert rows == len(POOL_MEMORIES)
    # a count past the cap (3) is counted again in full
    docs = scorer.doc_counts(terms, {"deploy": 99, "cafe": 3, "foo_bar": 3, "again": 1}, 3, rows)
    assert docs == {"deploy": 3, "cafe": 3, "foo_bar": 3, "again": 1}
    mine = scorer.scores(sorted(seqs.values()), docs, rows, tokens)
    assert mine[seqs["d"]] == 0.0  # holds no term
    assert {seq: score for seq, score in mine.items() if score} == pytest.approx(exact, abs=1e-12)
    assert len(exact) == 5


def test_a_large_store_ranks_by_every_term(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cortex.core.retrieval as retrieval
    import cortex.store.sqlite.search as search

    contents = [f"filler note {i}" for i in range(40)]
    contents += [f"deploy step {i} done" for i in range(12)]
    contents += [f"zebra sighting number {i} in the old north field" for i in range(3)]
    contents += ["zebra deploy", "deploy log rotated", "zebra deploy done"]
    store.add_memories([memory(f"m{i}", text) for i, text in enumerate(contents)])

    def ranked(terms: list[str], limit: int) -> list[tuple[str, float]]:
        found = store.search_memories(terms, MemoryFilter(), NOW, limit=limit)
        return [(m.content, round(r, 9)) for m, r in found]

    # Below the threshold FTS5 ranks every match: the exact rankings.
    exact = ranked(["zebra", "deploy", "done"], 6)
    exact_common = ranked(["deploy", "done"], 4)
    exact_alone = ranked(["deploy"], 4)
    assert [c for c, _ in exact[:2]] == ["zebra deploy done", "zebra deploy"]
    # Over it, with "deploy" and "done" common (in more than 6 memories) and "zebra" rare,
    # a pool of candidates is scored by all three terms: the same ranking and relevances.
    monkeypatch.setattr(retrieval, "LARGE_STORE", 0)
    monkeypatch.setattr(retrieval, "FREQUENT_DOCS", 6)
    monkeypatch.setattr(retrieval, "RARE_BUDGET_DOCS", 10)
    monkeypatch.setattr(search, "COMMON_SCAN", 1000)
    assert ranked(["zebra", "deploy", "done"], 6) == exact
    # Every term common: ranked by them all (not the newest matches, unranked).
    assert ranked(["deploy", "done"], 4) == exact_common
    assert exact_common[0] == ("zebra deploy done", 1.0)
    # One common term: its weight scales every score alike, the relevances are the same.
    assert ranked(["deploy"], 4) == exact_alone
    monkeypatch.setattr(retrieval, "FREQUENT_DOCS", 1)
    assert ranked(["zebra", "deploy", "done"], 6) == exact


def test_a_large_batch_grows_the_page_cache_to_hold_what_it_dirties(store: SQLiteStore) -> None:
    def cache_kib() -> int:
        return -int(store.connection.execute("PRAGMA cache_size").fetchone()[0])

    default = cache_kib()
    store.add_memories([memory(f"s{i}", f"small batch {i}") for i in range(10)])
    assert cache_kib() == default
    store.add_memories([memory(f"b{i}", f"bulk note {i}") for i in range(400)])
    assert cache_kib() == 8 * 400 > default
    store.add_memories([memory(f"c{i}", f"bulk note {i}") for i in range(300)])
    assert cache_kib() == 8 * 400  # never shrunk by a smaller batch
    store.connection.execute("PRAGMA cache_size = 500")  # in pages: 2,000 KiB at 4 KiB a page
    store.add_memories([memory(f"d{i}", f"bulk note {i}") for i in range(450)])
    assert cache_kib() == 8 * 450
    assert store.count_memories(MemoryFilter(), NOW) == 1160


def _checkpointers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "cortex-checkpoint"]


def test_a_bulk_batch_moves_the_log_into_the_database_from_a_thread_of_its_own(
    tmp_path: Path,
) -> None:
    """After a bulk batch commits, a thread with its own connection checkpoints the log, so
    the next batch does not wait for it; small batches start no thread; ``checkpoint`` waits
    for the thread's checkpoint, and closing stops the thread before the connection closes."""
    path = tmp_path / "brain.db"
    before = len(_checkpointers())
    store = SQLiteStore(path)
    db = store._db

    def log_left() -> tuple[int, int, int]:
        with contextlib.closing(sqlite3.connect(path)) as other:  # what a reader sees
            return other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()

    store.add_memories([memory(f"s{i}", f"small batch {i}") for i in range(10)])
    assert db._checkpointer is None and len(_checkpointers()) == before
    with store.transaction():  # the request waits for the outermost commit
        store.add_memories([memory(f"b{i}", f"bulk note {i}") for i in range(400)])
        assert db._checkpointer is None
    checkpointer = db._checkpointer
    assert checkpointer is not None and len(_checkpointers()) == before + 1
    deadline = time.monotonic() + 30
    while checkpointer.runs == 0:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    busy, log, moved = log_left()
    assert busy == 0 and log == moved > 0  # every frame of the log is in the database
    store.add_memories([memory(f"c{i}", f"bulk note {i}") for i in range(300)])
    store.checkpoint()  # waits for the thread's run, then makes its own
    assert db._checkpointer is None and len(_checkpointers()) == before
    store.add_memories([memory(f"d{i}", f"bulk note {i}") for i in range(300)])
    store.close()
    assert len(_checkpointers()) == before and not Path(f"{path}-wal").exists()
    with SQLiteStore(path) as reopened:
        assert reopened.count_memories(MemoryFilter(), NOW) == 1010
        reopened.manual_checkpoints()  # as the hook server's: no thread either
        reopened.add_memories([memory(f"e{i}", f"bulk note {i}") for i in range(400)])
        assert reopened._db._checkpointer is None


def test_vacuum_after_a_bulk_batch_stops_the_checkpoint_thread_first(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "brain.db") as store:
        store.add_memories([memory(f"b{i}", f"bulk note {i}") for i in range(400)])
        assert store._db._checkpointer is not None
        before, after = store.vacuum()
        assert store._db._checkpointer is None and after <= before
        assert store.count_memories(MemoryFilter(), NOW) == 400


@pytest.mark.skipif(not fts5_available(sqlite3.connect(":memory:")), reason="no FTS5")
def test_vacuum_merges_the_full_text_index_into_one_segment(tmp_path: Path) -> None:
    """Each commit adds a segment to the full-text index; ``vacuum`` merges them (FTS5's
    ``optimize``) and a search finds what it found before, in the same order."""

    def segments(store: SQLiteStore) -> int:
        rows = store._db.rows("SELECT count(DISTINCT segid) FROM memories_fts_idx")
        return int(rows[0][0])

    with SQLiteStore(tmp_path / "brain.db") as store:
        for i in range(12):  # a commit each
            store.add_memories([memory(f"m{i}", f"deploy note {i} for the staging cluster")])
        store.delete_memory("m3", NOW)
        found = store.search_memories(["deploy", "staging"], MemoryFilter(), NOW, limit=20)
        assert segments(store) > 1
        store.vacuum()
        assert segments(store) == 1
        again = store.search_memories(["deploy", "staging"], MemoryFilter(), NOW, limit=20)
        assert [(m.id, r) for m, r in again] == [(m.id, r) for m, r in found]
        assert len(found) == 11 and store._db.rows("PRAGMA integrity_check") == [("ok",)]
    with SQLiteStore(tmp_path / "brain.db") as reopened:  # merged on disk, not in memory
        assert segments(reopened) == 1
        reopened.vacuum()  # a merged index merges again to the same
        assert segments(reopened) == 1


def test_a_failed_bulk_batch_asks_for_no_checkpoint(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "brain.db") as store:
        with pytest.raises(RuntimeError), store.transaction():
            store.add_memories([memory(f"b{i}", f"bulk note {i}") for i in range(400)])
            raise RuntimeError("rolled back")
        store.add_memories([memory("s", "small")])
        assert store._db._checkpointer is None
        assert store.count_memories(MemoryFilter(), NOW) == 1


def test_a_large_batch_lets_the_log_hold_two_batches_before_a_checkpoint(
    tmp_path: Path,
) -> None:
    """A bulk batch raises the pages a commit may leave in the write-ahead log (twice its
    page-cache estimate, in pages of the file); a small batch, or a connection whose
    checkpoints are manual, keeps its setting; what the log holds is in the database once the
    last connection closes."""
    path = tmp_path / "brain.db"
    store = SQLiteStore(path)

    def log_pages() -> int:
        return int(store.connection.execute("PRAGMA wal_autocheckpoint").fetchone()[0])

    store.add_memories([memory(f"s{i}", f"small batch {i}") for i in range(10)])
    assert log_pages() == 1000  # SQLite's default
    store.add_memories([memory(f"b{i}", f"bulk note {i}") for i in range(400)])
    assert log_pages() == 2 * 8 * 400 // 4  # KiB -> pages of 4 KiB
    store.add_memories([memory(f"c{i}", f"bulk note {i}") for i in range(300)])
    assert log_pages() == 1600  # never lowered by a smaller batch
    store.add_memories([memory(f"d{i}", f"bulk note {i}") for i in range(5000)])
    assert log_pages() == 32 * 1024 // 4  # at most 32 MiB
    store.close()
    assert not Path(f"{path}-wal").exists()  # the last connection checkpointed it
    with SQLiteStore(path) as reopened:
        assert reopened.count_memories(MemoryFilter(), NOW) == 5710
        reopened.manual_checkpoints()
        reopened.add_memories([memory(f"e{i}", f"bulk note {i}") for i in range(400)])
        assert reopened.connection.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
