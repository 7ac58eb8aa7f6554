"""``PostgresStore``: the ``Store`` protocol on PostgreSQL, for one tenant.

A store is bound to one tenant and composed of one repository per concern (sessions,
leases, metrics, audit, memories, embeddings, history); each repository filters every query
by that tenant itself. A store holds a pool connection only during a call or a
``transaction()``, so a server process opens one pool (the first store, or ``open_pool``)
and binds a store per request with ``for_tenant``. A store serves one thread at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from functools import cached_property
from typing import TYPE_CHECKING, Any

from psycopg.types.json import Jsonb

from cortex.core.history_models import (
    Checkpoint,
    CompactionEvent,
    EventTotals,
    SessionEvent,
    SessionSnapshot,
)
from cortex.core.memory_models import Memory, MemoryFilter, MemoryLink
from cortex.core.models import AuditEntry, MetricEvent, SessionState
from cortex.core.tasks import PENDING_STAGES
from cortex.errors import ConfigError, RequestReplayed, ValidationError
from cortex.store import DEFAULT_TENANT
from cortex.store.hygiene_sql import Dialect, HygieneRepository
from cortex.store.methods import HygieneMethods, RegistryMethods, TaskMethods
from cortex.store.migrations import refuse_unknown
from cortex.store.postgres import migrations
from cortex.store.postgres.batch import PostgresTurnBatch, turn_batch
from cortex.store.postgres.db import Pool, Runner, open_pool, redacted
from cortex.store.postgres.embeddings import EmbeddingRepository
from cortex.store.postgres.history import HistoryRepository
from cortex.store.postgres.leases import LeaseRepository
from cortex.store.postgres.memories import MemoryRepository
from cortex.store.postgres.metrics import AuditRepository, MetricsRepository
from cortex.store.postgres.sessions import SessionRepository, busy
from cortex.store.postgres.transfer import TransferRepository
from cortex.store.records import (
    SessionNarrowing,
    prefix_bounds,
    prefix_query,
    project_known_query,
    sessions_from_rows,
)
from cortex.store.registry import CLAIM, KEY_BY_ID, Registry, key_from_row
from cortex.store.tasks import TaskRepository

if TYPE_CHECKING:
    from cortex.core.tenancy import ApiKeyRecord
    from cortex.store.protocol import AuditRow, MetricRow
    from cortex.store.records import EndReads, StartReads

MAX_TENANT_CHARS = 128


def check_tenant(tenant: str) -> str:
    """``tenant`` if it is a usable tenant id, else a ``ValidationError``."""
    if not isinstance(tenant, str) or not tenant.strip() or len(tenant) > MAX_TENANT_CHARS:
        raise ValidationError(
            f"tenant {tenant!r} is not a tenant id; use 1 to {MAX_TENANT_CHARS} characters"
        )
    if not tenant.isprintable():
        raise ValidationError(f"tenant {tenant!r} holds control characters; use printable ones")
    return tenant


class PostgresStore(RegistryMethods, HygieneMethods, TaskMethods):
    """The ``Store`` protocol over PostgreSQL, bound to ``tenant``.

    Args:
        url: a ``postgresql://`` URL (or libpq conninfo); with ``pool``, only shown.
        tenant: whose data this store reads and writes.
        pool: a pool to share (the caller closes it); by default the store opens its own
            and closes it in ``close()``.
        migrate: apply pending migrations before returning (the default).
        pool_size: most connections of the pool the store opens (without ``pool``).
        lock_timeout: seconds a statement of that pool waits for a lock before it fails
            with ``BusyError`` (None: no bound).

    Raises:
        StorageError: the server cannot be reached, or migrating fails.
        ValidationError: ``tenant`` is empty, too long or not printable.
    """

    def __init__(
        self,
        url: str,
        tenant: str = DEFAULT_TENANT,
        *,
        pool: Pool | None = None,
        migrate: bool = True,
        pool_size: int = 10,
        lock_timeout: float | None = None,
    ) -> None:
        self.tenant = check_tenant(tenant)
        self.url = redacted(str(url))
        self._owns_pool = pool is None
        self._pool = (
            open_pool(str(url), max_size=pool_size, lock_timeout=lock_timeout)
            if pool is None
            else pool
        )
        self._db = Runner(self._pool, self.tenant, self.url)
        self._sessions = SessionRepository(self._db)
        self._leases = LeaseRepository(self._db)
        self._metrics = MetricsRepository(self._db)
        self._audit = AuditRepository(self._db)
        self._memories = MemoryRepository(self._db)
        self._embeddings = EmbeddingRepository(self._db)
        self._history = HistoryRepository(self._db)
        self._transfer = TransferRepository(self._db)
        if migrate:
            try:
                self.migrate()
            except BaseException:
                self.close()
                raise

    # The repositories both backends share (``cortex.store.methods``), built at first use.
    @cached_property
    def hygiene(self) -> HygieneRepository:
        return HygieneRepository(
            Dialect(
                mark="%s",
                find="strpos",
                tenant=self.tenant,
                lock="FOR UPDATE OF m SKIP LOCKED",
                to_json=Jsonb,
            ),
            self._db.rows,
            self._db.execute,
            lambda: self._db.in_transaction,
        )

    @cached_property
    def registry(self) -> Registry:
        return Registry(self._db.rows, self._db.execute, self.tenant)

    def check_api_key_ahead(
        self, key_id: str, check: Callable[[ApiKeyRecord | None], None]
    ) -> None:
        """See ``Store.check_api_key_ahead``: read with the transaction's next statement."""
        self._db.read_checked(
            KEY_BY_ID, (key_id,), lambda rows: check(key_from_row(rows[0]) if rows else None)
        )

    def claim_request_ahead(self, request_id: str, at: str) -> None:
        """See ``Store.claim_request_ahead``: sent with the transaction's next statement (a
        start's reads ahead, a turn's tasks), not in a round trip of its own."""

        def settle(changed: int) -> None:
            if changed != 1:
                raise RequestReplayed(request_id)

        self._db.execute_checked(CLAIM, (self.tenant, request_id, at), settle)

    @cached_property
    def task_rows(self) -> TaskRepository:
        return TaskRepository(self._db.rows, self._db.execute, self.tenant)

    @property
    def pool(self) -> Pool:
        """The connection pool, to share with stores of other tenants."""
        return self._pool

    def for_tenant(self, tenant: str) -> PostgresStore:
        """A store of ``tenant`` on this store's pool (no migration; closing it keeps the pool)."""
        return PostgresStore(self.url, tenant, pool=self._pool, migrate=False)

    def turn_batch(self) -> AbstractContextManager[PostgresTurnBatch]:
        """One transaction across tenants for a batch of captured turns (see ``batch``)."""
        return turn_batch(self._pool, self.url)

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- lifecycle ---------------------------------------------------------------------------
    def migrate(self) -> list[str]:
        """Apply pending migrations in order (for the whole database); return those applied."""
        with self._db.connection() as conn:
            applied = (name for name, _ in migrations.applied_migrations(conn))
            known = {name for name, _ in migrations.MIGRATIONS}
            refuse_unknown(applied, known, f"database {self.url}")
            return migrations.migrate(conn)

    def applied_migrations(self) -> list[tuple[str, str]]:
        """(name, applied_at) of every applied migration, in order."""
        with self._db.connection() as conn:
            return migrations.applied_migrations(conn)

    def transaction(self) -> AbstractContextManager[None]:
        """One transaction; nested calls join it; an exception rolls it back."""
        return self._db.transaction()

    def after_commit(self, step: Callable[[], object]) -> None:
        """Run ``step`` once the transaction open now commits (at once when none is open)."""
        self._db.after_commit(step)

    def manual_checkpoints(self) -> None:
        """PostgreSQL checkpoints its log itself, never in a commit: nothing to hand over."""

    def checkpoint(self) -> None:
        """PostgreSQL checkpoints its log itself: nothing to do."""

    def vacuum(self) -> tuple[int, int]:
        """PostgreSQL's autovacuum returns free space itself: a ConfigError that says so."""
        raise ConfigError(
            f"{self.url} is PostgreSQL, whose autovacuum returns free space by itself; there "
            "is nothing for Cortex to do (VACUUM FULL, as the database's owner, shrinks a table "
            "now)"
        )

    def free_bytes(self) -> int:
        """0: PostgreSQL's autovacuum reclaims dead rows' space itself."""
        return 0

    def search_index_segments(self) -> int:
        """0: the GIN index is one structure; autovacuum merges its pending entries."""
        return 0

    def merge_search_index(self) -> None:
        """Nothing to merge: the GIN index is one structure (``search_index_segments``)."""

    def check_integrity(self) -> list[str]:
        """Problems found in the schema and in this tenant's rows; empty when healthy."""
        with self._db.connection() as conn:
            problems = migrations.schema_problems(conn)
        if problems:  # the rows cannot be checked against a schema that is not there
            return problems
        for repository in (
            self._sessions,
            self._metrics,
            self._memories,
            self._embeddings,
            self._history,
        ):
            problems += repository.problems()
        return problems

    def close(self) -> None:
        """Close the pool if this store opened it; a store on a shared pool leaves it open."""
        if self._owns_pool:
            self._pool.close()

    # -- sessions ----------------------------------------------------------------------------
    def save_session(self, state: SessionState) -> None:
        self._sessions.save(state)

    def get_session(self, session_id: str) -> SessionState | None:
        return self._sessions.get(session_id)

    def get_sessions(self, session_ids: Sequence[str]) -> list[SessionState]:
        return self._sessions.get_many(session_ids)

    def read_ahead_start(self, start: StartReads) -> None:
        """See ``Store.read_ahead_start``: one round trip for a start's reads, not four."""
        sid, project = start.session_id, start.project
        sessions = self._sessions
        reads = [
            self.task_rows.tasks_query() if start.tasks else None,
            sessions.get_query(sid) if start.resumed else None,
            self._leases.open_query(exclude_id=sid, idle_before=start.idle_before),
            None if start.resumed else sessions.latest_id_query(project),
            sessions.completed_query(
                start.since, project, limit=start.limit, exclude_id=sid, all_pins=False
            ),
            None
            if start.before is None
            else sessions.completed_query(
                start.before, project, limit=1, exclude_id=sid, all_pins=False
            ),
        ]
        with busy(f"session {sid}"):  # the only read that waits: a resumed session's
            self._db.read_ahead([read for read in reads if read is not None])

    def read_ahead_end(self, end: EndReads) -> None:
        """See ``Store.read_ahead_end``: the session and its learnings (and the pending tasks)
        with an end's first round trip (its key's check, its request id's claim)."""
        reads = [
            self.task_rows.tasks_query(stages=PENDING_STAGES) if end.pending_tasks else None,
            self._sessions.get_query(end.session_id),
            self._memories.listing_query(end.learned, end.now, limit=end.limit, offset=0),
        ]
        with busy(f"session {end.session_id}"):  # the session's row is read locked
            self._db.read_ahead([read for read in reads if read is not None])

    def ids_with_prefix(self, kind: str, prefix: str, *, limit: int = 10) -> list[str]:
        """See ``Store.ids_with_prefix`` (ids are ``COLLATE "C"``: the primary key serves it)."""
        sql = prefix_query(kind, "tenant_id = %s AND ")
        rows = self._db.rows(sql, (self.tenant, *prefix_bounds(prefix), limit))
        return [str(row[0]) for row in rows]

    def project_known(self, project: str) -> bool:
        """See ``Store.project_known``."""
        sql = project_known_query("tenant_id = %s AND ")
        return bool(self._db.rows(sql, (self.tenant, project, self.tenant, project)))

    def completed_sessions_since(
        self,
        since: str,
        project: str | None,
        *,
        limit: int,
        exclude_id: str | None = None,
        all_pins: bool = True,
    ) -> list[SessionState]:
        query = self._sessions.completed_query(
            since, project, limit=limit, exclude_id=exclude_id, all_pins=all_pins
        )
        return sessions_from_rows(self._db.rows(*query))

    def open_sessions(
        self,
        *,
        exclude_id: str | None = None,
        idle_before: str | None = None,
        owner_keeps: Callable[[int, str | None], bool] | None = None,
    ) -> list[SessionState]:
        """(``owner_keeps`` is not used: the candidates come whole in one round trip, often
        sent ahead with a start's other reads, and locked for the recovery.)"""
        return self._leases.open_sessions(exclude_id=exclude_id, idle_before=idle_before)

    def latest_open_session(
        self, project: str | None = None, *, any_project: bool = False
    ) -> SessionState | None:
        return self._leases.latest_open(project, any_project=any_project)

    def latest_session_id(self, project: str | None) -> str | None:
        return self._sessions.latest_id(project)

    def list_sessions(
        self,
        *,
        limit: int = 50,
        offset: int = 0,
        project: str | None = None,
        any_project: bool = True,
        state: str | None = None,
        crashed: bool | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> list[SessionState]:
        narrow = SessionNarrowing(state=state, crashed=crashed, since=since, until=until)
        return self._sessions.listing(
            limit=limit, offset=offset, project=project, any_project=any_project, narrow=narrow
        )

    def task_sessions(self, task_slug: str, *, limit: int = 1000) -> list[SessionState]:
        return self._sessions.of_task(task_slug, limit=limit)

    def session_projects(self, *, limit: int = 500) -> list[str]:
        return self._sessions.projects(limit)

    def count_sessions(self) -> int:
        return self._sessions.count()

    def mark_continued(self, session_ids: list[str], next_id: str, at: str) -> None:
        self._sessions.mark_continued(session_ids, next_id, at)

    def sessions_ended_before(self, before: str, *, limit: int) -> list[SessionState]:
        return self._sessions.ended_before(before, limit=limit)

    def delete_sessions(self, session_ids: list[str]) -> int:
        return self._sessions.delete(session_ids)

    # -- metrics and audit -------------------------------------------------------------------
    def last_metric(self) -> MetricEvent | None:
        return self._metrics.last()

    def append_metric(
        self,
        event: str,
        session_id: str | None,
        payload: dict[str, Any],
        created_at: str,
        prev_hash: str,
        hash: str,
    ) -> int:
        return self._metrics.append(event, session_id, payload, created_at, prev_hash, hash)

    def append_metrics(self, events: Sequence[MetricRow]) -> list[int]:
        return self._metrics.append_many(events)

    def list_metrics(
        self,
        *,
        event: str | None = None,
        limit: int | None = None,
        after_seq: int = 0,
        session_id: str | None = None,
    ) -> list[MetricEvent]:
        return self._metrics.since(
            event=event, limit=limit, after_seq=after_seq, session_id=session_id
        )

    def iter_metrics(self) -> Iterator[MetricEvent]:
        return self._metrics.iterate()

    def append_audit(
        self, action: str, actor: str, target: str | None, detail: dict[str, Any], at: str
    ) -> int:
        return self._audit.append(action, actor, target, detail, at)

    def append_audits(self, entries: Sequence[AuditRow], at: str) -> None:
        self._audit.append_many(entries, at)

    def export_rows(self, table: str) -> Iterator[dict[str, Any]]:
        """Every row of the tenant's ``table``, oldest first, streamed."""
        return self._transfer.export_rows(table)

    def import_rows(self, table: str, rows: Sequence[dict[str, Any]]) -> int:
        """Insert ``rows`` verbatim into the tenant, skipping taken keys; return how many."""
        return self._transfer.import_rows(table, rows)

    def list_audit(self, *, limit: int = 100, target: str | None = None) -> list[AuditEntry]:
        return self._audit.newest(limit=limit, target=target)

    # -- memories ----------------------------------------------------------------------------
    def add_memories(self, memories: Sequence[Memory]) -> list[str | None]:
        return self._memories.add(memories)

    def get_memory(self, memory_id: str) -> Memory | None:
        return self._memories.get(memory_id)

    def update_memory(self, memory: Memory) -> None:
        self._memories.update(memory)

    def delete_memory(self, memory_id: str, at: str) -> bool:
        return self._memories.delete(memory_id, at)

    def list_memories(
        self, flt: MemoryFilter, now: str, *, limit: int = 50, offset: int = 0
    ) -> list[Memory]:
        return self._memories.listing(flt, now, limit=limit, offset=offset)

    def memories_by_id(
        self, memory_ids: Sequence[str], flt: MemoryFilter, now: str
    ) -> list[Memory]:
        return self._memories.by_id(memory_ids, flt, now)

    def count_memories(self, flt: MemoryFilter, now: str) -> int:
        return self._memories.count(flt, now)

    def search_memories(
        self,
        terms: Sequence[str],
        flt: MemoryFilter,
        now: str,
        *,
        limit: int,
    ) -> list[tuple[Memory, float]]:
        """Memories holding any of ``terms``, best first (relevance in [0, 1])."""
        return self._memories.search(terms, flt, now, limit=limit)

    def add_memory_link(self, link: MemoryLink) -> None:
        self._memories.add_link(link)

    def memory_links(self, memory_id: str) -> list[MemoryLink]:
        return self._memories.links(memory_id)

    def linked_memories(
        self, memory_ids: Sequence[str], flt: MemoryFilter, now: str
    ) -> list[tuple[str, str, Memory]]:
        return self._memories.linked(memory_ids, flt, now)

    def adjacent_memories(
        self, memory_ids: Sequence[str], flt: MemoryFilter, now: str
    ) -> list[tuple[str, Memory]]:
        return self._memories.adjacent(memory_ids, flt, now)

    def save_embeddings(self, model: str, items: Sequence[tuple[str, int, bytes]]) -> None:
        self._embeddings.save(model, items)

    def embedding_vectors(self, model: str, flt: MemoryFilter, now: str) -> list[tuple[str, bytes]]:
        return self._embeddings.vectors(model, flt, now)

    def memories_without_embedding(self, model: str, *, limit: int) -> list[Memory]:
        return self._embeddings.missing(model, limit=limit)

    # -- session history ---------------------------------------------------------------------
    def append_session_event(self, event: SessionEvent) -> None:
        self._history.append_event(event)

    def list_session_events(
        self,
        session_id: str,
        *,
        since: str | None = None,
        meaningful_only: bool = False,
        limit: int | None = None,
    ) -> list[SessionEvent]:
        return self._history.events(
            session_id, since=since, meaningful_only=meaningful_only, limit=limit
        )

    def session_event_totals(self, session_id: str, since: str | None = None) -> EventTotals:
        return self._history.event_totals(session_id, since)

    def captures_per_day(self, since: str) -> list[tuple[str, int, int]]:
        return self._history.captures_per_day(since)

    def save_snapshot(self, snapshot: SessionSnapshot) -> None:
        self._history.save_snapshot(snapshot)

    def get_snapshot(self, snapshot_id: str) -> SessionSnapshot | None:
        return self._history.snapshot(snapshot_id)

    def list_snapshots(self, session_id: str, *, limit: int = 20) -> list[SessionSnapshot]:
        return self._history.snapshots(session_id, limit=limit)

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        self._history.save_checkpoint(checkpoint)

    def get_checkpoint(self, checkpoint_id: str) -> Checkpoint | None:
        return self._history.checkpoint(checkpoint_id)

    def list_checkpoints(self, session_id: str, *, limit: int = 20) -> list[Checkpoint]:
        return self._history.checkpoints(session_id, limit=limit)

    def task_checkpoints(self, task_slug: str, *, limit: int = 1000) -> list[Checkpoint]:
        return self._history.task_checkpoints(task_slug, limit=limit)

    def bump_checkpoint_count(self, session_id: str, at: str) -> int:
        return self._sessions.bump_checkpoint_count(session_id, at)

    def append_compaction_event(self, event: CompactionEvent) -> None:
        self._history.append_compaction(event)

    def complete_compaction_event(self, event_id: str, summary_tokens: int, at: str) -> None:
        self._history.complete_compaction(event_id, summary_tokens, at)

    def list_compaction_events(self, session_id: str, *, limit: int = 20) -> list[CompactionEvent]:
        return self._history.compactions(session_id, limit=limit)
