"""What a copy between stores moves: the tables of one person's (one tenant's) data, in an
order that keeps every reference valid, and how a row is named in a copy's claim."""

from __future__ import annotations

TRANSFER_TABLES = (
    "session_states",
    "memories",
    "memory_links",
    "session_events",
    "session_snapshots",
    "checkpoints",
    "compaction_events",
    "consolidation_runs",
    "procedures",
    "audit_log",
)
"""Tables ``export_rows``/``import_rows`` move verbatim (the metrics chain is re-chained
instead, by ``cortex.services.transfer``; embeddings are recomputed, never copied; the
worker's job leases belong to the machine that ran them and are not moved)."""

HELD_LINKS = ("memories", "supersedes")
"""The table and column holding ``supersedes`` links (``cortex.store.links``): an export
leaves the column out and writes those links as ``memory_links`` rows instead, so that it
reads as an export made before they moved, and imports into any version the same way."""

KEYLESS_TABLES = ("audit_log",)
"""Tables whose rows get a fresh id in the target: a copy claims each row once instead."""


def check_table(table: str) -> str:
    """``table`` if it is one a copy moves, else ``ValueError`` (a programming error)."""
    if table not in TRANSFER_TABLES:
        raise ValueError(f"not a transferable table: {table!r}")
    return table
