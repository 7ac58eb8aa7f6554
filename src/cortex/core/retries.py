"""Retry bookkeeping of a task: failures by type and step, what to do next, when a fixer
sub-agent is due and when to escalate to a person.

The rules, by failure type:

| type | strategy | escalates when |
| --- | --- | --- |
| transient (network, timeout) | retry the same step | the step failed 3 times |
| test_failure | diagnose, fix, retry the step | 6 consecutive failures on the step |
| resource_exhaustion | wait, increase limits, retry | 6 consecutive failures on the step |
| logic_error | roll back to the latest checkpoint, re-plan | 6 consecutive failures on the step |
| persistent | none | at once |

A fixer hint (scope: only the failing step, read-only on the task context, a 10-minute budget,
output: a suggested fix or an escalation) comes with the third consecutive failure on one step.
A success on a step resets its consecutive count; its attempt count is kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cortex.errors import ValidationError

STRATEGIES = {
    "transient": "retry the same step (at most 3 attempts)",
    "test_failure": "diagnose, fix, then retry the step",
    "resource_exhaustion": "wait, increase limits, then retry the step",
    "logic_error": "roll back to the latest checkpoint and re-plan",
    "persistent": "escalate to human review",
}
FAILURE_TYPES = tuple(STRATEGIES)
TRANSIENT_MAX_ATTEMPTS = 3
FIXER_AFTER = 3
ESCALATE_AFTER = 6
FIXER_TIME_BUDGET_MINUTES = 10
HISTORY_LIMIT = 50


@dataclass(frozen=True)
class RetryAdvice:
    """What to do after a failure: the strategy, and whether a fixer or a person is due."""

    step: str
    failure_type: str
    attempts: int
    consecutive: int
    strategy: str
    fixer: dict[str, Any] | None
    escalate: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "failure_type": self.failure_type,
            "attempts": self.attempts,
            "consecutive": self.consecutive,
            "strategy": self.strategy,
            "fixer": self.fixer,
            "escalate": self.escalate,
        }


@dataclass
class RetryLedger:
    """Attempts, consecutive failures and the last failures of each step of one task."""

    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)

    def record_failure(self, step: str, failure_type: str, detail: str, at: str) -> RetryAdvice:
        """Count a failure of ``step`` and return the advice for it."""
        if failure_type not in STRATEGIES:
            raise ValidationError(
                f"unknown failure type {failure_type!r}; use one of {', '.join(FAILURE_TYPES)}"
            )
        entry = self.steps.setdefault(step, {"attempts": 0, "consecutive": 0, "by_type": {}})
        entry["attempts"] += 1
        entry["consecutive"] += 1
        entry["by_type"][failure_type] = entry["by_type"].get(failure_type, 0) + 1
        entry["last_failure_at"] = at
        self.history.append({"step": step, "type": failure_type, "detail": detail, "at": at})
        del self.history[:-HISTORY_LIMIT]
        return self.advice(step, failure_type)

    def record_success(self, step: str, at: str) -> None:
        """A step that passed: its consecutive failures start again from zero."""
        entry = self.steps.setdefault(step, {"attempts": 0, "consecutive": 0, "by_type": {}})
        entry["attempts"] += 1
        entry["consecutive"] = 0
        entry["last_success_at"] = at

    def advice(self, step: str, failure_type: str) -> RetryAdvice:
        entry = self.steps.get(step) or {"attempts": 0, "consecutive": 0, "by_type": {}}
        consecutive = int(entry["consecutive"])
        escalate = (
            failure_type == "persistent"
            or (
                failure_type == "transient"
                and int(entry["by_type"].get("transient", 0)) >= TRANSIENT_MAX_ATTEMPTS
            )
            or consecutive >= ESCALATE_AFTER
        )
        fixer = None
        if consecutive >= FIXER_AFTER and not escalate:
            fixer = {
                "trigger": f"{consecutive} consecutive failures on step {step}",
                "scope": f"only step {step}",
                "permissions": "read-only on the task context",
                "output": "a suggested fix or an escalation",
                "time_budget_minutes": FIXER_TIME_BUDGET_MINUTES,
            }
        return RetryAdvice(
            step=step,
            failure_type=failure_type,
            attempts=int(entry["attempts"]),
            consecutive=consecutive,
            strategy=STRATEGIES["persistent"] if escalate else STRATEGIES[failure_type],
            fixer=fixer,
            escalate=escalate,
        )

    def to_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "history": self.history}

    @classmethod
    def from_dict(cls, data: Any) -> RetryLedger:
        if not isinstance(data, dict):
            return cls()
        steps = data.get("steps") if isinstance(data.get("steps"), dict) else {}
        history = data.get("history") if isinstance(data.get("history"), list) else []
        clean_steps = {
            str(k): {
                "attempts": int(v.get("attempts", 0)),
                "consecutive": int(v.get("consecutive", 0)),
                "by_type": dict(v.get("by_type") or {}),
                **{t: v[t] for t in ("last_failure_at", "last_success_at") if t in v},
            }
            for k, v in (steps or {}).items()
            if isinstance(v, dict)
        }
        return cls(clean_steps, [h for h in history or [] if isinstance(h, dict)])
