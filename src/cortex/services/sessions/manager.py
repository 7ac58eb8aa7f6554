"""SessionPersistenceManager: capture and restore sessions (FR-001..FR-013).

The service owns transactions and lifecycle; formulas live in the pure core and SQL in the
store. Every turn's signals go to the store at once (a turn may be a separate process), so a
session killed at any instant loses at most the turn in flight. A session with no end is
only crashed when its lease lapsed or its owning process is gone (ARCHITECTURE.md).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from cortex.clock import Clock, SystemClock, parse_time, to_iso
from cortex.config import Config
from cortex.services.archive import ArchiveReport, archive_sessions

if TYPE_CHECKING:
    from cortex.core.models import MetricEvent
    from cortex.services.metrics import MetricsWriter
from cortex.core.models import (
    ACTIVE,
    COMPLETE,
    TERMINATED,
    PendingTask,
    Pin,
    RestoredSessionContext,
    SessionState,
)
from cortex.core.pins import make_pin, remove_pin, upsert_pin
from cortex.core.redaction import redact, redact_value
from cortex.core.sizing import fit_record
from cortex.core.tasks import (
    PENDING_STAGES,
    merge_tasks,
    pending_from_pipeline,
    scan_pins_for_tasks,
)
from cortex.core.topics import HotTopicExtractor, extract_project_name, keywords_from_text
from cortex.errors import ConflictError, CortexError, NotFoundError, ValidationError
from cortex.files import check_id, write_json
from cortex.services.pipeline import load_pipeline
from cortex.services.project import display_name
from cortex.services.restoration import UNKNOWN_PIPELINE, RestorePlan, plan_forced, plan_restoration
from cortex.services.working_memory import load_working_memory, save_working_memory
from cortex.store import Store, open_store

log = logging.getLogger("cortex")
debug_log = logging.getLogger("cortex.debug")

RESTORE_BUDGET_SECONDS = 1.5
"""Design 10: a restoration slower than this is abandoned for a cold start (fail open)."""
MAX_TURN_TEXT = 20_000
"""Characters of one turn's text used for topic extraction (a huge prompt costs no more)."""
CANDIDATE_LIMIT = 50
"""Most recent completed sessions scored at a start (the spec's getRecentSessions(7, 50))."""


class SessionPersistenceManager:
    """Capture, restore, recover and chain sessions over one ``Store``."""

    def __init__(
        self,
        store: Store,
        config: Config,
        clock: Clock | None = None,
        metrics: MetricsWriter | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.clock = clock or SystemClock()
        self._metrics = metrics
        self._queued: list[tuple[str, str | None, dict[str, Any]]] = []
        self._depth = 0

    @classmethod
    def open(
        cls, config: Config, clock: Clock | None = None, store: Store | None = None
    ) -> SessionPersistenceManager:
        """Open the home's ``brain.db`` (migrated) and build the manager."""
        return cls(store or open_store(config.db_path), config, clock)

    # -- plumbing ------------------------------------------------------------------------------
    def now_iso(self) -> str:
        return to_iso(self.clock.now())

    @property
    def metrics(self) -> MetricsWriter:
        from cortex.services.metrics import MetricsWriter, load_or_create_key  # only when emitting

        if self._metrics is None:
            key = load_or_create_key(self.config.home / "metrics.key")
            self._metrics = MetricsWriter(self.store, key, self.config.home / "metrics.head")
        return self._metrics

    def _emit(self, event: str, session_id: str | None, payload: dict[str, Any]) -> None:
        """Queue an event; it is written after the surrounding transaction commits."""
        self._queued.append((event, session_id, redact_value(payload)))

    @contextmanager
    def _tx(self) -> Iterator[None]:
        """A store transaction whose queued metrics events join it just before it commits.

        The chain's head file advances only after the commit, so a rolled-back change never
        leaves a metrics event (or a head ahead of the database) behind. A metrics failure is
        logged and never undoes the session change it describes.
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

    def _load(self, session_id: str) -> SessionState:
        state = self.store.get_session(check_id(session_id))
        if state is None:
            raise NotFoundError(f"no session {session_id!r}; see `cortex session list`")
        return state

    def resolve(self, session_id: str | None, project: str | None = None) -> SessionState:
        """The named session, or the current active one (newest activity) of this home."""
        if session_id:
            return self._load(session_id)
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

    def _open(self, session_id: str | None) -> SessionState:
        state = self.resolve(session_id)
        if not state.is_open:
            raise ConflictError(
                f"session {state.session_id} ended at {state.end_time}; "
                "start a new one with `cortex session start`"
            )
        return state

    def _save(self, state: SessionState) -> SessionState:
        state = fit_record(state)
        self.store.save_session(state)
        return state

    def _mirror(self, state: SessionState) -> None:
        """Best effort: the session's JSON mirror in ``sessions_dir`` (FR-001)."""
        try:
            write_json(
                self.config.sessions_dir / f"{check_id(state.session_id)}.json",
                state.to_dict(),
                durable=False,
            )
        except CortexError as exc:
            log.warning("session %s: JSON mirror not written: %s", state.session_id, exc)

    def _mirror_pins(self, state: SessionState) -> None:
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

    def _pipeline(self) -> Mapping[str, dict[str, Any]] | None:
        """Pipeline tasks; a malformed file is logged and treated as unknown (nothing dropped)."""
        try:
            return load_pipeline(self.config.pipeline_state_path)
        except CortexError as exc:
            log.warning("%s", exc)
            return UNKNOWN_PIPELINE

    def detect_pending(
        self, pins: Sequence[Pin], pipeline: Mapping[str, dict[str, Any]] | None = None
    ) -> tuple[PendingTask, ...]:
        """FR-008: pipeline tasks in build/verify/validate, plus tasks pins say are unfinished.

        ``pipeline`` is the already-loaded pipeline file, when the caller has it.
        """
        pipeline = self._pipeline() if pipeline is None else pipeline
        from_pipeline = (
            []
            if pipeline is None or pipeline is UNKNOWN_PIPELINE
            else pending_from_pipeline(pipeline, PENDING_STAGES)
        )
        return tuple(merge_tasks(from_pipeline, scan_pins_for_tasks(pins)))

    # -- start ---------------------------------------------------------------------------------
    def on_session_start(
        self,
        session_id: str | None = None,
        channel: str = "cli",
        *,
        project: str | None = None,
        project_name: str | None = None,
        keywords: Iterable[str] = (),
        workdir: str | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        task_slug: str | None = None,
        owner_pid: int | None = None,
        parent_session: str | None = None,
        explain: bool = False,
    ) -> RestoredSessionContext:
        """Recover lapsed sessions, open this one and restore what is relevant (FR-002).

        ``project`` scopes restoration (a canonical id such as ``git:host/org/repo#root``);
        ``project_name`` is how the project appears in topics and keywords (default: the
        readable part of ``project``, e.g. ``radio`` for ``git:github.com/org/radio#1a2b``).
        ``explain`` records the score breakdown of every candidate. Starting an existing id
        again (a resume) reopens it and restores idempotently.
        """
        sid = check_id(session_id) if session_id is not None else _new_id()
        at = self.now_iso()
        name = project_name or display_name(project)
        extractor = HotTopicExtractor()
        if name:
            extractor.record_project(name)
        if workdir:
            extractor.record_exec_workdir(workdir)
        words = _context_keywords(name, workdir, keywords)
        with self._tx():
            existing = self.store.get_session(sid)
            self.detect_and_recover_crashed(sid)
            previous = self.store.latest_session(project) if existing is None else None
            state = existing or SessionState(
                session_id=sid,
                start_time=at,
                channel=channel,
                created_at=at,
                project=project,
                user_id=user_id,
                agent_id=agent_id,
                task_slug=task_slug,
                previous_session_id=previous.session_id if previous else None,
                parent_session=parent_session,
                topic_state=extractor.to_dict(),
                hot_topics=tuple(extractor.get_current_topics()),
                active_projects=tuple(extractor.get_active_projects()),
            )
            state = replace(
                state,
                end_time=None,
                crash_recovered=False,
                state=ACTIVE,
                last_activity=at,
                updated_at=at,
                owner_pid=owner_pid,
                owner_host=_HOST if owner_pid else None,
            )
            plan = self._plan(state, words, explain) if self.config.enabled else None
            if plan is not None and not plan.is_cold:
                state = replace(state, working_memory=plan.pins)
            state = self._save(state)
            if plan is not None and not plan.is_cold:
                self._record_restore(state, plan)
        self._mirror_pins(state)
        if plan is None or plan.is_cold:
            return RestoredSessionContext(sid, None, explain=plan.explain if plan else ())
        return RestoredSessionContext(
            sid,
            plan.preamble,
            plan.inherited,
            tuple(s.session_id for s in plan.contributors),
            tuple(_score_of(plan, s.session_id) for s in plan.contributors),
            len(plan.pending_tasks),
            plan.explain,
        )

    def _plan(
        self, state: SessionState, words: Sequence[str], explain: bool = False
    ) -> RestorePlan | None:
        """Plan the restoration; any failure or a blown time budget means a cold start."""
        started = time.perf_counter()
        now = self.clock.now()
        days = max(self.config.lookback_days, self.config.critical_inheritance_days)
        try:
            candidates = self.store.completed_sessions_since(
                to_iso(now - timedelta(days=days)),
                state.project,
                limit=CANDIDATE_LIMIT,
                exclude_id=state.session_id,
                all_pins=False,
            )
            plan = plan_restoration(
                candidates,
                state.working_memory,
                words,
                now,
                self.config,
                self._pipeline(),
                explain_all=explain or self.config.debug,
                load_pins=self._with_pins,
            )
        except Exception as exc:  # noqa: BLE001 - NFR-004: restoration never blocks a start
            if os.environ.get("CORTEX_RAISE_ERRORS") == "1":
                raise
            log.warning("restoration failed, starting cold: %s", exc)
            return None
        elapsed = time.perf_counter() - started
        if elapsed > RESTORE_BUDGET_SECONDS:
            log.warning(
                "restoration took %.0f ms (> %.0f ms budget); starting cold",
                elapsed * 1000,
                RESTORE_BUDGET_SECONDS * 1000,
            )
            return None
        if self.config.debug:
            debug_log.info(
                "[session:debug] Fetched %d sessions from last %d days",
                len(candidates),
                self.config.lookback_days,
            )
            for line in plan.explain:
                debug_log.info("%s", line)
            debug_log.info("[session:debug] Restoration complete in %.1fms", elapsed * 1000)
        return plan

    def _with_pins(self, session: SessionState) -> SessionState:
        """``session`` with all of its pins (candidates are loaded with CRITICAL ones only)."""
        full = self.store.get_session(session.session_id)
        return replace(session, working_memory=full.working_memory) if full else session

    def _record_restore(self, state: SessionState, plan: RestorePlan) -> None:
        """Chain links and the FR-013 events of a warm start."""
        ids = [s.session_id for s in plan.contributors]
        self.store.mark_continued(ids, state.session_id, self.now_iso())
        self._emit(
            "session_restored",
            state.session_id,
            {
                "new_session_id": state.session_id,
                "from_session_ids": ids,
                "pins_inherited": len(plan.inherited),
                "relevance_scores": [round(_score_of(plan, i), 4) for i in ids],
                "pending_task_count": len(plan.pending_tasks),
                "cold_start": False,
            },
        )
        for record in plan.decay:
            self._emit(
                "confidence_decay_applied",
                state.session_id,
                {
                    "memory_id": record.memory_id,
                    "original_confidence": record.original_confidence,
                    "decayed_confidence": record.decayed_confidence,
                    "hours_elapsed": record.hours_elapsed,
                    "excluded": record.excluded,
                },
            )
        now = self.clock.now()
        for task in plan.pending_tasks:
            since = plan.task_ages.get(task.task_id) or task.updated_at
            days = (now - parse_time(since)).total_seconds() / 86400 if since else 0.0
            self._emit(
                "pending_task_surfaced",
                state.session_id,
                {
                    "task_id": task.task_id,
                    "title": task.title,
                    "stage": task.stage,
                    "days_pending": round(max(days, 0.0), 2),
                    "source": task.source,
                },
            )

    # -- turns ---------------------------------------------------------------------------------
    def record(
        self,
        session_id: str | None = None,
        *,
        text: str | None = None,
        workdir: str | None = None,
        categories: Iterable[str] = (),
        learning_id: str | None = None,
        tool_name: str | None = None,
        tool_input: Mapping[str, Any] | None = None,
        files: Iterable[str] = (),
        weight: float = 1.0,
    ) -> SessionState:
        """Crash-safe per-turn capture: fold this turn's signals into the stored session."""
        at = self.now_iso()
        with self._tx():
            state = self._open(session_id)
            extractor = HotTopicExtractor.from_dict(state.topic_state)
            # Redacted here, where signals enter: topics, topic_state and projects derive from them.
            if text:
                extractor.record_text(redact(text[:MAX_TURN_TEXT]), weight)
            if workdir:
                extractor.record_exec_workdir(redact(workdir))
            if categories:
                extractor.record_memory_access([redact(c) for c in categories])
            if learning_id:
                extractor.record_learning_id(redact(learning_id))
            if tool_name:
                extractor.record_tool_call(tool_name, redact_value(dict(tool_input or {})))
            for path in files:
                extractor.record_file_path(redact(path))
            state = _with_topics(
                state,
                extractor,
                pending_tasks=self.detect_pending(state.working_memory),
                last_activity=at,
                updated_at=at,
            )
            return self._save(state)

    def update_session_state(self, session_id: str, partial: Mapping[str, Any]) -> SessionState:
        """UPSERT the FR-003 fields present in ``partial``, keeping all others."""
        with self._tx():
            current = self._load(session_id).to_dict()
            unknown = set(partial) - set(current)
            if unknown:
                raise ValidationError(
                    f"unknown SessionState field {sorted(unknown)[0]!r}; see the FR-003 names"
                )
            current.update(partial)
            current["session_id"] = session_id
            current["updated_at"] = self.now_iso()
            return self._save(SessionState.from_dict(current))

    # -- end -----------------------------------------------------------------------------------
    def on_session_end(self, session_id: str | None = None) -> SessionState:
        """FR-001: the final record (redacted pins, tasks, topics), its mirror and metric."""
        at = self.now_iso()
        with self._tx():
            state = self.resolve(session_id)
            if not state.is_open:
                return state  # ending twice is a no-op
            pins = self._pins_from_file(state)
            extractor = HotTopicExtractor.from_dict(state.topic_state)
            known = {p.label for p in state.working_memory}  # counted when they were pinned
            for pin in pins:
                if pin.label not in known:  # pinned through the working-memory file
                    extractor.record_working_memory_label(pin.label)
            state = self._save(
                _with_topics(
                    state,
                    extractor,
                    end_time=at,
                    state=COMPLETE,
                    last_activity=at,
                    updated_at=at,
                    working_memory=pins,
                    pending_tasks=self.detect_pending(pins),
                )
            )
            self._emit_captured(state)
        self._mirror(state)
        return state

    def _emit_captured(self, state: SessionState) -> None:
        start, end = parse_time(state.start_time), parse_time(state.end_time or state.start_time)
        self._emit(
            "session_captured",
            state.session_id,
            {
                "session_id": state.session_id,
                "channel": state.channel,
                "duration_minutes": round((end - start).total_seconds() / 60, 2),
                "pin_count": len(state.working_memory),
                "learning_count": len(state.recent_learnings),
                "task_count": len(state.pending_tasks),
                "hot_topic_count": len(state.hot_topics),
                "crash_recovered": state.crash_recovered,
            },
        )

    def _pins_from_file(self, state: SessionState) -> tuple[Pin, ...]:
        """The session's pins, taking edits made to its working-memory file into account."""
        mirror = load_working_memory(self.config.working_memory_path, self.now_iso())
        pins = state.working_memory
        if mirror is not None and mirror.session_id == state.session_id:
            pins = mirror.pins[:10]
        return tuple(replace(p, label=redact(p.label), content=redact(p.content)) for p in pins)

    # -- crash recovery ------------------------------------------------------------------------
    def is_lapsed(self, state: SessionState) -> bool:
        """An open session is crashed when its lease lapsed or its owner process is gone."""
        last = state.last_activity or state.updated_at or state.start_time
        idle = (self.clock.now() - parse_time(last)).total_seconds()
        if idle > self.config.lease_seconds:
            return True
        if state.owner_pid and state.owner_host == _HOST:
            return not _pid_alive(state.owner_pid)
        return False

    def detect_and_recover_crashed(self, current_session_id: str) -> list[SessionState]:
        """FR-012: close lapsed sessions with an estimated end and ``crash_recovered``."""
        recovered: list[SessionState] = []
        pipeline: Mapping[str, dict[str, Any]] | None = None
        with self._tx():
            idle_before = to_iso(self.clock.now() - timedelta(seconds=self.config.lease_seconds))
            for state in self.store.open_sessions(
                exclude_id=current_session_id, idle_before=idle_before
            ):
                if not self.is_lapsed(state):
                    continue
                if pipeline is None:
                    pipeline = self._pipeline() or {}
                end = state.last_activity or state.updated_at
                if end is None:
                    end = to_iso(
                        min(self.clock.now(), parse_time(state.start_time) + timedelta(hours=1))
                    )
                state = self._save(
                    replace(
                        state,
                        end_time=end,
                        state=TERMINATED,
                        crash_recovered=True,
                        pending_tasks=tuple(
                            merge_tasks(
                                list(state.pending_tasks),
                                list(self.detect_pending(state.working_memory, pipeline)),
                            )
                        ),
                        updated_at=self.now_iso(),
                    )
                )
                self._emit_captured(state)
                recovered.append(state)
        for state in recovered:
            self._mirror(state)
            log.info(
                "recovered crashed session %s (last activity %s)", state.session_id, state.end_time
            )
        return recovered

    # -- manual continue and chain -------------------------------------------------------------
    def force_inherit_session(
        self, target_session_id: str, session_id: str | None = None, *, actor: str = "cli"
    ) -> RestoredSessionContext:
        """FR-011: inherit everything from a session whatever its age or score (audited)."""
        with self._tx():
            target = self._load(target_session_id)
            state = self._open(session_id)
            if target.session_id == state.session_id:
                raise ConflictError("a session cannot continue itself; name a prior session")
            plan = plan_forced(
                target, state.working_memory, self.clock.now(), self.config, self._pipeline()
            )
            state = self._save(
                replace(
                    state,
                    working_memory=plan.pins,
                    last_activity=self.now_iso(),
                    updated_at=self.now_iso(),
                )
            )
            self.store.mark_continued([target.session_id], state.session_id, self.now_iso())
            self.store.append_audit(
                "session_continue",
                actor,
                target.session_id,
                {
                    "session_id": state.session_id,
                    "pins_inherited": len(plan.inherited),
                    "pending_tasks": len(plan.pending_tasks),
                },
                self.now_iso(),
            )
            self._record_restore(state, plan)
        self._mirror_pins(state)
        return RestoredSessionContext(
            state.session_id,
            plan.preamble,
            plan.inherited,
            (target.session_id,),
            (1.0,),
            len(plan.pending_tasks),
            plan.explain,
        )

    def get_session_chain(self, session_id: str, depth: int = 5) -> list[SessionState]:
        """FR-009: up to ``depth`` sessions ending at ``session_id``, oldest first."""
        if depth < 1:
            raise ConflictError(f"depth {depth} must be at least 1; e.g. --depth 5")
        chain = [self._load(session_id)]
        seen = {session_id}
        while len(chain) < depth and chain[-1].previous_session_id:
            prev_id = chain[-1].previous_session_id
            prev = self.store.get_session(prev_id) if prev_id not in seen else None
            if prev is None:
                break
            seen.add(prev.session_id)
            chain.append(prev)
        chain.reverse()
        oldest = parse_time(chain[0].start_time)
        with self._tx():
            self._emit(
                "session_chain_traversal",
                session_id,
                {
                    "start_session_id": session_id,
                    "requested_depth": depth,
                    "sessions_found": len(chain),
                    "oldest_session_age_hours": round(
                        (self.clock.now() - oldest).total_seconds() / 3600, 2
                    ),
                },
            )
        return chain

    # -- pins ----------------------------------------------------------------------------------
    def add_pin(
        self,
        label: str,
        content: str,
        session_id: str | None = None,
        *,
        critical: bool = False,
        confidence: float = 1.0,
    ) -> Pin:
        """Pin a note in the session's working memory (same label replaces; 10 at most)."""
        at = self.now_iso()
        pin = make_pin(redact(label), redact(content), at, critical=critical, confidence=confidence)
        with self._tx():
            state = self._open(session_id)
            extractor = HotTopicExtractor.from_dict(state.topic_state)
            extractor.record_working_memory_label(pin.label)
            state = self._save(
                _with_topics(
                    state,
                    extractor,
                    working_memory=upsert_pin(state.working_memory, pin),
                    last_activity=at,
                    updated_at=at,
                )
            )
        self._mirror_pins(state)
        return pin

    def remove_pin(self, label: str, session_id: str | None = None) -> Pin:
        with self._tx():
            state = self._open(session_id)
            pins, removed = remove_pin(state.working_memory, label)
            if removed is None:
                raise NotFoundError(
                    f"no pin labelled {label!r} in session "
                    f"{state.session_id}; see `cortex pin list`"
                )
            state = self._save(replace(state, working_memory=pins, updated_at=self.now_iso()))
        self._mirror_pins(state)
        return removed

    def list_pins(self, session_id: str | None = None) -> tuple[Pin, ...]:
        return self.resolve(session_id).working_memory

    # -- retention -----------------------------------------------------------------------------
    def archive(self, older_than_days: int = 30, batch: int = 500) -> ArchiveReport:
        """NFR-004: move sessions ended more than N days ago to JSON, then drop their rows."""
        before = to_iso(self.clock.now() - timedelta(days=older_than_days))
        return archive_sessions(self.store, self.config.sessions_dir, before, batch)


def _with_topics(
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


def _score_of(plan: RestorePlan, session_id: str) -> float:
    for scored in plan.scored:
        if scored.session.session_id == session_id:
            return scored.score
    return 0.0


def _context_keywords(
    project: str | None, workdir: str | None, keywords: Iterable[str]
) -> list[str]:
    """The new session's "current context" (ARCHITECTURE.md): project, workdir, keywords."""
    words: list[str] = []
    if project:
        words.append(project.lower())
    if workdir:
        name = extract_project_name(workdir)
        if name:
            words.append(name.lower())
    text = " ".join(keywords)
    words += keywords_from_text(text) if text else []
    return list(dict.fromkeys(words))


_HOST = os.uname().nodename


def _new_id() -> str:
    import uuid  # lazily: hooks always pass an id, and uuid costs ~8 ms to import

    return str(uuid.uuid4())


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
