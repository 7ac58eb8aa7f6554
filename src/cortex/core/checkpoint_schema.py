"""The checkpoint schema, checked: exactly the protocol's eleven keys, their types, the typed
parts of ``state`` and what each mandatory checkpoint must carry.

``state`` may hold more than the protocol's ``files_changed``, ``tests``, ``decisions`` and
``safety_metrics`` (a pre-compaction checkpoint adds pins, pending tasks and rules); those four,
when present, must have the protocol's shape.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime

from cortex.core.history_models import Checkpoint
from cortex.errors import ValidationError

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

CHECKPOINT_KEYS = (
    "checkpoint_id",
    "session_id",
    "timestamp",
    "gate",
    "step",
    "type",
    "summary",
    "state",
    "next_steps",
    "can_resume",
    "resume_instructions",
)
CHECKPOINT_TYPES = (
    "manual",
    "pre_compaction",
    "session_end",
    "gate_transition",
    "decision",
    "file_change",
    "error_recovery",
    "interrupted",
)
MANDATORY_CONTENT = {
    "gate_transition": "a gate and state.decisions (full state + decisions)",
    "decision": "state.decisions, each with a rationale and alternatives_considered",
    "file_change": "state.files_changed and a summary",
    "error_recovery": "state.error and state.resolution",
    "session_end": "a summary (the full session summary)",
}
FILE_ACTIONS = ("created", "modified", "deleted", "renamed")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+-]{0,127}")
_GATE = re.compile(r"G(?:[0-9]|10)")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _top_level(data: Mapping[str, Any]) -> list[str]:
    problems = [f"missing key {k!r}" for k in CHECKPOINT_KEYS if k not in data]
    problems += [f"unknown key {k!r}" for k in data if k not in CHECKPOINT_KEYS]
    cid = data.get("checkpoint_id")
    if "checkpoint_id" in data and not (
        isinstance(cid, str) and _ID.fullmatch(cid) and ".." not in cid
    ):
        problems.append("checkpoint_id must be 1-128 of letters, digits, . _ : @ + - (no '..')")
    checks: tuple[tuple[str, bool, str], ...] = (
        (
            "session_id",
            isinstance(data.get("session_id"), str) and bool(data.get("session_id")),
            "a non-empty string",
        ),
        ("timestamp", _is_time(data.get("timestamp")), "an ISO 8601 time"),
        (
            "gate",
            data.get("gate") is None or bool(_GATE.fullmatch(str(data.get("gate")))),
            "null or G0..G10",
        ),
        (
            "step",
            data.get("step") is None or (_is_int(data["step"]) and data["step"] >= 0),
            "null or an integer >= 0",
        ),
        ("type", data.get("type") in CHECKPOINT_TYPES, f"one of {', '.join(CHECKPOINT_TYPES)}"),
        ("summary", isinstance(data.get("summary"), str), "a string"),
        ("state", isinstance(data.get("state"), dict), "an object"),
        ("next_steps", _is_str_list(data.get("next_steps")), "a list of strings"),
        ("can_resume", isinstance(data.get("can_resume"), bool), "true or false"),
        ("resume_instructions", isinstance(data.get("resume_instructions"), str), "a string"),
    )
    problems += [f"{key} must be {what}" for key, ok, what in checks if key in data and not ok]
    return problems


def _is_time(value: Any) -> bool:
    if not isinstance(value, str) or len(value) < 10:
        return False
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _state_parts(state: Mapping[str, Any]) -> list[str]:
    """Problems of the typed parts of ``state``."""
    problems: list[str] = []
    files = state.get("files_changed")
    if files is not None and not (
        isinstance(files, list)
        and all(
            isinstance(f, dict)
            and isinstance(f.get("path"), str)
            and f.get("action") in FILE_ACTIONS
            for f in files
        )
    ):
        problems.append(
            "state.files_changed must be a list of {path, action} with action one of "
            + ", ".join(FILE_ACTIONS)
        )
    tests = state.get("tests")
    if tests is not None and not (
        isinstance(tests, dict)
        and all(_is_int(tests.get(k)) and tests[k] >= 0 for k in ("passing", "failing", "pending"))
    ):
        problems.append("state.tests must be {passing, failing, pending}, integers >= 0")
    decisions = state.get("decisions")
    if decisions is not None and not (
        isinstance(decisions, list) and all(_is_decision(d) for d in decisions)
    ):
        problems.append(
            "state.decisions must be a list of {decision, rationale?, alternatives_considered?}"
        )
    metrics = state.get("safety_metrics")
    if metrics is not None and not _is_safety(metrics):
        problems.append(
            "state.safety_metrics must be {refusal_rate_window, baseline_refusal_rate, delta: "
            "numbers, action: text}"
        )
    return problems


def _is_decision(d: Any) -> bool:
    return (
        isinstance(d, dict)
        and isinstance(d.get("decision"), str)
        and isinstance(d.get("rationale", ""), str)
        and _is_str_list(d.get("alternatives_considered", []))
    )


def _is_safety(m: Any) -> bool:
    return (
        isinstance(m, dict)
        and all(
            _is_number(m.get(k)) for k in ("refusal_rate_window", "baseline_refusal_rate", "delta")
        )
        and isinstance(m.get("action"), str)
    )


def _mandatory(data: Mapping[str, Any]) -> list[str]:
    """What the checkpoint's type requires of it, per the mandatory-checkpoint table."""
    kind, state = data.get("type"), data.get("state") or {}
    summary = str(data.get("summary") or "").strip()
    missing = {
        "gate_transition": data.get("gate") is None or "decisions" not in state,
        "decision": not state.get("decisions")
        or not all(
            isinstance(d, dict) and d.get("rationale") and "alternatives_considered" in d
            for d in state.get("decisions") or []
        ),
        "file_change": not state.get("files_changed") or not summary,
        "error_recovery": not state.get("error") or not state.get("resolution"),
        "session_end": not summary,
    }
    if isinstance(kind, str) and missing.get(kind):
        return [f"a {kind} checkpoint must carry {MANDATORY_CONTENT[kind]}"]
    return []


def checkpoint_problems(data: Any) -> list[str]:
    """Everything wrong with ``data`` as a checkpoint; empty when it is valid."""
    if not isinstance(data, dict):
        return [f"a checkpoint is a JSON object, not {type(data).__name__}"]
    problems = _top_level(data)
    if isinstance(data.get("state"), dict):
        problems += _state_parts(data["state"])
    return problems or _mandatory(data)


def validated_checkpoint(data: Any, where: str = "checkpoint") -> Checkpoint:
    """``data`` as a ``Checkpoint`` when it passes the schema.

    Raises:
        ValidationError: one line naming the first problem (and how many more there are).
    """
    problems = checkpoint_problems(data)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ValidationError(f"{where} fails the checkpoint schema: {problems[0]}{more}")
    return Checkpoint.from_dict(data)
