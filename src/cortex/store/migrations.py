"""SQLite schema migrations: an ordered list of named steps, each applied once.

Each step runs in its own ``BEGIN IMMEDIATE`` transaction together with its row in
``_cortex_migrations(name, applied_at)``, so a step is either fully applied and recorded or not
at all, and two processes migrating the same file at once apply each step exactly once.
Never edit a step that has shipped; add a new one. The PostgreSQL backend carries the same
list of names.

``m001_session_states`` is the spec's "brain.db migration v4" (API guide section 8), kept as
``CREATE TABLE IF NOT EXISTS`` so that a ``brain.db`` whose table was made by the spec's own
``_init_schema()`` (and has no ``_cortex_migrations``) migrates in place with no data loss.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from cortex.clock import SystemClock, to_iso

MIGRATIONS_TABLE = "_cortex_migrations"


@dataclass(frozen=True)
class Migration:
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


def m001_session_states(conn: sqlite3.Connection) -> None:
    """The spec's schema v4 ``session_states`` table and its three indexes."""
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
    """The columns ARCHITECTURE.md adds to ``session_states`` (only those missing) + indexes."""
    present = _columns(conn, "session_states")
    for name, decl in CONTINUITY_COLUMNS:
        if name not in present:
            conn.execute(f"ALTER TABLE session_states ADD COLUMN {name} {decl}")
    for sql in CONTINUITY_INDEXES:
        conn.execute(sql)


METRICS_COLUMNS = {"seq", "event", "session_id", "payload", "created_at", "prev_hash", "hash"}


def m003_metrics(conn: sqlite3.Connection) -> None:
    """The metrics hash chain (FR-013); AUTOINCREMENT so a deleted ``seq`` is never reused."""
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


MIGRATIONS: list[Migration] = [
    Migration("m001_session_states", m001_session_states),
    Migration("m002_session_continuity_columns", m002_session_continuity_columns),
    Migration("m003_metrics", m003_metrics),
    Migration("m004_audit_log", m004_audit_log),
]

SCHEMA_V4 = "m001_session_states"
"""The step that is the spec's ``session_states`` "migration v4"."""


def migration_names() -> list[str]:
    """Names of every migration, in the order they apply."""
    return [m.name for m in MIGRATIONS]


def applied_migrations(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """(name, applied_at) of each applied step in order; empty on a database Cortex never saw."""
    try:
        rows = conn.execute(
            f"SELECT name, applied_at FROM {MIGRATIONS_TABLE} ORDER BY rowid"
        ).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise
    return [(str(name), str(at)) for name, at in rows]


def pending_migrations(conn: sqlite3.Connection) -> list[Migration]:
    """Steps not yet applied: one small query, so opening a migrated database stays cheap."""
    done = {name for name, _ in applied_migrations(conn)}
    return [m for m in MIGRATIONS if m.name not in done]


def _apply_one(conn: sqlite3.Connection, migration: Migration) -> bool:
    """Apply one step in its own transaction unless another process just did; True if applied."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} "
            "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
        )
        already = conn.execute(
            f"SELECT 1 FROM {MIGRATIONS_TABLE} WHERE name = ?", (migration.name,)
        ).fetchone()
        if already is None:
            migration.apply(conn)
            conn.execute(
                f"INSERT INTO {MIGRATIONS_TABLE} (name, applied_at) VALUES (?, ?)",
                # When a step ran is bookkeeping about this file, not session data: the real clock.
                (migration.name, to_iso(SystemClock().now())),
            )
    except BaseException:
        if conn.in_transaction:  # SQLite has already rolled back after some errors (BUSY, FULL)
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return already is None


def migrate(conn: sqlite3.Connection) -> list[str]:
    """Apply pending steps in order on an autocommit connection; return the names applied now."""
    if conn.in_transaction:
        raise RuntimeError("migrate() needs a connection outside any transaction")
    return [m.name for m in pending_migrations(conn) if _apply_one(conn, m)]
