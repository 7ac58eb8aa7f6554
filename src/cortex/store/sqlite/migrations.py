"""The SQLite steps of the shared migrations (``cortex.store.migrations``), in their order.

``Database.migrate`` runs each pending step in its own ``BEGIN IMMEDIATE`` transaction
together with its ``_cortex_migrations`` row, so two processes migrating the same file at
once apply each step exactly once.

``m001_session_states`` is kept as ``CREATE TABLE IF NOT EXISTS`` so that a ``brain.db``
whose table was made by the spec's own ``_init_schema()`` (and has no ``_cortex_migrations``)
migrates in place with no data loss.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import NamedTuple

from cortex.store.links import fold_supersedes


class Migration(NamedTuple):
    """One named schema step; ``apply`` runs inside the transaction the runner opened."""

    name: str
    apply: Callable[[sqlite3.Connection], None]


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    """Column names of ``table`` (empty if it does not exist)."""
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def _set_aside_foreign_table(conn: sqlite3.Connection, table: str, needed: set[str]) -> None:
    """Rename a same-named table of another shape (an older brain.db's) instead of dropping it.

    The spec's brain.db already has tables such as ``metrics``; they are kept, unchanged,
    under ``<table>_legacy`` so that nothing is lost and Cortex gets a table it can use.
    """
    existing = _columns(conn, table)
    if not existing or needed <= existing:
        return
    target, n = f"{table}_legacy", 1
    while _columns(conn, target):
        n += 1
        target = f"{table}_legacy{n}"
    conn.execute(f'ALTER TABLE "{table}" RENAME TO "{target}"')


SESSION_STATES_V4 = (
    """
    CREATE TABLE IF NOT EXISTS session_states (
        id TEXT PRIMARY KEY,
        start_time TEXT NOT NULL,
        end_time TEXT,
        channel TEXT DEFAULT 'unknown',
        working_memory TEXT NOT NULL DEFAULT '[]',
        hot_topics TEXT NOT NULL DEFAULT '[]',
        active_projects TEXT NOT NULL DEFAULT '[]',
        pending_tasks TEXT NOT NULL DEFAULT '[]',
        recent_learnings TEXT NOT NULL DEFAULT '[]',
        confidence_updates TEXT NOT NULL DEFAULT '[]',
        sop_interactions TEXT NOT NULL DEFAULT '[]',
        previous_session_id TEXT,
        continued_by TEXT,
        crash_recovered INTEGER DEFAULT 0,
        schema_version INTEGER DEFAULT 1,
        created_at TEXT NOT NULL,
        updated_at TEXT
    )
    """,
    "CREATE INDEX IF NOT EXISTS idx_session_endtime ON session_states(end_time, start_time)",
    "CREATE INDEX IF NOT EXISTS idx_session_prev ON session_states(previous_session_id)",
    "CREATE INDEX IF NOT EXISTS idx_session_channel ON session_states(channel, start_time)",
)


SESSION_STATES_V4_COLUMNS = {
    "id", "start_time", "end_time", "channel", "working_memory", "hot_topics",
    "active_projects", "pending_tasks", "recent_learnings", "confidence_updates",
    "sop_interactions", "previous_session_id", "continued_by", "crash_recovered",
    "schema_version", "created_at", "updated_at",
}  # fmt: skip
"""The columns of the spec's table, which every ``session_states`` Cortex reads has."""


def m001_session_states(conn: sqlite3.Connection) -> None:
    """The spec's schema v4 ``session_states`` table and its three indexes. A table of that
    name without the spec's columns (another program's) is set aside, as ``metrics`` is: kept
    under ``session_states_legacy`` instead of failing every command that reads sessions."""
    _set_aside_foreign_table(conn, "session_states", SESSION_STATES_V4_COLUMNS)
    for sql in SESSION_STATES_V4:
        conn.execute(sql)


CONTINUITY_COLUMNS = (
    ("state", "TEXT NOT NULL DEFAULT 'ACTIVE'"),
    ("scope", "TEXT NOT NULL DEFAULT 'project'"),
    ("project", "TEXT"),
    ("user_id", "TEXT"),
    ("agent_id", "TEXT"),
    ("task_slug", "TEXT"),
    ("last_activity", "TEXT"),
    ("topic_state", "TEXT NOT NULL DEFAULT '{}'"),
    ("checkpoint_count", "INTEGER NOT NULL DEFAULT 0"),
    ("parent_session", "TEXT"),
    ("owner_pid", "INTEGER"),
    ("owner_host", "TEXT"),
)

CONTINUITY_INDEXES = (
    # Restore: completed sessions of one project, newest end first (completed_sessions_since).
    "CREATE INDEX IF NOT EXISTS idx_session_project_end ON session_states(project, end_time)",
    # Crash detection: open sessions (end_time IS NULL) by lease (latest_open_session).
    "CREATE INDEX IF NOT EXISTS idx_session_open ON session_states(end_time, last_activity)",
    # Chaining at start: the project's latest session (latest_session).
    "CREATE INDEX IF NOT EXISTS idx_session_project_start ON session_states(project, start_time)",
    # Listing every session newest first (list_sessions) without sorting the whole table.
    "CREATE INDEX IF NOT EXISTS idx_session_start ON session_states(start_time)",
)


def m002_session_continuity_columns(conn: sqlite3.Connection) -> None:
    """The continuity columns of ``session_states`` (only those missing) and their indexes."""
    present = _columns(conn, "session_states")
    for name, decl in CONTINUITY_COLUMNS:
        if name not in present:
            conn.execute(f"ALTER TABLE session_states ADD COLUMN {name} {decl}")
    for sql in CONTINUITY_INDEXES:
        conn.execute(sql)


METRICS_COLUMNS = {"seq", "event", "session_id", "payload", "created_at", "prev_hash", "hash"}


def m003_metrics(conn: sqlite3.Connection) -> None:
    """The metrics hash chain; AUTOINCREMENT so a deleted ``seq`` is never reused."""
    _set_aside_foreign_table(conn, "metrics", METRICS_COLUMNS)
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS metrics (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            event TEXT NOT NULL,
            session_id TEXT,
            payload TEXT NOT NULL,
            created_at TEXT NOT NULL,
            prev_hash TEXT NOT NULL,
            hash TEXT NOT NULL
        )
        """
    )
    conn.execute("CREATE INDEX IF NOT EXISTS idx_metrics_event ON metrics(event, seq)")


AUDIT_COLUMNS = {"id", "action", "actor", "target", "detail", "created_at"}


def m004_audit_log(conn: sqlite3.Connection) -> None:
    """Who did what to which record, and when."""
    _set_aside_foreign_table(conn, "audit_log", AUDIT_COLUMNS)
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS audit_log (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            action TEXT NOT NULL,
            actor TEXT NOT NULL,
            target TEXT,
            detail TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL
        )
        """
    )


# -- memory lifecycle ----------------------------------------------------------
def m005_memories(conn: sqlite3.Connection) -> None:
    """Memories with their lifecycle columns, its four indexes and the live-upsert invariant.

    ``seq`` is an INTEGER PRIMARY KEY so the FTS index can point at a rowid VACUUM never moves.
    The unique index ``idx_memories_upsert_live`` is with NULLs folded to '' (SQLite
    treats NULLs in a unique index as distinct, which would let two global truths coexist).
    """
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS memories (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            content TEXT NOT NULL,
            type TEXT NOT NULL DEFAULT 'note',
            memory_layer TEXT NOT NULL DEFAULT 'long_term'
                CHECK (memory_layer IN ('rule', 'working', 'long_term')),
            scope TEXT NOT NULL DEFAULT 'global' CHECK (scope IN ('global', 'project')),
            project_id TEXT,
            user_id TEXT,
            tags TEXT NOT NULL DEFAULT '',
            upsert_key TEXT,
            source_session_id TEXT,
            remember_intent TEXT NOT NULL DEFAULT 'implicit',
            confidence REAL NOT NULL DEFAULT 1.0,
            expires_at TEXT,
            superseded_by TEXT,
            superseded_at TEXT,
            last_confirmed_at TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            deleted_at TEXT
        )
        """
    )
    for sql in (
        "CREATE INDEX IF NOT EXISTS idx_memories_layer_scope_project "
        "ON memories(memory_layer, scope, project_id)",
        "CREATE INDEX IF NOT EXISTS idx_memories_layer_expires "
        "ON memories(memory_layer, expires_at)",
        "CREATE INDEX IF NOT EXISTS idx_memories_upsert_key "
        "ON memories(scope, project_id, type, upsert_key)",
        "CREATE INDEX IF NOT EXISTS idx_memories_source_session ON memories(source_session_id)",
        # Live memories of one layer, newest first, without a sort (rowid ends every index).
        "CREATE INDEX IF NOT EXISTS idx_memories_live_layer "
        "ON memories(memory_layer, deleted_at, superseded_at)",
        "CREATE UNIQUE INDEX IF NOT EXISTS idx_memories_upsert_live ON memories("
        "scope, IFNULL(project_id, ''), IFNULL(user_id, ''), type, upsert_key) "
        "WHERE upsert_key IS NOT NULL AND deleted_at IS NULL AND superseded_at IS NULL",
    ):
        conn.execute(sql)


def fts5_available(conn: sqlite3.Connection) -> bool:
    """Whether this SQLite was built with FTS5 (search falls back to LIKE without it)."""
    try:
        conn.execute("CREATE VIRTUAL TABLE temp._cortex_fts5_probe USING fts5(x)")
    except sqlite3.OperationalError:
        return False
    conn.execute("DROP TABLE temp._cortex_fts5_probe")
    return True


def m006_memory_fts(conn: sqlite3.Connection) -> None:
    """External-content FTS5 over content and tags (porter stemming), kept in sync by triggers.

    Skipped on a SQLite without FTS5: search then uses its LIKE fallback.
    """
    if not fts5_available(conn):
        return
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(content, tags, "
        "content='memories', content_rowid='seq', tokenize='porter unicode61 remove_diacritics 2')"
    )
    # Content counts fully, tags half: a tag is a hint, the content is the memory.
    conn.execute("INSERT INTO memories_fts(memories_fts, rank) VALUES ('rank', 'bm25(1.0, 0.5)')")
    conn.execute(
        "CREATE TRIGGER IF NOT EXISTS memories_fts_ai AFTER INSERT ON memories BEGIN "
        "INSERT INTO memories_fts(rowid, content, tags) VALUES (new.seq, new.content, new.tags); "
        "END"
    )
    conn.execute(
        "CREATE TRIGGER IF NOT EXISTS memories_fts_ad AFTER DELETE ON memories BEGIN "
        "INSERT INTO memories_fts(memories_fts, rowid, content, tags) "
        "VALUES ('delete', old.seq, old.content, old.tags); END"
    )
    conn.execute(
        "CREATE TRIGGER IF NOT EXISTS memories_fts_au AFTER UPDATE OF content, tags ON memories "
        "BEGIN INSERT INTO memories_fts(memories_fts, rowid, content, tags) "
        "VALUES ('delete', old.seq, old.content, old.tags); "
        "INSERT INTO memories_fts(rowid, content, tags) VALUES (new.seq, new.content, new.tags); "
        "END"
    )
    conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')")


def m007_memory_links(conn: sqlite3.Connection) -> None:
    """Typed edges between memories, walked one hop by graph expansion (both directions)."""
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS memory_links (
            from_id TEXT NOT NULL,
            to_id TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('supersedes', 'conflicts', 'relates')),
            created_at TEXT NOT NULL,
            PRIMARY KEY (from_id, to_id, kind)
        ) WITHOUT ROWID
        """
    )
    conn.execute("CREATE INDEX IF NOT EXISTS idx_memory_links_to ON memory_links(to_id, kind)")


def m008_session_events(conn: sqlite3.Connection) -> None:
    """Session events, on ``session_states.id`` (the one session entity).

    No foreign key: archiving a session row must keep (not cascade-delete) its history.
    """
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS session_events (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            session_id TEXT NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
            kind TEXT NOT NULL CHECK (kind IN ('message', 'checkpoint', 'summary', 'event')),
            content TEXT NOT NULL,
            token_count INTEGER NOT NULL DEFAULT 0,
            turn_index INTEGER,
            is_meaningful INTEGER NOT NULL DEFAULT 1,
            created_at TEXT NOT NULL
        )
        """
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS idx_session_events_session "
        "ON session_events(session_id, created_at)"
    )


def m009_session_snapshots(conn: sqlite3.Connection) -> None:
    """Markdown transcripts of a session's meaningful events, with what triggered them."""
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS session_snapshots (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            slug TEXT NOT NULL,
            source_trigger TEXT NOT NULL
                CHECK (source_trigger IN ('new_session', 'reset', 'manual', 'auto_compaction')),
            transcript_md TEXT NOT NULL,
            message_count INTEGER NOT NULL,
            created_at TEXT NOT NULL
        )
        """
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS idx_session_snapshots_session "
        "ON session_snapshots(session_id, created_at)"
    )


def m010_checkpoints(conn: sqlite3.Connection) -> None:
    """Checkpoints in the continuity protocol's schema; ``body`` is the whole JSON record."""
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS checkpoints (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            session_id TEXT NOT NULL,
            type TEXT NOT NULL,
            summary TEXT NOT NULL DEFAULT '',
            body TEXT NOT NULL,
            created_at TEXT NOT NULL
        )
        """
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS idx_checkpoints_session ON checkpoints(session_id, seq)"
    )


def m011_compaction_events(conn: sqlite3.Connection) -> None:
    """Compaction events (``checkpoint_id`` names the checkpoint written first)."""
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS compaction_events (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            session_id TEXT NOT NULL,
            trigger_type TEXT NOT NULL
                CHECK (trigger_type IN ('count', 'time', 'semantic', 'manual')),
            reason TEXT NOT NULL,
            token_count_before INTEGER,
            turn_count_before INTEGER,
            summary_tokens INTEGER,
            checkpoint_id TEXT,
            created_at TEXT NOT NULL,
            completed_at TEXT
        )
        """
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS idx_compaction_session "
        "ON compaction_events(session_id, created_at)"
    )


def m012_memory_embeddings(conn: sqlite3.Connection) -> None:
    """Optional dense vectors per memory and model (the ``[embeddings]`` extra fills it)."""
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS memory_embeddings (
            memory_seq INTEGER NOT NULL,
            model TEXT NOT NULL,
            dim INTEGER NOT NULL,
            vector BLOB NOT NULL,
            PRIMARY KEY (model, memory_seq)
        ) WITHOUT ROWID
        """
    )


def m013_tenants_and_keys(conn: sqlite3.Connection) -> None:
    """The server's registry (tenants, API keys as hashes, admin audit); a SQLite file serves
    one person's development server."""
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS tenants (
            tenant_id TEXT PRIMARY KEY,
            created_at TEXT NOT NULL,
            revoked_at TEXT
        )
        """
    )
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS api_keys (
            key_id TEXT PRIMARY KEY,
            tenant_id TEXT NOT NULL REFERENCES tenants(tenant_id),
            scopes TEXT NOT NULL,
            secret_hash TEXT NOT NULL,
            label TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL,
            revoked_at TEXT
        )
        """
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS idx_api_keys_tenant ON api_keys(tenant_id, created_at)"
    )
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS admin_audit (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            tenant_id TEXT NOT NULL,
            action TEXT NOT NULL,
            actor TEXT NOT NULL,
            detail TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL
        )
        """
    )


def m014_request_ids(conn: sqlite3.Connection) -> None:
    """Idempotency: each client request id a change applied, claimed in its transaction."""
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS request_ids (
            tenant_id TEXT NOT NULL,
            request_id TEXT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (tenant_id, request_id)
        ) WITHOUT ROWID
        """
    )


HYGIENE_TABLES = (
    """
    CREATE TABLE IF NOT EXISTS consolidation_runs (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        scope TEXT NOT NULL,
        project_id TEXT,
        user_id TEXT,
        mode TEXT NOT NULL CHECK (mode IN ('shadow', 'apply')),
        input_count INTEGER NOT NULL,
        candidate_count INTEGER NOT NULL DEFAULT 0,
        promoted_count INTEGER NOT NULL DEFAULT 0,
        merged_count INTEGER NOT NULL,
        superseded_count INTEGER NOT NULL,
        conflicted_count INTEGER NOT NULL,
        model TEXT,
        created_at TEXT NOT NULL,
        metadata TEXT NOT NULL DEFAULT '{}'
    )
    """,
    "CREATE INDEX IF NOT EXISTS idx_consolidation_runs_created ON consolidation_runs(created_at)",
    """
    CREATE TABLE IF NOT EXISTS procedures (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        procedure_key TEXT NOT NULL,
        title TEXT NOT NULL,
        steps TEXT NOT NULL DEFAULT '[]',
        scope TEXT NOT NULL DEFAULT 'global' CHECK (scope IN ('global', 'project')),
        project_id TEXT,
        user_id TEXT,
        source_session_id TEXT,
        usage_count INTEGER NOT NULL DEFAULT 0,
        last_used_at TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        deleted_at TEXT
    )
    """,
    # One live procedure per key and owner, as idx_memories_upsert_live is for memories.
    "CREATE UNIQUE INDEX IF NOT EXISTS idx_procedures_key_live ON procedures("
    "scope, IFNULL(project_id, ''), IFNULL(user_id, ''), procedure_key) "
    "WHERE deleted_at IS NULL",
    "CREATE INDEX IF NOT EXISTS idx_procedures_usage "
    "ON procedures(scope, project_id, usage_count DESC, updated_at DESC)",
    "CREATE INDEX IF NOT EXISTS idx_procedures_procedure_key ON procedures(procedure_key)",
    """
    CREATE TABLE IF NOT EXISTS worker_jobs (
        name TEXT PRIMARY KEY,
        owner TEXT,
        locked_until TEXT,
        last_started_at TEXT,
        last_finished_at TEXT,
        last_status TEXT,
        last_detail TEXT NOT NULL DEFAULT '{}'
    )
    """,
    # Stale and review listings: live memories by when they were last confirmed or changed.
    "CREATE INDEX IF NOT EXISTS idx_memories_confirmed ON memories("
    "IFNULL(last_confirmed_at, updated_at)) WHERE deleted_at IS NULL AND superseded_at IS NULL",
    "CREATE INDEX IF NOT EXISTS idx_memory_links_kind ON memory_links(kind, from_id)",
)


def m015_memory_hygiene(conn: sqlite3.Connection) -> None:
    """Consolidation runs (their audit rows), procedures with usage signals, the worker's job
    leases, and the indexes stale/review listings and conflict lookups use."""
    for sql in HYGIENE_TABLES:
        conn.execute(sql)


def m017_protocol(conn: sqlite3.Connection) -> None:
    """The continuity protocol: a checkpoint's task (from its session at insert) and lookups of
    a task's sessions and checkpoints."""
    if "task_slug" not in _columns(conn, "checkpoints"):
        conn.execute("ALTER TABLE checkpoints ADD COLUMN task_slug TEXT")
    conn.execute(
        "UPDATE checkpoints SET task_slug = (SELECT s.task_slug FROM session_states s "
        "WHERE s.id = checkpoints.session_id) WHERE task_slug IS NULL"
    )
    conn.execute("CREATE INDEX IF NOT EXISTS idx_checkpoints_task ON checkpoints(task_slug, seq)")
    conn.execute(
        "CREATE INDEX IF NOT EXISTS idx_session_task ON session_states(task_slug, start_time)"
    )


def m018_tenant_tasks(conn: sqlite3.Connection) -> None:
    """Pipeline tasks kept in the database, per tenant (a team server's pending work)."""
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS tasks (
            seq INTEGER PRIMARY KEY,
            tenant_id TEXT NOT NULL,
            task_id TEXT NOT NULL,
            title TEXT NOT NULL,
            stage TEXT NOT NULL,
            project TEXT,
            detail TEXT NOT NULL DEFAULT '{}',
            created_at TEXT NOT NULL,
            updated_at TEXT,
            UNIQUE (tenant_id, task_id)
        )
        """
    )
    conn.execute("CREATE INDEX IF NOT EXISTS idx_tasks_stage ON tasks(tenant_id, stage, seq)")


def m019_drop_memory_key_index(conn: sqlite3.Connection) -> None:
    """Drop ``idx_memories_upsert_key``: no query reads it (the live-key lookup and its
    uniqueness use ``idx_memories_upsert_live``), and a keyed insert put an entry at a random
    place in it, a page write per memory in a large batch. PostgreSQL never had it."""
    conn.execute("DROP INDEX IF EXISTS idx_memories_upsert_key")


def m021_memory_session_order(conn: sqlite3.Connection) -> None:
    """PostgreSQL puts ``seq`` in its session index for the neighbour query
    (``cortex.store.filters.adjacent_sql``). SQLite's session index (m005) holds it already,
    since the rowid ends every index entry: the step makes sure that index is there, and on a
    database Cortex made it creates nothing. Both backends apply the same names."""
    conn.execute(
        "CREATE INDEX IF NOT EXISTS idx_memories_source_session ON memories(source_session_id)"
    )


def m023_memory_supersede_indexes(conn: sqlite3.Connection) -> None:
    """Indexes a supersede (or an edit) leaves alone. Replacing a live memory wrote a random
    page of three indexes besides the old row's own: its live-key entry (unavoidable: the
    uniqueness rule), its entry in ``idx_memories_live_layer``, which moved from "not
    superseded" to "superseded at ...", and its entry in ``idx_memories_confirmed``, which
    left. The layer index now holds every memory not deleted (``memory_layer``, then the
    rowid): listings and counts read it as before (one layer, newest first, no sort) and skip
    the superseded rows by the row they read anyway. ``idx_memories_confirmed`` is dropped:
    no SQLite query reads it (the stale listing orders by ``COALESCE(...)``, which the
    planner does not match to the index's ``IFNULL(...)``; PostgreSQL's does, and keeps it).
    ``idx_memories_layer_expires`` is dropped too: no query reads it (the filters test
    ``expires_at IS NULL OR expires_at > ?`` on rows another index found), and every
    insert wrote an entry."""
    conn.execute("DROP INDEX IF EXISTS idx_memories_confirmed")
    conn.execute("DROP INDEX IF EXISTS idx_memories_layer_expires")
    conn.execute("DROP INDEX IF EXISTS idx_memories_live_layer")
    conn.execute(
        "CREATE INDEX IF NOT EXISTS idx_memories_layer_undeleted ON memories(memory_layer) "
        "WHERE deleted_at IS NULL"
    )


def m024_memory_supersedes_column(conn: sqlite3.Connection) -> None:
    """A memory's ``supersedes``: the id of the memory it replaced, written with its row, so
    that a supersede no longer inserts a link row (three random index pages a replaced
    memory; see ``cortex.store.links``). The ``supersedes`` link rows the memories rows hold
    exactly move into the column and are deleted; any other stays a link row."""
    if "supersedes" not in _columns(conn, "memories"):
        conn.execute("ALTER TABLE memories ADD COLUMN supersedes TEXT")
    for sql in fold_supersedes():
        conn.execute(sql)


def m025_memory_embeddings_in_rows(conn: sqlite3.Connection) -> None:
    """Vectors in an ordinary table, each on the page of its row. m012 made the table
    ``WITHOUT ROWID``, keyed by (model, memory_seq): its rows live in a b-tree whose cells hold
    at most about a quarter of a page, so every vector of MiniLM's 1,536 bytes spilled into
    an overflow page of its own. 100,000 vectors took 114,000 pages (468 MB, 4.7 KB each), and
    the hybrid search, which reads the vectors of every memory in scope, read two pages a
    vector. A rowid table keeps two such rows on a page: 50,000 pages (205 MB) and a scan
    2.4 times as fast. A unique index on (model, memory_seq) keeps one vector per memory and
    model and serves the lookups the key did. The vectors move in key order; the file keeps
    the freed pages for later writes (``VACUUM`` returns them to the disk)."""
    found = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'memory_embeddings'"
    ).fetchone()
    if found is not None and "WITHOUT ROWID" not in str(found[0]).upper():
        return  # (already in rows)
    conn.execute(
        """
        CREATE TABLE memory_embeddings_in_rows (
            memory_seq INTEGER NOT NULL,
            model TEXT NOT NULL,
            dim INTEGER NOT NULL,
            vector BLOB NOT NULL
        )
        """
    )
    if found is not None:  # (a file whose table someone dropped gets an empty one)
        conn.execute(
            "INSERT INTO memory_embeddings_in_rows (memory_seq, model, dim, vector) "
            "SELECT memory_seq, model, dim, vector FROM memory_embeddings "
            "ORDER BY model, memory_seq"
        )
        conn.execute("DROP TABLE memory_embeddings")
    conn.execute("ALTER TABLE memory_embeddings_in_rows RENAME TO memory_embeddings")
    conn.execute(
        "CREATE UNIQUE INDEX idx_memory_embeddings_key ON memory_embeddings(model, memory_seq)"
    )


def m026_open_sessions_by_start(conn: sqlite3.Connection) -> None:
    """PostgreSQL's step keys its open sessions' index by ``start_time``, so that a captured
    turn's rewrite of its session row is a HOT update there. SQLite updates a row in place and
    rewrites only the index entries whose columns changed (here ``idx_session_open``'s, one
    entry a turn), and ``latest_open_session`` reads that index backwards without a sort: the
    index stays. Nothing changes; both backends apply the same names."""
    del conn


MIGRATIONS: tuple[Migration, ...] = (
    Migration("m001_session_states", m001_session_states),
    Migration("m002_session_continuity_columns", m002_session_continuity_columns),
    Migration("m003_metrics", m003_metrics),
    Migration("m004_audit_log", m004_audit_log),
    Migration("m005_memories", m005_memories),
    Migration("m006_memory_fts", m006_memory_fts),
    Migration("m007_memory_links", m007_memory_links),
    Migration("m008_session_events", m008_session_events),
    Migration("m009_session_snapshots", m009_session_snapshots),
    Migration("m010_checkpoints", m010_checkpoints),
    Migration("m011_compaction_events", m011_compaction_events),
    Migration("m012_memory_embeddings", m012_memory_embeddings),
    Migration("m013_tenants_and_keys", m013_tenants_and_keys),
    Migration("m014_request_ids", m014_request_ids),
    Migration("m015_memory_hygiene", m015_memory_hygiene),
    Migration("m017_protocol", m017_protocol),
    Migration("m018_tenant_tasks", m018_tenant_tasks),
    Migration("m019_drop_memory_key_index", m019_drop_memory_key_index),
    Migration("m021_memory_session_order", m021_memory_session_order),
    Migration("m023_memory_supersede_indexes", m023_memory_supersede_indexes),
    Migration("m024_memory_supersedes_column", m024_memory_supersedes_column),
    Migration("m025_memory_embeddings_in_rows", m025_memory_embeddings_in_rows),
    Migration("m026_open_sessions_by_start", m026_open_sessions_by_start),
)
