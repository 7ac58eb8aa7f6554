"""The ``Store`` protocol: everything the services ask of a database, and nothing more.

Two implementations keep this contract: ``SQLiteStore`` (the embedded default) and, later,
``PostgresStore``. ``tests/store_contract.py`` holds the contract tests both must pass.

Rules every implementation follows:
- Reads and writes take and return model objects (``cortex.models``), never raw rows.
- ``transaction()`` opens one write transaction (SQLite: ``BEGIN IMMEDIATE``); calls made
  inside it share it, nested calls join the outer one, an exception rolls it back.
  Calls made outside a transaction each commit on their own.
- Session queries filter by ``project`` with SQL ``IS`` semantics: ``None`` matches ``None``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol

from cortex.models import AuditEntry, MetricEvent, SessionState


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
        self, since: str, project: str | None, *, limit: int, exclude_id: str | None = None
    ) -> list[SessionState]:
        """Sessions of ``project`` with ``end_time >= since``, newest ``end_time`` first."""
        ...

    def open_sessions(self, *, exclude_id: str | None = None) -> list[SessionState]:
        """Sessions with no ``end_time`` (live or crashed), any project, oldest first."""
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

    # -- metrics (a keyed hash chain; cortex.metrics computes the hashes) ----------------------
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
