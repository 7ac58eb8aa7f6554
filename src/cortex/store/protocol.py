"""The ``Store`` protocol: everything the services ask of a database, and nothing more.

Two implementations keep this contract: ``SQLiteStore`` (the embedded default) and, later,
``PostgresStore``. ``tests/store_contract.py`` holds the contract tests both must pass.

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
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from cortex.core.memory_models import (
    Checkpoint,
    CompactionEvent,
    EventTotals,
    Memory,
    MemoryFilter,
    MemoryLink,
    SessionEvent,
    SessionSnapshot,
)
from cortex.core.models import AuditEntry, MetricEvent, SessionState


class Store(Protocol):
    """What the services need from storage."""

    url: str
    """Where the store lives: a file path, ``:memory:`` or a PostgreSQL URL."""

    # -- lifecycle ---------------------------------------------------------------------------
    def migrate(self) -> list[str]:
        """Apply pending migrations in order; return the names applied now."""
        ...

    def applied_migrations(self) -> list[tuple[str, str]]:
        """(name, applied_at) of every applied migration, in order."""
        ...

    def transaction(self) -> AbstractContextManager[None]:
        """One write transaction; nested calls join it; an exception rolls it back."""
        ...

    def close(self) -> None: ...

    # -- sessions ----------------------------------------------------------------------------
    def save_session(self, state: SessionState) -> None:
        """Insert or replace the whole row of ``state.session_id`` (UPSERT)."""
        ...

    def get_session(self, session_id: str) -> SessionState | None: ...

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

    def open_sessions(
        self, *, exclude_id: str | None = None, idle_before: str | None = None
    ) -> list[SessionState]:
        """Sessions with no ``end_time`` (live or crashed), any project, oldest first.

        With ``idle_before``, only those idle since before it or with a recorded owner process.
        """
        ...

    def latest_open_session(
        self, project: str | None = None, *, any_project: bool = False
    ) -> SessionState | None:
        """The open session with the newest ``last_activity`` (of ``project`` unless
        ``any_project``)."""
        ...

    def latest_session(self, project: str | None) -> SessionState | None:
        """The session of ``project`` that started last, open or not."""
        ...

    def list_sessions(
        self,
        *,
        limit: int = 50,
        offset: int = 0,
        project: str | None = None,
        any_project: bool = True,
    ) -> list[SessionState]:
        """Sessions newest ``start_time`` first (all projects unless ``any_project`` is False)."""
        ...

    def count_sessions(self) -> int: ...

    def mark_continued(self, session_ids: list[str], next_id: str, at: str) -> None:
        """Set ``continued_by = next_id`` and ``updated_at = at`` on each of ``session_ids``."""
        ...

    def sessions_ended_before(self, before: str, *, limit: int) -> list[SessionState]:
        """Completed sessions with ``end_time < before``, oldest first (for archiving)."""
        ...

    def delete_sessions(self, session_ids: list[str]) -> int:
        """Delete these rows; return how many were deleted."""
        ...

    # -- metrics (a keyed hash chain; cortex.services.metrics computes the hashes) -------------
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

    def list_metrics(
        self, *, event: str | None = None, limit: int | None = None, after_seq: int = 0
    ) -> list[MetricEvent]:
        """Events in ``seq`` order, optionally of one ``event`` name."""
        ...

    def iter_metrics(self) -> Iterator[MetricEvent]:
        """Every event in ``seq`` order, streamed (for ``metrics verify``)."""
        ...

    # -- audit log ---------------------------------------------------------------------------
    def append_audit(
        self, action: str, actor: str, target: str | None, detail: dict[str, Any], at: str
    ) -> int: ...

    def list_audit(self, *, limit: int = 100) -> list[AuditEntry]:
        """Newest first."""
        ...

    # -- memories (RFC phase 1) --------------------------------------------------------------
    def has_fts(self) -> bool:
        """Whether full-text search is available (else search uses its LIKE fallback)."""
        ...

    def add_memories(self, memories: Sequence[Memory]) -> list[str | None]:
        """Insert in one transaction; per memory, the id of the live one its key superseded."""
        ...

    def get_memory(self, memory_id: str) -> Memory | None:
        """Any memory by id, live or not."""
        ...

    def update_memory(self, memory: Memory) -> None:
        """Rewrite the editable columns of ``memory.id``."""
        ...

    def delete_memory(self, memory_id: str, at: str) -> bool:
        """Soft delete; False if there is no such undeleted memory."""
        ...

    def list_memories(
        self, flt: MemoryFilter, now: str, *, limit: int = 50, offset: int = 0
    ) -> list[Memory]:
        """Memories ``flt`` sees at ``now``, newest first."""
        ...

    def count_memories(self, flt: MemoryFilter, now: str) -> int: ...

    def search_memories(
        self, match: str, flt: MemoryFilter, now: str, *, limit: int, by_recency: bool = False
    ) -> list[tuple[Memory, float]]:
        """Full-text candidates for ``match`` (an FTS5 expression) with their ``bm25`` score
        (lower is better), best first; empty when there is no full-text index. Only the best
        4,096 candidates are filtered by ``flt``. ``by_recency``: the newest matches, score 0."""
        ...

    def term_doc_counts(self, terms: Sequence[str], cap: int) -> dict[str, int]:
        """Memories holding each term, counted up to ``cap + 1`` (empty without full text)."""
        ...

    def memory_count_estimate(self) -> int:
        """An upper bound of how many memories exist, read in constant time."""
        ...

    def like_memories(
        self,
        patterns: Sequence[str],
        flt: MemoryFilter,
        now: str,
        *,
        limit: int,
        newest: int | None = None,
    ) -> list[Memory]:
        """Memories whose content or tags match any escaped ``LIKE`` pattern, newest first;
        only among the ``newest`` memories when given."""
        ...

    def add_memory_link(self, link: MemoryLink) -> None: ...

    def memory_links(self, memory_id: str) -> list[MemoryLink]:
        """Links from or to ``memory_id``."""
        ...

    def linked_memories(
        self, memory_ids: Sequence[str], flt: MemoryFilter, now: str
    ) -> list[tuple[str, str, Memory]]:
        """(seed id, link kind, neighbour) one hop from ``memory_ids``, neighbours ``flt``
        sees at ``now``."""
        ...

    def save_embeddings(self, model: str, items: Sequence[tuple[str, int, bytes]]) -> None:
        """Store (memory id, dimension, float32 little-endian vector) rows for ``model``."""
        ...

    def load_embeddings(
        self, model: str, flt: MemoryFilter, now: str
    ) -> list[tuple[Memory, bytes]]: ...

    def memories_without_embedding(self, model: str, *, limit: int) -> list[Memory]: ...

    # -- session history (RFC phases 2 and 3) ------------------------------------------------
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

    def save_snapshot(self, snapshot: SessionSnapshot) -> None: ...

    def get_snapshot(self, snapshot_id: str) -> SessionSnapshot | None: ...

    def list_snapshots(self, session_id: str, *, limit: int = 20) -> list[SessionSnapshot]:
        """Newest first."""
        ...

    def save_checkpoint(self, checkpoint: Checkpoint) -> None: ...

    def get_checkpoint(self, checkpoint_id: str) -> Checkpoint | None: ...

    def list_checkpoints(self, session_id: str, *, limit: int = 20) -> list[Checkpoint]:
        """Newest first."""
        ...

    def bump_checkpoint_count(self, session_id: str, at: str) -> int:
        """Increment ``session_states.checkpoint_count``; return it (0 if no such session)."""
        ...

    def append_compaction_event(self, event: CompactionEvent) -> None: ...

    def complete_compaction_event(self, event_id: str, summary_tokens: int, at: str) -> None: ...

    def list_compaction_events(self, session_id: str, *, limit: int = 20) -> list[CompactionEvent]:
        """Newest first."""
        ...
