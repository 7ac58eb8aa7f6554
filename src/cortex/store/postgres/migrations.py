"""PostgreSQL schema migrations: the SQLite steps' names, in the same order, for PostgreSQL.

Each step runs in its own transaction together with its row in ``_cortex_migrations(name,
applied_at)``, under an advisory lock, so that server processes starting at once apply each
step exactly once. Migrations belong to the database, not to a tenant: every data table
carries ``tenant_id`` from its first step, leading its primary key and unique indexes, so two
tenants may use the same session or memory ids.

Differences from SQLite, each for PostgreSQL's sake: JSON lists are ``JSONB`` (the metrics
payload and audit detail stay ``TEXT``, the exact text that was written and hashed);
booleans are ``BOOLEAN``; ids and timestamps are ``TEXT COLLATE "C"``, so they sort byte by
byte as in SQLite whatever the database's locale; ``seq`` columns are identities; full text
is a generated ``tsvector`` with a GIN index instead of FTS5. Never edit a step that has
shipped; add a new one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

from cortex.clock import SystemClock, to_iso
from cortex.store.links import fold_supersedes
from cortex.store.postgres.db import LOCK_MIGRATIONS

Conn = psycopg.Connection[Any]
Step = Callable[[Conn], None]
MIGRATIONS_TABLE = "_cortex_migrations"
KEY = 'TEXT COLLATE "C"'
"""Ids and timestamps: compared and sorted byte by byte, as SQLite does."""


def _run(conn: Conn, *statements: str) -> None:
    for sql in statements:
        conn.execute(sql)


def m001_session_states(conn: Conn) -> None:
    """The spec's schema v4 ``session_states`` table, per tenant, and its three indexes."""
    _run(
        conn,
        f"""
        CREATE TABLE session_states (
            tenant_id {KEY} NOT NULL,
            id {KEY} NOT NULL,
            start_time {KEY} NOT NULL,
            end_time {KEY},
            channel TEXT DEFAULT 'unknown',
            working_memory JSONB NOT NULL DEFAULT '[]',
            hot_topics JSONB NOT NULL DEFAULT '[]',
            active_projects JSONB NOT NULL DEFAULT '[]',
            pending_tasks JSONB NOT NULL DEFAULT '[]',
            recent_learnings JSONB NOT NULL DEFAULT '[]',
            confidence_updates JSONB NOT NULL DEFAULT '[]',
            sop_interactions JSONB NOT NULL DEFAULT '[]',
            previous_session_id {KEY},
            continued_by {KEY},
            crash_recovered BOOLEAN DEFAULT false,
            schema_version INTEGER DEFAULT 1,
            created_at {KEY} NOT NULL,
            updated_at {KEY},
            PRIMARY KEY (tenant_id, id)
        )
        """,
        "CREATE INDEX idx_session_endtime ON session_states(tenant_id, end_time, start_time)",
        "CREATE INDEX idx_session_prev ON session_states(tenant_id, previous_session_id)",
        "CREATE INDEX idx_session_channel ON session_states(tenant_id, channel, start_time)",
    )


def m002_session_continuity_columns(conn: Conn) -> None:
    """The continuity columns (state, scope, lease, accumulator, owner) and their indexes."""
    columns = (
        "state TEXT NOT NULL DEFAULT 'ACTIVE'",
        "scope TEXT NOT NULL DEFAULT 'project'",
        f"project {KEY}",
        "user_id TEXT",
        "agent_id TEXT",
        "task_slug TEXT",
        f"last_activity {KEY}",
        "topic_state JSONB NOT NULL DEFAULT '{}'",
        "checkpoint_count INTEGER NOT NULL DEFAULT 0",
        f"parent_session {KEY}",
        "owner_pid INTEGER",
        "owner_host TEXT",
    )
    _run(
        conn,
        "ALTER TABLE session_states " + ", ".join(f"ADD COLUMN {c}" for c in columns),
        # Restore: completed sessions of one project, newest end first.
        "CREATE INDEX idx_session_project_end ON session_states(tenant_id, project, end_time)",
        # Crash detection: the open sessions only, newest lease first.
        "CREATE INDEX idx_session_open ON session_states"
        "(tenant_id, last_activity DESC NULLS LAST) WHERE end_time IS NULL",
        # Chaining at start: the project's latest session.
        "CREATE INDEX idx_session_project_start ON session_states(tenant_id, project, start_time)",
        # Listing every session newest first, pages in a stable order.
        "CREATE INDEX idx_session_start ON session_states(tenant_id, start_time, id)",
    )


def m003_metrics(conn: Conn) -> None:
    """The metrics hash chain, one per tenant; a counter row per tenant so ``seq`` counts
    1, 2, 3... in each tenant and a deleted ``seq`` is never reused (SQLite's AUTOINCREMENT)."""
    _run(
        conn,
        f"""
        CREATE TABLE metrics (
            tenant_id {KEY} NOT NULL,
            seq BIGINT NOT NULL,
            event TEXT NOT NULL,
            session_id {KEY},
            payload TEXT NOT NULL,
            created_at {KEY} NOT NULL,
            prev_hash TEXT NOT NULL,
            hash TEXT NOT NULL,
            PRIMARY KEY (tenant_id, seq)
        )
        """,
        "CREATE INDEX idx_metrics_event ON metrics(tenant_id, event, seq)",
        f"""
        CREATE TABLE metric_counters (
            tenant_id {KEY} PRIMARY KEY,
            last_seq BIGINT NOT NULL
        )
        """,
    )


def m004_audit_log(conn: Conn) -> None:
    """Who did what to which record, and when."""
    _run(
        conn,
        f"""
        CREATE TABLE audit_log (
            tenant_id {KEY} NOT NULL,
            id BIGINT GENERATED ALWAYS AS IDENTITY,
            action TEXT NOT NULL,
            actor TEXT NOT NULL,
            target TEXT,
            detail TEXT NOT NULL DEFAULT '{{}}',
            created_at {KEY} NOT NULL,
            PRIMARY KEY (tenant_id, id)
        )
        """,
    )


def m005_memories(conn: Conn) -> None:
    """Memories with their lifecycle columns, their indexes and the live-upsert invariant.

    The unique index ``idx_memories_upsert_live`` is with NULLs folded to '' (a
    unique index treats NULLs as distinct, which would let two global truths coexist).
    """
    _run(
        conn,
        f"""
        CREATE TABLE memories (
            tenant_id {KEY} NOT NULL,
            seq BIGINT GENERATED ALWAYS AS IDENTITY,
            id {KEY} NOT NULL,
            content TEXT NOT NULL,
            type {KEY} NOT NULL DEFAULT 'note',
            memory_layer TEXT NOT NULL DEFAULT 'long_term'
                CHECK (memory_layer IN ('rule', 'working', 'long_term')),
            scope TEXT NOT NULL DEFAULT 'global' CHECK (scope IN ('global', 'project')),
            project_id {KEY},
            user_id {KEY},
            tags TEXT NOT NULL DEFAULT '',
            upsert_key {KEY},
            source_session_id {KEY},
            remember_intent TEXT NOT NULL DEFAULT 'implicit',
            confidence DOUBLE PRECISION NOT NULL DEFAULT 1.0,
            expires_at {KEY},
            superseded_by {KEY},
            superseded_at {KEY},
            last_confirmed_at {KEY},
            created_at {KEY} NOT NULL,
            updated_at {KEY} NOT NULL,
            deleted_at {KEY},
            PRIMARY KEY (tenant_id, id),
            UNIQUE (tenant_id, seq)
        )
        """,
        "CREATE INDEX idx_memories_layer_scope_project "
        "ON memories(tenant_id, memory_layer, scope, project_id)",
        "CREATE INDEX idx_memories_layer_expires ON memories(tenant_id, memory_layer, expires_at)",
        "CREATE INDEX idx_memories_source_session ON memories(tenant_id, source_session_id)",
        # Live memories newest first (listing, context) without a sort.
        "CREATE INDEX idx_memories_live ON memories(tenant_id, seq DESC) "
        "WHERE deleted_at IS NULL AND superseded_at IS NULL",
        "CREATE UNIQUE INDEX idx_memories_upsert_live ON memories(tenant_id, scope, "
        "COALESCE(project_id, ''), COALESCE(user_id, ''), type, upsert_key) "
        "WHERE upsert_key IS NOT NULL AND deleted_at IS NULL AND superseded_at IS NULL",
    )


def m006_memory_fts(conn: Conn) -> None:
    """Full text over content and tags: a generated ``tsvector`` (English stemming, content
    weighted A and tags B) and its GIN index; generated, so it can never fall out of sync."""
    _run(
        conn,
        "ALTER TABLE memories ADD COLUMN search_vector tsvector GENERATED ALWAYS AS ("
        "setweight(to_tsvector('english'::regconfig, content), 'A') || "
        "setweight(to_tsvector('english'::regconfig, tags), 'B')) STORED",
        "CREATE INDEX idx_memories_search ON memories USING GIN (search_vector)",
    )


def m007_memory_links(conn: Conn) -> None:
    """Typed edges between memories, walked one hop by graph expansion (both directions)."""
    _run(
        conn,
        f"""
        CREATE TABLE memory_links (
            tenant_id {KEY} NOT NULL,
            from_id {KEY} NOT NULL,
            to_id {KEY} NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('supersedes', 'conflicts', 'relates')),
            created_at {KEY} NOT NULL,
            PRIMARY KEY (tenant_id, from_id, to_id, kind)
        )
        """,
        "CREATE INDEX idx_memory_links_to ON memory_links(tenant_id, to_id, kind)",
    )


def m008_session_events(conn: Conn) -> None:
    """Session events, on ``session_states.id`` (the one session entity).

    No foreign key: archiving a session row must keep (not cascade-delete) its history.
    """
    _run(
        conn,
        f"""
        CREATE TABLE session_events (
            tenant_id {KEY} NOT NULL,
            seq BIGINT GENERATED ALWAYS AS IDENTITY,
            id {KEY} NOT NULL,
            session_id {KEY} NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
            kind TEXT NOT NULL CHECK (kind IN ('message', 'checkpoint', 'summary', 'event')),
            content TEXT NOT NULL,
            token_count INTEGER NOT NULL DEFAULT 0,
            turn_index INTEGER,
            is_meaningful BOOLEAN NOT NULL DEFAULT true,
            created_at {KEY} NOT NULL,
            PRIMARY KEY (tenant_id, id)
        )
        """,
        "CREATE INDEX idx_session_events_session "
        "ON session_events(tenant_id, session_id, created_at)",
    )


def m009_session_snapshots(conn: Conn) -> None:
    """Markdown transcripts of a session's meaningful events, with what triggered them."""
    _run(
        conn,
        f"""
        CREATE TABLE session_snapshots (
            tenant_id {KEY} NOT NULL,
            seq BIGINT GENERATED ALWAYS AS IDENTITY,
            id {KEY} NOT NULL,
            session_id {KEY} NOT NULL,
            slug TEXT NOT NULL,
            source_trigger TEXT NOT NULL
                CHECK (source_trigger IN ('new_session', 'reset', 'manual', 'auto_compaction')),
            transcript_md TEXT NOT NULL,
            message_count INTEGER NOT NULL,
            created_at {KEY} NOT NULL,
            PRIMARY KEY (tenant_id, id)
        )
        """,
        "CREATE INDEX idx_session_snapshots_session "
        "ON session_snapshots(tenant_id, session_id, created_at)",
    )


def m010_checkpoints(conn: Conn) -> None:
    """Checkpoints in the continuity protocol's schema; ``body`` is the whole JSON record."""
    _run(
        conn,
        f"""
        CREATE TABLE checkpoints (
            tenant_id {KEY} NOT NULL,
            seq BIGINT GENERATED ALWAYS AS IDENTITY,
            id {KEY} NOT NULL,
            session_id {KEY} NOT NULL,
            type TEXT NOT NULL,
            summary TEXT NOT NULL DEFAULT '',
            body JSONB NOT NULL,
            created_at {KEY} NOT NULL,
            PRIMARY KEY (tenant_id, id)
        )
        """,
        "CREATE INDEX idx_checkpoints_session ON checkpoints(tenant_id, session_id, seq)",
    )


def m011_compaction_events(conn: Conn) -> None:
    """Compaction events (``checkpoint_id`` names the checkpoint written first)."""
    _run(
        conn,
        f"""
        CREATE TABLE compaction_events (
            tenant_id {KEY} NOT NULL,
            seq BIGINT GENERATED ALWAYS AS IDENTITY,
            id {KEY} NOT NULL,
            session_id {KEY} NOT NULL,
            trigger_type TEXT NOT NULL
                CHECK (trigger_type IN ('count', 'time', 'semantic', 'manual')),
            reason TEXT NOT NULL,
            token_count_before INTEGER,
            turn_count_before INTEGER,
            summary_tokens INTEGER,
            checkpoint_id {KEY},
            created_at {KEY} NOT NULL,
            completed_at {KEY},
            PRIMARY KEY (tenant_id, id)
        )
        """,
        "CREATE INDEX idx_compaction_session ON compaction_events(tenant_id, session_id, seq)",
    )


def m012_memory_embeddings(conn: Conn) -> None:
    """Optional dense vectors per memory and model (the ``[embeddings]`` extra fills them)."""
    _run(
        conn,
        f"""
        CREATE TABLE memory_embeddings (
            tenant_id {KEY} NOT NULL,
            model TEXT NOT NULL,
            memory_seq BIGINT NOT NULL,
            dim INTEGER NOT NULL,
            vector BYTEA NOT NULL,
            PRIMARY KEY (tenant_id, model, memory_seq),
            FOREIGN KEY (tenant_id, memory_seq) REFERENCES memories(tenant_id, seq)
                ON DELETE CASCADE
        )
        """,
    )


def m013_tenants_and_keys(conn: Conn) -> None:
    """The server's registry: tenants, their API keys (only a hash of each secret) and the
    audit trail of registry changes. The registry belongs to the database, not to a tenant."""
    _run(
        conn,
        f"""
        CREATE TABLE tenants (
            tenant_id {KEY} PRIMARY KEY,
            created_at {KEY} NOT NULL,
            revoked_at {KEY}
        )
        """,
        f"""
        CREATE TABLE api_keys (
            key_id {KEY} PRIMARY KEY,
            tenant_id {KEY} NOT NULL REFERENCES tenants(tenant_id),
            scopes TEXT NOT NULL,
            secret_hash TEXT NOT NULL,
            label TEXT NOT NULL DEFAULT '',
            created_at {KEY} NOT NULL,
            revoked_at {KEY}
        )
        """,
        "CREATE INDEX idx_api_keys_tenant ON api_keys(tenant_id, created_at)",
        f"""
        CREATE TABLE admin_audit (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            tenant_id {KEY} NOT NULL,
            action TEXT NOT NULL,
            actor TEXT NOT NULL,
            detail TEXT NOT NULL DEFAULT '{{}}',
            created_at {KEY} NOT NULL
        )
        """,
    )


def m014_request_ids(conn: Conn) -> None:
    """Idempotency: each client request id a tenant's change applied, claimed in the change's
    own transaction."""
    _run(
        conn,
        f"""
        CREATE TABLE request_ids (
            tenant_id {KEY} NOT NULL,
            request_id {KEY} NOT NULL,
            created_at {KEY} NOT NULL,
            PRIMARY KEY (tenant_id, request_id)
        )
        """,
    )


def m015_memory_hygiene(conn: Conn) -> None:
    """Consolidation runs (their audit rows), procedures with usage signals, the worker's job
    leases, and the indexes stale/review listings and conflict lookups use."""
    _run(
        conn,
        f"""
        CREATE TABLE consolidation_runs (
            tenant_id {KEY} NOT NULL,
            seq BIGINT GENERATED ALWAYS AS IDENTITY,
            id {KEY} NOT NULL,
            scope TEXT NOT NULL,
            project_id {KEY},
            user_id {KEY},
            mode TEXT NOT NULL CHECK (mode IN ('shadow', 'apply')),
            input_count INTEGER NOT NULL,
            candidate_count INTEGER NOT NULL DEFAULT 0,
            promoted_count INTEGER NOT NULL DEFAULT 0,
            merged_count INTEGER NOT NULL,
            superseded_count INTEGER NOT NULL,
            conflicted_count INTEGER NOT NULL,
            model TEXT,
            created_at {KEY} NOT NULL,
            metadata JSONB NOT NULL DEFAULT '{{}}',
            PRIMARY KEY (tenant_id, id)
        )
        """,
        "CREATE INDEX idx_consolidation_runs_created ON consolidation_runs(tenant_id, created_at)",
        f"""
        CREATE TABLE procedures (
            tenant_id {KEY} NOT NULL,
            seq BIGINT GENERATED ALWAYS AS IDENTITY,
            id {KEY} NOT NULL,
            procedure_key {KEY} NOT NULL,
            title TEXT NOT NULL,
            steps JSONB NOT NULL DEFAULT '[]',
            scope TEXT NOT NULL DEFAULT 'global' CHECK (scope IN ('global', 'project')),
            project_id {KEY},
            user_id {KEY},
            source_session_id {KEY},
            usage_count INTEGER NOT NULL DEFAULT 0,
            last_used_at {KEY},
            created_at {KEY} NOT NULL,
            updated_at {KEY} NOT NULL,
            deleted_at {KEY},
            PRIMARY KEY (tenant_id, id)
        )
        """,
        "CREATE UNIQUE INDEX idx_procedures_key_live ON procedures(tenant_id, scope, "
        "COALESCE(project_id, ''), COALESCE(user_id, ''), procedure_key) "
        "WHERE deleted_at IS NULL",
        "CREATE INDEX idx_procedures_usage "
        "ON procedures(tenant_id, scope, project_id, usage_count DESC, updated_at DESC)",
        "CREATE INDEX idx_procedures_procedure_key ON procedures(tenant_id, procedure_key)",
        f"""
        CREATE TABLE worker_jobs (
            tenant_id {KEY} NOT NULL,
            name {KEY} NOT NULL,
            owner TEXT,
            locked_until {KEY},
            last_started_at {KEY},
            last_finished_at {KEY},
            last_status TEXT,
            last_detail TEXT NOT NULL DEFAULT '{{}}',
            PRIMARY KEY (tenant_id, name)
        )
        """,
        "CREATE INDEX idx_memories_confirmed ON memories(tenant_id, "
        "COALESCE(last_confirmed_at, updated_at)) WHERE deleted_at IS NULL "
        "AND superseded_at IS NULL",
        "CREATE INDEX idx_memory_links_kind ON memory_links(tenant_id, kind, from_id)",
    )


def m017_protocol(conn: Conn) -> None:
    """The continuity protocol: a checkpoint's task (from its session at insert) and lookups of
    a task's sessions and checkpoints."""
    _run(
        conn,
        "ALTER TABLE checkpoints ADD COLUMN IF NOT EXISTS task_slug TEXT",
        "UPDATE checkpoints c SET task_slug = s.task_slug FROM session_states s "
        "WHERE s.tenant_id = c.tenant_id AND s.id = c.session_id AND c.task_slug IS NULL",
        "CREATE INDEX idx_checkpoints_task ON checkpoints(tenant_id, task_slug, seq)",
        "CREATE INDEX idx_session_task ON session_states(tenant_id, task_slug, start_time)",
    )


def m018_tenant_tasks(conn: Conn) -> None:
    """Pipeline tasks kept in the database, per tenant (a team server's pending work)."""
    _run(
        conn,
        f"""
        CREATE TABLE tasks (
            tenant_id {KEY} NOT NULL,
            seq BIGINT GENERATED ALWAYS AS IDENTITY,
            task_id {KEY} NOT NULL,
            title TEXT NOT NULL,
            stage {KEY} NOT NULL,
            project {KEY},
            detail TEXT NOT NULL DEFAULT '{{}}',
            created_at {KEY} NOT NULL,
            updated_at {KEY},
            PRIMARY KEY (tenant_id, task_id)
        )
        """,
        "CREATE INDEX idx_tasks_stage ON tasks(tenant_id, stage, seq)",
    )


def m019_drop_memory_key_index(conn: Conn) -> None:
    """SQLite drops ``idx_memories_upsert_key`` (no query read it). This schema never had it,
    so on a database Cortex made the step drops nothing: both backends apply the same names."""
    _run(conn, "DROP INDEX IF EXISTS idx_memories_upsert_key")


def m021_memory_session_order(conn: Conn) -> None:
    """A session's memories in capture order, for the neighbour query
    (``cortex.store.filters.adjacent_sql``): from a memory to the next lower and next higher
    ``seq`` of its session is one step in ``(tenant_id, source_session_id, seq)``; with
    ``seq`` outside the session index, the first or last memory of a session walked every
    lower or higher ``seq`` of the tenant. The new index serves every query the old one did
    (its prefix), which is dropped."""
    _run(
        conn,
        "CREATE INDEX IF NOT EXISTS idx_memories_session_seq "
        "ON memories(tenant_id, source_session_id, seq)",
        "DROP INDEX IF EXISTS idx_memories_source_session",
    )


def m023_memory_supersede_indexes(conn: Conn) -> None:
    """SQLite drops the confirmation and expiry indexes its queries never read and keeps
    superseded rows in its layer index, so that replacing a live memory writes fewer random
    index pages. Here the
    stale listing does read ``idx_memories_confirmed`` (the same ``COALESCE`` expression) and
    an update writes a new row version either way: the step only makes sure the index is
    there, and on a database Cortex made it creates nothing. Both backends apply the same
    names."""
    _run(
        conn,
        "CREATE INDEX IF NOT EXISTS idx_memories_confirmed ON memories(tenant_id, "
        "COALESCE(last_confirmed_at, updated_at)) WHERE deleted_at IS NULL "
        "AND superseded_at IS NULL",
    )


def m024_memory_supersedes_column(conn: Conn) -> None:
    """SQLite's step, in the same shape: a memory's ``supersedes`` is written with its row
    instead of a link row (on this backend a link row was an insert into a table and two
    indexes besides the row's own write), and the link rows the memories rows hold exactly
    move into the column (``cortex.store.links``)."""
    _run(
        conn,
        f"ALTER TABLE memories ADD COLUMN IF NOT EXISTS supersedes {KEY}",
        *fold_supersedes(tenants=True),
    )


def m025_memory_embeddings_in_rows(conn: Conn) -> None:
    """SQLite moves its vectors out of a ``WITHOUT ROWID`` table, where each one spilled into
    an overflow page, into an ordinary table with a unique index on the key. Here the table
    is a heap already: a vector of MiniLM's 1,536 bytes sits in its row, and the primary key
    is an index beside it. Nothing moves; both backends apply the same names."""
    _run(conn)


def m026_open_sessions_by_start(conn: Conn) -> None:
    """The open sessions' index keyed by what never changes while a session is open.

    m002 keyed it by ``last_activity``, which every captured turn moves: no turn's rewrite of
    its session row could then be a HOT update, so each one added an entry to every index of
    the table (nine) and left the old ones for vacuum, and a start's reads of the tenant's
    sessions stepped over all of them. Keyed by ``start_time`` and ``id`` (the order crash
    recovery takes its candidates in), the index changes at a start and an end only; the
    newest lease is found by sorting the tenant's open sessions, which are few. The index is
    built inside the step's transaction: writes to ``session_states`` wait for it (it holds
    the open sessions only)."""
    _run(
        conn,
        "DROP INDEX IF EXISTS idx_session_open",
        "CREATE INDEX idx_session_open ON session_states(tenant_id, start_time, id) "
        "WHERE end_time IS NULL",
    )


MIGRATIONS: tuple[tuple[str, Step], ...] = (
    ("m001_session_states", m001_session_states),
    ("m002_session_continuity_columns", m002_session_continuity_columns),
    ("m003_metrics", m003_metrics),
    ("m004_audit_log", m004_audit_log),
    ("m005_memories", m005_memories),
    ("m006_memory_fts", m006_memory_fts),
    ("m007_memory_links", m007_memory_links),
    ("m008_session_events", m008_session_events),
    ("m009_session_snapshots", m009_session_snapshots),
    ("m010_checkpoints", m010_checkpoints),
    ("m011_compaction_events", m011_compaction_events),
    ("m012_memory_embeddings", m012_memory_embeddings),
    ("m013_tenants_and_keys", m013_tenants_and_keys),
    ("m014_request_ids", m014_request_ids),
    ("m015_memory_hygiene", m015_memory_hygiene),
    ("m017_protocol", m017_protocol),
    ("m018_tenant_tasks", m018_tenant_tasks),
    ("m019_drop_memory_key_index", m019_drop_memory_key_index),
    ("m021_memory_session_order", m021_memory_session_order),
    ("m023_memory_supersede_indexes", m023_memory_supersede_indexes),
    ("m024_memory_supersedes_column", m024_memory_supersedes_column),
    ("m025_memory_embeddings_in_rows", m025_memory_embeddings_in_rows),
    ("m026_open_sessions_by_start", m026_open_sessions_by_start),
)
_ORDER = {name: index for index, (name, _) in enumerate(MIGRATIONS)}


def applied_migrations(conn: Conn) -> list[tuple[str, str]]:
    """(name, applied_at) of each applied step in order; empty on a database Cortex never saw."""
    if conn.execute("SELECT to_regclass(%s)", (MIGRATIONS_TABLE,)).fetchone() == (None,):
        return []
    rows = conn.execute(f"SELECT name, applied_at FROM {MIGRATIONS_TABLE}").fetchall()
    applied = [(str(name), str(at)) for name, at in rows]
    # A name this version does not know (a newer Cortex applied it) sorts last.
    return sorted(applied, key=lambda row: (_ORDER.get(row[0], len(_ORDER)), row[0]))


def _apply_one(conn: Conn, name: str, step: Step) -> bool:
    """Apply one step in its own transaction unless another process just did; True if applied."""
    with conn.transaction():
        # A server's connections bound their lock waits; a migration waits as long as another
        # process's migration, or a table's readers, take.
        conn.execute("SET LOCAL lock_timeout = 0")
        conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (LOCK_MIGRATIONS,))
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} "
            "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
        )
        done = conn.execute(f"SELECT 1 FROM {MIGRATIONS_TABLE} WHERE name = %s", (name,))
        if done.fetchone() is not None:
            return False
        step(conn)
        conn.execute(
            f"INSERT INTO {MIGRATIONS_TABLE} (name, applied_at) VALUES (%s, %s)",
            # When a step ran is bookkeeping about the database, not data: the real clock.
            (name, to_iso(SystemClock().now())),
        )
    return True


def migrate(conn: Conn) -> list[str]:
    """Apply pending steps in order on an autocommit connection; return the names applied now."""
    done = {name for name, _ in applied_migrations(conn)}
    return [name for name, step in MIGRATIONS if name not in done and _apply_one(conn, name, step)]


def schema_problems(conn: Conn) -> list[str]:
    """What is wrong with the schema: steps not applied, indexes left invalid."""
    done = {name for name, _ in applied_migrations(conn)}
    problems = [
        f"migration {name} is not applied; run `cortex db migrate`"
        for name, _ in MIGRATIONS
        if name not in done
    ]
    invalid = conn.execute(
        "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND NOT i.indisvalid ORDER BY c.relname"
    ).fetchall()
    problems += [f"index {name} is invalid; run REINDEX INDEX {name}" for (name,) in invalid]
    return problems
