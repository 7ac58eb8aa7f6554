"""Schema migrations: the ordered names every backend applies, each once.

Each backend package has a ``migrations`` module whose ``MIGRATIONS`` is a tuple of
``(name, step)`` pairs in exactly this order (a test checks it), and records every applied
step in ``_cortex_migrations(name, applied_at)`` in the same transaction as the step, so a
step is either fully applied and recorded or not at all. Never edit or reorder a step that has
shipped; add a new name at the end and a step for it in every backend.

``m001_session_states`` is the session table at schema version 4.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from cortex.errors import StorageError

MIGRATIONS_TABLE = "_cortex_migrations"

MIGRATION_NAMES = (
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
)

NOTHING_ON_SQLITE = frozenset({"m026_open_sessions_by_start"})
"""Steps whose SQLite side changes nothing (PostgreSQL's does): a file of any size applies them
at once, so a hook migrates them in place rather than deferring them to a background process
as it does a step that may rewrite a table."""

SCHEMA_V4 = "m001_session_states"
"""The step that is the spec's ``session_states`` "migration v4"."""


def migration_names() -> list[str]:
    """Names of every migration, in the order they apply."""
    return list(MIGRATION_NAMES)


def refuse_unknown(applied: Iterable[str], known: Collection[str], where: str) -> None:
    """Refuse a database that a newer Cortex migrated: this version cannot know its schema.

    Raises:
        StorageError: one line naming the first unknown migration and the next step.
    """
    unknown = [name for name in applied if name not in known]
    if unknown:
        raise StorageError(
            f"{where} was migrated by a newer Cortex (unknown migration {unknown[0]!r}); "
            "upgrade Cortex to open it"
        )
