"""CompactionService: checkpoints, the compaction trigger, and the compaction itself.

Write-ahead: before a harness compacts its context, ``pre_compact`` writes a checkpoint that
carries what must survive (pins, pending tasks, rules, the latest decisions, working memories,
hot topics), a snapshot of the meaningful transcript (``auto_compaction``) and a compaction
event, in one transaction. Only then may the harness compact. ``post_compact`` records the
summary the harness produced. ``format_checkpoint`` is the text to re-inject afterwards.

Wiring: Claude Code ``PreCompact`` -> ``pre_compact(session_id, trigger)``; ``PostCompact``
(or ``SessionStart`` with source ``compact``) -> ``post_compact`` then
``format_checkpoint(latest_checkpoint(session_id))``. OpenClaw's compaction hooks do the same
through the bridge.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial

from cortex.clock import Clock, parse_time
from cortex.config import Config
from cortex.core.budgets import TriggerDecision, compaction_due
from cortex.core.checkpoint_schema import CHECKPOINT_TYPES, validated_checkpoint
from cortex.core.history_models import Checkpoint, CompactionEvent, SessionEvent, SessionSnapshot
from cortex.core.memory_models import RULE, WORKING, Memory, MemoryFilter, SessionBlock
from cortex.core.models import SessionState
from cortex.core.plaintext import storable, storable_value
from cortex.core.redaction import redact, redact_value
from cortex.core.tokens import estimate_tokens
from cortex.core.transcripts import extract_decisions, format_checkpoint
from cortex.errors import CortexError, ValidationError
from cortex.logs import getLogger
from cortex.services.base import Service
from cortex.services.events import EventLog
from cortex.services.ids import new_uuid

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

    from cortex.services.metrics import MetricsService
    from cortex.store.protocol import Store

HARNESS_TRIGGERS = ("auto", "manual")
DECISION_MEMORY_LIMIT = 5
CONTEXT_RULE_LIMIT = 50
CONTEXT_WORKING_LIMIT = 20
EVENT_SCAN_LIMIT = 500
COMPACTION_COUNT_LIMIT = 10_000
log = getLogger("cortex")


def context_rules(
    store: Store, scope: MemoryFilter, now: str, limit: int
) -> tuple[list[Memory], int]:
    """The rules a context or a checkpoint carries, ``limit`` at most: those of ``scope``'s
    project first (more specific than global ones), then global ones, each newest first; and
    how many rules of the scope were left out."""
    rules = replace(scope, layers=(RULE,), own_project=False)
    own: list[Memory] = []
    if scope.project is not None:
        own = store.list_memories(replace(rules, own_project=True), now, limit=limit)
    shared: list[Memory] = []
    if len(own) < limit:
        shared = store.list_memories(replace(rules, project=None), now, limit=limit - len(own))
    taken = own + shared
    left_out = store.count_memories(rules, now) - len(taken) if len(taken) == limit else 0
    return taken, left_out


@dataclass(frozen=True)
class SessionStatus:
    """Where a session stands: its derived status, counts since the last compaction, the
    trigger decision and its latest checkpoint."""

    session_id: str
    status: str
    decision: TriggerDecision
    idle_minutes: float | None
    latest_checkpoint_id: str | None
    checkpoint_count: int
    compactions: int
    last_compaction_at: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "status": self.status,
            "compaction": self.decision.to_dict(),
            "idle_minutes": None if self.idle_minutes is None else round(self.idle_minutes, 1),
            "latest_checkpoint_id": self.latest_checkpoint_id,
            "checkpoint_count": self.checkpoint_count,
            "compactions": self.compactions,
            "last_compaction_at": self.last_compaction_at,
        }


@dataclass(frozen=True)
class CompactionRun:
    """What ``run``/``pre_compact`` wrote: nothing when compaction was not due."""

    decision: TriggerDecision
    checkpoint: Checkpoint | None = None
    snapshot: SessionSnapshot | None = None
    event: CompactionEvent | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "compacted": self.event is not None,
            "decision": self.decision.to_dict(),
            "checkpoint": self.checkpoint.to_dict() if self.checkpoint else None,
            "snapshot_id": self.snapshot.id if self.snapshot else None,
            "event": self.event.to_dict() if self.event else None,
        }


def compaction_loss(run: CompactionRun, events: Sequence[SessionEvent]) -> dict[str, Any]:
    """What a compaction's checkpoint kept against what the context held: tokens and turns
    before, the checkpoint's own tokens and their ratio, the items it carries, and the
    decisions the transcript stated that it does not carry."""
    assert run.checkpoint is not None
    state = run.checkpoint.state
    kept_text = {str(d.get("decision")) for d in state.get("decisions", []) if isinstance(d, dict)}
    seen = extract_decisions(events, limit=len(events) or 1)
    before = run.decision.tokens
    kept = estimate_tokens(format_checkpoint(run.checkpoint))
    return {
        "trigger_type": run.event.trigger_type if run.event else None,
        "tokens_before": before,
        "turns_before": run.decision.turns,
        "checkpoint_tokens": kept,
        "kept_ratio": round(min(1.0, kept / before), 4) if before else 1.0,
        "pins": len(state.get("pins", [])),
        "pending_tasks": len(state.get("pending_tasks", [])),
        "rules": len(state.get("rules", [])),
        "working_memories": len(state.get("working_memories", [])),
        "decisions_seen": len(seen),
        "decisions_kept": len(kept_text),
        "decisions_lost": sum(d not in kept_text for d in seen),
    }


def derived_status(state: SessionState, compactions: int) -> str:
    """The session status from the one session row: closed, compacted or active."""
    if not state.is_open:
        return "closed"
    return "compacted" if compactions else "active"


def session_status(
    store: Store,
    config: Config,
    clock: Clock,
    state: SessionState,
    *,
    semantic_hint: bool = False,
) -> SessionStatus:
    """Counts since the last compaction, run through the trigger engine."""
    # One read for both the newest compaction (the "since" mark) and the count.
    compactions = store.list_compaction_events(state.session_id, limit=COMPACTION_COUNT_LIMIT)
    since = compactions[0].created_at if compactions else None
    totals = store.session_event_totals(state.session_id, since)
    now = clock.now()
    last = max(filter(None, (totals.last_event_at, state.last_activity)), default=None)
    idle = _minutes_between(last, now) if last else None
    decision = compaction_due(
        totals.tokens,
        totals.turns,
        idle if state.is_open else None,
        token_budget=config.compaction_token_budget,
        turn_budget=config.compaction_turn_budget,
        inactivity_minutes=config.compaction_inactivity_minutes,
        semantic_hint=semantic_hint,
    )
    if not config.memory_compaction_enabled:  # the flag turns the trigger off, not the counts
        decision = replace(
            decision, due=False, trigger_type=None, hint=None,
            reason="compaction is off (memory_compaction_enabled=false)",
        )  # fmt: skip
    latest = store.list_checkpoints(state.session_id, limit=1)
    return SessionStatus(
        session_id=state.session_id,
        status=derived_status(state, len(compactions)),
        decision=decision,
        idle_minutes=idle,
        latest_checkpoint_id=latest[0].checkpoint_id if latest else None,
        checkpoint_count=state.checkpoint_count,
        compactions=len(compactions),
        last_compaction_at=since,
    )


def session_block(store: Store, config: Config, clock: Clock, state: SessionState) -> SessionBlock:
    """The ``session`` block of ``get_context``: compaction hints and the latest checkpoint."""
    status = session_status(store, config, clock, state)
    return SessionBlock(
        session_id=state.session_id,
        compaction_required=status.decision.due,
        trigger_hint=status.decision.hint,
        latest_checkpoint_id=status.latest_checkpoint_id,
        status=status.status,
    )


def _minutes_between(earlier: str, now: datetime) -> float:
    return max(0.0, (now - parse_time(earlier)).total_seconds() / 60.0)


class CompactionService(Service):
    """Checkpoint, decide and compact sessions over one ``Store``."""

    def __init__(
        self,
        store: Store,
        config: Config,
        clock: Clock | None = None,
        events: EventLog | None = None,
        *,
        metrics: MetricsService | None = None,
    ) -> None:
        super().__init__(store, config, clock)
        self.events = events or EventLog(store, config, self.clock)
        self.metrics = metrics
        self.unpublished: dict[str, str] = {}
        """Why a strict checkpoint's task folder was not written after its commit, by id."""

    def status(self, session_id: str, *, semantic_hint: bool = False) -> SessionStatus:
        """The session's derived status and whether compaction is due (and why)."""
        state = self.events.session(session_id)
        return session_status(
            self.store, self.config, self.clock, state, semantic_hint=semantic_hint
        )

    # -- checkpoints ---------------------------------------------------------------------------
    def checkpoint(
        self,
        session_id: str,
        *,
        type: str = "manual",
        summary: str = "",
        next_steps: Sequence[str] = (),
        decisions: Sequence[str] = (),
        files_changed: Sequence[str] = (),
        resume_instructions: str = "",
        gate: str | None = None,
        step: int | None = None,
        extra_state: Mapping[str, Any] | None = None,
        can_resume: bool = True,
        strict_mirror: bool = False,
        ending: bool = False,
    ) -> Checkpoint:
        """Write a checkpoint of everything that must survive, bump the session's
        ``checkpoint_count`` and log a ``checkpoint`` event; return it.

        The checkpoint must pass the protocol's schema (``cortex.core.checkpoint_schema``);
        ``extra_state`` adds to (or replaces parts of) its ``state``, e.g. structured
        ``decisions``, ``tests`` or ``safety_metrics``. A session bound to a task also gets
        the checkpoint in memory (in this transaction) and, once the store committed it, in
        its task folder (file, index, status, evidence line): a kill or failure before the
        commit leaves no trace of it in the folder. A failure there is logged, so that a
        harness's compaction never loses its checkpoint to a damaged task folder (``cortex
        checkpoint verify`` finds the gap, ``--repair`` fills it); with ``strict_mirror`` a
        failure of the memory mirror rolls the checkpoint back, and one of the folder is kept
        in ``unpublished`` (by checkpoint id) for the caller to report. A session that has
        ended takes none (``EventLog.writable``; ``ending`` as there).
        """
        if type not in CHECKPOINT_TYPES:
            raise ValidationError(
                f"unknown checkpoint type {type!r}; use one of {', '.join(CHECKPOINT_TYPES)}"
            )
        # Free text, made storable (see cortex.core.plaintext) before anything is written.
        summary, resume_instructions = storable(summary), storable(resume_instructions)
        next_steps, decisions = storable_value(list(next_steps)), storable_value(list(decisions))
        files_changed = storable_value(list(files_changed))
        extra_state = storable_value(dict(extra_state)) if extra_state else extra_state
        with self.store.transaction():
            state = self.events.writable(session_id, ending=ending)
            session_id = state.session_id
            at = self.now_iso()
            survivors = self._survivors(state, decisions, files_changed) | dict(extra_state or {})
            checkpoint = validated_checkpoint(
                Checkpoint(
                    checkpoint_id=f"ckpt-{at[:10]}-{new_uuid()[:8]}",
                    session_id=session_id,
                    timestamp=at,
                    type=type,
                    summary=redact(summary.strip()),
                    state=redact_value(survivors),
                    next_steps=tuple(redact(s) for s in next_steps if s.strip()),
                    can_resume=can_resume,
                    resume_instructions=redact(resume_instructions.strip()),
                    gate=gate,
                    step=step,
                ).to_dict()
            )
            self.store.save_checkpoint(checkpoint)
            self.store.bump_checkpoint_count(session_id, at)
            text = f"checkpoint {checkpoint.checkpoint_id} ({type})" + (
                f": {checkpoint.summary}" if checkpoint.summary else ""
            )
            self.events.append(
                session_id, text, role="tool", kind="checkpoint", token_count=0, ending=ending
            )
            if state.task_slug:
                self._mirror(state, checkpoint, strict_mirror)
        return checkpoint

    def _mirror(self, state: SessionState, checkpoint: Checkpoint, strict: bool) -> None:
        """The checkpoint in memory now, and in the session's task folder after the commit."""
        from cortex.services.protocol.checkpoints import mirror_memory

        try:
            mirror_memory(self.store, self.config, self.clock, state, checkpoint)
        except CortexError as exc:
            if strict:
                raise
            log.warning("checkpoint %s not mirrored into memory: %s", checkpoint.checkpoint_id, exc)
        self.store.after_commit(partial(self._publish, state, checkpoint, strict))

    def _publish(self, state: SessionState, checkpoint: Checkpoint, strict: bool) -> None:
        """The committed checkpoint in its task folder; a failure is logged (and kept)."""
        from cortex.services.protocol.checkpoints import publish_checkpoint

        try:
            publish_checkpoint(self.store, self.config, self.clock, state, checkpoint)
        except CortexError as exc:
            log.warning("checkpoint %s kept in the store only: %s", checkpoint.checkpoint_id, exc)
            if strict:
                self.unpublished[checkpoint.checkpoint_id] = str(exc)

    def _survivors(
        self, state: SessionState, decisions: Sequence[str], files: Sequence[str]
    ) -> dict[str, Any]:
        """The checkpoint ``state``: pins, tasks, rules, decisions, working memory, files."""
        now = self.now_iso()
        scope = MemoryFilter(project=state.project, user_id=state.user_id)
        rules, rules_left_out = context_rules(self.store, scope, now, CONTEXT_RULE_LIMIT)
        working = self.store.list_memories(
            replace(scope, layers=(WORKING,)), now, limit=CONTEXT_WORKING_LIMIT
        )
        decided = self.store.list_memories(
            replace(scope, types=("decision",)), now, limit=DECISION_MEMORY_LIMIT
        )
        events = self.store.list_session_events(
            state.session_id, meaningful_only=True, limit=EVENT_SCAN_LIMIT
        )
        all_decisions = list(
            dict.fromkeys([*decisions, *(m.content for m in decided), *extract_decisions(events)])
        )
        survivors: dict[str, Any] = {
            "pins": [p.to_dict() for p in state.working_memory],
            "pending_tasks": [t.to_dict() for t in state.pending_tasks],
            "rules": [{"id": m.id, "content": m.content} for m in rules],
            "decisions": [{"decision": d} for d in all_decisions if d.strip()],
            "working_memories": [{"id": m.id, "content": m.content} for m in working],
            "files_changed": [{"path": f, "action": "modified"} for f in files],
            "hot_topics": list(state.hot_topics),
            "active_projects": list(state.active_projects),
        }
        if rules_left_out:
            survivors["rules_left_out"] = rules_left_out
        return survivors

    def checkpoints(self, session_id: str, *, limit: int = 20) -> list[Checkpoint]:
        """The session's checkpoints, newest first (``session_id`` may be a unique prefix)."""
        session_id = self.events.session(session_id).session_id
        return self.store.list_checkpoints(session_id, limit=limit)

    def latest_checkpoint(self, session_id: str) -> Checkpoint | None:
        """The session's newest checkpoint, or None."""
        found = self.checkpoints(session_id, limit=1)
        return found[0] if found else None

    def format_checkpoint(self, checkpoint: Checkpoint) -> str:
        """The re-injection text of a checkpoint (rules, pins, tasks, decisions, next steps)."""
        return format_checkpoint(checkpoint)

    # -- compaction ----------------------------------------------------------------------------
    def pre_compact(self, session_id: str, trigger: str = "auto", summary: str = "") -> Checkpoint:
        """Write-ahead before a harness compacts: checkpoint, snapshot and compaction event.

        ``trigger`` is the harness's (``auto`` or ``manual``, as Claude Code's PreCompact
        gives it). Returns the checkpoint; the harness may compact once this returns.
        """
        if trigger not in HARNESS_TRIGGERS:
            raise ValidationError(f"unknown trigger {trigger!r}; use auto or manual")
        run = self.run(session_id, force=True, summary=summary, harness_trigger=trigger)
        assert run.checkpoint is not None  # a forced run always writes one
        return run.checkpoint

    def run(
        self,
        session_id: str,
        *,
        force: bool = False,
        summary: str = "",
        harness_trigger: str = "manual",
    ) -> CompactionRun:
        """Compact when due (or always with ``force``): checkpoint first, then a snapshot and
        the compaction event, in one transaction; then its loss metrics."""
        run = self._compact(session_id, force=force, summary=summary,
                            harness_trigger=harness_trigger)  # fmt: skip
        self._emit_loss(run)
        return run

    def _compact(
        self, session_id: str, *, force: bool, summary: str, harness_trigger: str
    ) -> CompactionRun:
        with self.store.transaction():
            status = self.status(session_id)
            session_id = status.session_id
            decision = status.decision
            if not decision.due and not force:
                return CompactionRun(decision)
            checkpoint = self.checkpoint(session_id, type="pre_compaction", summary=summary)
            snapshot = self.events.snapshot(session_id, "auto_compaction")
            event = CompactionEvent(
                id=new_uuid(),
                session_id=session_id,
                trigger_type=(decision.trigger_type if decision.due else None) or "manual",
                reason=decision.reason if decision.due else f"forced ({harness_trigger})",
                token_count_before=decision.tokens,
                turn_count_before=decision.turns,
                summary_tokens=None,
                checkpoint_id=checkpoint.checkpoint_id,
                created_at=self.now_iso(),
            )
            self.store.append_compaction_event(event)
        return CompactionRun(decision, checkpoint, snapshot, event)

    def post_compact(self, session_id: str, summary: str, trigger: str = "auto") -> CompactionEvent:
        """Record the harness's compaction summary as a ``summary`` event and complete the
        compaction event (one is logged now if ``pre_compact`` never ran)."""
        if trigger not in HARNESS_TRIGGERS:
            raise ValidationError(f"unknown trigger {trigger!r}; use auto or manual")
        with self.store.transaction():
            session_id = self.events.writable(session_id).session_id
            latest = self.store.list_compaction_events(session_id, limit=1)
            run = None
            if not latest or latest[0].completed_at is not None:
                run = self._compact(session_id, force=True, summary="", harness_trigger=trigger)
                latest = self.store.list_compaction_events(session_id, limit=1)
            text = summary.strip() or "(the harness gave no summary)"
            self.events.append(session_id, text, role="assistant", kind="summary")
            tokens, at = estimate_tokens(text), self.now_iso()
            self.store.complete_compaction_event(latest[0].id, tokens, at)
        if run is not None:
            self._emit_loss(run)
        return replace(latest[0], summary_tokens=tokens, completed_at=at)

    def _emit_loss(self, run: CompactionRun) -> None:
        """A ``compaction_loss`` metrics event: what the checkpoint kept against what the
        context held (after the commit, so the chain's head never runs ahead)."""
        if self.metrics is None or run.checkpoint is None or run.event is None:
            return
        events = self.store.list_session_events(
            run.checkpoint.session_id, meaningful_only=True, limit=EVENT_SCAN_LIMIT
        )
        payload = compaction_loss(run, events)
        try:
            self.metrics.writer.emit("compaction_loss", run.checkpoint.session_id, payload,
                                     run.event.created_at)  # fmt: skip
        except CortexError as exc:  # a metrics failure never undoes the compaction
            log.warning("compaction_loss metric not written: %s", exc)

    def compactions(self, session_id: str, *, limit: int = 20) -> list[CompactionEvent]:
        """The session's compaction events, newest first."""
        session_id = self.events.session(session_id).session_id
        return self.store.list_compaction_events(session_id, limit=limit)
