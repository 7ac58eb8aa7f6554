"""The protocol's pure rules: lifecycle transitions, the checkpoint schema, gates, slugs,
retry bookkeeping, context budgets and the safety rule (their tables are the test data)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cortex.core.checkpoint_schema import checkpoint_problems, validated_checkpoint
from cortex.core.context_budget import budget_status, safety_metrics, soft_cap
from cortex.core.lifecycle import (
    check_gate,
    check_slug,
    check_transition,
    format_log_entry,
    missing_gate_content,
)
from cortex.core.models import SESSION_STATES
from cortex.core.retries import RetryLedger
from cortex.errors import ConflictError, UnsafeIdError, ValidationError

DRAWN = {
    ("INIT", "ACTIVE"),
    ("INIT", "SUSPENDED"),
    ("ACTIVE", "COMPLETE"),
    ("ACTIVE", "SUSPENDED"),
    ("COMPLETE", "SUSPENDED"),
    ("SUSPENDED", "TERMINATED"),
}

SPEC_EXAMPLE: dict[str, Any] = {
    "checkpoint_id": "ckpt-2025-12-04-001",
    "session_id": "session-abc123",
    "timestamp": "2025-12-04T10:30:00Z",
    "gate": "G4",
    "step": 3,
    "type": "gate_transition",
    "summary": "Completed unit test implementation",
    "state": {
        "files_changed": [
            {"path": "src/auth.ts", "action": "modified"},
            {"path": "tests/auth.test.ts", "action": "created"},
        ],
        "tests": {"passing": 12, "failing": 0, "pending": 2},
        "decisions": [
            {
                "decision": "Use JWT for session tokens",
                "rationale": "Stateless, industry standard",
                "alternatives_considered": ["Session cookies", "OAuth opaque tokens"],
            }
        ],
    },
    "next_steps": ["Implement refresh token logic", "Add rate limiting"],
    "can_resume": True,
    "resume_instructions": "Continue from G4 step 4, implement refresh tokens",
}


@pytest.mark.parametrize("current", SESSION_STATES)
@pytest.mark.parametrize("target", SESSION_STATES)
def test_only_the_drawn_transitions_are_allowed(current: str, target: str) -> None:
    if (current, target) in DRAWN:
        assert check_transition("s1", current, target) == target
    else:
        with pytest.raises(ConflictError, match=f"session s1 cannot go from {current} to {target}"):
            check_transition("s1", current, target)


def test_a_terminated_session_names_no_way_out() -> None:
    with pytest.raises(ConflictError, match="allowed from TERMINATED: none"):
        check_transition("s1", "TERMINATED", "ACTIVE")


def test_the_spec_example_passes_the_schema_and_round_trips() -> None:
    assert checkpoint_problems(SPEC_EXAMPLE) == []
    assert validated_checkpoint(SPEC_EXAMPLE).to_dict() == SPEC_EXAMPLE


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda d: d.pop("summary"), "missing key 'summary'"),
        (lambda d: d.update(extra=1), "unknown key 'extra'"),
        (lambda d: d.update(gate="G11"), "gate must be null or G0..G10"),
        (lambda d: d.update(step=-1), "step must be null or an integer >= 0"),
        (lambda d: d.update(step=True), "step must be null or an integer >= 0"),
        (lambda d: d.update(type="nap"), "type must be one of"),
        (lambda d: d.update(timestamp="yesterday"), "timestamp must be an ISO 8601 time"),
        (lambda d: d.update(can_resume="yes"), "can_resume must be true or false"),
        (lambda d: d.update(next_steps=[1]), "next_steps must be a list of strings"),
        (lambda d: d.update(checkpoint_id="../x"), "checkpoint_id must be"),
        (lambda d: d["state"]["tests"].update(failing=-1), "state.tests must be"),
        (lambda d: d["state"]["files_changed"].append({"path": "a"}), "state.files_changed"),
        (lambda d: d["state"].update(decisions=["x"]), "state.decisions must be"),
        (lambda d: d["state"].update(safety_metrics={"delta": "big"}), "state.safety_metrics"),
    ],
)
def test_schema_problems_are_named(change: Any, problem: str) -> None:
    data = copy.deepcopy(SPEC_EXAMPLE)
    change(data)
    problems = checkpoint_problems(data)
    assert any(problem in p for p in problems), problems
    with pytest.raises(ValidationError, match="fails the checkpoint schema"):
        validated_checkpoint(data)


@pytest.mark.parametrize(
    ("kind", "state", "summary", "gate", "ok"),
    [
        ("gate_transition", {"decisions": []}, "", "G1", True),
        ("gate_transition", {}, "", "G1", False),
        ("gate_transition", {"decisions": []}, "", None, False),
        ("decision", {"decisions": [{"decision": "a"}]}, "", None, False),
        (
            "decision",
            {"decisions": [{"decision": "a", "rationale": "b", "alternatives_considered": []}]},
            "",
            None,
            True,
        ),
        ("file_change", {"files_changed": [{"path": "a", "action": "created"}]}, "x", None, True),
        ("file_change", {"files_changed": []}, "x", None, False),
        ("error_recovery", {"error": "boom", "resolution": "retry"}, "", None, True),
        ("error_recovery", {"error": "boom"}, "", None, False),
        ("session_end", {}, "done", None, True),
        ("session_end", {}, " ", None, False),
        ("manual", {}, "", None, True),
    ],
)
def test_mandatory_checkpoints_carry_their_content(
    kind: str, state: dict[str, Any], summary: str, gate: str | None, ok: bool
) -> None:
    data = SPEC_EXAMPLE | {"type": kind, "state": state, "summary": summary, "gate": gate}
    assert (checkpoint_problems(data) == []) is ok


@pytest.mark.parametrize("bad", [None, [], "x", 3])
def test_a_checkpoint_is_an_object(bad: Any) -> None:
    assert checkpoint_problems(bad) == [f"a checkpoint is a JSON object, not {type(bad).__name__}"]


def test_gates_and_their_content() -> None:
    assert check_gate("g4") == "G4"
    with pytest.raises(ValidationError, match="unknown gate 'G11'"):
        check_gate("G11")
    assert missing_gate_content("G4", {"files_changed": [{"path": "a"}]}) == ["tests"]
    assert missing_gate_content("G0", {"definition": "x", "acceptance_criteria": ["y"]}) == []


@pytest.mark.parametrize("slug", ["a", "feat-user-auth", "v1.2_fix", "x" * 80])
def test_good_slugs(slug: str) -> None:
    assert check_slug(slug) == slug


@pytest.mark.parametrize(
    "slug", ["", "../etc", "a/b", "/abs", "a..b", "Upper", "-lead", ".hidden", "x" * 81, "a b"]
)
def test_bad_slugs(slug: str) -> None:
    with pytest.raises(UnsafeIdError, match="invalid task slug"):
        check_slug(slug)


@given(st.text(max_size=100))
def test_an_accepted_slug_never_leaves_its_directory(slug: str) -> None:
    try:
        check_slug(slug)
    except UnsafeIdError:
        return
    assert "/" not in slug and ".." not in slug and "\x00" not in slug and slug[0] != "."


def test_three_consecutive_failures_bring_a_fixer_hint_six_escalate() -> None:
    ledger = RetryLedger()
    advice = [ledger.record_failure("G4-3", "test_failure", "red", f"t{i}") for i in range(6)]
    assert [a.fixer is not None for a in advice] == [False, False, True, True, True, False]
    assert [a.escalate for a in advice] == [False] * 5 + [True]
    assert advice[2].fixer == {
        "trigger": "3 consecutive failures on step G4-3",
        "scope": "only step G4-3",
        "permissions": "read-only on the task context",
        "output": "a suggested fix or an escalation",
        "time_budget_minutes": 10,
    }


def test_transient_failures_escalate_after_three_attempts_and_success_resets() -> None:
    ledger = RetryLedger()
    first = ledger.record_failure("net", "transient", "", "t1")
    assert (first.escalate, first.strategy) == (False, "retry the same step (at most 3 attempts)")
    ledger.record_failure("net", "transient", "", "t2")
    ledger.record_success("net", "t3")
    third = ledger.record_failure("net", "transient", "", "t4")
    assert third.escalate and third.consecutive == 1 and third.attempts == 4
    again = RetryLedger.from_dict(ledger.to_dict())
    assert again.steps == ledger.steps


def test_persistent_failure_escalates_at_once() -> None:
    advice = RetryLedger().record_failure("s", "persistent", "", "t")
    assert advice.escalate and advice.strategy == "escalate to human review"
    with pytest.raises(ValidationError, match="unknown failure type"):
        RetryLedger().record_failure("s", "cosmic_ray", "", "t")


@pytest.mark.parametrize(("window", "cap"), [(100_000, 80_000), (200_000, 160_000)])
def test_soft_cap_is_80_percent(window: int, cap: int) -> None:
    assert soft_cap(window) == cap


def test_budget_refresh_every_50k_and_cap() -> None:
    assert not budget_status(49_999, 200_000, 0).refresh_due
    assert budget_status(50_000, 200_000, 0).refresh_due
    assert not budget_status(90_000, 200_000, 50_000).refresh_due
    assert budget_status(160_000, 200_000, 150_000).cap_reached
    assert not budget_status(159_999, 200_000, 150_000).cap_reached


def test_safety_metrics_of_the_spec_example_degrade() -> None:
    assert safety_metrics(0.38, 0.08) == {
        "refusal_rate_window": 0.38,
        "baseline_refusal_rate": 0.08,
        "delta": 0.3,
        "severity": "none",
        "action": "degrade_to_sandbox",
    }
    assert safety_metrics(0.1, 0.08)["action"] == "continue"
    assert safety_metrics(0.1, 0.08, "medium")["action"] == "degrade_to_sandbox"
    with pytest.raises(ValidationError, match="out of range"):
        safety_metrics(1.5, 0.0)


def test_the_log_entry_template() -> None:
    assert format_log_entry("2026-02-16", "1h 05m", "auth", "JWT", "", "refresh") == (
        "## Session 2026-02-16 (1h 05m)\n\n**Goal**: auth\n**Completed**: JWT\n"
        "**Blocked**: none\n**Next**: refresh\n"
    )


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)


@given(JSON)
def test_any_json_is_judged_never_crashes(data: Any) -> None:
    problems = checkpoint_problems(data)
    assert isinstance(problems, list) and all(isinstance(p, str) for p in problems)


@given(st.dictionaries(st.sampled_from(sorted(SPEC_EXAMPLE)), JSON, max_size=11))
def test_a_mutated_checkpoint_is_judged_never_crashes(changes: dict[str, Any]) -> None:
    data = SPEC_EXAMPLE | changes
    problems = checkpoint_problems(data)
    if not problems:
        assert validated_checkpoint(data).checkpoint_id == data["checkpoint_id"]
