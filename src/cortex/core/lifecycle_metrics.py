"""Lifecycle metrics: the memory lifecycle's events on the metrics chain, summed per day.

Pure: metrics events in, a report out. Per UTC day: sessions ended (``session_captured``,
crash-recovered ones counted apart), sessions the worker closed for inactivity
(``session_idle_closed``), compactions with what they kept (``compaction_loss``: the mean
share of the context's tokens a checkpoint kept, decisions stated but not kept), and
consolidation runs with their merged, superseded and conflicted counts
(``consolidation_run``; applied runs only for the counts, shadow runs counted apart). The
conflicts found per applied run, day by day, is the contradiction trend.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cortex.core.models import MetricEvent

LIFECYCLE_EVENTS = (
    "session_captured",
    "session_idle_closed",
    "compaction_loss",
    "consolidation_run",
)


@dataclass
class DayStats:
    """One day's lifecycle counts (an accumulator: ``record`` each event)."""

    day: str
    sessions: int = 0
    crash_recovered: int = 0
    idle_closed: int = 0
    compactions: int = 0
    kept_ratio_sum: float = 0.0
    decisions_lost: int = 0
    consolidation_runs: int = 0
    shadow_runs: int = 0
    merged: int = 0
    superseded: int = 0
    conflicted: int = 0
    promoted: int = 0
    extra: dict[str, int] = field(default_factory=dict)

    def record(self, event: MetricEvent) -> None:
        p = event.payload
        if event.event == "session_captured":
            self.sessions += 1
            self.crash_recovered += bool(p.get("crash_recovered"))
        elif event.event == "session_idle_closed":
            self.idle_closed += 1
        elif event.event == "compaction_loss":
            self.compactions += 1
            self.kept_ratio_sum += float(p.get("kept_ratio", 1.0))
            self.decisions_lost += int(p.get("decisions_lost", 0))
        elif event.event == "consolidation_run" and p.get("mode") == "shadow":
            self.shadow_runs += 1
        elif event.event == "consolidation_run":
            self.consolidation_runs += 1
            self.merged += int(p.get("merged_count", 0))
            self.superseded += int(p.get("superseded_count", 0))
            self.conflicted += int(p.get("conflicted_count", 0))
            self.promoted += int(p.get("promoted_count", 0))

    def to_dict(self) -> dict[str, Any]:
        mean = self.kept_ratio_sum / self.compactions if self.compactions else None
        return {
            "day": self.day,
            "sessions": self.sessions,
            "crash_recovered": self.crash_recovered,
            "idle_closed": self.idle_closed,
            "compactions": self.compactions,
            "mean_kept_ratio": None if mean is None else round(mean, 4),
            "decisions_lost": self.decisions_lost,
            "consolidation_runs": self.consolidation_runs,
            "shadow_runs": self.shadow_runs,
            "merged": self.merged,
            "superseded": self.superseded,
            "conflicted": self.conflicted,
            "promoted": self.promoted,
        }


def lifecycle_report(events: Iterable[MetricEvent], since: str) -> dict[str, Any]:
    """Per-day lifecycle counts of ``events`` created at or after ``since`` (ISO), oldest day
    first, with totals and the contradiction trend (conflicts per applied run, per day)."""
    days: dict[str, DayStats] = {}
    total = DayStats("total")
    for event in events:
        if event.event not in LIFECYCLE_EVENTS or event.created_at < since:
            continue
        day = event.created_at[:10]
        days.setdefault(day, DayStats(day)).record(event)
        total.record(event)
    ordered = [days[d] for d in sorted(days)]
    trend = [
        {"day": d.day, "conflicts_per_run": round(d.conflicted / d.consolidation_runs, 3)}
        for d in ordered
        if d.consolidation_runs
    ]
    return {
        "since": since,
        "days": [d.to_dict() for d in ordered],
        "totals": total.to_dict() | {"day": None},
        "contradiction_trend": trend,
    }
