"""Crash recovery by lease: an open session is only crashed when it is known dead.

Several sessions run at once, so an open neighbour is never "recovered" because it is not the
current session: only when its lease lapsed (no activity for ``lease_seconds``) or its
recorded owner process on this host is gone.

A recovered session is SUSPENDED (the lifecycle's state for an interrupted session), gets an
``interrupted`` checkpoint from its last known state (continuing its latest checkpoint's
gate, next steps and resume instructions) and an incident in the audit log (and in its task
folder when it worked on a task).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta

from cortex.clock import parse_time, to_iso
from cortex.core.models import SUSPENDED, SessionState
from cortex.core.tasks import merge_tasks
from cortex.logs import getLogger
from cortex.services.sessions.capture import emit_captured
from cortex.services.sessions.context import SessionContext

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

log = getLogger("cortex")

HOST = os.uname().nodename
"""This machine's name, recorded with an owner pid: a pid means nothing on another host."""


class CrashRecovery:
    """Finds open sessions whose lease lapsed and closes them with a recovery record."""

    def __init__(self, context: SessionContext) -> None:
        self.context = context

    def is_lapsed(self, state: SessionState) -> bool:
        """An open session is crashed when its lease lapsed or its owner process is gone."""
        last = state.last_activity or state.updated_at or state.start_time
        idle = (self.context.clock.now() - parse_time(last)).total_seconds()
        if idle < 0:
            return False  # active after "now" (a clock set back, a replay): live, not crashed
        if idle > self.context.config.lease_seconds:
            return True
        if state.owner_pid and state.owner_host == HOST:
            return not _pid_alive(state.owner_pid)
        return False

    def open_sessions(self) -> list[SessionState]:
        """Every session with no end yet, live or lapsed."""
        return self.context.store.open_sessions()

    def idle_before(self, now: datetime) -> str:
        """Open sessions idle since before this (at ``now``) may have lapsed."""
        return to_iso(now - timedelta(seconds=self.context.config.lease_seconds))

    def detect_and_recover_crashed(
        self, current_session_id: str, now: datetime | None = None
    ) -> list[SessionState]:
        """Close lapsed sessions with an estimated end and ``crash_recovered``."""
        ctx = self.context
        recovered: list[SessionState] = []
        pipeline: Mapping[str, dict[str, Any]] | None = None
        with ctx.tx():
            idle_before = self.idle_before(now or ctx.clock.now())
            for state in ctx.store.open_sessions(
                exclude_id=current_session_id, idle_before=idle_before, owner_keeps=_owner_keeps
            ):
                if not self.is_lapsed(state):
                    continue
                if pipeline is None:
                    pipeline = ctx.pipeline() or {}
                state = ctx.save(self._closed(state, pipeline))
                emit_captured(ctx, state)
                self._interrupted(state)
                recovered.append(state)
        for state in recovered:
            ctx.mirror(state)
            log.info(
                "recovered crashed session %s (last activity %s)", state.session_id, state.end_time
            )
        return recovered

    def _closed(self, state: SessionState, pipeline: Mapping[str, dict[str, Any]]) -> SessionState:
        """The recovery record: ended at its last activity (else start + 1 h), tasks kept."""
        from cortex.core.lifecycle import can_transition  # (a recovery's: most starts have none)

        ctx = self.context
        end = state.last_activity or state.updated_at
        if end is None:
            end = to_iso(min(ctx.clock.now(), parse_time(state.start_time) + timedelta(hours=1)))
        return replace(
            state,
            end_time=end,
            # An open session is INIT or ACTIVE; a row of another state keeps it.
            state=SUSPENDED if can_transition(state.state, SUSPENDED) else state.state,
            crash_recovered=True,
            pending_tasks=tuple(
                merge_tasks(
                    list(state.pending_tasks),
                    list(ctx.detect_pending(state.working_memory, pipeline, state.project)),
                )
            ),
            updated_at=ctx.now_iso(),
        )

    def _interrupted(self, state: SessionState) -> None:
        """The interrupted checkpoint and the incident of a session recovery just suspended."""
        from cortex.services.compaction import CompactionService  # only when one crashed

        ctx = self.context
        compaction = CompactionService(ctx.store, ctx.config, ctx.clock)
        latest = ctx.store.list_checkpoints(state.session_id, limit=1)
        last = latest[0] if latest else None
        checkpoint = compaction.checkpoint(
            state.session_id,
            type="interrupted",
            summary=f"Session interrupted; last known activity at {state.end_time}",
            next_steps=last.next_steps if last else (),
            resume_instructions=(last.resume_instructions if last else "")
            or "Resume from the last known state in this checkpoint",
            gate=last.gate if last else None,
            step=last.step if last else None,
            ending=True,  # written with the end that recovery just gave the session
        )
        detail = {
            "checkpoint_id": checkpoint.checkpoint_id,
            "last_activity": state.end_time,
            "task_slug": state.task_slug,
        }
        ctx.store.append_audit(
            "session.interrupted", "recovery", state.session_id, detail, ctx.now_iso()
        )
        if state.task_slug:
            _task_incident(ctx, state, detail)
        log.warning(
            "incident: session %s interrupted, suspended (last activity %s UTC%s); checkpoint %s",
            state.session_id,
            str(state.end_time)[:16].replace("T", " "),
            f", task {state.task_slug}" if state.task_slug else "",
            checkpoint.checkpoint_id,
        )


def _task_incident(ctx: SessionContext, state: SessionState, detail: dict[str, Any]) -> None:
    """The incident in the task folder too; a damaged folder does not stop recovery."""
    from cortex.errors import CortexError
    from cortex.services.protocol.checkpoints import folder_of

    try:
        folder_of(ctx.config, str(state.task_slug)).incident(
            {
                "at": ctx.now_iso(),
                "action": "session.interrupted",
                "session_id": state.session_id,
                **detail,
            }
        )
    except CortexError as exc:
        log.warning("incident of %s not written to its task folder: %s", state.session_id, exc)


def _owner_keeps(pid: int, host: str | None) -> bool:
    """Whether a session owned by ``pid`` on ``host`` holds its lease whatever its idle time
    below ``lease_seconds``: its owner is elsewhere (only the lease tells) or alive here."""
    return host != HOST or _pid_alive(pid)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
