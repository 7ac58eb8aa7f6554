"""``SQLiteStore``: the embedded default ``Store``, one ``brain.db`` file, stdlib ``sqlite3`` only.

One ``Database`` (the connection, its transactions and error translation) is shared by a
repository per concern. The store's methods are those repositories' own bound methods: nothing
runs between a caller and the SQL, and mypy checks each one against the protocol wherever a
``SQLiteStore`` is used as a ``Store``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

from cortex.store import DEFAULT_TENANT
from cortex.store.methods import HygieneMethods, RegistryMethods, TaskMethods
from cortex.store.records import prefix_bounds, prefix_query, project_known_query
from cortex.store.sqlite.db import MEMORY, Database, copy_read_only
from cortex.store.sqlite.leases import LeaseRepository
from cortex.store.sqlite.metrics import AuditRepository, MetricRepository
from cortex.store.sqlite.sessions import SessionRepository

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

    from cortex.store.hygiene_sql import HygieneRepository
    from cortex.store.records import EndReads, StartReads
    from cortex.store.registry import Registry
    from cortex.store.sqlite.embeddings import EmbeddingRepository
    from cortex.store.sqlite.history import HistoryRepository
    from cortex.store.sqlite.memories import MemoryRepository
    from cortex.store.sqlite.search import MemorySearch
    from cortex.store.tasks import TaskRepository


BOUND_AT_FIRST_USE = {
    "_bind_memory_side": frozenset(
        {
            *("add_memories", "get_memory", "update_memory", "delete_memory", "list_memories"),
            *("memories_by_id", "count_memories", "add_memory_link", "memory_links"),
            *("linked_memories", "adjacent_memories", "save_embeddings", "embedding_vectors"),
            *("memories_without_embedding", "search_memories", "has_fts", "full_text"),
            *("like_memories", "term_doc_counts", "memory_count_estimate"),
            *("merge_search_index", "search_index_segments"),
        }
    ),
    "_bind_history_side": frozenset(
        {
            *("append_session_event", "list_session_events", "session_event_totals"),
            *("captures_per_day", "save_snapshot", "get_snapshot", "list_snapshots"),
            *("save_checkpoint", "get_checkpoint", "list_checkpoints", "task_checkpoints"),
            *("bump_checkpoint_count", "append_compaction_event", "complete_compaction_event"),
            "list_compaction_events",
        }
    ),
    "_bind_transfer_side": frozenset({"export_rows", "import_rows"}),
}
"""The methods each binder binds, all at the first use of one of them."""
_BINDER = {name: binder for binder, names in BOUND_AT_FIRST_USE.items() for name in names}


class SQLiteStore(RegistryMethods, HygieneMethods, TaskMethods):
    """The ``Store`` protocol over one SQLite file (or ``:memory:``).

    Beyond the protocol, a few SQLite-only methods serve tests and tools: ``count_sessions``,
    ``list_audit``, ``count_memories``, ``add_memory_link``, ``memories_without_embedding``,
    ``get_checkpoint``, and search's parts (``has_fts``, ``full_text``, ``like_memories``,
    ``term_doc_counts``, ``memory_count_estimate``); the protocol's ``merge_search_index``
    and ``search_index_segments`` are bound with them.
    """

    def __init__(
        self,
        path: str | Path = MEMORY,
        *,
        migrate: bool = True,
        busy_timeout_ms: int = 5000,
        migrate_max_bytes: int | None = None,
    ) -> None:
        self._db = db = Database(path, busy_timeout_ms=busy_timeout_ms)
        self.url = db.url
        self.transaction = db.transaction
        self.after_commit = db.after_commit
        self.applied_migrations = db.applied_migrations
        self.check_integrity = db.check_integrity
        self.manual_checkpoints = db.manual_checkpoints
        self.checkpoint = db.checkpoint
        self._bind_sessions(SessionRepository(db), LeaseRepository(db))
        self._bind_logs(MetricRepository(db), AuditRepository(db))
        self._bound: set[str] = set()
        """The binders of ``BOUND_AT_FIRST_USE`` that ran."""
        if migrate:
            try:
                self.migrate(migrate_max_bytes)
            except BaseException:
                db.close()
                raise

    @classmethod
    def copy_of(cls, path: str | Path) -> SQLiteStore:
        """An in-memory store holding a copy of the database at ``path``, read without writing
        anything there (``copy_read_only``) and migrated in memory: the store of a home this
        process cannot write, whose writes go nowhere. StorageError when it cannot be read."""
        store = cls(MEMORY, migrate=False)
        try:
            copy_read_only(Path(path), store.connection)
            store.migrate()
        except BaseException:
            store.close()
            raise
        return store

    # The repositories both backends share, built (and their modules imported) at first use.
    @cached_property
    def hygiene(self) -> HygieneRepository:
        from cortex.store.hygiene_sql import Dialect, HygieneRepository

        db = self._db
        return HygieneRepository(
            Dialect(mark="?", find="instr"),
            db.rows,
            lambda sql, params: db.run(sql, params).rowcount,
            lambda: db.connection.in_transaction,
        )

    @cached_property
    def registry(self) -> Registry:
        from cortex.store.registry import Registry

        return Registry(self._registry_rows, self._registry_execute, DEFAULT_TENANT)

    @cached_property
    def task_rows(self) -> TaskRepository:
        from cortex.store.tasks import TaskRepository

        return TaskRepository(self._registry_rows, self._registry_execute, DEFAULT_TENANT)

    def _bind_sessions(self, sessions: SessionRepository, leases: LeaseRepository) -> None:
        self.save_session = sessions.save_session
        self.get_session = sessions.get_session
        self.get_sessions = sessions.get_sessions
        self.completed_sessions_since = sessions.completed_sessions_since
        self.latest_session_id = sessions.latest_session_id
        self.list_sessions = sessions.list_sessions
        self.count_sessions = sessions.count_sessions
        self.task_sessions = sessions.task_sessions
        self.session_projects = sessions.session_projects
        self.sessions_ended_before = sessions.sessions_ended_before
        self.delete_sessions = sessions.delete_sessions
        self.open_sessions = leases.open_sessions
        self.latest_open_session = leases.latest_open_session
        self.mark_continued = leases.mark_continued

    def _bind_logs(self, metrics: MetricRepository, audit: AuditRepository) -> None:
        self.last_metric = metrics.last_metric
        self.append_metric = metrics.append_metric
        self.append_metrics = metrics.append_metrics
        self.list_metrics = metrics.list_metrics
        self.iter_metrics = metrics.iter_metrics
        self.append_audit = audit.append_audit
        self.append_audits = audit.append_audits
        self.list_audit = audit.list_audit

    if not TYPE_CHECKING:  # (mypy sees the methods where the binders bind them)

        def __getattr__(self, name: str) -> Any:
            """The memories', the session history's and the transfer's methods, bound at the
            first use of one of their side's: a session start or a hook reads and writes
            sessions and metrics only, and need not import the memory repositories, search,
            the history, their records (~2.5 ms of such a process)."""
            binder = _BINDER.get(name)
            if binder is None or binder in vars(self).get("_bound", (binder,)):
                raise AttributeError(f"'SQLiteStore' object has no attribute {name!r}")
            getattr(self, binder)()
            self._bound.add(binder)
            return getattr(self, name)

    def _bind_memory_side(self) -> None:
        from cortex.store.sqlite.embeddings import EmbeddingRepository
        from cortex.store.sqlite.memories import MemoryRepository
        from cortex.store.sqlite.search import MemorySearch

        db = self._db
        self._search = MemorySearch(db)
        self._bind_memories(MemoryRepository(db), EmbeddingRepository(db))
        self._bind_search(self._search)

    def _bind_history_side(self) -> None:
        from cortex.store.sqlite.history import HistoryRepository

        self._bind_history(HistoryRepository(self._db))

    def _bind_transfer_side(self) -> None:
        from cortex.store.sqlite.transfer import TransferRepository

        transfer = TransferRepository(self._db)
        self.export_rows = transfer.export_rows
        self.import_rows = transfer.import_rows

    def _bind_memories(self, memories: MemoryRepository, vectors: EmbeddingRepository) -> None:
        self.add_memories = memories.add_memories
        self.get_memory = memories.get_memory
        self.update_memory = memories.update_memory
        self.delete_memory = memories.delete_memory
        self.list_memories = memories.list_memories
        self.memories_by_id = memories.memories_by_id
        self.count_memories = memories.count_memories
        self.add_memory_link = memories.add_memory_link
        self.memory_links = memories.memory_links
        self.linked_memories = memories.linked_memories
        self.adjacent_memories = memories.adjacent_memories
        self.save_embeddings = vectors.save_embeddings
        self.embedding_vectors = vectors.embedding_vectors
        self.memories_without_embedding = vectors.memories_without_embedding

    def _bind_search(self, search: MemorySearch) -> None:
        self.search_memories = search.search_memories
        self.has_fts = search.has_fts
        self.full_text = search.full_text
        self.like_memories = search.like_memories
        self.term_doc_counts = search.term_doc_counts
        self.memory_count_estimate = search.memory_count_estimate
        self.merge_search_index = search.merge_index
        self.search_index_segments = search.index_segments

    def _bind_history(self, history: HistoryRepository) -> None:
        self.append_session_event = history.append_session_event
        self.list_session_events = history.list_session_events
        self.session_event_totals = history.session_event_totals
        self.captures_per_day = history.captures_per_day
        self.save_snapshot = history.save_snapshot
        self.get_snapshot = history.get_snapshot
        self.list_snapshots = history.list_snapshots
        self.save_checkpoint = history.save_checkpoint
        self.get_checkpoint = history.get_checkpoint
        self.list_checkpoints = history.list_checkpoints
        self.task_checkpoints = history.task_checkpoints
        self.bump_checkpoint_count = history.bump_checkpoint_count
        self.append_compaction_event = history.append_compaction_event
        self.complete_compaction_event = history.complete_compaction_event
        self.list_compaction_events = history.list_compaction_events

    def read_ahead_start(self, start: StartReads) -> None:
        """See ``Store.read_ahead_start``: nothing to do, SQLite has no round trips."""

    def read_ahead_end(self, end: EndReads) -> None:
        """See ``Store.read_ahead_end``: nothing to do, SQLite has no round trips."""

    def ids_with_prefix(self, kind: str, prefix: str, *, limit: int = 10) -> list[str]:
        """See ``Store.ids_with_prefix``."""
        sql = prefix_query(kind).replace("%s", "?")
        return [str(row[0]) for row in self._db.rows(sql, (*prefix_bounds(prefix), limit))]

    def project_known(self, project: str) -> bool:
        """See ``Store.project_known``."""
        sql = project_known_query().replace("%s", "?")
        return bool(self._db.rows(sql, (project, project)))

    def _registry_rows(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        return self._db.rows(sql.replace("%s", "?"), params)

    def _registry_execute(self, sql: str, params: Sequence[Any]) -> int:
        return self._db.run(sql.replace("%s", "?"), params).rowcount

    @property
    def connection(self) -> sqlite3.Connection:
        """The underlying connection, for SQLite-only tooling (backup, ``PRAGMA`` checks)."""
        return self._db.connection

    def migrate(self, max_bytes: int | None = None) -> list[str]:
        """Apply pending migrations in order; return the names applied now. With
        ``max_bytes``, none on a larger file (``MigrationDeferredError``)."""
        if "_bind_memory_side" in self._bound:  # a migration may be about to make the FTS index
            self._search.schema_changed()
        return self._db.migrate(max_bytes)

    def vacuum(self) -> tuple[int, int]:
        """Hand the file's free pages back to the disk (SQLite only): the database's size in
        bytes before and after. Rows deleted, and a migration that moves a table, leave free
        pages that later writes reuse; ``VACUUM`` rewrites the whole file without them. The
        full-text index is merged into one segment first (``MemorySearch.merge_index``), so
        the pages the merge frees are handed back too."""
        self.merge_search_index()
        return self._db.vacuum()

    def free_bytes(self) -> int:
        """The bytes of the file's free pages, which ``vacuum`` hands back."""
        return self._db.free_bytes()

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
