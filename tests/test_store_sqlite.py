"""SQLiteStore: the Store contract on a file and in memory, plus what only SQLite has."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shutil
import signal
import sqlite3
import stat
import tempfile
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from cortex.core.models import PendingTask, Pin
from cortex.errors import ConfigError, StorageError
from cortex.store import (
    MIGRATIONS,
    SCHEMA_V4,
    SQLiteStore,
    migration_names,
    open_store,
)
from cortex.store.sqlite.store import storage_error
from store_contract import StoreContract, full_session, session, t

FORK = multiprocessing.get_context("fork")

# The spec's own statement (API guide section 8), comments and all, as an older brain.db has it.
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


class TestSQLite(StoreContract):
    @pytest.fixture
    def store(self, sqlite_store: SQLiteStore) -> SQLiteStore:
        return sqlite_store


# -- migrations --------------------------------------------------------------------------------
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


def _plan_of(store: SQLiteStore, call: object) -> str:
    """The query plan of the SELECT that ``call()`` made on the store's connection."""
    seen: list[str] = []
    store.connection.set_trace_callback(seen.append)
    try:
        assert callable(call)
        call()
    finally:
        store.connection.set_trace_callback(None)
    select = next(sql for sql in seen if sql.lstrip().upper().startswith("SELECT"))
    rows = store.connection.execute("EXPLAIN QUERY PLAN " + select).fetchall()
    return " | ".join(str(row[3]) for row in rows)


def test_restore_queries_use_their_indexes(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "brain.db") as store:
        with store.transaction():
            for i in range(300):
                end = None if i % 50 == 0 else t(1 + i % 20, 1)
                store.save_session(session(f"s{i}", t(1 + i % 20), end, project=f"p{i % 7}"))
        store.connection.execute("ANALYZE")
        plan = _plan_of(store, lambda: store.completed_sessions_since(t(5), "p1", limit=50))
        assert "idx_session_project_end" in plan and "TEMP B-TREE" not in plan
        plan = _plan_of(store, lambda: store.latest_open_session(any_project=True))
        assert "idx_session_open" in plan and "TEMP B-TREE" not in plan
        plan = _plan_of(store, lambda: store.latest_session("p1"))
        assert "idx_session_project_start" in plan and "TEMP B-TREE" not in plan


# -- connection settings and files -------------------------------------------------------------
def test_connection_settings(tmp_path: Path) -> None:
    db = tmp_path / "brain.db"
    with SQLiteStore(db) as store:
        conn = store.connection
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert conn.isolation_level is None
    with contextlib.closing(sqlite3.connect(db)) as other:
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_files_are_private(tmp_path: Path) -> None:
    home = tmp_path / "new-home"
    db = home / "brain.db"
    with SQLiteStore(db) as store:
        store.save_session(session("s1", t(1)))
        assert stat.S_IMODE(home.stat().st_mode) == 0o700
        for path in (db, db.with_name("brain.db-wal"), db.with_name("brain.db-shm")):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_existing_directory_permissions_untouched(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    SQLiteStore(tmp_path / "brain.db").close()
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o755


def test_corrupt_json_columns_are_tolerated(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "brain.db") as store:
        store.save_session(full_session("good"))
        store.save_session(full_session("bad"))
        store.connection.execute(
            "UPDATE session_states SET working_memory = '{not json', hot_topics = '{\"a\": 1}', "
            "topic_state = '[1, 2]', pending_tasks = ? WHERE id = 'bad'",
            ('[{"title": "no id"}, {"task_id": "t9", "title": "kept", "stage": "s"}]',),
        )
        found = {s.session_id: s for s in store.list_sessions(limit=9)}
        assert set(found) == {"good", "bad"}
        assert found["good"] == full_session("good")
        bad = found["bad"]
        assert (bad.working_memory, bad.hot_topics, bad.topic_state) == ((), (), {})
        assert bad.pending_tasks == (PendingTask("t9", "kept", "s"),)
        assert bad.active_projects == full_session().active_projects
        assert store.get_session("bad") == bad


def test_metric_seq_is_never_reused(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "brain.db") as store:
        store.append_metric("e", None, {}, t(1), "0" * 64, "h1")
        store.append_metric("e", None, {}, t(1), "h1", "h2")
        store.connection.execute("DELETE FROM metrics WHERE seq = 2")
        assert store.append_metric("e", None, {}, t(1), "h1", "h3") == 3


# -- errors ------------------------------------------------------------------------------------
def test_not_a_database(tmp_path: Path) -> None:
    db = tmp_path / "brain.db"
    db.write_bytes(b"this is not sqlite, just some text that fills a page " * 100)
    with pytest.raises(StorageError) as info:
        open_store(db)
    message = str(info.value)
    assert "\n" not in message
    assert message == (
        f"{db} is not a Cortex database or is damaged; move it aside (a new one is created) "
        "or restore a backup"
    )


def test_locked_database(tmp_path: Path) -> None:
    db = tmp_path / "brain.db"
    SQLiteStore(db).close()
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as holder:
        holder.execute("BEGIN IMMEDIATE")
        with SQLiteStore(db, busy_timeout_ms=50) as store:
            with pytest.raises(StorageError, match="is locked by another process; retry"):
                store.save_session(session("s1", t(1)))
            assert store.count_sessions() == 0  # readers are not blocked by the writer (WAL)
        holder.execute("ROLLBACK")


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            sqlite3.OperationalError("attempt to write a readonly database"),
            "database /x/brain.db is read-only; check permissions on /x or set CORTEX_HOME",
        ),
        (
            sqlite3.OperationalError("database is locked"),
            "database /x/brain.db is locked by another process; retry, or stop the process "
            "that holds it",
        ),
        (
            sqlite3.OperationalError("unable to open database file"),
            "cannot open database /x/brain.db; check that /x exists and is writable, "
            "or set CORTEX_HOME",
        ),
        (
            sqlite3.OperationalError("database or disk is full"),
            "cannot write database /x/brain.db (database or disk is full); free disk space "
            "and retry",
        ),
    ],
)
def test_storage_error_messages(error: sqlite3.Error, expected: str) -> None:
    assert str(storage_error(error, "/x/brain.db")) == expected


def _try_open_as_unprivileged(db: Path, out: Connection) -> None:
    """Child process: drop root if we have it, then try to open and write the store."""
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    try:
        with SQLiteStore(db) as store:
            store.save_session(session("s1", t(1)))
        out.send("opened")
    except StorageError as exc:
        out.send(f"StorageError: {exc}")
    except BaseException as exc:  # report anything else to the parent as a failure
        out.send(f"{type(exc).__name__}: {exc}")


def _open_unprivileged(db: Path) -> str:
    receiver, sender = FORK.Pipe(duplex=False)
    child = FORK.Process(target=_try_open_as_unprivileged, args=(db, sender))
    child.start()
    child.join(30)
    return str(receiver.recv()) if receiver.poll(1) else f"no answer (exit {child.exitcode})"


@pytest.fixture
def unprivileged_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory a dropped-privilege child can reach (pytest's base dir is root-only)."""
    if os.geteuid() != 0:
        yield tmp_path
        return
    base = Path(tempfile.mkdtemp(prefix="cortex-ro-test-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_read_only_directory(unprivileged_dir: Path) -> None:
    ro = unprivileged_dir / "ro"
    ro.mkdir()
    existing = unprivileged_dir / "ro-existing"
    existing.mkdir()
    SQLiteStore(existing / "brain.db").close()
    for path in (ro, existing, existing / "brain.db"):
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        fresh = _open_unprivileged(ro / "brain.db")
        assert fresh == (
            f"StorageError: database {ro}/brain.db is read-only; check permissions on {ro} "
            "or set CORTEX_HOME"
        )
        old = _open_unprivileged(existing / "brain.db")
        assert old.startswith("StorageError: ") and "\n" not in old
        assert f"{existing}/brain.db" in old and "CORTEX_HOME" in old
    finally:
        for path in (ro, existing):
            path.chmod(0o755)


def test_unsupported_urls() -> None:
    with pytest.raises(ConfigError, match="unsupported store URL scheme 'mysql'"):
        open_store("mysql://localhost/cortex")


# -- processes ---------------------------------------------------------------------------------
def _save_fifty(db: Path, writer: int) -> None:
    with SQLiteStore(db) as store:
        for i in range(50):
            store.save_session(session(f"w{writer}-{i}", t(1 + i % 27), project=f"p{writer}"))
            if i % 10 == 0:
                with store.transaction():
                    store.append_audit("save", f"w{writer}", f"w{writer}-{i}", {}, t(1))


def test_concurrent_writers_from_four_processes(tmp_path: Path) -> None:
    db = tmp_path / "home" / "brain.db"  # created and migrated by the racing writers themselves
    writers = [FORK.Process(target=_save_fifty, args=(db, w)) for w in range(4)]
    for proc in writers:
        proc.start()
    for proc in writers:
        proc.join(60)
    assert [proc.exitcode for proc in writers] == [0, 0, 0, 0]
    with SQLiteStore(db) as store:
        assert store.count_sessions() == 200
        assert len(store.list_audit(limit=100)) == 20
        assert [name for name, _ in store.applied_migrations()] == migration_names()


def _write_forever(db: Path) -> None:
    with SQLiteStore(db) as store:
        n = 0
        while True:
            with store.transaction():
                for _ in range(5):
                    store.save_session(full_session(f"k{n}"))
                    n += 1
                store.append_metric("e", None, {"n": n}, t(1), "0" * 64, f"h{n}")


def test_killed_writer_leaves_a_readable_database(tmp_path: Path) -> None:
    db = tmp_path / "brain.db"
    SQLiteStore(db).close()
    child = FORK.Process(target=_write_forever, args=(db,))
    child.start()
    try:
        with SQLiteStore(db) as watcher:
            deadline = time.monotonic() + 30
            while watcher.count_sessions() < 200 and time.monotonic() < deadline:
                time.sleep(0.01)
    finally:
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        child.join(10)
    assert child.exitcode == -signal.SIGKILL
    with SQLiteStore(db) as store:
        assert store.connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        count = store.count_sessions()
        assert count >= 200 and count % 5 == 0  # whole transactions only
        assert len(store.list_sessions(limit=count)) == count
        store.save_session(session("after", t(2)))
