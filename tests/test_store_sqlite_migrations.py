"""SQLiteStore's migrations: names and order, recording, and legacy brain.db files in place."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cortex.core.memory_models import MemoryFilter, MemoryLink
from cortex.core.models import PendingTask, Pin
from cortex.errors import MigrationDeferredError, StorageError
from cortex.store import SCHEMA_V4, SQLiteStore, migration_names, open_store
from cortex.store.sqlite import db as sqlite_db
from cortex.store.sqlite.migrations import MIGRATIONS, m012_memory_embeddings
from store_contract import full_session, t
from store_contract_memory import memory

# The spec's own statement, comments and all, as an older brain.db has it.
SPEC_SCHEMA = """
CREATE TABLE IF NOT EXISTS session_states (
    -- Primary identity
    id TEXT PRIMARY KEY,                     -- UUID (session_id)
    start_time TEXT NOT NULL,                -- ISO 8601
    end_time TEXT,                           -- NULL = active or crashed
    channel TEXT DEFAULT 'unknown',          -- "signal", "cli", etc.
    working_memory TEXT NOT NULL DEFAULT '[]',    -- WorkingMemoryPin[]
    hot_topics TEXT NOT NULL DEFAULT '[]',        -- string[]
    active_projects TEXT NOT NULL DEFAULT '[]',   -- string[]
    pending_tasks TEXT NOT NULL DEFAULT '[]',     -- PendingTask[]
    recent_learnings TEXT NOT NULL DEFAULT '[]',       -- string[] (memory IDs)
    confidence_updates TEXT NOT NULL DEFAULT '[]',     -- ConfidenceUpdate[]
    sop_interactions TEXT NOT NULL DEFAULT '[]',       -- SOPInteraction[]
    previous_session_id TEXT,               -- FK -> prior session ID (nullable)
    continued_by TEXT,                      -- Set by next session on load
    crash_recovered INTEGER DEFAULT 0,      -- 1 if recovered from unclean shutdown
    schema_version INTEGER DEFAULT 1,
    created_at TEXT NOT NULL,
    updated_at TEXT
);
CREATE INDEX IF NOT EXISTS idx_session_endtime ON session_states(end_time, start_time);
CREATE INDEX IF NOT EXISTS idx_session_prev ON session_states(previous_session_id);
CREATE INDEX IF NOT EXISTS idx_session_channel ON session_states(channel, start_time);
"""


def test_migration_names_and_order() -> None:
    names = migration_names()
    assert names == [
        "m001_session_states",
        "m002_session_continuity_columns",
        "m003_metrics",
        "m004_audit_log",
        "m005_memories",
        "m006_memory_fts",
        "m007_memory_links",
        "m008_session_events",
        "m009_session_snapshots",
        "m010_checkpoints",
        "m011_compaction_events",
        "m012_memory_embeddings",
        "m013_tenants_and_keys",
        "m014_request_ids",
        "m015_memory_hygiene",
        "m017_protocol",
        "m018_tenant_tasks",
        "m019_drop_memory_key_index",
        "m021_memory_session_order",
        "m023_memory_supersede_indexes",
        "m024_memory_supersedes_column",
        "m025_memory_embeddings_in_rows",
        "m026_open_sessions_by_start",
    ]
    assert names == sorted(names) == [m.name for m in MIGRATIONS]
    assert SCHEMA_V4 == "m001_session_states"


def test_migrations_are_recorded(tmp_path: Path) -> None:
    db = tmp_path / "brain.db"
    store = open_store(db)
    store.close()
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT name, applied_at FROM _cortex_migrations ORDER BY rowid")
        recorded = rows.fetchall()
    assert [name for name, _ in recorded] == migration_names()
    assert all(at.endswith("Z") for _, at in recorded)


def test_reopen_is_idempotent(tmp_path: Path) -> None:
    db = tmp_path / "brain.db"
    with SQLiteStore(db) as first:
        first.save_session(full_session("s1"))
        applied = first.applied_migrations()
    with SQLiteStore(db) as second:
        assert second.migrate() == []
        assert second.applied_migrations() == applied
        assert second.get_session("s1") == full_session("s1")


def test_migrate_false_leaves_schema_alone(tmp_path: Path) -> None:
    store = open_store(tmp_path / "brain.db", migrate=False)
    assert store.applied_migrations() == []
    with pytest.raises(StorageError, match="not migrated.*cortex db migrate"):
        store.count_sessions()
    assert store.migrate() == migration_names()
    assert store.count_sessions() == 0
    store.close()


def _make_legacy_db(db: Path) -> None:
    """A brain.db as the spec's _init_schema() leaves it, with an older metrics table."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.executescript(SPEC_SCHEMA)
        conn.execute("CREATE TABLE metrics (id INTEGER PRIMARY KEY, name TEXT, value REAL)")
        conn.execute("INSERT INTO metrics (name, value) VALUES ('recall', 0.9)")
        pins = '[{"label":"db","content":"use WAL","pinnedAt":"2026-02-01T09:00:00Z",'
        pins += '"importance":"CRITICAL","confidence":0.8}]'
        tasks = '[{"task_id":"t1","title":"Ship","stage":"build","flagged_incomplete":true}]'
        conn.execute(
            "INSERT INTO session_states (id, start_time, end_time, channel, working_memory, "
            "hot_topics, pending_tasks, previous_session_id, crash_recovered, created_at) "
            "VALUES ('old-1', ?, ?, 'signal', ?, '[\"wal\",\"sqlite\"]', ?, NULL, 1, ?)",
            (t(1), t(1, 2), pins, tasks, t(1)),
        )
        conn.execute(
            "INSERT INTO session_states (id, start_time, channel, created_at) "
            "VALUES ('old-2', ?, NULL, ?)",
            (t(2), t(2)),
        )
        conn.commit()


def test_spec_made_table_migrates_without_loss(tmp_path: Path) -> None:
    db = tmp_path / "brain.db"
    _make_legacy_db(db)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        before = conn.execute("SELECT * FROM session_states ORDER BY id").fetchall()
    with SQLiteStore(db) as store:
        assert [name for name, _ in store.applied_migrations()] == migration_names()
        old = store.get_session("old-1")
        assert old is not None
        assert (old.end_time, old.channel, old.hot_topics) == (t(1, 2), "signal", ("wal", "sqlite"))
        assert old.working_memory == (
            Pin("db", "use WAL", "2026-02-01T09:00:00Z", "CRITICAL", 0.8),
        )
        assert old.pending_tasks == (PendingTask("t1", "Ship", "build", True),)
        assert old.crash_recovered is True
        assert (old.state, old.scope, old.topic_state, old.checkpoint_count) == (
            "ACTIVE",
            "project",
            {},
            0,
        )
        second = store.get_session("old-2")
        assert second is not None and second.channel == "unknown" and second.is_open
        assert store.count_sessions() == 2
        store.save_session(full_session("new"))
    with contextlib.closing(sqlite3.connect(db)) as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(session_states)")]
        spec_columns = columns[:17]  # the spec's columns come first; m002 appends
        after = conn.execute(
            f"SELECT {', '.join(spec_columns)} FROM session_states WHERE id != 'new' ORDER BY id"
        ).fetchall()
        legacy_metrics = conn.execute("SELECT name, value FROM metrics_legacy").fetchall()
    assert after == before
    assert legacy_metrics == [("recall", 0.9)]


def test_continuity_columns_added_only_where_missing(tmp_path: Path) -> None:
    db = tmp_path / "brain.db"
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.executescript(SPEC_SCHEMA)
        conn.execute("ALTER TABLE session_states ADD COLUMN project TEXT")
        conn.execute(
            "INSERT INTO session_states (id, start_time, end_time, created_at, project) "
            "VALUES ('s1', ?, ?, ?, 'kept')",
            (t(1), t(2), t(1)),
        )
        conn.commit()
    with SQLiteStore(db) as store:
        got = store.get_session("s1")
        assert got is not None and got.project == "kept"
        assert [s.session_id for s in store.completed_sessions_since(t(1), "kept", limit=5)] == [
            "s1"
        ]


def test_a_database_a_newer_cortex_migrated_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "brain.db"
    SQLiteStore(path).close()
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("DELETE FROM _cortex_migrations WHERE name = 'm012_memory_embeddings'")
        conn.execute("DROP TABLE memory_embeddings")
        conn.execute("INSERT INTO _cortex_migrations VALUES ('m099_from_the_future', 'x')")
    before = path.read_bytes()
    with pytest.raises(StorageError) as err:
        SQLiteStore(path)
    assert str(err.value) == (
        f"database {path} was migrated by a newer Cortex (unknown migration "
        "'m099_from_the_future'); upgrade Cortex to open it"
    )
    assert path.read_bytes() == before  # m012 was not applied either


def test_protocol_migration_tags_existing_checkpoints_with_their_task(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "old.db")
    for migration in MIGRATIONS:
        if migration.name == "m017_protocol":
            break
        migration.apply(conn)
    conn.execute(
        "INSERT INTO session_states (id, start_time, created_at, task_slug) "
        "VALUES ('s1', ?, ?, 'feat-a')",
        (t(1), t(1)),
    )
    conn.execute(
        "INSERT INTO checkpoints (id, session_id, type, body, created_at) "
        "VALUES ('c1', 's1', 'manual', '{}', ?), ('c2', 'gone', 'manual', '{}', ?)",
        (t(1), t(1)),
    )
    step = dict(MIGRATIONS)["m017_protocol"]
    step(conn)
    step(conn)  # a step applied twice changes nothing more
    rows = conn.execute("SELECT id, task_slug FROM checkpoints ORDER BY id").fetchall()
    assert rows == [("c1", "feat-a"), ("c2", None)]
    conn.close()


def test_the_unread_memory_key_index_is_dropped_and_keys_stay_unique(tmp_path: Path) -> None:
    store = open_store(tmp_path / "brain.db")
    indexes = {
        str(name)
        for (name,) in store.connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'memories'"
        )
    }
    assert "idx_memories_upsert_key" not in indexes
    assert "idx_memories_upsert_live" in indexes  # one live memory per key, still enforced
    insert = (
        "INSERT INTO memories (id, content, scope, upsert_key, created_at, updated_at) "
        "VALUES (?, 'x', 'global', 'k', ?, ?)"
    )
    store.connection.execute(insert, ("m1", t(1), t(1)))
    with pytest.raises(sqlite3.IntegrityError):
        store.connection.execute(insert, ("m2", t(1), t(1)))
    store.close()


def test_opening_a_migrated_database_loads_no_migration_step(tmp_path: Path) -> None:
    # The steps' SQL is most of the store's code; a long-lived hook server on a home in use
    # must not carry it. A database that needs a step still gets it (the tests above).
    path = tmp_path / "brain.db"
    SQLiteStore(path).close()
    code = (
        "import sys\n"
        "from cortex.store import SQLiteStore\n"
        "SQLiteStore(sys.argv[1]).close()\n"
        "print('cortex.store.sqlite.migrations' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True)
    assert (out.returncode, out.stdout.strip()) == (0, "False"), out.stderr


def _supersedes_two(store: SQLiteStore) -> list[MemoryLink]:
    """ "b" supersedes "a" by key and "x" by consolidation, "b" relates to "c": its links."""
    store.add_memories([memory("a", "v1", upsert_key="k"), memory("x", "x"), memory("c", "c")])
    store.add_memories([memory("b", "v2", upsert_key="k", created_at=t(17))])
    assert store.supersede_memory("x", "b", t(18))
    store.add_memory_link(MemoryLink("b", "c", "relates", t(19)))
    return store.memory_links("b")


def _before(db: Path, step: str, *statements: str) -> None:
    """Make the file at ``db`` as it was before migration ``step``: run ``statements``, then
    forget that the step was applied (the next open applies it again)."""
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        for sql in statements:
            conn.execute(sql)
        conn.execute("DELETE FROM _cortex_migrations WHERE name = ?", (step,))


def test_a_supersede_is_held_by_the_two_rows_not_a_link_row(tmp_path: Path) -> None:
    db = tmp_path / "brain.db"
    with SQLiteStore(db) as store:
        _supersedes_two(store)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        links = conn.execute("SELECT from_id, to_id, kind FROM memory_links ORDER BY 2")
        assert links.fetchall() == [("b", "c", "relates"), ("b", "x", "supersedes")]
        rows = conn.execute("SELECT id, supersedes, superseded_by FROM memories ORDER BY id")
        assert rows.fetchall() == [
            ("a", None, "b"),
            ("b", "a", None),
            ("c", None, None),
            ("x", None, "b"),
        ]


def test_m024_moves_the_supersedes_links_the_rows_can_hold(tmp_path: Path) -> None:
    db = tmp_path / "brain.db"
    with SQLiteStore(db) as store:
        before = _supersedes_two(store)
    # The file as m023 left it: every supersede a link row, no column.
    _before(
        db,
        "m024_memory_supersedes_column",
        "INSERT INTO memory_links SELECT n.id, n.supersedes, 'supersedes', o.superseded_at "
        "FROM memories n JOIN memories o ON o.id = n.supersedes",
        "ALTER TABLE memories DROP COLUMN supersedes",
    )
    with SQLiteStore(db) as store:
        assert store.memory_links("b") == before
    with contextlib.closing(sqlite3.connect(db)) as conn:
        links = conn.execute("SELECT from_id, to_id FROM memory_links ORDER BY 2").fetchall()
    assert links == [("b", "c"), ("b", "x")]


def test_m025_moves_the_vectors_into_rows_of_their_own_pages(tmp_path: Path) -> None:
    db = tmp_path / "brain.db"
    vectors = {name: bytes([n]) * 1536 for n, name in enumerate(("a", "b", "c"), 1)}
    with SQLiteStore(db) as store:
        store.add_memories([memory(name, f"text {name}") for name in vectors])
    # The file as m024 left it: the vectors in m012's WITHOUT ROWID table, keyed by
    # (model, memory_seq), two models, each vector spilling into an overflow page.
    _before(db, "m025_memory_embeddings_in_rows", "DROP TABLE memory_embeddings")
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        m012_memory_embeddings(conn)  # the shipped step: the table as it made it
        for model in ("m", "other"):
            conn.executemany(
                "INSERT INTO memory_embeddings SELECT seq, ?, 384, ? FROM memories WHERE id = ?",
                [(model, vector, name) for name, vector in vectors.items()],
            )
    with SQLiteStore(db) as store:
        assert store.embedding_vectors("m", MemoryFilter(), t(1)) == list(vectors.items())
        assert store.embedding_vectors("other", MemoryFilter(), t(1)) == list(vectors.items())
        store.save_embeddings("m", [("b", 1, b"\x00\x00\x80?")])  # still one vector a key
        assert store.embedding_vectors("m", MemoryFilter(), t(1))[1] == ("b", b"\x00\x00\x80?")
    with contextlib.closing(sqlite3.connect(db)) as conn:
        (sql,) = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'memory_embeddings'"
        ).fetchone()
        assert "WITHOUT ROWID" not in sql.upper()
        assert conn.execute("SELECT count(*) FROM memory_embeddings").fetchone() == (6,)
        with pytest.raises(sqlite3.IntegrityError):  # the key stays unique
            conn.execute(
                "INSERT INTO memory_embeddings SELECT memory_seq, model, dim, vector "
                "FROM memory_embeddings LIMIT 1"
            )


def test_m025_gives_a_file_without_the_vectors_table_an_empty_one(tmp_path: Path) -> None:
    db = _m025_pending(tmp_path / "brain.db")
    with SQLiteStore(db) as store:
        store.add_memories([memory("a", "text a")])
        store.save_embeddings("m", [("a", 1, b"\x00\x00\x80?")])
        assert store.embedding_vectors("m", MemoryFilter(), t(1)) == [("a", b"\x00\x00\x80?")]


M025, M026 = "m025_memory_embeddings_in_rows", "m026_open_sessions_by_start"


def test_a_file_over_migrate_max_bytes_is_left_as_it_is(tmp_path: Path) -> None:
    db = tmp_path / "brain.db"
    SQLiteStore(db).close()
    open_store(db, migrate_max_bytes=0).close()  # nothing pending: any size opens
    _m025_pending(db)
    with pytest.raises(MigrationDeferredError) as raised:
        open_store(db, migrate_max_bytes=db.stat().st_size - 1)
    message = str(raised.value)
    assert f"2 migrations pending ({M025}, {M026})" in message
    assert message.endswith("run `cortex db migrate`") and "\n" not in message
    with contextlib.closing(sqlite3.connect(db)) as conn:  # the step was not applied
        tables = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'memory_embeddings'")
        assert tables.fetchall() == []
        assert conn.execute("SELECT count(*) FROM _cortex_migrations").fetchone() == (
            len(MIGRATIONS) - 2,
        )
    with open_store(db, migrate_max_bytes=db.stat().st_size) as store:  # at the limit: migrated
        assert [name for name, _ in store.applied_migrations()] == migration_names()


def test_a_file_over_migrate_max_bytes_applies_a_step_that_changes_nothing_there(
    tmp_path: Path,
) -> None:
    db = tmp_path / "brain.db"
    SQLiteStore(db).close()
    _before(db, M026)
    with open_store(db, migrate_max_bytes=0) as store:  # no background process needed
        assert [name for name, _ in store.applied_migrations()] == migration_names()


def _m025_pending(db: Path) -> Path:
    """A database at ``db`` (new unless it is there) with m025, and m026 after it (nothing on
    SQLite), to apply again; returns ``db``."""
    SQLiteStore(db).close()
    _before(db, M025, "DROP TABLE memory_embeddings")
    _before(db, M026)
    return db


def _step_held(db: Path) -> sqlite3.Connection:
    """A connection holding ``db``'s write lock, as another process applying a step does."""
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    return holder


def test_a_migration_waits_for_another_process_applying_a_step(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = _m025_pending(tmp_path / "brain.db")
    holder = _step_held(db)
    release = threading.Timer(0.6, holder.execute, ("COMMIT",))
    release.start()
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, "cortex.store"):
        # A busy timeout of 0.1 s: an ordinary write would fail; a migration step waits.
        with SQLiteStore(db, busy_timeout_ms=100) as store:
            waited = time.monotonic() - started
            assert [name for name, _ in store.applied_migrations()] == migration_names()
            store.add_memories([memory("a", "text a")])  # the ordinary timeout is back
            assert store.connection.execute("PRAGMA busy_timeout").fetchone() == (100,)
    release.join()
    holder.close()
    assert waited >= 0.5
    assert f"waiting for another process to finish migrating {db}" in caplog.text


def test_a_migration_gives_up_on_a_step_held_too_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _m025_pending(tmp_path / "brain.db")
    monkeypatch.setattr(sqlite_db, "MIGRATION_WAIT_SECONDS", 0.3)
    holder = _step_held(db)
    try:
        with pytest.raises(StorageError) as raised:
            SQLiteStore(db, busy_timeout_ms=100)
    finally:
        holder.close()
    message = str(raised.value)
    assert message == (
        f"database {db} is still being migrated by another process after 0.3 s "
        "(m025_memory_embeddings_in_rows); retry once it is done, or stop it"
    )
    with contextlib.closing(sqlite3.connect(db)) as conn:  # the step was not applied
        tables = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'memory_embeddings'")
        assert tables.fetchall() == []
    with SQLiteStore(db) as store:  # the lock gone, the next open applies it
        assert [name for name, _ in store.applied_migrations()] == migration_names()
