"""The load generator's pacing (``bench/server_load.py``): paced agents begin their sessions
spread over a whole cycle, so their starts arrive evenly rather than in one burst a cycle
(which is what the aligned pacing measures, on purpose)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from server_load import Plan  # noqa: E402


def _slots(plan: Plan, draws: int = 2000) -> set[int]:
    """Which of a cycle's request slots the agents' first requests fall in."""
    random.seed(7)
    return {int(plan.first_delay() / plan.interval) for _ in range(draws)}


def test_paced_sessions_begin_in_every_slot_of_a_cycle() -> None:
    plan = Plan(agents=100, turns=10, seconds=15, request_ids=True, rate=500)
    assert plan.interval == 100 / 600 and plan.cycle == 2.0
    assert _slots(plan) == set(range(12))  # starts spread: 100 in 2 s, not 100 in 0.17 s


def test_aligned_sessions_all_begin_in_the_first_slot() -> None:
    plan = Plan(agents=100, turns=10, seconds=15, request_ids=True, rate=500, aligned=True)
    assert _slots(plan) == {0}


def test_unpaced_agents_begin_at_once() -> None:
    plan = Plan(agents=100, turns=10, seconds=15, request_ids=True, rate=None)
    assert plan.cycle == 0.0 and plan.first_delay() == 0.0
