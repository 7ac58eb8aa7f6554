"""ReviewService: what a person should look at in the memories, and their verdicts.

- **Stale**: live memories nobody confirmed or changed for ``stale_after_days`` (explicit
  ``remember`` confirms a memory; an edit changes it). Superseded history may be included.
- **Review queue**: memories linked as ``conflicts`` (consolidation kept both statements on one
  subject), what the newest shadow consolidation run proposed and nobody applied yet, then the
  stale ones.
- **Verdicts**: ``keep`` confirms a memory (explicit, confirmed now), ``drop`` forgets it,
  ``prefer`` makes one memory supersede another (the conflict resolved, the loser kept as
  history). Each is audited.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from cortex.clock import Clock, to_iso
from cortex.config import Config
from cortex.core.hygiene import SHADOW
from cortex.core.memory_models import Memory
from cortex.errors import ValidationError
from cortex.services.base import Service
from cortex.services.memory_checks import check_limit

if TYPE_CHECKING:
    from cortex.services.memory import MemoryService
    from cortex.store.protocol import Store


@dataclass(frozen=True)
class ReviewQueue:
    """Conflicting pairs, a shadow run's pending proposals, and stale memories."""

    conflicts: tuple[tuple[Memory, Memory], ...]
    stale: tuple[Memory, ...]
    shadow_run_id: str | None = None
    proposals: tuple[dict[str, Any], ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "conflicts": [{"a": a.to_dict(), "b": b.to_dict()} for a, b in self.conflicts],
            "shadow_run_id": self.shadow_run_id,
            "proposals": list(self.proposals),
            "stale": [m.to_dict() for m in self.stale],
        }


class ReviewService(Service):
    """Stale listings, the review queue and the verdicts on it."""

    def __init__(
        self, store: Store, config: Config, clock: Clock | None, memory: MemoryService
    ) -> None:
        super().__init__(store, config, clock)
        self.memory = memory

    def stale(
        self,
        *,
        days: int | None = None,
        limit: int = 50,
        superseded: bool = False,
        **scope: Any,
    ) -> builtins.list[Memory]:
        """Memories not confirmed or changed for ``days`` (default ``stale_after_days``),
        least recently confirmed first; ``superseded`` adds the history."""
        check_limit(limit)
        days = self.config.stale_after_days if days is None else days
        if not 0 <= days <= 36500:
            raise ValidationError(f"days {days} is out of range; use 0-36500")
        flt = self.memory.scope_filter(include_history=superseded, **scope)
        before = to_iso(self.clock.now() - timedelta(days=days))
        return self.store.stale_memories(flt, self.now_iso(), before, limit=limit)

    def queue(self, *, limit: int = 20, **scope: Any) -> ReviewQueue:
        """What needs a verdict: conflicts, the newest shadow run's proposals still pending,
        stale memories."""
        check_limit(limit)
        flt = self.memory.scope_filter(**scope)
        now = self.now_iso()
        conflicts = self.store.memory_conflicts(flt, now, limit=limit)
        run = next((r for r in self.store.list_consolidation_runs(limit=20)), None)
        proposals: list[dict[str, Any]] = []
        if run is not None and run.mode == SHADOW:
            for action in run.metadata.get("actions", []):
                other = self.store.get_memory(str(action.get("other_id") or ""))
                if other is not None and other.is_live(now):  # not applied since
                    proposals.append(action)
        return ReviewQueue(
            conflicts=tuple(conflicts),
            stale=tuple(self.stale(limit=limit, **scope)),
            shadow_run_id=run.id if run is not None and run.mode == SHADOW else None,
            proposals=tuple(proposals[:limit]),
        )

    def keep(self, memory_id: str, *, actor: str = "cli") -> Memory:
        """Confirm a memory: explicit, confirmed now (it is no longer stale)."""
        return self.memory.edit(memory_id, actor=actor, remember_intent="explicit")

    def drop(self, memory_id: str, *, actor: str = "cli") -> Memory:
        """Forget a memory (audited)."""
        return self.memory.forget(memory_id, actor=actor)

    def prefer(self, winner_id: str, loser_id: str, *, actor: str = "cli") -> Memory:
        """Resolve a conflict: ``winner_id`` supersedes ``loser_id`` (kept as history)."""
        if winner_id == loser_id:
            raise ValidationError("a memory cannot supersede itself; name two memories")
        now = self.now_iso()
        with self.store.transaction():
            winner = self.memory.live(winner_id)
            loser = self.memory.live(loser_id)
            winner_id, loser_id = winner.id, loser.id
            self.memory.supersede(loser, winner, now)
            detail = {"superseded": loser_id, "by": winner_id}
            self.store.append_audit("memory.review.prefer", actor, loser_id, detail, now)
        return winner
