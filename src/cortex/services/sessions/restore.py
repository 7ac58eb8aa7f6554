"""Restoration's I/O, in order: load the candidates, pick the contributors, load their pins,
plan (pure, ``cortex.services.restoration``), then record the outcome's chain links and metrics.

A restoration that fails or passes its time budget is a cold start (fail open).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from cortex.clock import parse_time, to_iso
from cortex.core.models import ScoredSession, SessionState, evolve
from cortex.core.scoring import score_all
from cortex.logs import getLogger
from cortex.services.restoration import RestorePlan, plan_restoration, select_contributors
from cortex.services.sessions.context import SessionContext

log = getLogger("cortex")
debug_log = getLogger("cortex.debug")

RESTORE_BUDGET_SECONDS = 1.5
"""Design 10: a restoration slower than this is abandoned for a cold start (fail open)."""
EPOCH = "1970-01-01T00:00:00.000000Z"
COLD = "restoration "
"""How the warnings of a restoration that failed or passed its budget begin (a caller that
drops the engine's other warnings keeps these: ``restoration failed, starting cold: ...``)."""
CANDIDATE_LIMIT = 50
"""Most recent completed sessions scored at a start (the spec's getRecentSessions(7, 50))."""


@dataclass(frozen=True)
class FailedRestore:
    """A restoration that failed or passed its time budget: a cold start, and ``why`` in a
    few words for the agent (the logged warning holds the cause)."""

    why: str


class Restorer:
    """Plans a new session's inheritance from the store and records what it inherited."""

    def __init__(self, context: SessionContext) -> None:
        self.context = context

    def window_start(self, now: datetime) -> str:
        """Sessions that ended since this (at ``now``) are the restore's candidates."""
        config = self.context.config
        return to_iso(
            now - timedelta(days=max(config.lookback_days, config.critical_inheritance_days))
        )

    def plan(
        self,
        state: SessionState,
        words: list[str],
        explain: bool = False,
        recovered: Sequence[str] = (),
        now: datetime | None = None,
    ) -> RestorePlan | FailedRestore:
        """Plan the restoration (as at ``now``, by default the clock's); any failure or a
        blown time budget means a cold start (logged, and said by the ``FailedRestore``)."""
        ctx = self.context
        started = time.perf_counter()
        try:
            explain_all = explain or ctx.config.debug
            plan, fetched = self._plan(state, words, explain_all, recovered, now)
        except Exception as exc:  # noqa: BLE001 - restoration never blocks a start
            if ctx.config.raise_errors:
                raise
            log.warning("%sfailed, starting cold: %s", COLD, exc)
            return FailedRestore(f"{COLD}failed")
        elapsed = time.perf_counter() - started
        if elapsed > RESTORE_BUDGET_SECONDS:
            log.warning(
                "%stook %.0f ms (> %.0f ms budget); starting cold",
                COLD,
                elapsed * 1000,
                RESTORE_BUDGET_SECONDS * 1000,
            )
            return FailedRestore(f"{COLD}took longer than its time budget")
        if ctx.config.debug:
            debug_log.info(
                "[session:debug] Fetched %d sessions from last %d days",
                fetched,
                ctx.config.lookback_days,
            )
            for line in plan.explain:
                debug_log.info("%s", line)
            debug_log.info("[session:debug] Restoration complete in %.1fms", elapsed * 1000)
        return plan

    def _plan(
        self,
        state: SessionState,
        words: list[str],
        explain_all: bool,
        recovered: Sequence[str],
        now: datetime | None,
    ) -> tuple[RestorePlan, int]:
        """Candidates, contributors, their pins, then the plan; and how many were fetched."""
        plan, candidates = self._planned(state, words, explain_all, recovered, now)
        return plan, len(candidates)

    def preview(
        self, state: SessionState, words: list[str]
    ) -> tuple[RestorePlan, list[ScoredSession]]:
        """The plan for ``state`` and every candidate's score (above the threshold or not),
        best first. Reads only: nothing is recorded (the dashboard's next-start view)."""
        plan, candidates = self._planned(state, words, True, ())
        return plan, score_all(candidates, words, self.context.clock.now(), 0.0, None)

    def _planned(
        self,
        state: SessionState,
        words: list[str],
        explain_all: bool,
        recovered: Sequence[str],
        now: datetime | None = None,
    ) -> tuple[RestorePlan, list[SessionState]]:
        """The plan, and the candidates it weighed."""
        ctx = self.context
        now = now or ctx.clock.now()
        candidates = ctx.store.completed_sessions_since(
            self.window_start(now),
            state.project,
            limit=CANDIDATE_LIMIT,
            exclude_id=state.session_id,
            all_pins=False,
        )
        pipeline = ctx.pipeline()
        last = None
        if not candidates:  # a break longer than the windows: the last session, however old
            before = ctx.store.completed_sessions_since(
                EPOCH, state.project, limit=1, exclude_id=state.session_id, all_pins=False
            )
            last = before[0] if before else None
        selection = select_contributors(
            candidates,
            words,
            now,
            ctx.config,
            explain_all=explain_all,
            explained=explain_all or ctx.config.debug,
            last=last,
        )
        sources = self._with_pins(selection.standard_sources)
        plan = plan_restoration(
            selection, sources, state.working_memory, now, ctx.config, pipeline, recovered
        )
        return plan, candidates

    def _with_pins(self, sessions: Sequence[SessionState]) -> list[SessionState]:
        """``sessions`` with all of their pins (candidates are loaded with CRITICAL ones only),
        read in one statement (a round trip per contributor was most of a start's reads)."""
        ids = [s.session_id for s in sessions]
        full = {s.session_id: s for s in self.context.store.get_sessions(ids)}
        return [
            evolve(s, working_memory=full[s.session_id].working_memory)
            if s.session_id in full
            else s
            for s in sessions
        ]

    def record(self, state: SessionState, plan: RestorePlan) -> None:
        """Chain links and the metrics events of a warm start."""
        ctx = self.context
        ids = [s.session_id for s in plan.contributors]
        ctx.store.mark_continued(ids, state.session_id, ctx.now_iso())
        ctx.emit(
            "session_restored",
            state.session_id,
            {
                "new_session_id": state.session_id,
                "from_session_ids": ids,
                "pins_inherited": len(plan.inherited),
                "relevance_scores": [round(plan.score_of(i), 4) for i in ids],
                "pending_task_count": len(plan.pending_tasks),
                "cold_start": False,
            },
        )
        for record in plan.decay:
            ctx.emit(
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
        self._record_tasks(state, plan)

    def _record_tasks(self, state: SessionState, plan: RestorePlan) -> None:
        """One ``pending_task_surfaced`` event per task the preamble names."""
        now = self.context.clock.now()
        for task in plan.pending_tasks:
            since = plan.task_ages.get(task.task_id) or task.updated_at
            days = (now - parse_time(since)).total_seconds() / 86400 if since else 0.0
            self.context.emit(
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
