"""ProtocolService: the session-continuity protocol over the one session entity.

A task (``tasks_root/<slug>``) is worked on by a chain of sessions, each a ``session_states``
row whose ``task_slug`` names the task; at most one of them is live at a time. A task in
progress is also a pending task of the pipeline file, so it shows in every continuity preamble.
The rituals (start, end) are in ``rituals.py``; this module holds the task folder, the
checkpoints, the gates, retries, budgets and the orphan sweep.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from cortex.clock import Clock
from cortex.config import Config
from cortex.core.checkpoint_schema import CHECKPOINT_TYPES
from cortex.core.context_budget import budget_line, budget_status, refresh_line, safety_metrics
from cortex.core.history_models import Checkpoint
from cortex.core.lifecycle import (
    GATES,
    check_gate,
    check_slug,
    check_transition,
    missing_gate_content,
    start_line,
)
from cortex.core.models import SUSPENDED, TASK_CHANNEL, SessionState
from cortex.core.redaction import redact, redact_value
from cortex.core.retries import RetryAdvice, RetryLedger
from cortex.errors import (
    ConflictError,
    NotFoundError,
    StorageError,
    ValidationError,
    command,
    param,
)
from cortex.files import check_id
from cortex.logs import getLogger
from cortex.services.base import Service
from cortex.services.ids import lookup
from cortex.services.protocol import commands
from cortex.services.protocol.checkpoints import (
    VerifyReport,
    folder_of,
    remake_status,
    repair_task,
    verify_task,
)
from cortex.services.protocol.folders import TaskFolder

if TYPE_CHECKING:
    from cortex.services.compaction import CompactionService
    from cortex.services.memory import MemoryService
    from cortex.services.sessions.manager import SessionPersistenceManager
    from cortex.store.protocol import Store

log = getLogger("cortex")
PROBE_TAIL_TOKENS = 2_000
PROBE_TIMEOUT_SECONDS = 30.0
REFRESH_MEMORY_TYPE = "context_refresh"


@dataclass(frozen=True)
class SweepReport:
    """What one orphan sweep did: sessions suspended, interrupted checkpoints and incidents."""

    suspended: int
    checkpoints: int
    incidents: int
    session_ids: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "suspended": self.suspended,
            "checkpoints": self.checkpoints,
            "incidents": self.incidents,
            "session_ids": list(self.session_ids),
        }


class ProtocolService(Service):
    """Task folders, rituals, checkpoints, gates, retries, budgets and the orphan sweep."""

    def __init__(
        self,
        store: Store,
        config: Config,
        clock: Clock | None,
        sessions: SessionPersistenceManager,
        compaction: CompactionService,
        memory: MemoryService,
    ) -> None:
        super().__init__(store, config, clock)
        self.sessions = sessions
        self.compaction = compaction
        self.memory = memory

    @property
    def service_name(self) -> str:
        return self.config.protocol_service_name

    def folder(self, slug: str) -> TaskFolder:
        return folder_of(self.config, slug)

    # -- tasks -------------------------------------------------------------------------------
    def init_task(self, slug: str, title: str = "") -> dict[str, Any]:
        """Create the task folder (keeping what exists); return its status and paths."""
        folder = self.folder(slug)
        status, created = folder.init(title.strip() or slug, self.now_iso())
        return {"created": created, "path": str(folder.path), "status": status}

    def status(self, slug: str) -> dict[str, Any]:
        """The task's status file, its live session, latest checkpoint and session count."""
        folder = self.folder(slug)
        status = folder.status()
        sessions = self.store.task_sessions(slug)
        live = self.live_session(slug)
        latest = self.latest_checkpoint(slug)
        return {
            "status": status,
            "path": str(folder.path),
            "live_session": live.session_id if live else None,
            "sessions": len(sessions),
            "latest_checkpoint": latest.to_dict() if latest else None,
        }

    def live_session(self, slug: str) -> SessionState | None:
        """The task's open session whose lease holds (None when there is none)."""
        live = [
            s
            for s in self.store.task_sessions(check_slug(slug))
            if s.is_open and not self.sessions.is_lapsed(s)
        ]
        return live[-1] if live else None

    def own_session(self, slug: str) -> SessionState | None:
        """The task's newest open session, even one whose lease lapsed: the commands of one
        agent may be more than ``lease_seconds`` apart, and until a sweep or another start
        suspends it nothing else has taken the task over (None: every session ended)."""
        found = [s for s in self.store.task_sessions(check_slug(slug)) if s.is_open]
        return found[-1] if found else None

    def task_session(self, slug: str, session_id: str | None = None) -> SessionState:
        """The named session (it must belong to the task), else the task's open session."""
        if session_id is not None:  # "" is refused by check_id, not the live session
            state = self.sessions.get_session(check_id(session_id))
            if state is None or state.task_slug != slug:
                raise NotFoundError(
                    f"no session {session_id!r} of task {slug}; "
                    f"see {command('session list', f' --task {slug}')}"
                )
            return state
        own = self.own_session(slug) or self._continued(slug)
        if own is None:
            raise ConflictError(
                f"task {slug} has no open session; start one with "
                f"{command('task start', f' {slug}')} (or name one with {param('session_id')})"
            )
        return own

    def _continued(self, slug: str) -> SessionState | None:
        """A new session of the task, a child of its newest one, when crash recovery
        suspended that one after a healthy start (its lease lapsed between two commands, the
        worker's sweep found it): what the next command works in, as ``task start`` would
        have begun it. None when there is nothing to continue."""
        folder = self.folder(slug)
        health = folder.status().get("health") or {}  # no folder: init it first, as for a start
        if health.get("passed") is False:
            return None  # its start failed the health check: no new work before one passes
        with self.sessions.transaction():
            previous = self.sessions_of(slug)
            last = previous[-1] if previous else None
            if last is None or last.is_open:
                return last  # (a command running at the same time continued it first)
            if not (last.crash_recovered and last.state == SUSPENDED):
                return None
            new_id = self._child_session(last, slug)
            latest = self.latest_checkpoint(slug)
            line = start_line(self.service_name, new_id, latest.checkpoint_id if latest else None)
            self.store.after_commit(partial(self._record_continuation, folder, new_id, line))
        log.warning(
            "session %s of task %s was suspended when its lease lapsed; continuing in session "
            "%s, its child",
            last.session_id,
            slug,
            new_id,
        )
        return self.sessions.get_session(new_id)

    def _child_session(self, parent: SessionState, slug: str) -> str:
        """Open a new session of the task as ``parent``'s child (its project, user and agent);
        return its id."""
        return self.sessions.on_session_start(
            None,
            TASK_CHANNEL,
            project=parent.project,
            user_id=parent.user_id,
            agent_id=parent.agent_id,
            task_slug=slug,
            parent_session=parent.session_id,
        ).session_id

    def _record_continuation(self, folder: TaskFolder, session_id: str, line: str) -> None:
        at = self.now_iso()
        folder.evidence(at, line)
        folder.update_status(lambda s: s.update(last_session=session_id, last_activity=at))

    def sessions_of(self, slug: str) -> list[SessionState]:
        """The task's sessions, oldest first."""
        return self.store.task_sessions(check_slug(slug))

    def session_rows(self, slug: str) -> list[dict[str, Any]]:
        """The task's sessions as the protocol's session metadata, oldest first: each with its
        gate (its newest checkpoint's) and its child sessions (those naming it as parent)."""
        states = self.sessions_of(slug)
        gates: dict[str, str] = {}
        for c in self.list_checkpoints(slug):
            if c.gate:
                gates[c.session_id] = c.gate
        return [
            session_metadata(
                s,
                [c.session_id for c in states if c.parent_session == s.session_id],
                gates.get(s.session_id),
            )
            for s in states
        ]

    def set_state(self, session_id: str, target: str) -> SessionState:
        """Move a session along the lifecycle; ConflictError for a transition it does not draw."""
        with self.sessions.transaction():
            state = self.sessions.resolve(session_id)
            new = check_transition(state.session_id, state.state, target)
            at = self.now_iso()
            changed = replace(state, state=new, updated_at=at, last_activity=at)
            if new in (SUSPENDED, "TERMINATED", "COMPLETE") and state.end_time is None:
                changed = replace(changed, end_time=at)
            self.store.save_session(changed)
        return changed

    # -- checkpoints -------------------------------------------------------------------------
    def create_checkpoint(
        self,
        slug: str,
        *,
        type: str = "manual",
        summary: str = "",
        gate: str | None = None,
        step: int | None = None,
        next_steps: Sequence[str] = (),
        resume_instructions: str = "",
        state: Mapping[str, Any] | None = None,
        can_resume: bool = True,
        session_id: str | None = None,
    ) -> tuple[Checkpoint, list[str]]:
        """Write a checkpoint of the task's session to the store, the task folder and memory.

        ``state`` holds the protocol's typed parts (``files_changed``, ``tests``,
        ``decisions``...) and anything a gate needs. Returns the checkpoint and warnings (a
        gate transition missing its gate's content).
        """
        if type not in CHECKPOINT_TYPES:
            raise ValidationError(
                f"unknown checkpoint type {type!r}; use one of {', '.join(CHECKPOINT_TYPES)}"
            )
        gate = check_gate(gate) if gate else None
        extra = dict(state or {})
        folder = self.folder(slug)
        status = folder.status()  # a damaged status or index fails first, storing nothing
        folder.index()
        session = self.task_session(slug, session_id)
        gate = gate or status.get("current_gate")
        probe = self._probe(session)  # an outside command: never inside a write transaction
        if probe is not None:
            extra["safety_metrics"] = probe
        with self.sessions.transaction():
            checkpoint = self.compaction.checkpoint(
                session.session_id,
                type=type,
                summary=summary,
                next_steps=next_steps,
                resume_instructions=resume_instructions,
                gate=gate,
                step=step,
                extra_state=extra,
                can_resume=can_resume,
                strict_mirror=True,
            )
        self._published(slug, checkpoint.checkpoint_id)
        if probe is not None and probe["action"] == "degrade_to_sandbox":
            self._degrade(slug, session, checkpoint)  # the folder follows the commit
        warnings = []
        if type == "gate_transition" and gate:
            missing = missing_gate_content(gate, checkpoint.state)
            if missing:
                warnings.append(
                    f"gate {gate} checkpoints usually carry {', '.join(missing)} in state"
                )
        return checkpoint, warnings

    def _published(self, slug: str, checkpoint_id: str) -> None:
        """StorageError when the committed checkpoint did not reach its task folder."""
        problem = self.compaction.unpublished.pop(checkpoint_id, None)
        if problem is not None:
            raise StorageError(
                f"checkpoint {checkpoint_id} is stored but not in the task folder ({problem}); "
                f"then run {command('checkpoint verify', f' --task {slug} --repair')}"
            )

    def list_checkpoints(self, slug: str) -> list[Checkpoint]:
        """The task's checkpoints, oldest first."""
        return self.store.task_checkpoints(check_slug(slug))

    def latest_checkpoint(self, slug: str, gate: str | None = None) -> Checkpoint | None:
        """The task's newest checkpoint (at ``gate`` when given)."""
        found = [c for c in self.list_checkpoints(slug) if gate is None or c.gate == gate]
        return found[-1] if found else None

    def show_checkpoint(self, checkpoint_id: str) -> Checkpoint:
        given = check_id(checkpoint_id, "checkpoint id")
        found = lookup(self.store, "checkpoint", given, self.store.get_checkpoint)
        if found is None:
            raise NotFoundError(
                f"no checkpoint {checkpoint_id!r}; "
                f"see {command('checkpoint list', ' --task <slug>')}"
            )
        return found

    def verify(self, slug: str, *, repair: bool = False) -> VerifyReport:
        """Whether files, index and store hold the same checkpoints, unaltered, and the
        status and evidence log what they wrote; with ``repair``, first make the folder agree
        with the store (``repair_task``; a missing status file is made anew from the task's
        checkpoints)."""
        folder, repaired, fresh = self.folder(slug), [], False
        stored = self.list_checkpoints(slug) if repair and not folder.exists() else []
        if stored:  # its checkpoints say where the task stands, what survives what it is
            sessions = self.store.task_sessions(slug)
            found = remake_status(self.config, folder, stored, sessions, self.now_iso())
            title, where = found or (slug, "")
            titled = f", titled {title!r} as {where} has it" if title != slug else ""
            repaired.append(f"{folder.status_path.name}: missing; made anew{titled}")
            fresh = True
        folder.status()
        if repair:
            repaired += repair_task(self.store, self.config, folder, self.now_iso(), fresh=fresh)
        report = verify_task(self.store, self.config, folder)
        report.repaired = repaired
        return report

    # -- gates -------------------------------------------------------------------------------
    def gates(self) -> list[dict[str, Any]]:
        return [
            {"gate": g.id, "name": g.name, "content": g.content, "state_keys": list(g.required)}
            for g in GATES
        ]

    # -- retries -----------------------------------------------------------------------------
    def record_failure(
        self, slug: str, step: str, failure_type: str, detail: str = ""
    ) -> RetryAdvice:
        """Count a failure of ``step``; on escalation the task is blocked and an incident logged."""
        folder, at = self.folder(slug), self.now_iso()
        step = redact(step.strip()) or "unnamed"
        advice: list[RetryAdvice] = []

        def change(status: dict[str, Any]) -> None:
            ledger = RetryLedger.from_dict(status.get("retries"))
            advice.append(ledger.record_failure(step, failure_type, redact(detail), at))
            status["retries"] = ledger.to_dict()
            status["last_activity"] = at
            if advice[0].escalate:
                status["status"] = "blocked"

        folder.update_status(change)
        if advice[0].escalate:
            self._incident(
                folder,
                "task.escalated",
                None,
                {"step": step, "failure_type": failure_type, "detail": redact(detail)},
            )
        return advice[0]

    def record_success(self, slug: str, step: str) -> dict[str, Any]:
        at = self.now_iso()

        def change(status: dict[str, Any]) -> None:
            ledger = RetryLedger.from_dict(status.get("retries"))
            ledger.record_success(redact(step.strip()) or "unnamed", at)
            status["retries"] = ledger.to_dict()

        return self.folder(slug).update_status(change)

    def _incident(
        self, folder: TaskFolder | None, action: str, session_id: str | None, detail: dict[str, Any]
    ) -> None:
        at = self.now_iso()
        self.store.append_audit(action, "protocol", session_id, redact_value(detail), at)
        if folder is not None:
            folder.incident(
                {"at": at, "action": action, "session_id": session_id, **redact_value(detail)}
            )

    # -- context budgets ---------------------------------------------------------------------
    def budget(
        self, slug: str, add_tokens: int = 0, session_id: str | None = None
    ) -> dict[str, Any]:
        """Add context tokens to the task's session and apply the budget rules: a refresh every
        50K tokens, a fork to a fresh session at the soft cap. Returns the status and actions."""
        if add_tokens < 0:
            raise ValidationError(f"{param('add_tokens', add_tokens)} is negative; give 0 or more")
        folder = self.folder(slug)
        folder.status()  # a damaged status fails first, whatever the session
        with self.sessions.transaction():
            session = self.task_session(slug, session_id)
            sid = session.session_id
            if add_tokens:
                self.compaction.events.append(
                    sid,
                    f"context: {add_tokens} tokens",
                    role="tool",
                    kind="event",
                    meaningful=False,
                    token_count=add_tokens,
                )
            tokens = self.store.session_event_totals(sid).tokens
            marks = folder.status().get("budget") or {}
            refreshed = int((marks.get(sid) or {}).get("refreshed_at_tokens", 0))
            status = budget_status(tokens, self.config.model_context_window, refreshed)
            actions: list[str] = []
            if status.refresh_due and not status.cap_reached:
                actions.append(
                    self._refresh(folder, session, status.context_tokens - refreshed, tokens)
                )
            fork = self._fork(folder, session) if status.cap_reached else None
            if fork is not None:
                actions.append(budget_line(self.service_name))
        return {"budget": status.to_dict(), "actions": actions, "fork": fork}

    def _mark(self, folder: TaskFolder, sid: str, **values: Any) -> None:
        def change(status: dict[str, Any]) -> None:
            marks = status.setdefault("budget", {})
            marks[sid] = {**(marks.get(sid) or {}), **values}

        folder.update_status(change)

    def _refresh(self, folder: TaskFolder, session: SessionState, flushed: int, tokens: int) -> str:
        """The refresh ritual: a summarized memory entry, and the working context restarts."""
        latest = self.latest_checkpoint(folder.slug)
        summary = (
            self.compaction.format_checkpoint(latest)
            if latest
            else f"Task {folder.slug}: no checkpoint yet."
        )
        self.memory.add(
            f"Context refresh of task {folder.slug} at {tokens} tokens:\n{summary}",
            type=REFRESH_MEMORY_TYPE,
            project=session.project,
            tags=["context-refresh", folder.slug],
            session_id=session.session_id,
            actor="protocol",
        )
        self._mark(folder, session.session_id, refreshed_at_tokens=tokens)
        line = refresh_line(self.service_name, flushed)
        folder.evidence(self.now_iso(), line)
        return line

    def _fork(self, folder: TaskFolder, session: SessionState) -> dict[str, Any]:
        """At the soft cap: suspend this session, start a fresh one of the task that loads the
        latest checkpoint summary instead of the transcript."""
        at = self.now_iso()
        folder.evidence(at, budget_line(self.service_name))
        latest = self.latest_checkpoint(folder.slug)
        self.set_state(session.session_id, SUSPENDED)
        new_id = self._child_session(session, folder.slug)
        self._mark(folder, session.session_id, forked_to=new_id)
        folder.update_status(lambda s: s.update(last_session=new_id, last_activity=at))
        return {
            "from_session": session.session_id,
            "session_id": new_id,
            "checkpoint_id": latest.checkpoint_id if latest else None,
            "context": self.compaction.format_checkpoint(latest) if latest else None,
        }

    # -- safety ------------------------------------------------------------------------------
    def _probe(self, session: SessionState) -> dict[str, Any] | None:
        """The external safety probe over the session's last 2K tokens (None: no probe)."""
        command = self.config.safety_probe_command
        if not command.strip():
            return None
        events = self.store.list_session_events(session.session_id, limit=200)
        text = "\n".join(e.content for e in events)
        tail = text[-PROBE_TAIL_TOKENS * 4 :]  # about 4 characters a token
        answer = commands.probe(command, tail, PROBE_TIMEOUT_SECONDS)
        try:
            return safety_metrics(
                float(answer.get("refusal_rate_window", 0.0)),
                float(answer.get("baseline_refusal_rate", 0.0)),
                str(answer.get("severity") or "none"),
            )
        except (TypeError, ValueError) as exc:
            raise ValidationError(
                f"the safety probe's answer is not usable ({exc}); {commands.PROBE_ANSWER}"
            ) from exc

    def record_safety(
        self,
        slug: str,
        window: float,
        baseline: float,
        severity: str = "none",
        session_id: str | None = None,
    ) -> Checkpoint:
        """Record a probe's result given by hand (or by a harness) as a checkpoint's
        ``safety_metrics``; a degrade decision flags the task for a sandboxed resume."""
        metrics = safety_metrics(window, baseline, severity)
        checkpoint, _ = self.create_checkpoint(
            slug,
            type="manual",
            summary=f"safety probe: {metrics['action']}",
            state={"safety_metrics": metrics},
            session_id=session_id,
        )
        if metrics["action"] == "degrade_to_sandbox":
            self._degrade(slug, self.task_session(slug, checkpoint.session_id), checkpoint)
        return checkpoint

    def _degrade(self, slug: str, session: SessionState, checkpoint: Checkpoint) -> None:
        """Flag the task: its next session resumes from this checkpoint in a sandbox."""
        folder = self.folder(slug)
        at = self.now_iso()
        manifest = folder.logs_dir / "long-context" / f"{checkpoint.checkpoint_id}.json"
        from cortex.files import write_json

        write_json(
            manifest,
            {
                "at": at,
                "session_id": session.session_id,
                "checkpoint_id": checkpoint.checkpoint_id,
                "safety_metrics": checkpoint.state.get("safety_metrics"),
                "tools": "read-only",
            },
        )
        folder.update_status(lambda s: s.update(sandbox=True, sandbox_manifest=str(manifest)))
        self._incident(
            folder,
            "task.degraded_to_sandbox",
            session.session_id,
            {"checkpoint_id": checkpoint.checkpoint_id},
        )

    # -- orphans -----------------------------------------------------------------------------
    def sweep_orphans(self) -> SweepReport:
        """Suspend every open session whose lease lapsed, each with an interrupted checkpoint
        and an incident (what crash recovery does at a start, for a scheduler to run)."""
        recovered = self.sessions.detect_and_recover_crashed("")
        return SweepReport(
            len(recovered), len(recovered), len(recovered), tuple(s.session_id for s in recovered)
        )

    # -- timeline ----------------------------------------------------------------------------
    def timeline(self, slug: str) -> list[dict[str, Any]]:
        """The task's sessions and checkpoints in time order (at one instant: a session's
        start, then its checkpoints in the order written, then its end)."""
        rows: list[tuple[str, int, dict[str, Any]]] = []
        for s in self.sessions_of(slug):
            rows.append(
                (
                    s.start_time,
                    0,
                    _row(
                        s.start_time,
                        "session.start",
                        s.session_id,
                        f"parent {s.parent_session or '-'}",
                    ),
                )
            )
            if s.end_time:
                detail = "crash recovered" if s.crash_recovered else ""
                rows.append(
                    (
                        s.end_time,
                        2,
                        _row(s.end_time, f"session.{s.state.lower()}", s.session_id, detail),
                    )
                )
        for c in self.list_checkpoints(slug):
            detail = f"{c.checkpoint_id} {c.gate or ''} {c.summary}".strip()
            rows.append(
                (c.timestamp, 1, _row(c.timestamp, f"checkpoint.{c.type}", c.session_id, detail))
            )
        return [row for _, _, row in sorted(rows, key=lambda r: (r[0], r[1]))]


def _row(at: str, what: str, session_id: str, detail: str) -> dict[str, Any]:
    return {"at": at, "what": what, "session_id": session_id, "detail": detail}


def session_metadata(
    state: SessionState, children: Sequence[str], gate: str | None
) -> dict[str, Any]:
    """A session as the protocol's session metadata."""
    return {
        "session_id": state.session_id,
        "agent_id": state.agent_id,
        "task_slug": state.task_slug,
        "state": state.state.lower(),
        "started_at": state.start_time,
        "last_activity": state.last_activity,
        "current_gate": gate,
        "checkpoint_count": state.checkpoint_count,
        "parent_session": state.parent_session,
        "child_sessions": list(children),
    }
