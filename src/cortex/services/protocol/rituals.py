"""The startup and shutdown rituals of a task's session.

Start: bind a session to the task (the task's live session, else the live harness session of
the project, else a new one in INIT), recall context (restoration and a memory search), read
the implementation log and status, read git history, run the smoke command, read the previous
final checkpoint and check its preconditions, log the goal. A failing health check leaves the
session out of ACTIVE and the task blocked: no new work until it passes.

End: append the log entry, write the session-end checkpoint, memorize the decisions, update
the task status, end the session (COMPLETE) and emit ``session.complete`` to the event log,
then to the configured command and webhook.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cortex.clock import parse_time
from cortex.core.checkpoint_schema import checkpoint_problems
from cortex.core.history_models import Checkpoint
from cortex.core.lifecycle import (
    check_gate,
    check_transition,
    end_line,
    format_duration,
    format_log_entry,
    goal_line,
    health_line,
    start_line,
)
from cortex.core.models import ACTIVE, COMPLETE, INIT, SUSPENDED, TASK_CHANNEL, SessionState
from cortex.core.redaction import redact
from cortex.errors import ConflictError, CortexError, ValidationError, command, param
from cortex.files import check_id
from cortex.logs import getLogger
from cortex.services.protocol import commands
from cortex.services.protocol.folders import TaskFolder, content_hash
from cortex.services.protocol.service import ProtocolService

log = getLogger("cortex")
OUTCOMES = ("success", "partial", "failed")
END_STATUSES = ("in-progress", "complete", "blocked")
LOG_TAIL_CHARS = 1_500
RECALL_LIMIT = 5


@dataclass
class StartReport:
    """What the startup ritual found and did; ``text`` joins the continuity preamble."""

    task_slug: str
    session_id: str
    state: str
    healthy: bool
    resumed_from: str | None
    gate: str
    preamble: str | None = None
    recalled: list[str] = field(default_factory=list)
    log_tail: str = ""
    commits: list[str] = field(default_factory=list)
    health: dict[str, Any] = field(default_factory=dict)
    preconditions: list[dict[str, Any]] = field(default_factory=list)
    resume: dict[str, Any] | None = None
    sandbox: bool = False
    lines: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_slug": self.task_slug,
            "session_id": self.session_id,
            "state": self.state,
            "healthy": self.healthy,
            "resumed_from": self.resumed_from,
            "gate": self.gate,
            "preamble": self.preamble,
            "recalled": self.recalled,
            "log_tail": self.log_tail,
            "commits": self.commits,
            "health": self.health,
            "preconditions": self.preconditions,
            "resume": self.resume,
            "sandbox": self.sandbox,
            "log_lines": self.lines,
            "text": self.text(),
        }

    def text(self) -> str:
        """The ritual's result as the agent reads it, after the restored preamble."""
        parts = [self.preamble] if self.preamble else []
        parts.append(
            f"TASK {self.task_slug}: gate {self.gate}, session {self.session_id} ({self.state})"
        )
        if self.resume:
            parts.append(
                f"RESUME FROM {self.resume['checkpoint_id']} "
                f"({self.resume.get('gate') or '-'}, step "
                f"{self.resume.get('step') if self.resume.get('step') is not None else '-'}): "
                f"{self.resume.get('resume_instructions') or self.resume.get('summary') or '-'}"
            )
            parts += [f"  next: {s}" for s in self.resume.get("next_steps") or []]
        parts += [
            f"  precondition {'ok ' if p['ok'] else 'FAILED'} {p['name']}: {p['detail']}"
            for p in self.preconditions
        ]
        if self.sandbox:
            parts.append("SANDBOX: a safety probe asked for a sandboxed resume (read-only tools)")
        if self.recalled:
            parts.append("RECALLED:\n" + "\n".join(f"  - {r}" for r in self.recalled))
        if self.log_tail:
            parts.append("IMPLEMENTATION LOG (latest):\n" + self.log_tail)
        if self.commits:
            parts.append("RECENT COMMITS:\n" + "\n".join(f"  {c}" for c in self.commits))
        parts += self.lines
        if not self.healthy:
            parts.append(
                "STOP: the health check failed; fix the regression first (no new work), "
                f"then rerun `cortex task start {self.task_slug}`."
            )
        return "\n".join(parts)


def start_task(
    protocol: ProtocolService,
    slug: str,
    *,
    session_id: str | None = None,
    from_gate: str | None = None,
    goal: str = "",
    project: str | None = None,
    agent_id: str | None = None,
    workdir: Path,
) -> StartReport:
    """The startup ritual (see the module docstring)."""
    folder = protocol.folder(slug)
    status = folder.status()
    gate = check_gate(from_gate) if from_gate else str(status.get("current_gate") or "G0")
    if from_gate:
        _require_gate_checkpoint(protocol, slug, gate)
    # "" (an unset variable) is refused by check_id, never taken for "no session".
    session_id = check_id(session_id) if session_id is not None else None
    session, preamble = _bind(protocol, folder, session_id, project, agent_id)
    report = StartReport(slug, session.session_id, session.state, True, None, gate, preamble)
    report.sandbox = bool(status.get("sandbox"))
    resume = _resume_point(protocol, slug, session, from_gate and gate)
    report.recalled = _recall(protocol, slug, session.project)
    report.log_tail = folder.read_log(LOG_TAIL_CHARS * 4)[-LOG_TAIL_CHARS:].strip()
    report.commits = commands.git_history(workdir)
    report.health = _health(protocol, workdir)
    report.healthy = bool(report.health["passed"])
    report.preconditions = _preconditions(
        folder, resume, report.healthy, str(report.health.get("detail"))
    )
    report.resume = resume.to_dict() if resume else None
    report.resumed_from = resume.checkpoint_id if resume else None
    name = protocol.service_name
    report.lines = [
        start_line(name, session.session_id, report.resumed_from),
        health_line(name, report.healthy),
    ]
    if goal.strip():
        report.lines.append(goal_line(name, redact(goal.strip())))
    _record_start(protocol, folder, session, report, goal)
    return report


def _require_gate_checkpoint(protocol: ProtocolService, slug: str, gate: str) -> None:
    """ValidationError, naming the gates that have one, when no checkpoint is at ``gate``."""
    gates = list(dict.fromkeys(c.gate for c in protocol.list_checkpoints(slug) if c.gate))
    if gate not in gates:
        raise ValidationError(
            f"task {slug} has no checkpoint at gate {gate} (checkpoints at: "
            f"{', '.join(gates) or 'none'}); give one of those or start without "
            f"{param('from_gate')}"
        )


def _bind(
    protocol: ProtocolService,
    folder: TaskFolder,
    session_id: str | None,
    project: str | None,
    agent_id: str | None,
) -> tuple[SessionState, str | None]:
    """The session the task runs in, and the restored preamble when it is new."""
    sessions, slug = protocol.sessions, folder.slug
    with sessions.transaction():
        live = protocol.live_session(slug)
        if live is not None and session_id not in (None, live.session_id):
            raise ConflictError(
                f"task {slug} already has a live session {live.session_id} (last activity "
                f"{live.last_activity}); end it with {command('task end', f' {slug}')} "
                "or wait for its lease"
            )
        if live is not None:
            return live, None
        existing = (
            sessions.get_session(session_id) if session_id else _harness_session(protocol, project)
        )
        if existing is not None and existing.is_open and existing.task_slug in (None, slug):
            return _attach(protocol, existing, slug), None
        if existing is not None and session_id:
            raise ConflictError(
                f"session {session_id} is ended or works on task {existing.task_slug}; "
                f"start without {param('session_id')}"
            )
        previous = protocol.sessions_of(slug)
        restored = sessions.on_session_start(
            session_id,
            TASK_CHANNEL,
            project=project,
            agent_id=agent_id,
            task_slug=slug,
            parent_session=previous[-1].session_id if previous else None,
            keywords=[slug],
        )
        state = sessions.get_session(restored.session_id)
        assert state is not None
        state = replace(state, state=INIT)
        protocol.store.save_session(state)
        return state, restored.preamble


def _harness_session(protocol: ProtocolService, project: str | None) -> SessionState | None:
    """The live session a harness opened for this project, if one is open now."""
    found = protocol.store.latest_open_session(project)
    if found is None or protocol.sessions.is_lapsed(found) or found.task_slug is not None:
        return None
    return found


def _attach(protocol: ProtocolService, state: SessionState, slug: str) -> SessionState:
    if state.task_slug == slug:
        return state
    previous = protocol.sessions_of(slug)
    parent = state.parent_session or (previous[-1].session_id if previous else None)
    state = replace(state, task_slug=slug, parent_session=parent, updated_at=protocol.now_iso())
    protocol.store.save_session(state)
    return state


def _resume_point(
    protocol: ProtocolService, slug: str, session: SessionState, gate: str | None
) -> Checkpoint | None:
    """The previous session's final checkpoint (the latest at ``gate`` when resuming there)."""
    found = [c for c in protocol.list_checkpoints(slug) if c.session_id != session.session_id]
    if gate:
        found = [c for c in found if c.gate == gate] or found
    return found[-1] if found else None


def _recall(protocol: ProtocolService, slug: str, project: str | None) -> list[str]:
    """Memories about the task (its checkpoints, decisions, refreshes), best first."""
    query = " ".join(slug.replace("-", " ").replace("_", " ").split()) or slug
    try:
        hits = protocol.memory.search(query, limit=RECALL_LIMIT, project=project)
    except ValidationError:
        return []
    return [redact(h.memory.content.splitlines()[0])[:200] for h in hits]


def _health(protocol: ProtocolService, workdir: Path) -> dict[str, Any]:
    """Run the smoke command of the governance config (none configured: passes, noted)."""
    path = protocol.config.governance_config_path
    path = path if path.is_absolute() else workdir / path
    argv = commands.smoke_command(path)
    if argv is None:
        return {"passed": True, "skipped": True, "detail": f"no smoke command in {path}"}
    run = commands.run_command(
        argv, timeout=protocol.config.smoke_timeout_seconds, cwd=commands.repo_root(path)
    )
    detail = "passed" if run.ok else (run.error or f"exit code {run.returncode}")
    return {"passed": run.ok, "skipped": False, "detail": detail, **run.to_dict()}


def _preconditions(
    folder: TaskFolder, resume: Checkpoint | None, healthy: bool, health_detail: str
) -> list[dict[str, Any]]:
    """Whether what the previous checkpoint assumed still holds."""
    checks = [
        {
            "name": "health check",
            "ok": healthy,
            "detail": health_detail,
        }
    ]
    if resume is None:
        return checks
    data = resume.to_dict()
    problems = checkpoint_problems(data)
    checks.append(
        {
            "name": "checkpoint schema",
            "ok": not problems,
            "detail": problems[0] if problems else "valid",
        }
    )
    checks.append(
        {
            "name": "can resume",
            "ok": resume.can_resume,
            "detail": "can_resume is " + str(resume.can_resume).lower(),
        }
    )
    try:
        on_disk = folder.read_checkpoint_file(resume.checkpoint_id)
    except ValidationError:
        on_disk = None
    same = isinstance(on_disk, dict) and content_hash(on_disk) == content_hash(data)
    checks.append(
        {
            "name": "checkpoint file",
            "ok": same,
            "detail": "matches the store"
            if same
            else "missing or differs from the store; run "
            f"`cortex checkpoint verify --task {folder.slug} --repair`",
        }
    )
    return checks


def _record_start(
    protocol: ProtocolService,
    folder: TaskFolder,
    session: SessionState,
    report: StartReport,
    goal: str,
) -> None:
    """Log the evidence lines, move the session to ACTIVE when healthy, update the status."""
    at = protocol.now_iso()
    for line in report.lines:
        folder.evidence(at, line)
    with protocol.sessions.transaction():
        for line in report.lines:
            protocol.compaction.events.append(
                session.session_id, line, role="tool", kind="event", meaningful=False, token_count=0
            )
        # Read again under the write lock: a concurrent start of the task may have made it
        # ACTIVE since, which is this start's outcome too (a rerun), not a move to refuse.
        current = protocol.sessions.get_session(session.session_id) or session
        if report.healthy and current.state == INIT:
            current = protocol.set_state(session.session_id, ACTIVE)
        report.state = current.state

    def change(status: dict[str, Any]) -> None:
        status.update(
            last_session=session.session_id,
            last_activity=at,
            current_gate=report.gate,
            status="in-progress" if report.healthy else "blocked",
            health={k: report.health.get(k) for k in ("passed", "skipped", "detail")} | {"at": at},
        )
        if goal.strip():
            status["goal"] = redact(goal.strip())

    status = folder.update_status(change)
    _pending(protocol, folder.slug, str(status.get("title") or folder.slug), report.gate, "build")


def _pending(protocol: ProtocolService, slug: str, title: str, gate: str, stage: str) -> None:
    """The task as a pipeline task: in progress it is pending, and every preamble shows it."""
    from cortex.services.pipeline import task_title, upsert_task

    path = protocol.config.pipeline_state_path
    upsert_task(path, slug, task_title(title, gate), stage, protocol.now_iso())


# -- shutdown ------------------------------------------------------------------------------------
def end_task(
    protocol: ProtocolService,
    slug: str,
    *,
    outcome: str,
    goal: str = "",
    completed: str = "",
    blocked: str = "",
    next_steps: Sequence[str] = (),
    decisions: Sequence[str] = (),
    status: str | None = None,
    resume_instructions: str = "",
    session_id: str | None = None,
) -> dict[str, Any]:
    """The shutdown ritual (see the module docstring); returns what it wrote and emitted.

    A rerun after a kill or failure finishes what is missing: the session-end checkpoint and
    the session's end are each written once (the checkpoint is found again by its type), and
    the log entry and evidence line carry keys a rerun finds.
    """
    new_status = _end_status(outcome, status)
    folder = protocol.folder(slug)
    task = folder.status()
    session, ended = _ending_session(protocol, slug, session_id)
    if session.is_open:  # the move is checked before anything is written
        check_transition(
            session.session_id, session.state, SUSPENDED if session.state == INIT else COMPLETE
        )
    hint = next_steps[0] if next_steps else _HINTS.get(new_status, _HINTS["in-progress"])
    checkpoint = (
        ended
        or protocol.create_checkpoint(
            slug,
            type="session_end",
            summary=completed.strip() or f"Session ended ({outcome})",
            next_steps=next_steps,
            resume_instructions=resume_instructions.strip() or hint,
            state={"decisions": [{"decision": d} for d in decisions if d.strip()]}
            if decisions
            else None,
            session_id=session.session_id,
        )[0]
    )
    payload = {
        "session_id": session.session_id,
        "task_slug": slug,
        "outcome": outcome,
        "next_session_hint": redact(hint),
    }
    closing = session.is_open
    memorized, final = _close(protocol, session, decisions, payload) if closing else ([], session)
    at = final.end_time or protocol.now_iso()
    goal = goal.strip() or str(task.get("goal") or "")
    duration = format_duration((parse_time(at) - parse_time(session.start_time)).total_seconds())
    logged = folder.append_log(
        "\n" + format_log_entry(at[:10], duration, goal, completed, blocked,
                                "; ".join(next_steps), checkpoint.checkpoint_id),
        once=f"**Checkpoint**: {checkpoint.checkpoint_id}",
    )  # fmt: skip
    gate = checkpoint.gate or str(task.get("current_gate") or "G0")
    folder.update_status(
        lambda s: s.update(
            last_session=session.session_id, last_activity=at, status=new_status, current_gate=gate
        )
    )
    title = str(task.get("title") or slug)
    _pending(protocol, slug, title, gate, "done" if new_status == "complete" else "build")
    line = end_line(protocol.service_name, session.session_id, outcome)
    folder.evidence(at, line, once=f"Session end: {session.session_id} ")
    return {
        "session_id": session.session_id,
        "state": final.state,
        "status": new_status,
        "checkpoint": checkpoint.to_dict(),
        "memorized": memorized,
        "event": {"event": "session.complete", "payload": payload},
        "deliveries": _deliver(protocol, folder, payload) if closing or logged else [],
        "log_line": line,
    }


def _ending_session(
    protocol: ProtocolService, slug: str, session_id: str | None
) -> tuple[SessionState, Checkpoint | None]:
    """The session ``task end`` ends: the named one, else the task's open one, else (a rerun
    after an end that did not finish its folder steps) its latest, ended by ``task end``; with
    its session-end checkpoint when a run before wrote it."""
    if session_id is None and protocol.own_session(slug) is None:
        previous = protocol.sessions_of(slug)
        ended = _end_checkpoint(protocol, previous[-1]) if previous else None
        if ended is not None:
            return previous[-1], ended
    session = protocol.task_session(slug, session_id)
    ended = _end_checkpoint(protocol, session)
    if not session.is_open and ended is None:
        raise ConflictError(
            f"session {session.session_id} ended without {command('task end')} "
            f"({session.state}); start the next one with {command('task start', f' {slug}')}"
        )
    return session, ended


def _end_checkpoint(protocol: ProtocolService, session: SessionState) -> Checkpoint | None:
    """The session's session-end checkpoint, when it is its newest (a rerun's)."""
    newest = protocol.store.list_checkpoints(session.session_id, limit=1)
    return newest[0] if newest and newest[0].type == "session_end" else None


_HINTS = {"complete": "task complete", "in-progress": "resume from the latest checkpoint"}


def _end_status(outcome: str, status: str | None) -> str:
    """The task status after a session: given, else from the outcome."""
    if outcome not in OUTCOMES:
        raise ValidationError(f"unknown outcome {outcome!r}; use one of {', '.join(OUTCOMES)}")
    chosen = status or {"success": "complete", "failed": "blocked"}.get(outcome, "in-progress")
    if chosen not in END_STATUSES:
        raise ValidationError(f"unknown status {chosen!r}; use one of {', '.join(END_STATUSES)}")
    return chosen


def _close(
    protocol: ProtocolService,
    session: SessionState,
    decisions: Sequence[str],
    payload: dict[str, Any],
) -> tuple[list[str], SessionState]:
    """In one transaction: memorize the decisions, end the session, log ``session.complete``."""
    with protocol.sessions.transaction():
        memorized = [
            protocol.memory.add(
                d,
                type="decision",
                project=session.project,
                tags=["decision", str(payload["task_slug"])],
                session_id=session.session_id,
                actor="protocol",
            ).memory.id
            for d in decisions
            if d.strip()
        ]
        final = _finish(protocol, session)
        protocol.compaction.events.append(
            session.session_id,
            "session.complete " + json.dumps(payload, ensure_ascii=False),
            role="tool",
            kind="event",
            meaningful=False,
            token_count=0,
            ending=True,  # the record of the end just made, in its transaction
        )
    return memorized, final


def _deliver(
    protocol: ProtocolService, folder: TaskFolder, payload: dict[str, Any]
) -> list[dict[str, Any]]:
    """``session.complete`` to the configured command and webhook; failures are logged."""
    config = protocol.config
    deliveries = commands.deliver(
        payload,
        config.session_complete_command,
        config.session_complete_webhook,
        config.session_complete_timeout_seconds,
    )
    for failed in (d for d in deliveries if not d["ok"]):
        folder.evidence(
            protocol.now_iso(),
            f"[{protocol.service_name}] session.complete delivery to the {failed['target']} "
            f"failed: {failed['error']}",
        )
    return deliveries


def _finish(protocol: ProtocolService, session: SessionState) -> SessionState:
    """End the session: ACTIVE -> COMPLETE; a session that never became ACTIVE is SUSPENDED."""
    if session.state == INIT:
        return protocol.set_state(session.session_id, SUSPENDED)
    check_transition(session.session_id, session.state, COMPLETE)
    return protocol.sessions.on_session_end(session.session_id)


def harness_session_end(protocol: ProtocolService, state: SessionState) -> Checkpoint | None:
    """A harness ended a task's session without the shutdown ritual: keep a session-end
    checkpoint (continuing the latest one's next steps) and the evidence line."""
    if not state.task_slug:
        return None
    latest = protocol.store.list_checkpoints(state.session_id, limit=1)
    last = latest[0] if latest else None
    checkpoint = protocol.compaction.checkpoint(
        state.session_id,
        type="session_end",
        summary="Session ended by the harness (no shutdown ritual ran)",
        next_steps=last.next_steps if last else (),
        resume_instructions=last.resume_instructions if last else "",
        gate=last.gate if last else None,
        step=last.step if last else None,
    )
    try:
        folder = protocol.folder(state.task_slug)
        folder.evidence(
            protocol.now_iso(), end_line(protocol.service_name, state.session_id, "partial")
        )
    except CortexError as exc:  # the checkpoint is kept; only the line is missing
        log.warning("session end of %s not logged in its task folder: %s", state.session_id, exc)
    return checkpoint
