"""Scoring one start's injected text against what was true at that moment, the two baselines
computed from the same stream, and confidence intervals.

A start of project ``p`` at time ``t`` should get:

- every task of ``p`` added before ``t`` and neither done nor abandoned by then (pending recall);
- every CRITICAL pin of ``p`` current at ``t`` (not changed, not removed) (CRITICAL-pin recall);
- no pin other than the current pins of ``p`` (pin precision: share of injected pins current);
- nothing of another project (a leak: another project's reference or vocabulary word);
- no old value of a pin that was changed before ``t`` (superseded facts injected);
- no credential (secrets injected), in few tokens (``cortex.core.tokens.estimate_tokens``).
"""

from __future__ import annotations

import math
import random
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from generate import Item, Scenario

from cortex.core.tokens import estimate_tokens

_REF = re.compile(r"\bref[a-z]{6}\b")
_WORD = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class StartScore:
    """One start, scored. Counts rather than ratios, so that aggregates pool them."""

    tasks_expected: int
    tasks_found: int
    critical_expected: int
    critical_found: int
    pins_injected: int
    pins_current: int
    leaks: int
    superseded: int
    secrets: int
    tokens: int


class Truth:
    """What was current when, for one scenario."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.by_ref = {item.ref: item for item in scenario.items}
        self.words = [set(v) | {scenario.projects[i]} for i, v in enumerate(scenario.vocab)]

    def _live(self, item: Item, t: datetime) -> bool:
        life = self.scenario.life
        return all(
            ended.get(item.ref) is None or ended[item.ref] >= t
            for ended in (life.closed, life.superseded, life.removed)
        )

    def score(self, text: str, project: int, t: datetime) -> StartScore:
        """Score the text a start of ``project`` at ``t`` injected."""
        refs = {self.by_ref[r] for r in _REF.findall(text) if r in self.by_ref}
        before = [i for i in self.scenario.items if i.project == project and i.at < t]
        tasks = {i.ref for i in before if i.kind == "task" and self._live(i, t)}
        critical = {i.ref for i in before if i.kind == "pin" and i.critical and self._live(i, t)}
        pins = [i for i in refs if i.kind == "pin"]
        life = self.scenario.life
        words = set(_WORD.findall(text.lower()))
        other_words = set().union(*(w for k, w in enumerate(self.words) if k != project))
        leaks = sum(1 for i in refs if i.project != project) + len(words & other_words)
        found = {i.ref for i in refs}
        return StartScore(
            tasks_expected=len(tasks),
            tasks_found=len(tasks & found),
            critical_expected=len(critical),
            critical_found=len(critical & found),
            pins_injected=len(pins),
            pins_current=sum(1 for i in pins if i.project == project and self._live(i, t)),
            leaks=leaks,
            superseded=sum(
                1 for i in pins if i.ref in life.superseded and life.superseded[i.ref] < t
            ),
            secrets=sum(1 for at, s in self.scenario.secrets if at < t and _shows(s, text)),
            tokens=estimate_tokens(text) if text else 0,
        )


def _shows(secret: str, text: str, window: int = 16) -> bool:
    """``text`` holds ``secret`` or any ``window`` characters of it (a part is a leak too)."""
    size = min(window, len(secret))
    return any(secret[i : i + size] in text for i in range(len(secret) - size + 1))


def _item_text(item: Item) -> str:
    body = f"{item.label}: {item.text}" if item.label else item.text
    return f"{body} ({item.ref})"


def recency_text(scenario: Scenario, t: datetime, n: int) -> str:
    """Baseline "last N by recency": the last ``n`` captured items of any project, as
    captured (a store that keeps what it is given, unredacted), newest last."""
    before = [i for i in scenario.items if i.at < t]
    return "\n".join(_item_text(i) for i in before[-n:]) if n else ""


# -- aggregation ---------------------------------------------------------------------------------
def wilson(successes: int, total: int, z: float = 1.96) -> tuple[float, float, float]:
    """Share and its Wilson score interval, in percent; (nan, nan, nan) when total is 0."""
    if total == 0:
        return (math.nan, math.nan, math.nan)
    p = successes / total
    denom = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    low, high = round(max(0.0, centre - half), 6), round(min(1.0, centre + half), 6)
    return (100 * p, 100 * low, 100 * high)


def bootstrap(
    values: Sequence[float], stat: str = "mean", runs: int = 1000, seed: int = 7
) -> tuple[float, float, float]:
    """``stat`` (mean | p50 | p95) of ``values`` and its 95 % percentile-bootstrap interval."""
    if not values:
        return (math.nan, math.nan, math.nan)

    def of(xs: Sequence[float]) -> float:
        if stat == "mean":
            return statistics.fmean(xs)
        ordered = sorted(xs)
        q = 0.5 if stat == "p50" else 0.95
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    rng = random.Random(seed)
    samples = sorted(of([rng.choice(values) for _ in values]) for _ in range(runs))
    return (of(values), samples[int(0.025 * runs)], samples[int(0.975 * runs) - 1])


def aggregate(scores: Sequence[StartScore]) -> dict[str, tuple[float, float, float]]:
    """The table's row: pooled shares with Wilson intervals, means with bootstrap ones."""

    def total(name: str) -> int:
        return sum(int(getattr(s, name)) for s in scores)

    return {
        "pending_task_recall": wilson(total("tasks_found"), total("tasks_expected")),
        "critical_pin_recall": wilson(total("critical_found"), total("critical_expected")),
        "pin_precision": wilson(total("pins_current"), total("pins_injected")),
        "starts_with_leak": wilson(sum(1 for s in scores if s.leaks), len(scores)),
        "superseded_injected": (float(total("superseded")), math.nan, math.nan),
        "secrets_injected": (float(total("secrets")), math.nan, math.nan),
        "tokens_mean": bootstrap([float(s.tokens) for s in scores]),
        "tokens_max": (float(max((s.tokens for s in scores), default=0)), math.nan, math.nan),
    }
