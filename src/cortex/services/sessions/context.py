"""The unit of work every session use case shares.

It holds the store, settings and clock, queues metrics events so that they join the
transaction that caused them, and has the steps each use case repeats: load, resolve,
save (size-capped), mirror to JSON and to the working-memory file, and pending-task detection.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from cortex.clock import Clock
from cortex.config import Config
from cortex.core.models import PendingTask, Pin, SessionState
from cortex.core.redaction import redact_value
from cortex.core.sizing import fit_record
from cortex.core.tasks import (
    PENDING_STAGES,
    merge_tasks,
    pending_from_pipeline,
    scan_pins_for_tasks,
)
from cortex.core.topics import HotTopicExtractor
from cortex.errors import ConflictError, CortexError, NotFoundError
from cortex.files import check_id, write_json
from cortex.services.base import Service
from cortex.services.pipeline import load_pipeline
from cortex.services.restoration import UNKNOWN_PIPELINE
from cortex.services.working_memory import save_working_memory
from cortex.store.protocol import Store

if TYPE_CHECKING:
    from cortex.core.models import MetricEvent
    from cortex.services.metrics import MetricsWriter

log = logging.getLogger("cortex")


class SessionContext(Service):
    """Store, settings, clock and metrics queue of the session use cases, and their steps."""

    def __init__(
        self,
        store: Store,
        config: Config,
        clock: Clock | None = None,
        metrics: MetricsWriter | None = None,
    ) -> None:
        super().__init__(store, config, clock)
        self._metrics = metrics
        self._queued: list[tuple[str, str | None, dict[str, Any]]] = []
        self._depth = 0

    @property
    def metrics(self) -> MetricsWriter:
        """The metrics chain's writer, opened (key loaded) on the first event."""
        if self._metrics is None:
            from cortex.services.metrics import open_writer  # only when emitting

            self._metrics = open_writer(self.store, self.config.home)
        return self._metrics

    def emit(self, event: str, session_id: str | None, payload: dict[str, Any]) -> None:
        """Queue an event; it is written after the surrounding transaction commits."""
        self._queued.append((event, session_id, redact_value(payload)))

    @contextmanager
    def tx(self) -> Iterator[None]:
        """A store transaction whose queued metrics events join it just before it commits.

        Nested calls join the outermost one. The chain's head file advances only after the
        commit, so a rolled-back change never leaves a metrics event (or a head ahead of the
        database) behind. A metrics failure is logged and never undoes the session change it
        describes.
        """
        self._depth += 1
        written: list[MetricEvent] = []
        try:
            with self.store.transaction():
                yield
                if self._depth == 1 and self._queued:
                    written = self._append_queued()
        except BaseException:
            if self._depth == 1:
                self._queued.clear()
            raise
        finally:
            self._depth -= 1
        if written:
            try:
                self.metrics.advance_head(written[-1])
            except CortexError as exc:
                log.warning("metrics chain head not advanced: %s", exc)

    def _append_queued(self) -> list[MetricEvent]:
        events, self._queued = self._queued, []
        try:
            return self.metrics.append(events, self.now_iso())
        except CortexError as exc:
            log.warning("metrics not recorded: %s", exc)
            return []

    # -- load and save -------------------------------------------------------------------------
    def get(self, session_id: str) -> SessionState | None:
        """The stored session, or None; the id is checked first (it may name a file)."""
        return self.store.get_session(check_id(session_id))

    def load(self, session_id: str) -> SessionState:
        state = self.get(session_id)
        if state is None:
            raise NotFoundError(f"no session {session_id!r}; see `cortex session list`")
        return state

    def resolve(self, session_id: str | None, project: str | None = None) -> SessionState:
        """The named session, or the current active one (newest activity) of this home."""
        if session_id:
            return self.load(session_id)
        state = (
            self.store.latest_open_session(project)
            if project is not None
            else self.store.latest_open_session(any_project=True)
        )
        if state is None:
            raise NotFoundError(
                "no active session; start one with `cortex session start` or pass --session-id"
            )
        return state

    def resolve_open(self, session_id: str | None) -> SessionState:
        """Like ``resolve``, but a session that has ended is a ``ConflictError``."""
        return check_open(self.resolve(session_id))

    def save(self, state: SessionState) -> SessionState:
        """Store ``state`` whole, capped to the record size limit; return what was stored."""
        state = fit_record(state)
        self.store.save_session(state)
        return state

    # -- mirrors -------------------------------------------------------------------------------
    def mirror(self, state: SessionState) -> None:
        """Best effort: the session's JSON mirror in ``sessions_dir`` (FR-001)."""
        try:
            write_json(
                self.config.sessions_dir / f"{check_id(state.session_id)}.json",
                state.to_dict(),
                durable=False,
            )
        except CortexError as exc:
            log.warning("session %s: JSON mirror not written: %s", state.session_id, exc)

    def mirror_pins(self, state: SessionState) -> None:
        """Best effort: OpenClaw's working_memory.json mirrors this session's pins."""
        try:
            save_working_memory(
                self.config.working_memory_path,
                state.session_id,
                state.working_memory,
                self.now_iso(),
            )
        except CortexError as exc:
            log.warning("working memory file not written: %s", exc)

    # -- pending tasks -------------------------------------------------------------------------
    def pipeline(self) -> Mapping[str, dict[str, Any]] | None:
        """Pipeline tasks; a malformed file is logged and treated as unknown (nothing dropped)."""
        try:
            return load_pipeline(self.config.pipeline_state_path)
        except CortexError as exc:
            log.warning("%s", exc)
            return UNKNOWN_PIPELINE

    def detect_pending(
        self,
        pins: Sequence[Pin],
        pipeline: Mapping[str, dict[str, Any]] | None = None,
        project: str | None = None,
    ) -> tuple[PendingTask, ...]:
        """FR-008: pipeline tasks in build/verify/validate, plus tasks pins say are unfinished.

        ``pipeline`` is the already-loaded pipeline file, when the caller has it. A pipeline
        task that names a project is pending only for sessions of that project.
        """
        pipeline = self.pipeline() if pipeline is None else pipeline
        from_pipeline = (
            []
            if pipeline is None or pipeline is UNKNOWN_PIPELINE
            else pending_from_pipeline(pipeline, PENDING_STAGES, project)
        )
        return tuple(merge_tasks(from_pipeline, scan_pins_for_tasks(pins)))


def check_open(state: SessionState) -> SessionState:
    """``state`` if it is open, else a ``ConflictError`` naming the next step."""
    if not state.is_open:
        raise ConflictError(
            f"session {state.session_id} ended at {state.end_time}; "
            "start a new one with `cortex session start`"
        )
    return state


def with_topics(
    session: SessionState, extractor: HotTopicExtractor, **changes: Any
) -> SessionState:
    """``session`` with the accumulator's outputs (topics, projects, learnings) and ``changes``."""
    return replace(
        session,
        topic_state=extractor.to_dict(),
        hot_topics=tuple(extractor.get_current_topics(20)),
        active_projects=tuple(extractor.get_active_projects()),
        recent_learnings=tuple(extractor.get_recent_learning_ids()),
        **changes,
    )
