"""SQLiteStore: what only SQLite has (the contract itself runs in test_store_contract.py)."""

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
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest

from cortex.core.models import PendingTask
from cortex.errors import ConfigError, StorageError
from cortex.store import SQLiteStore, migration_names, open_store, open_store_copy
from cortex.store.sqlite.db import storage_error
from store_contract import full_session, session, t

# Children start fresh ("spawn"): forking a process that runs threads (pytest's workers do) can
# deadlock the child, and Python 3.12 and later warn about it.
SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SQLiteStore]:
    with SQLiteStore(tmp_path / "brain.db") as store:
        yield store


def test_count_sessions(sqlite_store: SQLiteStore) -> None:
    assert sqlite_store.count_sessions() == 0
    for day in (1, 2, 3):
        sqlite_store.save_session(session(f"s{day}", t(day)))
    sqlite_store.save_session(session("s1", t(1), t(2)))  # a replaced row counts once
    assert sqlite_store.count_sessions() == 3


def test_audit_lists_newest_first(sqlite_store: SQLiteStore) -> None:
    first = sqlite_store.append_audit("session.delete", "cli", "s1", {"why": "archive"}, t(1))
    second = sqlite_store.append_audit("pin.add", "mcp", None, {}, t(2))
    entries = sqlite_store.list_audit()
    assert [e.id for e in entries] == [second, first]
    assert (entries[1].action, entries[1].actor, entries[1].target) == (
        "session.delete",
        "cli",
        "s1",
    )
    assert entries[1].detail == {"why": "archive"}
    assert entries[0].target is None and entries[0].created_at == t(2)
    assert [e.id for e in sqlite_store.list_audit(limit=1)] == [second]


def test_rollback_drops_audit_entries_too(sqlite_store: SQLiteStore) -> None:
    with pytest.raises(RuntimeError), sqlite_store.transaction():
        sqlite_store.save_session(session("s1", t(1)))
        sqlite_store.append_audit("a", "b", None, {}, t(1))
        raise RuntimeError("boom")
    assert sqlite_store.count_sessions() == 0
    assert sqlite_store.list_audit() == []


def test_integrity_check_reports_damage(tmp_path: Path) -> None:
    db = tmp_path / "brain.db"
    with SQLiteStore(db) as store:
        store.append_audit("pin.add", "cli", None, {}, t(1))
        assert store.check_integrity() == []
        # A NULL where the schema now says NOT NULL: damage quick_check finds.
        store.connection.execute("PRAGMA writable_schema = ON")
        store.connection.execute(
            "UPDATE sqlite_master SET sql = replace(sql, 'target TEXT,', 'target TEXT NOT NULL,') "
            "WHERE name = 'audit_log'"
        )
    with SQLiteStore(db) as store:
        assert store.check_integrity() == ["NULL value in audit_log.target"]


# -- query plans -------------------------------------------------------------------------------
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
        plan = _plan_of(store, lambda: store.latest_session_id("p1"))
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


def test_a_long_batch_of_metrics_is_numbered_across_its_statements(tmp_path: Path) -> None:
    """A batch is numbered from its last row; the numbers follow a deleted newest event's gap."""
    with SQLiteStore(tmp_path / "brain.db") as store:
        store.append_metric("e", None, {}, t(1), "0" * 64, "h1")
        store.append_metric("e", None, {}, t(1), "h1", "h2")
        store.connection.execute("DELETE FROM metrics WHERE seq = 2")
        rows = [(f"e{i}", None, {"i": i}, t(2), f"p{i}", f"h{i}") for i in range(1201)]
        seqs = store.append_metrics(rows)
        assert seqs == list(range(3, 1204))
        stored = store.list_metrics(after_seq=2)
        assert [(m.seq, m.event, m.payload) for m in stored] == [
            (seq, event, payload) for seq, (event, _, payload, *_) in zip(seqs, rows, strict=True)
        ]


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
    receiver, sender = SPAWN.Pipe(duplex=False)
    child = SPAWN.Process(target=_try_open_as_unprivileged, args=(db, sender))
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
def _save_fifty(db: Path, writer: int, start: Barrier) -> None:
    start.wait(60)  # the four open (create, migrate) the database at once
    with SQLiteStore(db) as store:
        for i in range(50):
            store.save_session(session(f"w{writer}-{i}", t(1 + i % 27), project=f"p{writer}"))
            if i % 10 == 0:
                with store.transaction():
                    store.append_audit("save", f"w{writer}", f"w{writer}-{i}", {}, t(1))


def test_concurrent_writers_from_four_processes(tmp_path: Path) -> None:
    db = tmp_path / "home" / "brain.db"  # created and migrated by the racing writers themselves
    start = SPAWN.Barrier(4)
    writers = [SPAWN.Process(target=_save_fifty, args=(db, w, start)) for w in range(4)]
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
    child = SPAWN.Process(target=_write_forever, args=(db,))
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


@pytest.fixture
def laptop_cache() -> Iterator[None]:
    """The decoded-row cache at a laptop's size (a team server's host, built by an earlier
    test of this process, made it larger)."""
    from cortex.store import records

    limits = list(records._limits)
    records.keep_decoded_sessions(records.DECODED_SESSIONS, records.DECODED_CHARS)
    yield
    records.keep_decoded_sessions(*limits)


@pytest.mark.usefixtures("laptop_cache")
def test_a_decoded_session_row_is_reused_until_the_row_changes(sqlite_store: SQLiteStore) -> None:
    from dataclasses import replace

    from cortex.store import records

    sqlite_store.save_session(full_session("memo"))
    first = sqlite_store.get_session("memo")
    assert first is not None
    assert sqlite_store.get_session("memo") is first  # the same row: decoded once
    changed = replace(first, hot_topics=(*first.hot_topics, "antenna"))
    sqlite_store.save_session(changed)
    again = sqlite_store.get_session("memo")
    assert again == changed and again is not first
    for n in range(records.DECODED_SESSIONS + 5):
        sqlite_store.save_session(session(f"other-{n}", t(10, 9)))
        sqlite_store.get_session(f"other-{n}")
    assert len(records._decoded) <= records.DECODED_SESSIONS
    assert sqlite_store.get_session("memo") == changed  # evicted, then decoded again


def test_a_continued_session_reads_back_with_its_new_link(sqlite_store: SQLiteStore) -> None:
    """A row changed only in ``continued_by``/``updated_at`` reuses its decoded state for the
    rest, and reads back exactly as a fresh decode would."""
    from dataclasses import replace

    from cortex.store import records

    sqlite_store.save_session(full_session("linked"))
    first = sqlite_store.get_session("linked")
    assert first is not None
    seen = first
    for n, at in ((1, t(3)), (2, t(4))):
        sqlite_store.mark_continued(["linked"], f"next-{n}", at)
        linked = sqlite_store.get_session("linked")
        assert linked == replace(first, continued_by=f"next-{n}", updated_at=at)
        assert linked.working_memory is seen.working_memory  # not decoded again
        records._decoded.clear()
        seen = sqlite_store.get_session("linked")
        assert seen == linked and seen is not linked  # as a fresh decode gives
    assert sqlite_store.get_session("linked") is sqlite_store.get_session("linked")


def test_a_session_changed_by_every_event_keeps_two_decoded_rows(
    sqlite_store: SQLiteStore,
) -> None:
    """An open session's older rows are dropped from the cache as newer ones are read (a hook
    server reads one per event, for hours); the other sessions' rows stay."""
    from dataclasses import replace

    from cortex.store import records

    records._decoded.clear()
    records._versions.clear()
    sqlite_store.save_session(full_session("steady"))
    steady = sqlite_store.get_session("steady")
    sqlite_store.save_session(session("busy", t(1)))
    busy = sqlite_store.get_session("busy")
    assert busy is not None
    for turn in range(20):
        busy = replace(busy, hot_topics=(f"topic{turn}",), last_activity=t(2, turn % 24))
        sqlite_store.save_session(busy)
        assert sqlite_store.get_session("busy") == busy
    assert sum(1 for key in records._decoded if key[0] == "busy") == 2
    assert sqlite_store.get_session("steady") is steady  # still kept: not decoded again
    assert set(records._versions) == {"busy", "steady"}
    assert sorted(map(len, records._versions.values())) == [1, 2]


def test_a_session_row_with_decoded_json_is_decoded_each_time() -> None:
    """PostgreSQL hands JSON columns over decoded (lists, dicts): such a row is not kept."""
    from cortex.store import records

    records._decoded.clear()  # the first row seen by a process, as in a fresh server worker
    row = dict.fromkeys(records.SESSION_COLUMNS)
    row.update(id="pg-1", start_time=t(10, 9), created_at=t(10, 9), hot_topics=["antenna"])
    values = tuple(row[c] for c in records.SESSION_COLUMNS)
    first = records.session_from_row(values)
    assert first is not None and first.hot_topics == ("antenna",)
    assert records.session_from_row(values) == first
    assert records._decoded == {}


def test_the_light_candidates_keep_pins_exactly_when_sqlite_instr_finds_critical(
    sqlite_store: SQLiteStore,
) -> None:
    """Restoration's candidates come with their pins only when they hold a CRITICAL one; the
    test runs in Python on the column's bytes, and must agree with SQLite's
    ``CASE WHEN instr(working_memory, '"CRITICAL"') > 0 ...`` on every kind of stored value."""
    from cortex.store.records import dumps

    critical = full_session("x").working_memory
    stored: dict[str, object] = {
        "critical": dumps([p.to_dict() for p in critical]),
        "normal": dumps([p.to_dict() for p in critical[1:]]),
        "unquoted": '[{"label":"CRITICAL work","content":"not CRITICAL","pinnedAt":"x"}]',
        "empty": "[]",
        "number": 7,
        "blob": dumps([p.to_dict() for p in critical]).encode(),
        "accented": dumps([{**critical[0].to_dict(), "content": "déploiement"}]),
    }
    for n, (sid, value) in enumerate(stored.items()):
        sqlite_store.save_session(session(sid, t(20, n), t(20, n, 30), project="p"))
        sqlite_store._db.run(
            "UPDATE session_states SET working_memory = ? WHERE id = ?", (value, sid)
        )
    light = sqlite_store.completed_sessions_since(t(1), "p", limit=50, all_pins=False)
    full = {s.session_id: s for s in sqlite_store.completed_sessions_since(t(1), "p", limit=50)}
    instr = dict(
        sqlite_store._db.rows(
            "SELECT id, instr(working_memory, '\"CRITICAL\"') > 0 FROM session_states"
        )
    )
    assert [s.session_id for s in light] == list(reversed(stored))
    for state in light:
        expected = full[state.session_id].working_memory if instr[state.session_id] else ()
        assert state.working_memory == expected, state.session_id
    assert {s.session_id for s in light if s.working_memory} == {"critical", "blob", "accented"}


def _wal_after_commits(store: SQLiteStore, pages: int) -> int:
    """The WAL file's size after ``pages`` pages of 4 KiB rows, one commit per 50 pages."""
    store._db.run("CREATE TABLE IF NOT EXISTS filler (x BLOB)")
    for _ in range(pages // 50):
        with store.transaction():
            store._db.run_many("INSERT INTO filler VALUES (?)", [(os.urandom(4000),)] * 50)
    return os.path.getsize(store.url + "-wal")


def test_manual_checkpoints_leave_the_log_to_checkpoint(tmp_path: Path) -> None:
    # SQLite's commits checkpoint past 1,000 pages and the log restarts from its beginning;
    # with manual_checkpoints it grows until checkpoint() runs, and then restarts.
    with SQLiteStore(tmp_path / "auto.db") as auto:
        assert _wal_after_commits(auto, 1500) < 1100 * 4096
    with SQLiteStore(tmp_path / "manual.db") as store:
        store.manual_checkpoints()
        grown = _wal_after_commits(store, 1500)
        assert grown > 1400 * 4096
        assert _wal_after_commits(store, 100) > grown  # appended: nothing checkpointed
        size = os.path.getsize(store.url + "-wal")
        store.checkpoint()
        assert _wal_after_commits(store, 100) == size  # restarted at the log's beginning
        with sqlite3.connect(store.url) as other:  # every committed row is readable
            assert other.execute("SELECT count(*) FROM filler").fetchone() == (1700,)


def test_open_sessions_leaves_out_the_live_sessions_an_owner_keeps(
    sqlite_store: SQLiteStore,
) -> None:
    # Crash recovery's candidates: idle ones always; the others only when their owner does not
    # keep them (then their rows are read whole), the rest leave their lease columns only.
    for sid, last, pid in (
        ("idle", t(1), 7),  # idle since before t(5): a candidate whatever its owner
        ("kept", t(6), 7),  # active, its owner keeps it: left out
        ("gone", t(6), 8),  # active, but its owner is gone: a candidate
        ("nobody", t(6), None),  # active, no owner: not a candidate at all
    ):
        sqlite_store.save_session(
            session(sid, last, last_activity=last, owner_pid=pid, owner_host="here")
        )
    calls: list[tuple[int, str | None]] = []

    def keeps(pid: int, host: str | None) -> bool:
        calls.append((pid, host))
        return pid == 7

    def found(owner_keeps: Callable[[int, str | None], bool] | None = None) -> list[str]:
        opened = sqlite_store.open_sessions(
            exclude_id="new", idle_before=t(5), owner_keeps=owner_keeps
        )
        return [s.session_id for s in opened]

    assert found() == ["idle", "gone", "kept"]
    assert found(keeps) == ["idle", "gone"]
    assert sorted(calls) == [(7, "here"), (8, "here")]  # idle rows need no question
    assert found(lambda pid, host: True) == ["idle"]
    sqlite_store.save_session(session("idle", t(1), t(2)))  # ended: no candidate left
    assert found(lambda pid, host: True) == []


def test_the_memory_and_history_methods_are_bound_at_their_first_use(tmp_path: Path) -> None:
    """A session start reads and writes sessions and metrics only: the store binds its memory
    side (the repositories, search, their modules), its session history and its transfer when
    one of their methods is first used, each side's methods together."""
    from cortex.core.memory_models import MemoryFilter
    from cortex.store.sqlite.store import BOUND_AT_FIRST_USE

    store = SQLiteStore(tmp_path / "brain.db")
    try:
        before = set(vars(store))
        for names in BOUND_AT_FIRST_USE.values():
            assert not names & before
        with pytest.raises(AttributeError, match="no attribute 'no_such_method'"):
            store.no_such_method  # type: ignore[attr-defined]  # noqa: B018
        flt = MemoryFilter(all_projects=True)
        assert store.list_memories(flt, t(0), limit=5, offset=0) == []
        memory_side = BOUND_AT_FIRST_USE["_bind_memory_side"]
        assert set(vars(store)) - before == {*memory_side, "_search"}  # all of them, once
        assert store.has_fts() and store.migrate() == []
        assert store.list_checkpoints("s1") == []
        history = BOUND_AT_FIRST_USE["_bind_history_side"]
        assert set(vars(store)) - before == {*memory_side, "_search", *history}
        assert store.export_rows is vars(store)["export_rows"]
        with pytest.raises(AttributeError):
            store.no_such_method  # type: ignore[attr-defined]  # noqa: B018
    finally:
        store.close()


def test_decoded_rows_are_kept_within_a_row_count_and_a_text_budget() -> None:
    """A team server keeps more rows than a laptop (``keep_decoded_sessions``), but never
    more text than its budget: the least recently used rows go first."""
    from cortex.store import records

    def row(sid: str, topics: str) -> tuple[object, ...]:
        values = dict.fromkeys(records.SESSION_COLUMNS)
        values.update(id=sid, start_time=t(10, 9), created_at=t(10, 9), hot_topics=topics)
        return tuple(values[c] for c in records.SESSION_COLUMNS)

    limits = list(records._limits)
    records._decoded.clear()
    records._versions.clear()
    try:
        records.keep_decoded_sessions(3, 10_000)
        for n in range(5):
            records.session_from_row(row(f"s{n}", '["antenna"]'))
        assert [key[0] for key in records._decoded] == ["s2", "s3", "s4"]
        records.keep_decoded_sessions(100, 300)  # s4 and wide: 67 + 212 characters
        wide = '["' + "x" * 150 + '"]'
        records.session_from_row(row("wide", wide))
        assert [key[0] for key in records._decoded] == ["s4", "wide"]
        first = records.session_from_row(row("s4", '["antenna"]'))
        assert records.session_from_row(row("s4", '["antenna"]')) is first
        assert records.session_from_row(row("gone", "[]"), keep=False) is not None
        assert "gone" not in {key[0] for key in records._decoded}
    finally:
        records.keep_decoded_sessions(*limits)
        records._decoded.clear()
        records._versions.clear()


# -- a copy read without writing (a read-only home's) ---------------------------------------------
def files_of(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_copy_holds_the_file_and_makes_nothing_beside_it(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "brain.db") as store:
        store.save_session(full_session("s1"))
    before = files_of(tmp_path)
    assert set(before) == {"brain.db"}  # (closed: its log checkpointed and gone)
    copy = open_store_copy(tmp_path / "brain.db")
    try:
        assert copy.get_session("s1") == full_session("s1")
        copy.save_session(session("s2", t(2)))  # writes go into the copy alone
        assert copy.get_session("s2") is not None
    finally:
        copy.close()
    assert files_of(tmp_path) == before  # SQLite's mode=ro would have made -wal and -shm here
    with SQLiteStore(tmp_path / "brain.db") as store:
        assert store.get_session("s2") is None


def test_a_copy_reads_what_only_the_write_ahead_log_holds(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "brain.db") as writer:  # a writer still running
        writer.manual_checkpoints()
        writer.save_session(session("s1", t(1)))
        assert (tmp_path / "brain.db-wal").stat().st_size > 0
        copy = open_store_copy(tmp_path / "brain.db")
        try:
            assert copy.get_session("s1") is not None
        finally:
            copy.close()


def test_a_copy_of_a_file_that_is_no_database_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "brain.db"
    path.write_bytes(b"not a database at all " * 200)
    with pytest.raises(StorageError, match="is not a Cortex database or is damaged; move it"):
        open_store_copy(path)
