"""Budgets: when a session is due for compaction, and what fits in a context's token budget.

Pure: counts, times and limits in; a decision out.

Compaction trigger, checked in order:

1. ``count``: tokens since the last compaction >= ``token_budget``;
2. ``count``: turns since the last compaction >= ``turn_budget``;
3. ``time``: at least one turn since the last compaction, and idle >= ``inactivity_minutes``
   (compact a paused session before it is resumed);
4. ``semantic``: the harness says a unit of work completed (``semantic_hint``) and at least
   one turn happened since the last compaction.

A "soft" hint is given from 80 % of the token or turn budget, so that an agent can checkpoint
before the hard limit (the protocol's 80 % soft cap).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import TypeVar

    T = TypeVar("T")

SOFT_FRACTION = 0.8


@dataclass(frozen=True)
class TriggerDecision:
    """Whether compaction is due, which trigger fired and why, in one line."""

    due: bool
    trigger_type: str | None
    reason: str
    hint: str | None
    tokens: int
    turns: int

    def to_dict(self) -> dict[str, object]:
        return {
            "due": self.due,
            "trigger_type": self.trigger_type,
            "reason": self.reason,
            "hint": self.hint,
            "tokens": self.tokens,
            "turns": self.turns,
        }


def compaction_due(
    tokens: int,
    turns: int,
    idle_minutes: float | None,
    *,
    token_budget: int,
    turn_budget: int,
    inactivity_minutes: float,
    semantic_hint: bool = False,
) -> TriggerDecision:
    """Apply the module docstring's rules to the counts since the last compaction."""
    if tokens >= token_budget:
        reason = f"{tokens:,} tokens since the last compaction >= budget {token_budget:,}"
        return TriggerDecision(True, "count", reason, reason, tokens, turns)
    if turns >= turn_budget:
        reason = f"{turns} turns since the last compaction >= budget {turn_budget}"
        return TriggerDecision(True, "count", reason, reason, tokens, turns)
    if turns > 0 and idle_minutes is not None and idle_minutes >= inactivity_minutes:
        reason = f"idle {idle_minutes:.0f} min >= {inactivity_minutes:g} min with {turns} turns"
        return TriggerDecision(True, "time", reason, reason, tokens, turns)
    if turns > 0 and semantic_hint:
        reason = "the harness reported a completed unit of work"
        return TriggerDecision(True, "semantic", reason, reason, tokens, turns)
    hint = None
    if tokens >= SOFT_FRACTION * token_budget:
        hint = f"{tokens:,} of {token_budget:,} tokens used: checkpoint soon"
    elif turns >= SOFT_FRACTION * turn_budget:
        hint = f"{turns} of {turn_budget} turns used: checkpoint soon"
    return TriggerDecision(False, None, "within budget", hint, tokens, turns)


def fill_budget(
    items: Sequence[T], costs: Sequence[int], budget: int | None
) -> tuple[list[T], int, int]:
    """Take ``items`` in rank order while they fit ``budget`` tokens (None: no limit).

    An item too large for what is left is skipped and later, smaller ones may still fit.

    Returns:
        (chosen items, tokens used, number skipped).
    """
    chosen: list[T] = []
    used = skipped = 0
    for item, cost in zip(items, costs, strict=True):
        if budget is not None and used + cost > budget:
            skipped += 1
            continue
        chosen.append(item)
        used += cost
    return chosen, used, skipped
