"""The unit of work every session use case shares.

It holds the store, settings and clock, queues metrics events so that they join the
transaction that caused them, and has the steps each use case repeats: load, resolve,
save (size-capped), mirror to JSON and to the working-memory file, and pending-task detection.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from functools import partial

from cortex.clock import Clock
from cortex.config import Config
from cortex.core.models import PendingTask, Pin, SessionState, evolve
from cortex.core.redaction import redact_value
from cortex.core.sizing import fit_record, tasks_that_can_fit
from cortex.core.tasks import (
    PENDING_STAGES,
    merge_tasks,
    pending_from_pipeline,
    scan_pins_for_tasks,
)
from cortex.core.topics import HotTopicExtractor
from cortex.errors import ConflictError, CortexError, NotFoundError, command, param
from cortex.files import BRIEF_LOCK_SECONDS, check_id, file_lock, write_json
from cortex.logs import getLogger
from cortex.services.base import Service
from cortex.services.ids import lookup
from cortex.services.restoration import UNKNOWN_PIPELINE
from cortex.services.tasks import PipelineFile, StoreTasks, TaskSource
from cortex.services.working_memory import save_working_memory

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from cortex.core.models import MetricEvent
    from cortex.services.metrics import MetricsWriter
    from cortex.services.project import ProjectIdentity
    from cortex.services.tasks import Tasks
    from cortex.store.protocol import Store

    PinsCopy = tuple[Path, str, tuple[Pin, ...], str]
    """What ``save_working_memory`` writes: the file, the session, its pins and when."""

log = getLogger("cortex")
START_OR_NAME = f"start one with {command('session start')} or pass {param('session_id')}"
"""The next step when no session is named and none is current."""

PLACES = ("git:", "path:")
"""Prefixes of the project ids that name a place (a repository, a directory), not a name."""


class SessionContext(Service):
    """Store, settings, clock and metrics queue of the session use cases, and their steps."""

    def __init__(
        self,
        store: Store,
        config: Config,
        clock: Clock | None = None,
        metrics: MetricsWriter | None = None,
        tasks: TaskSource | None = None,
    ) -> None:
        super().__init__(store, config, clock)
        self._metrics = metrics
        self.tasks = tasks or PipelineFile(config.pipeline_state_path)
        """Where pending tasks come from: the pipeline file, or a tenant's tasks in the store."""
        self._queued: list[tuple[str, str | None, dict[str, Any]]] = []
        self._depth = 0
        self._defer: Callable[[Callable[[], object]], None] | None = None
        """The outermost transaction's ``defer``, while it runs."""
        self._pins: tuple[ExitStack[bool | None], PinsCopy] | None = None
        """The held lock and the copy of the pins a deferring transaction writes after it."""
        self._all: tuple[object, Tasks | None] | None = None
        self._pending: tuple[object, Tasks | None, dict[str | None, tuple[PendingTask, ...]]]
        self._pending = (_NOT_READ, None, {})

    @property
    def tasks_in_store(self) -> bool:
        """Whether the tasks are the store's rows (a server's), read by ``list_tasks()``."""
        return isinstance(self.tasks, StoreTasks) and self.tasks.store is self.store

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
    def tx(self, defer: Callable[[Callable[[], object]], None] | None = None) -> Iterator[None]:
        """A store transaction whose queued metrics events join it just before it commits.

        Nested calls join the outermost one. The chain's head file advances only after the
        commit, so a rolled-back change never leaves a metrics event (or a head ahead of the
        database) behind. A metrics failure is logged and never undoes the session change it
        describes. With ``defer`` (the outermost call's), that step and the copy of the pins
        (``mirror_pins``) are handed to it once committed instead of run here.
        """
        if self._depth == 0:
            # Read (and trim) the pending tasks before taking the write lock: a pipeline file
            # can be long, and every writer waiting on the lock would wait for it too.
            self._pipeline_tasks()
            self._defer = defer
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
                self._drop_pins()
            raise
        finally:
            self._depth -= 1
            if self._depth == 0:
                self._defer = None
        if self._depth > 0:
            return
        after: list[Callable[[], None]] = []
        pins = self._pins_after_commit()  # first: it holds the file's lock until it runs
        if pins is not None:
            after.append(pins)
        if written:
            after.append(partial(self._advance_head, written[-1]))
        for step in after:
            if defer is None:
                step()
            else:
                defer(step)

    def _advance_head(self, newest: MetricEvent) -> None:
        try:
            self.metrics.advance_head(newest)
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
        """The stored session ``session_id`` names: the whole id or a unique prefix of it."""
        state = lookup(self.store, "session", check_id(session_id), self.store.get_session)
        if state is None:
            raise NotFoundError(f"no session {session_id!r}; see {command('session list')}")
        return state

    def resolve(self, session_id: str | None, project: str | None = None) -> SessionState:
        """The named session, or the current active one (newest activity) of this home. Only
        None means the current one: an empty id (an unset variable) is refused by ``load``."""
        if session_id is not None:
            return self.load(session_id)
        state = (
            self.store.latest_open_session(project)
            if project is not None
            else self.store.latest_open_session(any_project=True)
        )
        if state is None:
            raise NotFoundError(f"no active session; {START_OR_NAME}")
        return state

    def current(self, here: ProjectIdentity) -> SessionState:
        """See ``SessionPersistenceManager.current_session``."""
        return current_of(self.store.open_sessions(), here)

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
        """Best effort: the session's JSON mirror in ``sessions_dir``."""
        try:
            write_json(
                self.config.sessions_dir / f"{check_id(state.session_id)}.json",
                state.to_dict(),
                durable=False,
                wait=BRIEF_LOCK_SECONDS,
            )
        except CortexError as exc:
            log.warning("session %s: JSON mirror not written: %s", state.session_id, exc)

    def mirror_pins(self, state: SessionState) -> None:
        """Best effort: OpenClaw's working_memory.json mirrors this session's pins.

        Called inside the transaction that changed them, so that the copies of concurrent
        writers land in commit order (the write lock serializes them). In a transaction that
        defers (a hook server's) the file's lock is taken here, under the write lock, and held
        until the copy is written after the commit: a writer that commits later waits for it
        before writing its own copy, so the order holds.
        """
        path = self.config.working_memory_path
        pins = (path, state.session_id, state.working_memory, self.now_iso())
        if self._defer is None:
            _save_pins(pins)
            return
        if self._pins is None:
            held = ExitStack()
            try:
                held.enter_context(file_lock(path, wait=BRIEF_LOCK_SECONDS))
            except CortexError as exc:
                log.warning("working memory file not written: %s", exc)
                return
            self._pins = (held, pins)
        else:
            self._pins = (self._pins[0], pins)  # the newest copy of this transaction wins

    def _pins_after_commit(self) -> Callable[[], None] | None:
        """The deferred copy of the pins, which releases the file's lock when written."""
        if self._pins is None:
            return None
        (held, pins), self._pins = self._pins, None

        def write() -> None:
            with held:
                _save_pins(pins, locked=True)

        return write

    def _drop_pins(self) -> None:
        if self._pins is not None:
            self._pins[0].close()
            self._pins = None

    # -- pending tasks -------------------------------------------------------------------------
    def pipeline(self) -> Mapping[str, dict[str, Any]] | None:
        """Every pipeline task; an unreadable task list is logged and treated as unknown
        (nothing dropped). Read again only when the task source changed."""
        version = self.tasks.version()
        if self._all is None or self._all[0] != version:
            self._all = (version, self._read(self.tasks.tasks))
        return self._all[1]

    def _read(self, read: Callable[[], Tasks | None]) -> Tasks | None:
        try:
            return read()
        except CortexError as exc:
            log.warning("%s", exc)
            return UNKNOWN_PIPELINE

    def _pipeline_tasks(self, project: str | None = None) -> tuple[PendingTask, ...]:
        """The pending tasks of ``project`` (and of no project), trimmed to those a record can
        hold; read once, and computed once per project, while the task source is unchanged."""
        version = self.tasks.version()
        if self._pending[0] != version:
            known = self._all is not None and self._all[0] == version
            read = self._all[1] if self._all is not None and known else None
            self._pending = (version, read if known else self._read(self.tasks.pending), {})
        _, tasks, by_project = self._pending
        if project not in by_project:
            by_project[project] = _pending_of(tasks, project)
        return by_project[project]

    def detect_pending(
        self,
        pins: Sequence[Pin],
        pipeline: Mapping[str, dict[str, Any]] | None = None,
        project: str | None = None,
    ) -> tuple[PendingTask, ...]:
        """Pipeline tasks in build/verify/validate, plus tasks pins say are unfinished.

        ``pipeline`` is the already-loaded pipeline file, when the caller has it. A pipeline
        task that names a project is pending only for sessions of that project.
        """
        if pipeline is None:
            return _with_pins(self._pipeline_tasks(project), pins)
        return pending_tasks(pins, pipeline, project)


_NOT_READ = object()


def pending_tasks(
    pins: Sequence[Pin], pipeline: Mapping[str, dict[str, Any]] | None, project: str | None
) -> tuple[PendingTask, ...]:
    """``detect_pending`` over the tasks of ``pipeline`` (a tenant's, read for a batch)."""
    return _with_pins(_pending_of(pipeline, project), pins)


def _with_pins(
    from_pipeline: Sequence[PendingTask], pins: Sequence[Pin]
) -> tuple[PendingTask, ...]:
    return tuple(merge_tasks(from_pipeline, scan_pins_for_tasks(pins)))


def _pending_of(
    pipeline: Mapping[str, dict[str, Any]] | None, project: str | None
) -> tuple[PendingTask, ...]:
    """The pipeline's pending tasks of ``project`` (and of no project), least valuable left out
    beyond what a record can hold."""
    if pipeline is None or pipeline is UNKNOWN_PIPELINE:
        return ()
    return tasks_that_can_fit(tuple(pending_from_pipeline(pipeline, PENDING_STAGES, project)))


def check_open(state: SessionState) -> SessionState:
    """``state`` if it is open, else a ``ConflictError`` naming the next step."""
    if not state.is_open:
        raise ConflictError(
            f"session {state.session_id} ended at {state.end_time}; "
            f"start a new one with {command('session start')}"
        )
    return state


def with_topics(
    session: SessionState, extractor: HotTopicExtractor, **changes: Any
) -> SessionState:
    """``session`` with the accumulator's outputs (topics, projects, learnings) and ``changes``."""
    return evolve(
        session,
        topic_state=extractor.to_dict(),
        hot_topics=tuple(extractor.get_current_topics(20)),
        active_projects=tuple(extractor.get_active_projects()),
        recent_learnings=tuple(extractor.get_recent_learning_ids()),
        **changes,
    )


def _save_pins(pins: PinsCopy, *, locked: bool = False) -> None:
    try:
        save_working_memory(*pins, locked=locked)
    except CortexError as exc:
        log.warning("working memory file not written: %s", exc)


def current_of(open_sessions: Sequence[SessionState], here: ProjectIdentity) -> SessionState:
    """Which of ``open_sessions`` a command run in project ``here`` means when it names none
    (the rule of ``SessionPersistenceManager.current_session``, wherever the sessions live)."""
    from cortex.services.project import project_label, project_matches  # (a start: none)

    open_now = sorted(open_sessions, key=lambda s: s.last_activity or s.start_time)
    mine = [s for s in open_now if s.project and project_matches(s.project, here.id)]
    if mine:
        return mine[-1]
    unplaced = [s for s in open_now if not s.project or not s.project.startswith(PLACES)]
    if len({s.project for s in unplaced}) == 1:
        return unplaced[-1]
    listed = ", ".join(
        f"{s.session_id[:8]} ({project_label(s.project)})" for s in reversed(open_now)
    )
    if unplaced:
        raise ConflictError(
            f"several sessions are open and none is of {here.name}: {listed}; "
            f"pass {param('session_id')}"
        )
    if open_now:
        raise NotFoundError(
            f"no open session of {here.name} (open elsewhere: {listed}); {START_OR_NAME}"
        )
    raise NotFoundError(f"no active session; {START_OR_NAME}")
