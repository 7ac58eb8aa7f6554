"""PostgresStore: the Store contract on PostgreSQL, plus what only PostgreSQL has.

Runs against the real server (see ``pg_helpers``): a scratch database per run, a fresh tenant
per test. Tenant isolation and the races between server processes are in
``test_store_postgres_tenants.py``.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from cortex.core.history_models import Checkpoint, SessionEvent, SessionSnapshot
from cortex.core.memory_models import Memory, MemoryFilter
from cortex.errors import (
    BusyError,
    ConfigError,
    ConflictError,
    ContentionError,
    StorageError,
    ValidationError,
)
from cortex.store import migration_names, open_store
from cortex.store.protocol import Store
from store_contract import full_session, session, t
from store_contract_memory import NOW, memory

pytestmark = pytest.mark.usefixtures("pg_driver")


# -- the protocol ------------------------------------------------------------------------------
def test_every_protocol_method_is_there_with_its_signature() -> None:
    from cortex.store.postgres import PostgresStore

    names = {
        name
        for cls in Store.__mro__
        if cls.__module__ == "cortex.store.protocol"
        for name, value in vars(cls).items()
        if callable(value) and not name.startswith("_")
    }
    assert "search_memories" in names and "get_session" in names
    for name in sorted(names):
        ours = inspect.signature(getattr(PostgresStore, name))
        theirs = inspect.signature(getattr(Store, name))
        assert list(ours.parameters.values()) == list(theirs.parameters.values()), name


def test_only_the_postgres_package_imports_psycopg() -> None:
    package = Path(__file__).resolve().parents[1] / "src" / "cortex"
    importers = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            if any(n.split(".")[0] in ("psycopg", "psycopg_pool") for n in names):
                importers.add(path.relative_to(package).parts[:2])
    assert importers == {("store", "postgres")}


# -- migrations --------------------------------------------------------------------------------
def test_steps_carry_the_sqlite_names_in_order() -> None:
    from cortex.store.postgres import MIGRATIONS

    assert [name for name, _ in MIGRATIONS] == migration_names()


def _store(url: str, tenant: str = "default", **kw: Any) -> Any:
    from cortex.store.postgres import PostgresStore

    return PostgresStore(url, tenant, **kw)


def test_unmigrated_database_then_migrating_processes_racing(fresh_database: str) -> None:
    bare = _store(fresh_database, migrate=False)
    assert bare.applied_migrations() == []
    with pytest.raises(StorageError, match="is not migrated .*; run `cortex db migrate`$"):
        bare.count_sessions()
    assert bare.check_integrity()[0] == (
        "migration m001_session_states is not applied; run `cortex db migrate`"
    )
    applied: list[list[str]] = []
    barrier = threading.Barrier(4)

    def open_one() -> None:
        barrier.wait()
        with _store(fresh_database, migrate=False) as store:
            applied.append(store.migrate())

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(name for names in applied for name in names) == sorted(migration_names())
    assert [name for name, _ in bare.applied_migrations()] == migration_names()
    assert all(at.endswith("Z") for _, at in bare.applied_migrations())
    assert bare.migrate() == [] and bare.check_integrity() == []
    bare.close()


def test_a_database_a_newer_cortex_migrated_is_refused_and_left_alone(
    fresh_database: str,
) -> None:
    from cortex.store.postgres.db import redacted

    with _store(fresh_database) as store, store.pool.connection() as conn:
        conn.execute("DELETE FROM _cortex_migrations WHERE name = 'm012_memory_embeddings'")
        conn.execute("INSERT INTO _cortex_migrations VALUES ('m099_from_the_future', 'x')")
    with pytest.raises(StorageError) as err:
        _store(fresh_database)
    assert str(err.value) == (
        f"database {redacted(fresh_database)} was migrated by a newer Cortex (unknown "
        "migration 'm099_from_the_future'); upgrade Cortex to open it"
    )
    with _store(fresh_database, migrate=False) as bare:
        names = [name for name, _ in bare.applied_migrations()]
    assert "m012_memory_embeddings" not in names and names[-1] == "m099_from_the_future"


REGISTRY = ("tenants", "api_keys", "admin_audit")
"""The server's registry: the database's own tables (each row names its tenant)."""


def test_every_data_table_leads_with_the_tenant(pg_root: Any) -> None:
    outside = "('_cortex_migrations', " + ", ".join(f"'{t}'" for t in REGISTRY) + ")"
    with pg_root.pool.connection() as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                f"AND tablename NOT IN {outside}"
            )
        ]
        firsts = conn.execute(
            "SELECT c.relname, i.indisunique, a.attname, a.attnotnull FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid "
            "JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = i.indkey[0] "
            "JOIN pg_namespace n ON n.oid = t.relnamespace WHERE n.nspname = current_schema() "
            f"AND t.relname NOT IN {outside}"
        ).fetchall()
    assert sorted(tables) == [
        "audit_log",
        "checkpoints",
        "compaction_events",
        "consolidation_runs",
        "memories",
        "memory_embeddings",
        "memory_links",
        "metric_counters",
        "metrics",
        "procedures",
        "request_ids",
        "session_events",
        "session_snapshots",
        "session_states",
        "tasks",
        "worker_jobs",
    ]
    unique = [(name, col, notnull) for name, uniq, col, notnull in firsts if uniq]
    assert len(unique) >= 12  # a primary key per table, and the live-upsert index
    assert {(col, notnull) for _, col, notnull in unique} == {("tenant_id", True)}
    led = {name for name, _, col, _ in firsts if col == "tenant_id"}
    assert {name for name, *_ in firsts} - led == {"idx_memories_search"}  # GIN, no tenant


# -- values come back as written ---------------------------------------------------------------
def test_timestamps_and_json_are_stored_as_written(pg_store: Any) -> None:
    state = session("s1", "2026-02-16T09:00:00Z", project="p", last_activity=t(16, 9))
    pg_store.save_session(state)
    pg_store.save_session(full_session("full"))
    assert pg_store.get_session("s1") == state
    with pg_store.pool.connection() as conn:
        row = conn.execute(
            "SELECT start_time, last_activity, jsonb_typeof(working_memory), "
            "jsonb_typeof(topic_state), crash_recovered FROM session_states "
            "WHERE tenant_id = %s AND id = 'full'",
            (pg_store.tenant,),
        ).fetchone()
    assert row == (t(10, 9), t(10, 11, 29), "array", "object", True)


def test_restore_reads_pins_only_of_sessions_with_a_critical_one(pg_store: Any) -> None:
    pg_store.save_session(full_session("crit"))
    plain = full_session("plain")
    pins = plain.working_memory[1:]
    pg_store.save_session(session("plain", t(10), t(10, 11), project="cortex", working_memory=pins))
    light = pg_store.completed_sessions_since(t(1), "cortex", limit=5, all_pins=False)
    assert [(s.session_id, len(s.working_memory)) for s in light] == [("crit", 2), ("plain", 0)]
    assert light[0].topic_state == {} and light[0].recent_learnings == ()


def test_a_decoded_session_row_is_reused_until_the_row_changes(pg_store: Any) -> None:
    """JSON columns come back as text, so a row read before (a restore reads the same
    candidates at every start) is not decoded again; a changed row is."""
    from dataclasses import replace

    pg_store.save_session(full_session("memo"))
    first = pg_store.get_session("memo")
    assert first is not None and pg_store.get_session("memo") is first
    light = pg_store.completed_sessions_since(t(1), "cortex", limit=5, all_pins=False)
    assert pg_store.completed_sessions_since(t(1), "cortex", limit=5, all_pins=False)[0] is light[0]
    changed = replace(first, hot_topics=(*first.hot_topics, "antenna"))
    pg_store.save_session(changed)
    again = pg_store.get_session("memo")
    assert again == changed and again is not first


# -- full-text search --------------------------------------------------------------------------
def _ids(found: list[tuple[Memory, float]]) -> list[str]:
    return [m.id for m, _ in found]


def test_search_ranks_by_terms_and_filters(pg_store: Any) -> None:
    pg_store.add_memories(
        [
            memory("a", "redis broke starlette under load"),
            memory("b", "redis cache warmed"),
            memory("c", "redis in web", scope="project", project="web"),
            memory("d", "unrelated", tags=("redis",)),
            memory("gone", "redis retired", expires_at=t(16, 8)),
        ]
    )
    found = pg_store.search_memories(["redis", "starlette"], MemoryFilter(), NOW, limit=9)
    assert _ids(found)[:2] == ["a", "b"] and set(_ids(found)) == {"a", "b", "d"}
    assert found[0][1] > found[1][1] > found[2][1] > 0  # higher is better; a tag counts less
    assert _ids(pg_store.search_memories(["redis"], MemoryFilter(project="web"), NOW, limit=9))[
        :1
    ] == ["c"] or "c" in _ids(
        pg_store.search_memories(["redis"], MemoryFilter(project="web"), NOW, limit=9)
    )
    assert "c" not in _ids(pg_store.search_memories(["redis"], MemoryFilter(), NOW, limit=9))
    assert _ids(pg_store.search_memories(["redis"], MemoryFilter(), NOW, limit=1)) == ["b"]
    assert pg_store.search_memories(["nothing"], MemoryFilter(), NOW, limit=5) == []
    assert pg_store.search_memories([], MemoryFilter(), NOW, limit=5) == []
    assert _ids(pg_store.search_memories(["running"], MemoryFilter(), NOW, limit=5)) == []
    pg_store.add_memories([memory("run", "she runs daily")])
    assert _ids(pg_store.search_memories(["running"], MemoryFilter(), NOW, limit=5)) == ["run"]


def test_search_terms_are_never_syntax(pg_store: Any) -> None:
    pg_store.add_memories([memory("a", "o'brien said & or | !not")])
    for terms in (["o'brien"], ["&", "|", "!", ":*"], ["or"], ["'"], ['"x"']):
        pg_store.search_memories(terms, MemoryFilter(), NOW, limit=5)
    assert _ids(pg_store.search_memories(["brien", "&"], MemoryFilter(), NOW, limit=5)) == ["a"]


def test_search_ties_newest_first_and_follows_edits(pg_store: Any) -> None:
    pg_store.add_memories([memory(f"m{i}", f"redis note {i}") for i in range(5)])
    tied = pg_store.search_memories(["redis"], MemoryFilter(), NOW, limit=2)
    assert [(m.id, score) for m, score in tied] == [("m4", 1.0), ("m3", 1.0)]
    pg_store.update_memory(Memory("m0", "uses sqlite", created_at=t(16), updated_at=t(17)))
    assert _ids(pg_store.search_memories(["sqlite"], MemoryFilter(), NOW, limit=5)) == ["m0"]
    assert "m0" not in _ids(pg_store.search_memories(["redis"], MemoryFilter(), NOW, limit=9))
    assert pg_store.delete_memory("m0", t(18)) is True
    assert pg_store.delete_memory("m0", t(18)) is False
    assert pg_store.search_memories(["sqlite"], MemoryFilter(), NOW, limit=5) == []
    gone = pg_store.get_memory("m0")
    assert gone is not None and gone.deleted_at == t(18) and gone.content == "uses sqlite"


def test_search_is_served_by_the_gin_index(pg_store: Any) -> None:
    from cortex.store.postgres.memories import search_sql

    pg_store.add_memories([memory(f"m{i}", f"note {i}") for i in range(2000)])
    pg_store.add_memories([memory("z", "a zebra note")])
    sql, params = search_sql(pg_store.tenant, ["zebra"], MemoryFilter(), NOW, 5)
    with pg_store.pool.connection() as conn:
        conn.execute("ANALYZE memories")
        plan = " ".join(r[0] for r in conn.execute("EXPLAIN " + sql, params))
    assert "Bitmap Index Scan on idx_memories_search" in plan


def test_neighbours_are_one_step_in_the_session_index(pg_store: Any) -> None:
    from cortex.store.filters import adjacent_sql
    from cortex.store.postgres.memories import SELECT, filter_sql

    pg_store.add_memories(
        [memory(f"m{i}", f"turn {i}", source_session_id=f"s{i % 50}") for i in range(2000)]
    )
    where, params = filter_sql(MemoryFilter(), NOW)
    sql = adjacent_sql(SELECT, "s.id = ANY(%s)", where, tenant="%s")
    with pg_store.pool.connection() as conn:
        conn.execute("ANALYZE memories")
        values = (pg_store.tenant, ["m0", "m7"], pg_store.tenant, *params)
        plan = " ".join(r[0] for r in conn.execute("EXPLAIN " + sql, values))
    # each side seeks (tenant, session, seq); the tenant's seq index alone walked a session's
    # first or last memory to the start or end of the tenant
    assert plan.count("using idx_memories_session_seq") == 2
    found = pg_store.adjacent_memories(["m0", "m7"], MemoryFilter(), NOW)
    assert sorted((seed, m.id) for seed, m in found) == [("m0", "m50"), ("m7", "m57")]


# -- pool and transactions ---------------------------------------------------------------------
def test_stores_share_a_pool_and_hold_a_connection_only_while_busy(pg_url: str) -> None:
    from cortex.store.postgres import open_pool

    pool = open_pool(pg_url, max_size=1, timeout=3)
    try:
        one, two = _store(pg_url, "one", pool=pool), _store(pg_url, "two", pool=pool)
        with one.transaction():  # everything inside uses the one connection, nested or not
            one.save_session(session("s", t(1)))
            with one.transaction():
                one.append_metric("e", None, {}, t(1), "0" * 64, "h1")
            assert one.count_sessions() == 1 and one.last_metric() is not None
        two.save_session(session("s", t(2)))
        assert (one.count_sessions(), two.count_sessions()) == (1, 1)
        one.close()  # a store on a shared pool leaves it open
        assert two.for_tenant("one").get_session("s") == session("s", t(1))
    finally:
        pool.close()


def test_a_failed_statement_rolls_the_transaction_back(pg_store: Any) -> None:
    pg_store.save_snapshot(SessionSnapshot("dup", "s1", "x", "manual", "# t\n", 1, t(1)))
    with pytest.raises(ConflictError, match="^write conflicts with a stored record"):
        with pg_store.transaction():
            pg_store.save_session(session("s1", t(1)))
            pg_store.save_snapshot(SessionSnapshot("dup", "s1", "x", "manual", "# u\n", 1, t(2)))
    assert pg_store.count_sessions() == 0
    pg_store.save_session(session("s1", t(1)))
    assert pg_store.count_sessions() == 1


def test_a_failed_statement_caught_inside_the_transaction_still_rolls_it_back(
    pg_store: Any,
) -> None:
    """A caller that catches a statement's error and goes on (a metrics write is best effort)
    does not commit the rest: PostgreSQL ended the transaction at the failed statement, so
    the transaction raises that error again at its end and nothing of it is stored."""
    pg_store.save_snapshot(SessionSnapshot("dup", "s1", "x", "manual", "# t\n", 1, t(1)))
    with pytest.raises(ConflictError, match="^write conflicts with a stored record"):
        with pg_store.transaction():
            pg_store.save_session(session("s1", t(1)))
            with contextlib.suppress(ConflictError):  # caught and passed over
                pg_store.save_snapshot(
                    SessionSnapshot("dup", "s1", "x", "manual", "# u\n", 1, t(2))
                )
            pg_store.save_session(session("s2", t(2)))
    assert pg_store.count_sessions() == 0
    pg_store.save_session(session("s3", t(3)))  # the store goes on as before
    assert pg_store.count_sessions() == 1


def test_a_chain_lock_goes_with_the_next_statement_and_holds_until_commit(pg_url: str) -> None:
    from cortex.store.postgres import open_pool

    pool = open_pool(pg_url, max_size=2, timeout=5)
    try:
        one, two = _store(pg_url, "chain", pool=pool), _store(pg_url, "chain", pool=pool)
        order: list[str] = []

        def append() -> None:
            two.append_metric("e2", None, {}, t(2), "0" * 64, "h2")
            order.append("two")

        with one.transaction():
            assert one.last_metric() is None  # BEGIN, the chain lock and this read: one trip
            waiter = threading.Thread(target=append)
            waiter.start()
            waiter.join(0.5)
            assert waiter.is_alive() and not order  # the other writer waits for the lock
            one.append_metric("e1", None, {}, t(1), "0" * 64, "h1")
            order.append("one")
        waiter.join(5)
        assert order == ["one", "two"]
        assert [m.event for m in one.list_metrics()] == ["e1", "e2"]
    finally:
        pool.close()


def test_a_failing_first_statement_rolls_back_and_frees_the_connection(pg_url: str) -> None:
    from cortex.store.postgres import open_pool

    pool = open_pool(pg_url, max_size=1, timeout=3)
    try:
        store = _store(pg_url, "first", pool=pool)
        store.save_snapshot(SessionSnapshot("dup", "s1", "x", "manual", "# t\n", 1, t(1)))
        with pytest.raises(ConflictError), store.transaction():
            store.save_snapshot(SessionSnapshot("dup", "s1", "x", "manual", "# u\n", 1, t(2)))
        with store.transaction():
            pass  # runs nothing, sends nothing
        store.save_session(session("s1", t(1)))  # the pool's one connection is usable
        assert store.count_sessions() == 1
    finally:
        pool.close()


def test_a_session_write_in_a_transaction_goes_with_the_next_statement(pg_store: Any) -> None:
    with pg_store.transaction():
        pg_store.save_session(session("s1", t(1)))
        assert pg_store.get_session("s1") == session("s1", t(1))  # the write ran first
        pg_store.save_session(session("s2", t(2)))  # sent with the commit
    assert pg_store.count_sessions() == 2
    with pytest.raises(ValidationError, match="^PostgreSQL cannot store this value"):
        with pg_store.transaction():
            assert pg_store.claim_request("r1", t(3))
            pg_store.save_session(session("s3", t(3), project="a\x00b"))  # fails at the commit
    assert pg_store.count_sessions() == 2
    assert pg_store.claim_request("r1", t(3))  # the claim was rolled back with it


# -- errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://ana:s3cr%40t@db:5432/cortex", "postgresql://ana:***@db:5432/cortex"),
        ("postgres://ana@db/cortex?sslmode=require", "postgres://ana@db/cortex?sslmode=require"),
        ("host=db user=ana password=s3cret dbname=c", "host=db user=ana password=*** dbname=c"),
        ("postgresql:///cortex?password='a b'&x=1", "postgresql:///cortex?password=***&x=1"),
        ("postgresql://h/c?password=abc&sslmode=no", "postgresql://h/c?password=***&sslmode=no"),
    ],
)
def test_passwords_never_show(url: str, shown: str) -> None:
    from cortex.store.postgres.db import redacted

    assert redacted(url) == shown


@pytest.mark.parametrize(
    ("error", "kind", "expected"),
    [
        (
            "UniqueViolation",
            ConflictError,
            "write conflicts with a stored record (duplicate key); change that one",
        ),
        (
            "UndefinedTable",
            StorageError,
            "database pg://x is not migrated (no table); run `cortex db migrate`",
        ),
        (
            "InsufficientPrivilege",
            StorageError,
            "database pg://x refused access (denied); grant the role its rights",
        ),
        ("DeadlockDetected", ContentionError, "database pg://x is busy (deadlock); retry"),
        (
            "SerializationFailure",
            ContentionError,
            "database pg://x is busy (could not serialize); retry",
        ),
        ("QueryCanceled", StorageError, "database pg://x is busy (statement timeout); retry"),
        (
            "LockNotAvailable",
            BusyError,
            "what this request needs is held by another transaction (lock timeout); retry shortly",
        ),
        ("DiskFull", StorageError, "cannot write database pg://x (full); free space and retry"),
        (
            "AdminShutdown",
            StorageError,
            "cannot reach PostgreSQL at pg://x (shutting down); check that the server runs and "
            "the URL is right",
        ),
        (
            "SyntaxError",
            StorageError,
            "database pg://x failed (at or near x); retry, and if it fails again see "
            "PostgreSQL's log for the statement and its cause",
        ),
        (
            "PoolTimeout",
            StorageError,
            "database pg://x is busy: no free connection (after 10 s); retry, or give the pool "
            "more",
        ),
    ],
)
def test_psycopg_errors_become_one_line_cortex_errors(
    error: str, kind: type[Exception], expected: str
) -> None:
    import psycopg_pool
    from psycopg import errors

    from cortex.store.postgres.db import cortex_error

    words = expected.split("(", 1)[1].split(")")[0]
    cls = getattr(errors, error, None) or getattr(psycopg_pool, error)
    translated = cortex_error(cls(words.replace(" ", "\n  ", 1)), "pg://x")
    assert type(translated) is kind and str(translated) == expected


def test_a_statement_without_the_tenant_is_refused(pg_store: Any) -> None:
    from cortex.store.postgres.db import Runner

    runner = Runner(pg_store.pool, pg_store.tenant, pg_store.url)
    with pytest.raises(RuntimeError, match="^statement without a tenant filter refused"):
        runner.rows("SELECT count(*) FROM memories")
    assert runner.rows("SELECT count(*) FROM memories WHERE tenant_id = %s", (runner.tenant,))


def test_unreachable_server_is_one_line_without_the_password() -> None:
    with pytest.raises(StorageError) as info:
        _store("postgresql://postgres:hunter2@127.0.0.1:1/cortex")
    message = str(info.value)
    assert "\n" not in message and "hunter2" not in message
    assert message.startswith("cannot reach PostgreSQL at postgresql://postgres:***@127.0.0.1:1/")
    assert message.endswith("; check that the server runs and the URL is right")


def test_values_postgresql_cannot_hold_are_validation_errors(pg_store: Any) -> None:
    with pytest.raises(ValidationError, match="^PostgreSQL cannot store this value .*NUL"):
        pg_store.add_memories([memory("nul", "a\x00b")])
    assert pg_store.get_memory("nul") is None


@pytest.mark.parametrize("tenant", ["", " ", "x" * 129, "a\nb"])
def test_tenant_ids_are_checked(pg_root: Any, tenant: str) -> None:
    with pytest.raises(ValidationError, match="tenant"):
        pg_root.for_tenant(tenant)


# -- the factory -------------------------------------------------------------------------------
def test_open_store_opens_postgresql_for_a_tenant(pg_url: str) -> None:
    from cortex.store.postgres import PostgresStore

    for url in (pg_url, pg_url.replace("postgresql://", "postgres://", 1)):
        store = open_store(url, tenant="acme")
        assert isinstance(store, PostgresStore) and store.tenant == "acme"
        store.save_session(session("s", t(1)))
        assert store.count_sessions() == 1
        store.delete_sessions(["s"])
        store.close()


def test_open_store_on_sqlite_has_only_the_default_tenant(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="^tenant 'acme' needs a postgresql:// store"):
        open_store(tmp_path / "brain.db", tenant="acme")
    open_store(tmp_path / "brain.db", tenant="default").close()


def test_open_store_without_psycopg_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m.startswith(("cortex.store.postgres", "psycopg"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "psycopg", None)  # what an install without it looks like
    with pytest.raises(ConfigError) as info:
        open_store("postgresql://localhost/cortex")
    assert str(info.value) == (
        "PostgreSQL support is not installed; run pip install 'cortex-continuity[postgres]'"
    )


# -- integrity ---------------------------------------------------------------------------------
def _corrupt(store: Any, sql: str) -> None:
    with store.pool.connection() as conn:
        conn.execute(sql.replace("TENANT", "%s"), (store.tenant,))


def test_check_integrity_finds_damaged_rows_of_its_tenant_only(pg_store: Any) -> None:
    neighbour = pg_store.for_tenant(pg_store.tenant + "-neighbour")
    for store in (pg_store, neighbour):
        store.save_session(full_session("s1"))
        for i in range(1, 4):
            store.append_metric("e", None, {}, t(1), f"h{i - 1}", f"h{i}")
        store.add_memories([memory("a", "v1", upsert_key="k"), memory("b", "x")])
        store.add_memories([memory("a2", "v2", upsert_key="k")])
        store.save_embeddings("m", [("b", 2, b"\x00" * 8)])
        store.save_checkpoint(Checkpoint("c1", "s1", t(1), "manual", "one"))
        assert store.check_integrity() == []
    _corrupt(pg_store, "UPDATE session_states SET hot_topics = '{}' WHERE tenant_id = TENANT")
    _corrupt(pg_store, "UPDATE metrics SET prev_hash = 'x' WHERE tenant_id = TENANT AND seq = 3")
    _corrupt(pg_store, "UPDATE metric_counters SET last_seq = 1 WHERE tenant_id = TENANT")
    _corrupt(
        pg_store, "UPDATE memories SET superseded_by = 'zz' WHERE tenant_id = TENANT AND id = 'a'"
    )
    _corrupt(
        pg_store, "UPDATE memories SET superseded_at = 'x' WHERE tenant_id = TENANT AND id = 'b'"
    )
    _corrupt(pg_store, "UPDATE memory_embeddings SET dim = 3 WHERE tenant_id = TENANT")
    _corrupt(
        pg_store,
        "UPDATE checkpoints SET body = jsonb_set(body, '{session_id}', '\"s9\"') "
        "WHERE tenant_id = TENANT",
    )
    assert pg_store.check_integrity() == [
        "session s1: column hot_topics has the wrong JSON shape",
        "metrics event 3 does not follow event 2 (chain broken); run `cortex metrics verify`",
        "metrics counter is behind event 3: new events would reuse numbers",
        "memory a is superseded by missing memory zz",
        "memory b has only one of superseded_by and superseded_at",
        "memory b: m vector has 8 bytes, not 4 x 3",
        "checkpoint c1: its body does not match its row",
    ]
    assert neighbour.check_integrity() == []


def test_appends_after_the_locked_head_read_take_the_counters_next_numbers(pg_store: Any) -> None:
    """The appends of a transaction that read the chain's head go with its COMMIT, numbered
    from the counter read with the head: after the newest events were deleted the numbers
    still continue from the counter (never reused), and two batches follow each other."""
    for i in range(1, 4):
        pg_store.append_metric("e", None, {}, t(1), f"h{i - 1}", f"h{i}")
    _corrupt(pg_store, "DELETE FROM metrics WHERE tenant_id = TENANT AND seq = 3")
    rows = [(f"n{i}", None, {"i": i}, t(2), f"h{i + 1}", f"h{i + 2}") for i in range(1, 4)]
    with pg_store.transaction():
        last = pg_store.last_metric()
        assert last is not None and last.seq == 2
        first = pg_store.append_metrics(rows[:2])
        second = pg_store.append_metrics(rows[2:])
    assert (first, second) == ([4, 5], [6])
    assert [(m.seq, m.event) for m in pg_store.list_metrics(after_seq=2)] == [
        (4, "n1"),
        (5, "n2"),
        (6, "n3"),
    ]
    assert pg_store.append_metric("after", None, {}, t(3), "h5", "h6") == 7
    with pg_store.transaction():  # one event, then a batch: the batch comes after it
        pg_store.last_metric()
        assert pg_store.append_metric("one", None, {}, t(3), "h6", "h7") == 8
        assert pg_store.append_metrics([("two", None, {}, t(3), "h7", "h8")]) == [9]


def test_a_head_read_of_another_transaction_numbers_nothing(pg_store: Any) -> None:
    """Numbers known from one transaction's head read are not used by the next one."""
    pg_store.append_metric("e", None, {}, t(1), "0" * 64, "h1")
    with pg_store.transaction():
        pg_store.last_metric()
    pg_store.append_metric("other", None, {}, t(1), "h1", "h2")  # moves the counter
    with pg_store.transaction():
        assert pg_store.append_metrics([("x", None, {}, t(2), "h2", "h3")]) == [3]
    assert [m.seq for m in pg_store.list_metrics()] == [1, 2, 3]


def test_history_rows_round_trip_per_session(pg_store: Any) -> None:
    event = SessionEvent("e1", "s1", "tool", "event", "ran", 0, None, False, t(1))
    pg_store.append_session_event(event)
    assert pg_store.list_session_events("s1") == [event]
    assert pg_store.list_session_events("s1", meaningful_only=True) == []


def test_a_filter_of_no_layers_sees_nothing(pg_store: Any) -> None:
    pg_store.add_memories([memory("a", "redis")])
    assert pg_store.list_memories(MemoryFilter(layers=()), NOW) == []
    assert pg_store.search_memories(["redis"], MemoryFilter(layers=()), NOW, limit=5) == []
    assert pg_store.count_memories(MemoryFilter(layers=("long_term",)), NOW) == 1


def test_a_statement_first_prepared_in_a_failed_pipeline_stays_usable(pg_store: Any) -> None:
    # psycopg prepares a statement on its sixth run; when that run sits behind a failing
    # statement in a pipeline the server never parses it, yet psycopg records it as prepared,
    # and its ROLLBACK forgets that only the first time a connection runs one: every later run
    # on that connection would fail "prepared statement ... does not exist".
    from cortex.store.postgres.db import Runner

    runner = Runner(pg_store.pool, pg_store.tenant, pg_store.url)
    count = "SELECT count(*) FROM memories WHERE tenant_id = %s"
    fails = "SELECT count(*) / 0 FROM memories WHERE tenant_id = %s"

    def failed_transaction(*then: str) -> None:
        with pytest.raises(ValidationError, match="division by zero"), runner.transaction():
            runner.execute_later(fails, (runner.tenant,))
            for sql in then:  # each goes in one pipeline with the failing one, aborted
                runner.rows(sql, (runner.tenant,))

    failed_transaction()  # a ROLLBACK with nothing prepared yet
    for _ in range(2):
        for _ in range(5):
            assert runner.rows(count, (runner.tenant,)) == [(0,)]
        failed_transaction(count)  # its sixth run
        assert runner.rows(count, (runner.tenant,)) == [(0,)]


def _supersedes_two(store: Any) -> list[Any]:
    """ "b" supersedes "a" by key and "x" by consolidation, "b" relates to "c": its links."""
    from cortex.core.memory_models import MemoryLink

    store.add_memories([memory("a", "v1", upsert_key="k"), memory("x", "x"), memory("c", "c")])
    store.add_memories([memory("b", "v2", upsert_key="k", created_at=t(17))])
    assert store.supersede_memory("x", "b", t(18))
    store.add_memory_link(MemoryLink("b", "c", "relates", t(19)))
    return list(store.memory_links("b"))


def test_a_supersede_is_held_by_the_two_rows_not_a_link_row(pg_store: Any) -> None:
    _supersedes_two(pg_store)
    with pg_store.pool.connection() as conn:
        links = conn.execute(
            "SELECT from_id, to_id, kind FROM memory_links WHERE tenant_id = %s ORDER BY 2",
            (pg_store.tenant,),
        ).fetchall()
        rows = conn.execute(
            "SELECT id, supersedes, superseded_by FROM memories WHERE tenant_id = %s ORDER BY id",
            (pg_store.tenant,),
        ).fetchall()
    # "b" holds one supersede in its row; the second one it makes stays a link row.
    assert links == [("b", "c", "relates"), ("b", "x", "supersedes")]
    assert rows == [("a", None, "b"), ("b", "a", None), ("c", None, None), ("x", None, "b")]


def test_m024_moves_the_supersedes_links_the_rows_can_hold(fresh_database: str) -> None:
    with _store(fresh_database, "t1") as store:
        before = _supersedes_two(store)
        with store.pool.connection() as conn:
            # The database as m023 left it: every supersede a link row, no column.
            conn.execute(
                "INSERT INTO memory_links SELECT n.tenant_id, n.id, n.supersedes, 'supersedes', "
                "o.superseded_at FROM memories n JOIN memories o ON o.tenant_id = n.tenant_id "
                "AND o.id = n.supersedes"
            )
            conn.execute("ALTER TABLE memories DROP COLUMN supersedes")
            conn.execute(
                "DELETE FROM _cortex_migrations WHERE name = 'm024_memory_supersedes_column'"
            )
    with _store(fresh_database, "t1") as store:
        assert store.memory_links("b") == before
        with store.pool.connection() as conn:
            links = conn.execute("SELECT from_id, to_id FROM memory_links ORDER BY 2").fetchall()
    assert links == [("b", "c"), ("b", "x")]


def test_a_team_server_keeps_every_tenants_restore_candidates_decoded(
    pg_url: str, tmp_path: Path
) -> None:
    """A start reads its tenant's ~50 candidates: a server of many tenants keeps more rows
    than a laptop, or the tenants' starts would push one another's rows out."""
    from cortex.services.hosting import ServiceHost
    from cortex.store import records

    limits = list(records._limits)
    try:
        ServiceHost(pg_url, tmp_path).close()
        assert records._limits == [records.SERVER_DECODED_SESSIONS, records.SERVER_DECODED_CHARS]
        assert records.SERVER_DECODED_SESSIONS >= 50 * 50  # fifty tenants' windows
    finally:
        records.keep_decoded_sessions(*limits)


_OPEN_BY_LEASE = (
    "CREATE INDEX idx_session_open ON session_states(tenant_id, last_activity DESC NULLS LAST) "
    "WHERE end_time IS NULL"
)
"""m002's open sessions' index, keyed by the lease every captured turn moves."""


def _hot_updates_of_a_turn(store: Any) -> int:
    """How many of a captured turn's rewrites of its session row (``UPSERT``: a new lease,
    new topics) PostgreSQL made HOT updates, read in the rewriting transaction."""
    from dataclasses import replace

    from cortex.store.postgres.sessions import UPSERT, session_row

    def hot(conn: Any) -> int:  # (the backend's counts not yet reported, this transaction's too)
        sql = "SELECT n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relname = %s"
        return int(conn.execute(sql, ("session_states",)).fetchone()[0])

    opened = session("hot", t(10, 9), last_activity=t(10, 9), hot_topics=("a",))
    with store.pool.connection() as conn:
        conn.execute(UPSERT, session_row(store.tenant, opened))
        with conn.transaction():
            before = hot(conn)
            for minute in (1, 2, 3):
                turned = replace(opened, last_activity=t(10, 9, minute), hot_topics=("a", "b"))
                conn.execute(UPSERT, session_row(store.tenant, turned))
            return hot(conn) - before


def test_a_captured_turns_rewrite_of_its_session_is_a_hot_update(fresh_database: str) -> None:
    with _store(fresh_database, "t1") as store:
        assert _hot_updates_of_a_turn(store) == 3  # no index entry written, none left dead
        with store.pool.connection() as conn:  # the index before m026: no turn is HOT
            conn.execute("DROP INDEX idx_session_open")
            conn.execute(_OPEN_BY_LEASE)
            conn.execute("DELETE FROM session_states")
        assert _hot_updates_of_a_turn(store) == 0


def test_m026_rebuilds_the_open_sessions_index_in_place(fresh_database: str) -> None:
    with _store(fresh_database, "t1") as store:
        store.save_session(session("old", t(10, 8), last_activity=t(10, 8)))
        store.save_session(session("new", t(10, 9), last_activity=t(10, 12)))
        store.save_session(session("ended", t(10, 7), t(10, 8), last_activity=t(10, 8)))
        with store.pool.connection() as conn:  # the database as m025 left it
            conn.execute("DROP INDEX idx_session_open")
            conn.execute(_OPEN_BY_LEASE)
            conn.execute(
                "DELETE FROM _cortex_migrations WHERE name = 'm026_open_sessions_by_start'"
            )
    with _store(fresh_database, "t1") as store:
        assert [name for name, _ in store.applied_migrations()] == migration_names()
        with store.pool.connection() as conn, conn.transaction():
            (definition,) = conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE indexname = 'idx_session_open'"
            ).fetchone()
            conn.execute("SET LOCAL enable_seqscan = off")  # (three rows: as if many)
            plan = conn.execute(
                "EXPLAIN SELECT id FROM session_states WHERE tenant_id = 't1' "
                "AND end_time IS NULL ORDER BY start_time, id"
            ).fetchall()
        assert definition.endswith("(tenant_id, start_time, id) WHERE (end_time IS NULL)")
        assert "idx_session_open" in str(plan) and "Sort" not in str(plan)  # in its order
        assert [s.session_id for s in store.open_sessions()] == ["old", "new"]
        found = store.latest_open_session(any_project=True)
        assert found is not None and found.session_id == "new"  # the newest lease
