"""Start: recover lapsed sessions, open this one and restore what is relevant.

Starting an existing id again (a resume) reopens it and restores idempotently; with
``keep_ended``, a session that ended normally is refused instead (the reopen a client's hook
journaled offline: it continues only a session crash recovery closed). The new
session's "current context" is what the harness knows at start: the
project's name, the working directory and any keywords (a first prompt, a branch).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from cortex.clock import to_iso
from cortex.core.models import ACTIVE, RestoredSessionContext, SessionState, evolve
from cortex.core.plaintext import plain, storable
from cortex.core.preamble import format_cold_preamble
from cortex.core.redaction import redact, refuse_secret
from cortex.core.topics import (
    HotTopicExtractor,
    display_name,
    extract_project_name,
    keywords_from_text,
)
from cortex.files import check_id
from cortex.services.ids import new_uuid
from cortex.services.restoration import RestorePlan
from cortex.services.sessions.context import SessionContext, check_open
from cortex.services.sessions.recovery import HOST, CrashRecovery
from cortex.services.sessions.restore import CANDIDATE_LIMIT, EPOCH, FailedRestore, Restorer
from cortex.store.records import StartReads


class SessionStart:
    """Opens (or reopens) a session with what restoration gives it."""

    def __init__(
        self, context: SessionContext, restorer: Restorer, recovery: CrashRecovery
    ) -> None:
        self.context = context
        self.restorer = restorer
        self.recovery = recovery

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
        keep_ended: bool = False,
    ) -> RestoredSessionContext:
        """See ``SessionPersistenceManager.on_session_start``."""
        ctx = self.context
        for given, field in (
            (session_id, "session_id"),
            (channel, "channel"),
            (project, "project"),
            (project_name, "project_name"),
            (user_id, "user_id"),
            (agent_id, "agent_id"),
            (task_slug, "task_slug"),
            (parent_session, "parent_session"),
        ):
            plain(given, field)  # names: refused whole, before anything is read or written
        sid = check_id(session_id) if session_id is not None else _new_id()
        project = redact(project) if project else project  # (the hooks' ids come redacted)
        for value, what in ((user_id, "user id"), (agent_id, "agent id"), (task_slug, "task")):
            refuse_secret(value, what)
        task_slug = _task_slug(task_slug)
        now = ctx.clock.now()
        at = to_iso(now)
        # Stored as topics and active projects: a typed name or directory may hold a credential.
        name = project_name or display_name(project)
        name = redact(name) if name else name
        workdir = redact(storable(workdir)) if workdir else workdir
        keywords = tuple(redact(storable(k)) for k in keywords if isinstance(k, str))
        words = context_keywords(name, workdir, keywords)
        extractor = _seeded_topics(name, workdir, keywords)
        self._read_ahead(sid, session_id is not None, project, now)
        if ctx.config.enabled:
            # The restore reads every task: read them once, and the pending ones (what the
            # transaction reads first) come from the same read (one round trip fewer).
            ctx.pipeline()
        with ctx.tx():
            # A new random id names no stored session: one round trip fewer per fresh start.
            existing = ctx.store.get_session(sid) if session_id is not None else None
            if keep_ended and existing is not None and existing.ended_normally:
                check_open(existing)  # the 409 of a write to it: nothing changes
            recovered = self.recovery.detect_and_recover_crashed(sid, now)
            previous = ctx.store.latest_session_id(project) if existing is None else None
            state = existing or SessionState(
                session_id=sid,
                start_time=at,
                channel=channel,
                created_at=at,
                project=project,
                user_id=user_id,
                agent_id=agent_id,
                task_slug=task_slug,
                previous_session_id=previous,
                parent_session=parent_session,
                topic_state=extractor.to_dict(),
                hot_topics=tuple(extractor.get_current_topics()),
                active_projects=tuple(extractor.get_active_projects()),
            )
            state = _activated(state, at, owner_pid)
            crashed_here = [
                s.session_id for s in recovered if s.project == state.project and s.crashed
            ]
            outcome = (
                self.restorer.plan(state, words, explain, crashed_here, now)
                if ctx.config.enabled
                else None
            )
            plan = outcome if isinstance(outcome, RestorePlan) else None
            repeat = existing is not None and plan is not None and _repeated(sid, plan)
            state = self._save(state, plan, record=not repeat)
            ctx.mirror_pins(state)
        if isinstance(outcome, FailedRestore):  # said, with what crash recovery did
            return RestoredSessionContext(sid, format_cold_preamble(outcome.why, crashed_here))
        return _restored(sid, plan, repeat=repeat)

    def _read_ahead(self, sid: str, resumed: bool, project: str | None, now: datetime) -> None:
        """On a server's PostgreSQL, in a transaction (a request id's), the reads below in one
        round trip instead of four (each round trip of a start waits for a core on a busy
        host): the tasks, the session or the project's latest one, crash recovery's and the
        restore's candidates. The calls below ask the same and get these rows, or read again
        if a write came between (a recovered session, say)."""
        ctx = self.context
        enabled = ctx.config.enabled
        ctx.store.read_ahead_start(
            StartReads(
                session_id=sid,
                resumed=resumed,
                project=project,
                idle_before=self.recovery.idle_before(now),
                since=self.restorer.window_start(now),
                limit=CANDIDATE_LIMIT,
                tasks=enabled and ctx.tasks_in_store,
                before=EPOCH,  # a cold start's last session, however old: one probe
            )
        )

    def _save(self, state: SessionState, plan: RestorePlan | None, *, record: bool) -> SessionState:
        """Store the opened session with the pins it inherits, and record a warm start."""
        warm = plan is not None and not plan.is_cold
        if plan is not None and warm:
            state = evolve(state, working_memory=plan.pins)
        state = self.context.save(state)
        if plan is not None and warm and record:
            self.restorer.record(state, plan)
        return state


def _task_slug(slug: str | None) -> str | None:
    """The task a session works on as its folder's name, or None (also for ""): refused here,
    before anything is stored, rather than at each checkpoint the folder could not take."""
    if not slug:
        return None
    from cortex.core.lifecycle import check_slug  # (a hook's start names no task)

    return check_slug(slug)


def _seeded_topics(
    name: str | None, workdir: str | None, keywords: Iterable[str]
) -> HotTopicExtractor:
    """A new session's topic accumulator, seeded with its project, working directory and the
    keywords given at start (so ``--keywords "ham radio"`` is a topic from the first turn)."""
    extractor = HotTopicExtractor()
    if name:
        extractor.record_project(name)
    if workdir:
        extractor.record_exec_workdir(workdir)
    extractor.record_keywords(keywords)
    return extractor


def _activated(state: SessionState, at: str, owner_pid: int | None) -> SessionState:
    """``state`` (new or reopened) as an open, active session owned by ``owner_pid``."""
    return evolve(
        state,
        end_time=None,
        crash_recovered=False,
        state=ACTIVE,
        last_activity=at,
        updated_at=at,
        owner_pid=owner_pid,
        owner_host=HOST if owner_pid else None,
    )


def _repeated(session_id: str, plan: RestorePlan) -> bool:
    """Whether restoring ``session_id`` again brings nothing new: no pin to inherit and every
    contributor already continued by it. Such a repeat emits nothing (no second
    ``session_restored``, no second preamble for the harness to inject twice)."""
    return not plan.inherited and all(s.continued_by == session_id for s in plan.contributors)


def _restored(
    session_id: str, plan: RestorePlan | None, *, repeat: bool = False
) -> RestoredSessionContext:
    """What the caller gets: the preamble and what was inherited (nothing on a cold start or
    a repeat, whose ``explain`` is kept)."""
    if plan is None or plan.is_cold or repeat:
        return RestoredSessionContext(session_id, None, explain=plan.explain if plan else ())
    return RestoredSessionContext(
        session_id,
        plan.preamble,
        plan.inherited,
        tuple(s.session_id for s in plan.contributors),
        tuple(plan.score_of(s.session_id) for s in plan.contributors),
        len(plan.pending_tasks),
        plan.explain,
    )


def context_keywords(
    project: str | None, workdir: str | None, keywords: Iterable[str]
) -> list[str]:
    """The new session's "current context": project, workdir, keywords."""
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


def _new_id() -> str:
    return new_uuid()
