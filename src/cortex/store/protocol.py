"""The ``Store`` protocol: everything the services ask of a database, grouped by concern.

Two implementations keep this contract: ``SQLiteStore`` (the embedded default) and, later,
``PostgresStore``. ``tests/store_contract.py`` holds the contract tests every backend passes.

Rules every implementation follows:
- Reads and writes take and return model objects (``cortex.core.models``), never raw rows.
- ``transaction()`` opens one write transaction (SQLite: ``BEGIN IMMEDIATE``); calls made
  inside it share it, nested calls join the outer one, an exception rolls it back.
  Calls made outside a transaction each commit on their own.
- Session queries filter by ``project`` with SQL ``IS`` semantics: ``None`` matches ``None``.
- Memory queries take a ``MemoryFilter`` and the current time (ISO 8601): a project sees its
  own memories plus global ones, never another project's; deleted, superseded and expired
  memories are invisible unless ``include_history``. At most one live memory holds a given
  (scope, project, user, type, upsert_key): the store enforces it.
- Session events, snapshots, checkpoints and compaction events belong to a
  ``session_states`` row by ``session_id``; deleting (archiving) the row keeps them.

Errors (``cortex.errors``) a store raises, each a one-line message naming the next step:
- ``StorageError``: the database cannot be created, opened, read or written (read-only,
  locked too long, full, damaged, not migrated, unreachable).
- ``ConflictError``: a write breaks a uniqueness rule, such as a second live memory for one
  upsert key, or a history record whose id is taken.
Anything else (``TypeError``, a backend's own exception) is a programming error and passes
through untranslated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:  # annotations only: a session command need not import the memory records
    from typing import Any, Protocol

    from cortex.core.history_models import (
        Checkpoint,
        CompactionEvent,
        EventTotals,
        SessionEvent,
        SessionSnapshot,
    )
    from cortex.core.hygiene import ConsolidationRun, JobState, Procedure
    from cortex.core.memory_models import Memory, MemoryFilter, MemoryLink
    from cortex.core.models import AuditEntry, MetricEvent, SessionState
    from cortex.core.tasks import TaskRecord
    from cortex.core.tenancy import ApiKeyRecord, TenantRecord
    from cortex.store.records import EndReads, StartReads

    MetricRow = tuple[str, str | None, dict[str, Any], str, str, str]
    """A metrics row to append: (event, session_id, payload, created_at, prev_hash, hash)."""
    AuditRow = tuple[str, str, str | None, dict[str, Any]]
    """An audit entry to append: (action, actor, target, detail)."""
else:
    Protocol = object  # a protocol is for mypy only; nothing checks one at run time


class SessionStore(Protocol):
    """Session records: save, read, list, archive."""

    def save_session(self, state: SessionState) -> None:
        """Insert or replace the whole row of ``state.session_id`` (UPSERT)."""
        ...

    def get_session(self, session_id: str) -> SessionState | None: ...

    def get_sessions(self, session_ids: Sequence[str]) -> list[SessionState]:
        """The stored sessions of ``session_ids``, in that order, missing ones left out: one
        statement (a restore reads its contributors' pins with it, one round trip for all)."""
        ...

    def ids_with_prefix(self, kind: str, prefix: str, *, limit: int = 10) -> list[str]:
        """Up to ``limit`` stored ids of ``kind`` (``session``, ``memory``, ``snapshot``) that
        start with ``prefix`` (non-empty), in order: an id equal to ``prefix`` comes first.
        A range scan of the id index; this tenant's ids only."""
        ...

    def completed_sessions_since(
        self,
        since: str,
        project: str | None,
        *,
        limit: int,
        exclude_id: str | None = None,
        all_pins: bool = True,
    ) -> list[SessionState]:
        """Sessions of ``project`` with ``end_time >= since``, newest ``end_time`` first.

        For speed the columns restoration never reads (``topic_state``, ``recent_learnings``,
        ``confidence_updates``, ``sop_interactions``) may come back empty. With
        ``all_pins=False`` only sessions holding a CRITICAL pin come with their
        ``working_memory``; the others' is empty (restoration reads it for one or two).
        """
        ...

    def latest_session_id(self, project: str | None) -> str | None:
        """The id of the session of ``project`` that started last, open or not (a new
        session's ``previous_session_id``: its id alone, no row to decode)."""
        ...

    def read_ahead_start(self, start: StartReads) -> None:
        """Inside a transaction, send now, together, the reads a session start makes next
        (``StartReads`` names them): the same calls later in the transaction read nothing
        again, unless a write came between. A backend with no round trips to save (SQLite)
        does nothing; outside a transaction nothing is read ahead."""
        ...

    def read_ahead_end(self, end: EndReads) -> None:
        """As ``read_ahead_start``, for the reads a session end makes next (``EndReads``)."""
        ...

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
        """Sessions newest ``start_time`` first (all projects unless ``any_project`` is False),
        only in ``state``, only crash-recovered (or not) when ``crashed`` is given, only
        started at or after ``since`` and before ``until``."""
        ...

    def project_known(self, project: str) -> bool:
        """Whether a session or a project memory is recorded under exactly ``project`` (an
        index probe each: a typed name that is already a stored project needs no matching)."""
        ...

    def session_projects(self, *, limit: int = 500) -> list[str]:
        """The distinct projects sessions were recorded under (none for no project), the one
        whose latest session started last first."""
        ...

    def sessions_ended_before(self, before: str, *, limit: int) -> list[SessionState]:
        """Completed sessions with ``end_time < before``, oldest first (for archiving)."""
        ...

    def delete_sessions(self, session_ids: list[str]) -> int:
        """Delete these rows; return how many were deleted."""
        ...

    def task_sessions(self, task_slug: str, *, limit: int = 1000) -> list[SessionState]:
        """Sessions whose ``task_slug`` is ``task_slug``, oldest ``start_time`` first."""

    def count_sessions(self) -> int:
        """How many session rows exist."""
        ...


class LeaseStore(Protocol):
    """Open sessions and their leases: what crash recovery and chaining ask."""

    def open_sessions(
        self,
        *,
        exclude_id: str | None = None,
        idle_before: str | None = None,
        owner_keeps: Callable[[int, str | None], bool] | None = None,
    ) -> list[SessionState]:
        """Sessions with no ``end_time`` (live or crashed), any project, oldest first.

        With ``idle_before``, only those idle since before it or with a recorded owner process.
        With ``owner_keeps`` too, a session not idle since before it whose owner (pid, host)
        ``owner_keeps`` says still holds it may be left out (a backend that reads whole rows
        anyway returns it; the caller passes over it either way).
        """
        ...

    def latest_open_session(
        self, project: str | None = None, *, any_project: bool = False
    ) -> SessionState | None:
        """The open session with the newest ``last_activity`` (of ``project`` unless
        ``any_project``)."""
        ...

    def mark_continued(self, session_ids: list[str], next_id: str, at: str) -> None:
        """Set ``continued_by = next_id`` and ``updated_at = at`` on each of ``session_ids``."""
        ...


class MetricStore(Protocol):
    """The metrics hash chain; ``cortex.services.metrics`` computes the hashes."""

    def last_metric(self) -> MetricEvent | None: ...

    def append_metric(
        self,
        event: str,
        session_id: str | None,
        payload: dict[str, Any],
        created_at: str,
        prev_hash: str,
        hash: str,
    ) -> int:
        """Append one event; return its ``seq`` (1, 2, 3... with no reuse)."""
        ...

    def append_metrics(self, events: Sequence[MetricRow]) -> list[int]:
        """Append (event, session_id, payload, created_at, prev_hash, hash) rows in order, in
        one statement where the backend can (a restore appends one per inherited pin, under the
        chain's lock); return their ``seq`` values, in order."""
        ...

    def list_metrics(
        self,
        *,
        event: str | None = None,
        limit: int | None = None,
        after_seq: int = 0,
        session_id: str | None = None,
    ) -> list[MetricEvent]:
        """Events in ``seq`` order, optionally of one ``event`` name or one session."""
        ...

    def iter_metrics(self) -> Iterator[MetricEvent]:
        """Every event in ``seq`` order, streamed (for ``metrics verify``)."""
        ...


class AuditStore(Protocol):
    """Who did what to which record, and when."""

    def append_audit(
        self, action: str, actor: str, target: str | None, detail: dict[str, Any], at: str
    ) -> int:
        """Append one entry; return its id (increasing)."""
        ...

    def append_audits(self, entries: Sequence[AuditRow], at: str) -> None:
        """Append ``entries``, all made at ``at``, in order (ids increasing): one statement
        run for every row (a batch's supersedes)."""
        ...

    def list_audit(self, *, limit: int = 100, target: str | None = None) -> list[AuditEntry]:
        """Entries newest first; of one ``target`` (a memory id...) when it is given."""
        ...


class MemoryStore(Protocol):
    """Layered memories, their links and their search."""

    def add_memories(self, memories: Sequence[Memory]) -> list[str | None]:
        """Insert in one transaction; per memory, the id of the live one its key superseded
        (which gets ``superseded_by``/``superseded_at`` and a ``supersedes`` link)."""
        ...

    def get_memory(self, memory_id: str) -> Memory | None:
        """Any memory by id, live or not."""
        ...

    def update_memory(self, memory: Memory) -> None:
        """Rewrite the editable columns of ``memory.id`` (search follows the new text)."""
        ...

    def delete_memory(self, memory_id: str, at: str) -> bool:
        """Soft delete; False if there is no such undeleted memory."""
        ...

    def list_memories(
        self, flt: MemoryFilter, now: str, *, limit: int = 50, offset: int = 0
    ) -> list[Memory]:
        """Memories ``flt`` sees at ``now``, newest first."""
        ...

    def memories_by_id(
        self, memory_ids: Sequence[str], flt: MemoryFilter, now: str
    ) -> list[Memory]:
        """Those of ``memory_ids`` that ``flt`` sees at ``now``, in insertion order (``seq``);
        an id it does not see (or no memory's) is left out."""
        ...

    def search_memories(
        self, terms: Sequence[str], flt: MemoryFilter, now: str, *, limit: int
    ) -> list[tuple[Memory, float]]:
        """Candidate memories ``flt`` sees at ``now`` holding any of ``terms``, best first.

        ``terms`` are plain lowercase words (``cortex.core.retrieval.search_terms``: for a
        query with no word, its pieces, which only the substring match finds), never query
        syntax: every character is literal. Each candidate comes with a text relevance
        in [0, 1], higher is better:

        - ``> 0``: ranked by the backend's full-text index, relative to the best candidate
          (SQLite: FTS5 ``bm25`` over every term, the best one's first,
          ``cortex.core.retrieval.relevances``; on a large store over a bounded pool of
          candidates, ``cortex.store.sqlite.search``);
        - ``0.0``: matched without a ranking (a substring match when the index finds
          nothing); the service ranks these by the share of ``terms`` their text holds.

        At most ``limit`` candidates.
        """
        ...

    def count_memories(self, flt: MemoryFilter, now: str) -> int:
        """How many memories ``flt`` sees at ``now``."""
        ...

    def memory_links(self, memory_id: str) -> list[MemoryLink]:
        """Links from or to ``memory_id``, by (from, to, kind); a ``supersedes`` link's time
        is when the old memory was superseded."""
        ...

    def linked_memories(
        self, memory_ids: Sequence[str], flt: MemoryFilter, now: str
    ) -> list[tuple[str, str, Memory]]:
        """(seed id, link kind, neighbour) one hop from ``memory_ids``, neighbours ``flt``
        sees at ``now``."""
        ...

    def adjacent_memories(
        self, memory_ids: Sequence[str], flt: MemoryFilter, now: str
    ) -> list[tuple[str, Memory]]:
        """(memory id, neighbour) for each of ``memory_ids`` captured in a session: the
        memories ``flt`` sees at ``now`` captured just before and just after it in that
        session (the store's insertion order, ``seq``), at most one each side."""
        ...


class HygieneStore(Protocol):
    """Memory hygiene: consolidation, stale and conflict listings, procedures, job leases."""

    def consolidation_candidates(self, flt: MemoryFilter, now: str, *, limit: int) -> list[Memory]:
        """Live memories ``flt`` sees at ``now``, newest ``created_at`` first.

        Inside a ``transaction()`` a backend shared by several servers locks the rows it
        returns and skips rows another transaction holds (PostgreSQL ``FOR UPDATE SKIP
        LOCKED``), so that two consolidations never act on the same memory at once.
        """
        ...

    def supersede_memory(self, old_id: str, new_id: str, at: str) -> bool:
        """Mark ``old_id`` superseded by ``new_id`` at ``at``, with a ``supersedes`` link from
        ``new_id``, only if ``old_id`` is still live; False (and nothing changed) otherwise."""
        ...

    def add_memory_link(self, link: MemoryLink) -> None:
        """Store a link; the same (from, to, kind) twice is stored once."""
        ...

    def memory_conflicts(
        self, flt: MemoryFilter, now: str, *, limit: int
    ) -> list[tuple[Memory, Memory]]:
        """(from, to) memories linked as ``conflicts`` that ``flt`` both sees, newest first."""
        ...

    def stale_memories(
        self, flt: MemoryFilter, now: str, before: str, *, limit: int
    ) -> list[Memory]:
        """Memories ``flt`` sees whose ``last_confirmed_at`` (else ``updated_at``) is before
        ``before``, least recently confirmed first."""
        ...

    def save_consolidation_run(self, run: ConsolidationRun) -> None: ...

    def list_consolidation_runs(self, *, limit: int = 20) -> list[ConsolidationRun]:
        """Newest first."""
        ...

    def save_procedure(self, procedure: Procedure) -> Procedure:
        """Insert, or rewrite the title and steps of the live procedure with the same scope,
        project, user and ``procedure_key`` (keeping its id and usage); return the stored one."""
        ...

    def get_procedure(self, procedure_id: str) -> Procedure | None: ...

    def list_procedures(
        self, project: str | None, user_id: str | None, *, limit: int = 50
    ) -> list[Procedure]:
        """Live procedures of ``project`` plus global ones, most used first."""
        ...

    def record_procedure_use(self, procedure_id: str, at: str) -> bool:
        """Increment ``usage_count`` and set ``last_used_at``; False if no live procedure."""
        ...

    def delete_procedure(self, procedure_id: str, at: str) -> bool: ...

    def claim_job(self, name: str, owner: str, now: str, until: str) -> bool:
        """Take job ``name``'s lease until ``until``; False while another owner holds an
        unexpired one (so two workers never run one job at once)."""
        ...

    def finish_job(
        self, name: str, owner: str, at: str, status: str, detail: dict[str, Any]
    ) -> bool:
        """Release ``owner``'s lease and record the outcome; False if ``owner`` lost it."""
        ...

    def list_jobs(self) -> list[JobState]: ...


class EmbeddingStore(Protocol):
    """Optional dense vectors per memory and model (hybrid search)."""

    def save_embeddings(self, model: str, items: Sequence[tuple[str, int, bytes]]) -> None:
        """Store (memory id, dimension, float32 little-endian vector) rows for ``model``."""
        ...

    def embedding_vectors(self, model: str, flt: MemoryFilter, now: str) -> list[tuple[str, bytes]]:
        """(memory id, vector) of ``model`` for each memory ``flt`` sees at ``now`` that has
        one, in insertion order (``seq``): what scoring needs, no memory decoded."""
        ...

    def memories_without_embedding(self, model: str, *, limit: int) -> list[Memory]:
        """Memories not forgotten that have no vector of ``model`` yet, oldest first, at most
        ``limit`` (those added before an embedder was set)."""
        ...


class HistoryStore(Protocol):
    """A session's history: events, snapshots, checkpoints and compaction events."""

    def append_session_event(self, event: SessionEvent) -> None: ...

    def list_session_events(
        self,
        session_id: str,
        *,
        since: str | None = None,
        meaningful_only: bool = False,
        limit: int | None = None,
    ) -> list[SessionEvent]:
        """Events in order, after ``since`` if given; the newest ``limit`` of them."""
        ...

    def session_event_totals(self, session_id: str, since: str | None = None) -> EventTotals:
        """Tokens, distinct turns and events after ``since``."""
        ...

    def captures_per_day(self, since: str) -> list[tuple[str, int, int]]:
        """(UTC day ``YYYY-MM-DD``, sessions started, events recorded) from ``since``, oldest
        day first; days with neither are left out."""
        ...

    def save_snapshot(self, snapshot: SessionSnapshot) -> None: ...

    def get_snapshot(self, snapshot_id: str) -> SessionSnapshot | None: ...

    def list_snapshots(self, session_id: str, *, limit: int = 20) -> list[SessionSnapshot]:
        """Newest first."""
        ...

    def save_checkpoint(self, checkpoint: Checkpoint) -> None: ...

    def list_checkpoints(self, session_id: str, *, limit: int = 20) -> list[Checkpoint]:
        """Newest first."""
        ...

    def get_checkpoint(self, checkpoint_id: str) -> Checkpoint | None:
        """One checkpoint by id, or None."""
        ...

    def task_checkpoints(self, task_slug: str, *, limit: int = 1000) -> list[Checkpoint]:
        """Checkpoints whose session belonged to ``task_slug`` when they were written, oldest
        first (the task is taken from the session row at insert)."""
        ...

    def bump_checkpoint_count(self, session_id: str, at: str) -> int:
        """Increment ``session_states.checkpoint_count``; return it (0 if no such session)."""
        ...

    def append_compaction_event(self, event: CompactionEvent) -> None: ...

    def complete_compaction_event(self, event_id: str, summary_tokens: int, at: str) -> None: ...

    def list_compaction_events(self, session_id: str, *, limit: int = 20) -> list[CompactionEvent]:
        """Newest first."""
        ...


class TenantStore(Protocol):
    """The server's registry of tenants and API keys, and its admin audit trail.

    The registry belongs to the database, not to the store's tenant: any store of a database
    reads and writes the same registry (``tenant`` arguments name the row's tenant).
    """

    def create_tenant(self, tenant: str, at: str) -> TenantRecord:
        """Register ``tenant``; ``ConflictError`` if it exists."""
        ...

    def get_tenant(self, tenant: str) -> TenantRecord | None: ...

    def list_tenants(self) -> list[TenantRecord]:
        """Every tenant, revoked ones too, oldest first."""
        ...

    def revoke_tenant(self, tenant: str, at: str) -> bool:
        """Mark ``tenant`` revoked; False if there is no such unrevoked tenant."""
        ...

    def create_api_key(self, key: ApiKeyRecord) -> None:
        """Store a key record (only the hash of its secret); ``ConflictError`` on a taken id."""
        ...

    def get_api_key(self, key_id: str) -> ApiKeyRecord | None:
        """The key ``key_id`` with its tenant's revocation folded in, revoked or not."""
        ...

    def list_api_keys(self, tenant: str | None = None) -> list[ApiKeyRecord]:
        """Keys of ``tenant`` (every tenant's when None), oldest first."""
        ...

    def revoke_api_key(self, key_id: str, at: str) -> bool:
        """Mark the key revoked; False if there is no such unrevoked key."""
        ...

    def append_admin_audit(
        self, action: str, actor: str, tenant: str, detail: dict[str, Any], at: str
    ) -> int:
        """Append one registry change (tenant or key created, revoked); return its id."""
        ...


class RequestStore(Protocol):
    """Idempotency: a client's request id applies at most once per tenant."""

    def claim_request(self, request_id: str, at: str) -> bool:
        """Record ``request_id`` for this store's tenant; False if it was already recorded.

        Call it inside the ``transaction()`` that makes the change, so that the claim and the
        change commit (or roll back) together.
        """
        ...

    def check_api_key_ahead(
        self, key_id: str, check: Callable[[ApiKeyRecord | None], None]
    ) -> None:
        """``check`` of the registry's record of ``key_id`` (None: no such key), read with the
        open transaction's next statement on PostgreSQL (no round trip of its own) and handed
        to ``check`` before anything else of that round trip is seen; ``check`` raises to
        roll the transaction back. Outside a transaction, and on SQLite, read now."""
        ...

    def claim_request_ahead(self, request_id: str, at: str) -> None:
        """``claim_request`` inside the ``transaction()`` that makes the change, settled by
        the change's first statement: on PostgreSQL the claim goes with it in one round trip
        (not one of its own), and once that round trip returns, before the change sees any
        of its results, an id already recorded raises ``RequestReplayed`` (the transaction
        rolls back). SQLite claims at once. So the change must do nothing outside the
        transaction before its first statement.
        """
        ...


class TaskStore(Protocol):
    """Pipeline tasks of this store's tenant (a team server's pending work), by task id."""

    def save_task(self, task: TaskRecord) -> None:
        """Insert the task, or replace its title, stage, project, detail and ``updated_at``
        (its ``created_at`` and its place in the order stay)."""
        ...

    def add_tasks(self, tasks: Sequence[TaskRecord]) -> int:
        """Insert each task whose id is not stored yet (a stored one is left as it is);
        return how many were added."""
        ...

    def get_task(self, task_id: str) -> TaskRecord | None: ...

    def list_tasks(
        self,
        *,
        stages: Sequence[str] | None = None,
        project: str | None = None,
        limit: int | None = None,
    ) -> list[TaskRecord]:
        """Tasks in the order they were first added: at one of ``stages`` (exact, lower case)
        when given, of ``project`` or of no project when ``project`` is given."""
        ...


class TransferStore(Protocol):
    """Verbatim copies of whole tables (``cortex.store.transfer.TRANSFER_TABLES``), to move one
    home into another store. Rows are column -> value dicts as a SQLite file holds them (JSON
    as text), without the tenant column."""

    def export_rows(self, table: str) -> Iterator[dict[str, Any]]:
        """Every row of ``table`` (this tenant's), oldest first, streamed; the ``supersedes``
        links the memories rows hold come as ``memory_links`` rows (``HELD_LINKS``)."""
        ...

    def import_rows(self, table: str, rows: Sequence[dict[str, Any]]) -> int:
        """Insert ``rows`` in one transaction as they are, skipping any whose key is already
        stored (ids of ``KEYLESS_TABLES`` are assigned afresh); return how many were added."""
        ...


class Store(
    TransferStore,
    TenantStore,
    RequestStore,
    TaskStore,
    SessionStore,
    LeaseStore,
    MetricStore,
    AuditStore,
    MemoryStore,
    HygieneStore,
    EmbeddingStore,
    HistoryStore,
    Protocol,
):
    """What the services need from storage: every concern, plus the store's lifecycle."""

    url: str
    """Where the store lives: a file path, ``:memory:`` or a PostgreSQL URL."""

    def migrate(self) -> list[str]:
        """Apply pending migrations in order; return the names applied now."""
        ...

    def applied_migrations(self) -> list[tuple[str, str]]:
        """(name, applied_at) of every applied migration, in order."""
        ...

    def transaction(self) -> AbstractContextManager[None]:
        """One write transaction; nested calls join it; an exception rolls it back."""
        ...

    def after_commit(self, step: Callable[[], object]) -> None:
        """Run ``step`` once the transaction open now commits (at once when none is open); a
        rollback drops it. For what mirrors a commit outside the store (a task folder's
        files): a kill or failure before the commit then leaves no mirror of a change the
        store never made. ``step`` handles its own failures; one it raises reaches the caller
        of the outermost transaction, whose changes stay committed."""
        ...

    def check_integrity(self) -> list[str]:
        """Problems the backend's own consistency check finds; empty when healthy."""
        ...

    def manual_checkpoints(self) -> None:
        """From now on this store's commits leave moving the write-ahead log into the database
        to ``checkpoint`` (a long-lived writer that answers others runs it once it has
        answered). Nothing to do where the backend keeps no such log of its own (PostgreSQL)."""
        ...

    def checkpoint(self) -> None:
        """Move the write-ahead log's committed pages into the database, waiting for no
        reader or writer (what a SQLite commit does itself past 1,000 pages, unless
        ``manual_checkpoints``); nothing to do on PostgreSQL."""
        ...

    def vacuum(self) -> tuple[int, int]:
        """Hand the database's free pages back to the disk: its size in bytes before and after
        (SQLite merges its full-text index into one segment, then rewrites the file).
        PostgreSQL's autovacuum does this itself: ConfigError."""
        ...

    def free_bytes(self) -> int:
        """The bytes of the database's free pages, which ``vacuum`` hands back; 0 where the
        backend reclaims its space itself (PostgreSQL)."""
        ...

    def search_index_segments(self) -> int:
        """The segments of the full-text index, which ``vacuum`` merges into one; 0 where the
        backend's index has none to merge (PostgreSQL's GIN index: autovacuum merges its
        pending entries)."""
        ...

    def merge_search_index(self) -> None:
        """Merge the full-text index's segments into one, as ``vacuum`` does first; nothing
        where the backend's index has no segments (PostgreSQL)."""
        ...

    def close(self) -> None: ...


class SharedStore(Store, Protocol):
    """A store on a connection pool that stores of other tenants share (a server's)."""

    def for_tenant(self, tenant: str) -> SharedStore:
        """``tenant``'s store on the same pool; closing it leaves the pool open."""
        ...

    def turn_batch(self) -> AbstractContextManager[TurnBatch]:
        """One transaction across tenants for a batch of captured turns (the team server's
        group commit), on one connection of the pool: it commits when the block ends and
        rolls back on an exception."""
        ...


TenantKey = tuple[str, str]
"""(tenant, id): a session or request id is unique within its tenant only."""
if TYPE_CHECKING:
    BatchReads = tuple[
        set[TenantKey],
        dict[TenantKey, SessionState],
        dict[str, list[TaskRecord]],
        dict[str, ApiKeyRecord],
    ]
    """What ``TurnBatch.claim_and_read`` returns: the claims it made, the sessions found, each
    tenant's pending tasks and the keys found."""


class TurnBatch(Protocol):
    """The reads and writes of a batch of captured turns of many tenants, in one transaction.

    Every row named carries its tenant. The reads go to the database in two round trips
    (``api_keys``, then ``claim_and_read``), or in one when the callers' tenants are known
    beforehand (``claim_and_read`` reads the keys too); the writes wait for the commit and
    go with it.
    """

    def api_keys(self, key_ids: Sequence[str]) -> dict[str, ApiKeyRecord]:
        """The keys among ``key_ids`` that exist (revoked or not, as ``get_api_key``)."""
        ...

    def claim_and_read(
        self,
        claims: Sequence[TenantKey],
        at: str,
        sessions: Sequence[TenantKey],
        key_ids: Sequence[str] = (),
    ) -> BatchReads:
        """Claim the (tenant, request id) pairs of ``claims`` (distinct); read the sessions
        of ``sessions``, every pending-stage task of their tenants and the keys of
        ``key_ids`` (as ``api_keys``). Returns the claims this call made (the others were
        claimed before), the sessions found, the pending tasks of each tenant, in their
        order, and the keys found. A session another transaction holds is not waited for:
        it is left out, as one not found is."""
        ...

    def release(self, claims: Sequence[TenantKey]) -> None:
        """Take back claims this batch made (items that failed or are retried alone)."""
        ...

    def save_sessions(self, states: Sequence[tuple[str, SessionState]]) -> None:
        """UPSERT each (tenant, session) whole, as ``save_session`` does."""
        ...
