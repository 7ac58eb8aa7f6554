"""Manual continue and the session chain."""

from __future__ import annotations

from dataclasses import replace

from cortex.clock import parse_time
from cortex.core.models import RestoredSessionContext, SessionState
from cortex.errors import ConflictError, param
from cortex.services.restoration import plan_forced
from cortex.services.sessions.context import SessionContext
from cortex.services.sessions.restore import Restorer


class Continuation:
    """Inherit from a named session whatever its age or score; walk the chain of sessions."""

    def __init__(self, context: SessionContext, restorer: Restorer) -> None:
        self.context = context
        self.restorer = restorer

    def force_inherit_session(
        self, target_session_id: str, session_id: str | None = None, *, actor: str = "cli"
    ) -> RestoredSessionContext:
        """Inherit everything from a session whatever its age or score (audited)."""
        ctx = self.context
        with ctx.tx():
            target = ctx.load(target_session_id)
            state = ctx.resolve_open(session_id)
            if target.session_id == state.session_id:
                raise ConflictError("a session cannot continue itself; name a prior session")
            plan = plan_forced(
                target, state.working_memory, ctx.clock.now(), ctx.config, ctx.pipeline()
            )
            state = ctx.save(
                replace(
                    state,
                    working_memory=plan.pins,
                    last_activity=ctx.now_iso(),
                    updated_at=ctx.now_iso(),
                )
            )
            ctx.store.mark_continued([target.session_id], state.session_id, ctx.now_iso())
            ctx.store.append_audit(
                "session_continue",
                actor,
                target.session_id,
                {
                    "session_id": state.session_id,
                    "pins_inherited": len(plan.inherited),
                    "pending_tasks": len(plan.pending_tasks),
                },
                ctx.now_iso(),
            )
            self.restorer.record(state, plan)
            ctx.mirror_pins(state)
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
        """Up to ``depth`` sessions ending at ``session_id``, oldest first."""
        ctx = self.context
        if depth < 1:
            raise ConflictError(f"depth {depth} must be at least 1; e.g. {param('depth', 5)}")
        chain = [ctx.load(session_id)]
        seen = {chain[0].session_id}
        while len(chain) < depth and chain[-1].previous_session_id:
            prev_id = chain[-1].previous_session_id
            prev = ctx.store.get_session(prev_id) if prev_id not in seen else None
            if prev is None:
                break
            seen.add(prev.session_id)
            chain.append(prev)
        chain.reverse()
        oldest = parse_time(chain[0].start_time)
        with ctx.tx():
            ctx.emit(
                "session_chain_traversal",
                session_id,
                {
                    "start_session_id": session_id,
                    "requested_depth": depth,
                    "sessions_found": len(chain),
                    "oldest_session_age_hours": round(
                        (ctx.clock.now() - oldest).total_seconds() / 3600, 2
                    ),
                },
            )
        return chain
