"""The composition root: one store, one config, one clock, and every service over them.

Adapters (CLI, hooks, MCP, the OpenClaw bridge) open one ``Services`` and call its services;
none of them touches the store. Each service is built on first use, so a hook that records a
turn never imports the memory engine::

    with Services.open(load_config()) as app:
        app.sessions.on_session_start(project="api")
        app.memory.add("Deploys go to eu-west-1", project="api")
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

from cortex.clock import Clock
from cortex.config import Config
from cortex.errors import ConfigError
from cortex.services.base import Service

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from cortex.services.compaction import CompactionService
    from cortex.services.consolidation import ConsolidationService
    from cortex.services.dashboard import Dashboard
    from cortex.services.events import EventLog
    from cortex.services.filemode import FileModeService
    from cortex.services.memory import MemoryService
    from cortex.services.metrics import MetricsService, MetricsWriter
    from cortex.services.procedural import ProceduralService
    from cortex.services.protocol import ProtocolService
    from cortex.services.review import ReviewService
    from cortex.services.sessions.manager import SessionPersistenceManager
    from cortex.services.tasks import TaskService, TaskSource
    from cortex.services.tenants import TenantService
    from cortex.store.protocol import Store


MERGE_SEGMENTS = 8
"""Segments of the full-text index from which it is worth merging (``cortex doctor`` names
``cortex db vacuum``; the hook server merges it when it stops for idleness): a search looks up
each of its terms in every segment."""


COPY_METRICS_KEY = b"cortex: the metrics chain of a copy that nobody keeps"
"""The metrics chain's key in ``Services.open_copy``: given, so that the chain reads or writes
no key or head file (its events go into the copy, which is dropped)."""


@dataclass(frozen=True)
class DatabaseHealth:
    """What ``Services.health`` found: damage (empty when healthy), migrations, the bytes of
    free pages that ``vacuum`` would hand back to the disk, and the full-text index's segments,
    which it would merge into one."""

    url: str
    damage: tuple[str, ...]
    applied: tuple[str, ...]
    pending: tuple[str, ...]
    free_bytes: int = 0
    index_segments: int = 0


class Services(Service):
    """Every Cortex service over one open store; ``close()`` (or ``with``) closes the store.

    ``metrics_key``: the metrics chain's key when it comes from elsewhere than the home's
    ``metrics.key`` file (a server derives each tenant's from its secret); the chain then keeps
    no local head file, so that every server process verifies the same chain alike.
    ``tasks_in_store``: pipeline tasks live in the store (a server's tenant tasks) instead of
    the home's pipeline file.
    """

    def __init__(
        self,
        store: Store,
        config: Config,
        clock: Clock | None = None,
        *,
        metrics_key: bytes | None = None,
        tasks_in_store: bool = False,
    ) -> None:
        super().__init__(store, config, clock)
        self.metrics_key = metrics_key
        self.tasks_in_store = tasks_in_store

    def _writer(self) -> MetricsWriter | None:
        if self.metrics_key is None:
            return None
        from cortex.services.metrics import MetricsWriter

        return MetricsWriter(self.store, self.metrics_key)

    @classmethod
    def open_copy(cls, config: Config, clock: Clock | None = None) -> Services:
        """Every service over an in-memory copy of the home's ``brain.db`` (read without
        writing beside it: ``open_store_copy``), writing nothing outside that copy either:
        the metrics chain keeps no key or head file (its key is given: ``COPY_METRICS_KEY``),
        and every other file the services would write (a session's or the pins' mirror, a
        task folder's files, file mode's workspace) is under a path no process can create
        (one under the database file), so those best-effort writes fail. What a home this
        process cannot write still answers from (a hook's start); StorageError when the
        file cannot be read that way."""
        from cortex.store import open_store_copy

        db = config.db_path
        nowhere = db / "nothing-is-written-here"
        copy = replace(
            config,
            sessions_dir=nowhere,
            working_memory_path=nowhere / "working_memory.json",
            tasks_root=nowhere,
            file_mode_workspace=nowhere,
        )
        return cls(open_store_copy(db), copy, clock, metrics_key=COPY_METRICS_KEY)

    @classmethod
    def remote(cls, config: Config, clock: Clock | None) -> Services:
        """Client mode: the services over the Cortex server the settings name."""
        from cortex.services.remote.app import RemoteServices  # only in client mode

        return RemoteServices(config, clock)

    @cached_property
    def sessions(self) -> SessionPersistenceManager:
        """Capture, restore, recover, continue and chain sessions; their pins."""
        from cortex.services.sessions.manager import SessionPersistenceManager

        return SessionPersistenceManager(
            self.store, self.config, self.clock, self._writer(), self.task_source
        )

    @cached_property
    def task_source(self) -> TaskSource:
        """Where pending tasks live: the store (``tasks_in_store``) or the pipeline file."""
        from cortex.services.tasks import PipelineFile, StoreTasks

        if self.tasks_in_store:
            return StoreTasks(self.store)
        return PipelineFile(self.config.pipeline_state_path)

    @cached_property
    def tasks(self) -> TaskService:
        """Pipeline tasks: list, add, mark done (the ones every preamble carries)."""
        from cortex.services.tasks import TaskService

        return TaskService(self.store, self.config, self.clock, self.task_source)

    @cached_property
    def memory(self) -> MemoryService:
        """Layered memories: add, edit, forget, search, context."""
        from cortex.services.memory import MemoryService

        return MemoryService(self.store, self.config, self.clock)

    @cached_property
    def events(self) -> EventLog:
        """A session's events and snapshots."""
        from cortex.services.events import EventLog

        return EventLog(self.store, self.config, self.clock)

    @cached_property
    def compaction(self) -> CompactionService:
        """Checkpoints and compaction (over ``events``)."""
        from cortex.services.compaction import CompactionService

        return CompactionService(
            self.store, self.config, self.clock, self.events, metrics=self.metrics
        )

    @cached_property
    def consolidation(self) -> ConsolidationService:
        """Consolidation runs: duplicates merged, overwrites, conflicts linked, audited."""
        from cortex.services.consolidation import ConsolidationService

        return ConsolidationService(self.store, self.config, self.clock, self.memory, self.metrics)

    @cached_property
    def procedures(self) -> ProceduralService:
        """Procedural memory: workflows with usage signals; completed sessions promoted."""
        from cortex.services.procedural import ProceduralService

        return ProceduralService(self.store, self.config, self.clock)

    @cached_property
    def review(self) -> ReviewService:
        """Stale memories, the review queue (conflicts, shadow proposals) and verdicts."""
        from cortex.services.review import ReviewService

        return ReviewService(self.store, self.config, self.clock, self.memory)

    @cached_property
    def protocol(self) -> ProtocolService:
        """The session-continuity protocol: task folders, rituals, checkpoints, the sweep."""
        from cortex.services.protocol import ProtocolService

        return ProtocolService(
            self.store, self.config, self.clock, self.sessions, self.compaction, self.memory
        )

    @cached_property
    def filemode(self) -> FileModeService:
        """OpenClaw file mode: the workspace's memory.md, daily logs and snapshots."""
        from cortex.services.filemode import FileModeService

        return FileModeService(
            self.store, self.config, self.clock, self.memory, self.compaction, self.events
        )

    @cached_property
    def metrics(self) -> MetricsService:
        """The tamper-evident metrics chain: list and verify."""
        from cortex.services.metrics import MetricsService

        return MetricsService(self.store, self.config, self.clock, key=self.metrics_key)

    @cached_property
    def dashboard(self) -> Dashboard:
        """Read-only views for the web dashboard: sessions over time, next start, health."""
        from cortex.services.dashboard import Dashboard

        return Dashboard(self.store, self.config, self.clock, self.metrics)

    @cached_property
    def tenants(self) -> TenantService:
        """The server's tenants and API keys: create, list, revoke, authenticate."""
        from cortex.services.tenants import TenantService

        return TenantService(self.store, self.config, self.clock)

    def applied_migrations(self) -> list[tuple[str, str]]:
        """(name, applied_at) of every migration the database has, oldest first."""
        return self.store.applied_migrations()

    def pending_migrations(self) -> list[str]:
        """The migrations the database does not have yet, in the order they apply."""
        return _pending([name for name, _ in self.store.applied_migrations()])

    def migrate(self) -> list[str]:
        """Apply the pending migrations (services opened with ``migrate=False``); the names
        applied now."""
        return self.store.migrate()

    def vacuum(self) -> tuple[int, int]:
        """Hand the database's free pages back to the disk: its size in bytes before and after
        (``Store.vacuum``; ConfigError on PostgreSQL, whose autovacuum does this, and in client
        mode, which has no local database)."""
        return self.store.vacuum()

    def merge_search_index(self, least: int = MERGE_SEGMENTS) -> int:
        """Merge the full-text index into one segment when it holds ``least`` segments or
        more (what ``vacuum`` does first, without rewriting the file); the segments it held."""
        segments = self.store.search_index_segments()
        if segments >= least:
            self.store.merge_search_index()
        return segments

    def queued(self, since: int = 0) -> dict[str, Any] | None:
        """What this process's writes left waiting for a server (client mode), counting from
        the ``spooled()`` of before a call; None when every write was applied, as here, on the
        local store."""
        return None

    def spooled(self) -> int:
        """How many writes this process kept for a server so far (client mode; 0 here): a
        long-lived process asks before each call, and ``queued`` counts that call's."""
        return 0

    def answers_queued(self) -> Services:
        """Say that the caller reports every queued write in its answers (``queued``), as the
        command line, the MCP tools and the bridge do; these services, for chaining. In client
        mode the first write of an outage then logs nothing: the answer is the one report.
        Nothing to do here, on the local store."""
        return self

    def health(self) -> DatabaseHealth:
        """The database's integrity problems, its applied and pending migrations, its free
        pages and its search index's segments."""
        applied = [name for name, _ in self.store.applied_migrations()]
        damage = tuple(self.store.check_integrity())
        return DatabaseHealth(
            url=self.store.url,
            damage=damage,
            applied=tuple(applied),
            pending=tuple(_pending(applied)),
            free_bytes=0 if damage else self.store.free_bytes(),  # (a damaged file: no count)
            index_segments=0 if damage else self.store.search_index_segments(),
        )

    def rebind(self, config: Config, clock: Clock | None = None) -> Services:
        """The services of the same open store under another ``config`` and ``clock``.

        For a long-lived process that serves callers with their own settings and time (the
        hook server); ``config`` must name the same database. Closing either closes the store.
        """
        if config.db_path != self.config.db_path:
            raise ConfigError(
                f"cannot rebind the services of {self.config.db_path} to {config.db_path}; "
                "open a new Services for another database"
            )
        return Services(
            self.store,
            config,
            clock,
            metrics_key=self.metrics_key,
            tasks_in_store=self.tasks_in_store,
        )


def queued_line(queued: Mapping[str, Any], what: str = "") -> str:
    """One line for writes the server has not taken yet (``Services.queued``); ``what`` names
    what the command queued and what that means, ending in ``; ``."""
    return (
        f"queued for the server {queued['server']} (not reachable now): {what}"
        f"{queued['waiting']} write(s) waiting in the journal; `{queued['deliver']}` delivers them"
    )


def _pending(applied: list[str]) -> list[str]:
    """The migrations not in ``applied``, in the order they apply."""
    from cortex.store.migrations import migration_names

    done = set(applied)
    return [name for name in migration_names() if name not in done]
