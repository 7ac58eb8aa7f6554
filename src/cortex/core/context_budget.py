"""Long-context safety: the context budget of a session, the refresh ritual and the
degrade-to-sandbox rule.

- Soft cap: 80 % of the model's context window (80,000 tokens of a 100,000 window). When a
  session's cumulative context tokens reach it, the session is forked: a fresh session that
  loads the latest checkpoint summary instead of the raw transcript.
- Refresh: every 50,000 tokens since the last refresh, a summarized memory entry is written
  and the working context restarts from it.
- Degrade to sandbox: a refusal-rate delta of 0.2 or more, or a probe severity of medium or
  higher, sends the task's next session to a sandbox with read-only tools.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cortex.errors import ValidationError

SOFT_CAP_RATIO = 0.8
REFRESH_EVERY_TOKENS = 50_000
DEGRADE_DELTA = 0.2
SEVERITIES = ("none", "low", "medium", "high", "critical")
DEGRADE_SEVERITY = "medium"
DEGRADE_ACTION = "degrade_to_sandbox"


def soft_cap(window_tokens: int) -> int:
    """The soft cap in tokens: ``floor(0.8 * window)``."""
    return int(window_tokens * SOFT_CAP_RATIO)


@dataclass(frozen=True)
class BudgetStatus:
    """A session's context tokens against its cap and refresh interval."""

    context_tokens: int
    window_tokens: int
    cap_tokens: int
    refreshed_at_tokens: int

    @property
    def cap_reached(self) -> bool:
        return self.context_tokens >= self.cap_tokens

    @property
    def refresh_due(self) -> bool:
        return self.context_tokens - self.refreshed_at_tokens >= REFRESH_EVERY_TOKENS

    @property
    def used_ratio(self) -> float:
        return self.context_tokens / self.window_tokens if self.window_tokens else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "context_tokens": self.context_tokens,
            "window_tokens": self.window_tokens,
            "cap_tokens": self.cap_tokens,
            "refreshed_at_tokens": self.refreshed_at_tokens,
            "tokens_since_refresh": self.context_tokens - self.refreshed_at_tokens,
            "cap_reached": self.cap_reached,
            "refresh_due": self.refresh_due,
            "used_ratio": round(self.used_ratio, 4),
        }


def budget_status(context_tokens: int, window_tokens: int, refreshed_at: int) -> BudgetStatus:
    return BudgetStatus(
        context_tokens, window_tokens, soft_cap(window_tokens), min(refreshed_at, context_tokens)
    )


def budget_line(service: str) -> str:
    return f"[{service}] Context budget reached"


def refresh_line(service: str, tokens_flushed: int) -> str:
    return f"[{service}] Context refresh complete (tokens_flushed={tokens_flushed})"


def safety_metrics(
    refusal_rate_window: float, baseline_refusal_rate: float, severity: str = "none"
) -> dict[str, Any]:
    """``state.safety_metrics`` of a checkpoint from a probe's rates (each in [0, 1]).

    ``delta = window - baseline``; ``action`` is ``degrade_to_sandbox`` when the delta is at
    least 0.2 or the severity is medium or higher, else ``continue``.
    """
    for name, rate in (
        ("refusal_rate_window", refusal_rate_window),
        ("baseline_refusal_rate", baseline_refusal_rate),
    ):
        if not 0.0 <= rate <= 1.0:
            raise ValidationError(f"{name} {rate!r} is out of range; use a rate in 0-1")
    if severity not in SEVERITIES:
        raise ValidationError(f"unknown severity {severity!r}; use one of {', '.join(SEVERITIES)}")
    delta = round(refusal_rate_window - baseline_refusal_rate, 4)
    degrade = delta >= DEGRADE_DELTA or SEVERITIES.index(severity) >= SEVERITIES.index(
        DEGRADE_SEVERITY
    )
    return {
        "refusal_rate_window": refusal_rate_window,
        "baseline_refusal_rate": baseline_refusal_rate,
        "delta": delta,
        "severity": severity,
        "action": DEGRADE_ACTION if degrade else "continue",
    }
