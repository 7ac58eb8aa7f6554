"""The continuity protocol's pure rules: session states, gates, task slugs, the evidence lines
and the implementation-log entry.

Session states and the only transitions allowed between them::

    INIT ──▶ ACTIVE ──▶ COMPLETE
      │        │           │
      └──────▶ SUSPENDED ◀─┘
                  │
                  ▼
              TERMINATED

A harness reopening the same session id (a resumed conversation) is the core's resume, not a
lifecycle transition: it is outside this table (see ``docs/protocol.md``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cortex.core.models import ACTIVE, COMPLETE, INIT, SUSPENDED, TERMINATED
from cortex.errors import ConflictError, UnsafeIdError, ValidationError

TRANSITIONS: dict[str, tuple[str, ...]] = {
    INIT: (ACTIVE, SUSPENDED),
    ACTIVE: (COMPLETE, SUSPENDED),
    COMPLETE: (SUSPENDED,),
    SUSPENDED: (TERMINATED,),
    TERMINATED: (),
}


def can_transition(current: str, target: str) -> bool:
    """Whether the lifecycle draws an arrow from ``current`` to ``target``."""
    return target in TRANSITIONS.get(current.upper(), ())


def check_transition(session_id: str, current: str, target: str) -> str:
    """Return ``target`` when ``current -> target`` is allowed.

    Raises:
        ConflictError: one line naming the states the session may go to instead.
    """
    current, target = current.upper(), target.upper()
    if target not in TRANSITIONS:
        raise ValidationError(
            f"unknown session state {target!r}; use one of {', '.join(TRANSITIONS)}"
        )
    if not can_transition(current, target):
        allowed = ", ".join(TRANSITIONS.get(current, ())) or "none (it is final)"
        raise ConflictError(
            f"session {session_id} cannot go from {current} to {target}; "
            f"allowed from {current}: {allowed}"
        )
    return target


# -- gates ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Gate:
    """One gate of a task and what its checkpoint must carry (``state`` keys)."""

    id: str
    name: str
    content: str
    required: tuple[str, ...]


GATES: tuple[Gate, ...] = (
    Gate(
        "G0",
        "Task Init",
        "task definition, acceptance criteria",
        ("definition", "acceptance_criteria"),
    ),
    Gate("G1", "Research", "research findings, approach decision", ("findings", "decisions")),
    Gate("G2", "Planning", "TDD plan, implementation checklist", ("plan", "checklist")),
    Gate(
        "G3", "Scaffold", "file structure, interface definitions", ("files_changed", "interfaces")
    ),
    Gate("G4", "Implementation", "code changes, test status", ("files_changed", "tests")),
    Gate("G5", "Verification", "quality gate results, coverage", ("quality_gates", "coverage")),
    Gate("G6", "Review", "review feedback, resolutions", ("review_feedback", "resolutions")),
    Gate("G7", "Documentation", "docs updated, changelog entry", ("docs_updated", "changelog")),
    Gate("G8", "Deploy", "deployment evidence", ("deployment_evidence",)),
    Gate("G9", "Deploy", "deployment evidence", ("deployment_evidence",)),
    Gate("G10", "Archive", "final summary, lessons learned", ("final_summary", "lessons_learned")),
)
GATES_BY_ID = {g.id: g for g in GATES}
GATE_IDS = tuple(GATES_BY_ID)


def check_gate(gate: str) -> str:
    """The canonical gate id (``g4`` -> ``G4``); ValidationError for anything else."""
    canonical = gate.strip().upper() if isinstance(gate, str) else ""
    if canonical not in GATES_BY_ID:
        raise ValidationError(f"unknown gate {gate!r}; use one of G0..G10, e.g. G4")
    return canonical


def gate_index(gate: str) -> int:
    """0 for G0 ... 10 for G10."""
    return GATE_IDS.index(check_gate(gate))


def missing_gate_content(gate: str, state: dict[str, object]) -> list[str]:
    """The ``state`` keys a gate-transition checkpoint into ``gate`` lacks (empty: complete)."""
    return [key for key in GATES_BY_ID[check_gate(gate)].required if not state.get(key)]


# -- task slugs ----------------------------------------------------------------------------------
_SLUG = re.compile(r"[a-z0-9][a-z0-9._-]{0,79}")


def check_slug(slug: str) -> str:
    """``slug`` when it is safe as one directory name: 1-80 of a-z 0-9 . _ -, starting with a
    letter or digit, no ``..``."""
    if not isinstance(slug, str) or not _SLUG.fullmatch(slug) or ".." in slug:
        raise UnsafeIdError(
            f"invalid task slug {str(slug)[:60]!r}: use 1-80 lowercase letters, digits, '.', "
            "'_' or '-', starting with a letter or digit (no '/', no '..'), e.g. feat-user-auth"
        )
    return slug


# -- evidence lines and the log entry ------------------------------------------------------------
def start_line(service: str, session_id: str, checkpoint_id: str | None) -> str:
    return f"[{service}] Session start: {session_id} resuming from {checkpoint_id or 'none'}"


def health_line(service: str, passed: bool) -> str:
    return f"[{service}] Health check: {'pass' if passed else 'fail'}"


def checkpoint_line(service: str, checkpoint_id: str) -> str:
    return f"[{service}] Checkpoint created: {checkpoint_id}"


def end_line(service: str, session_id: str, outcome: str) -> str:
    return f"[{service}] Session end: {session_id} outcome={outcome}"


def goal_line(service: str, goal: str) -> str:
    return f"[{service}] Session starting: {goal}"


def format_duration(seconds: float) -> str:
    """``1h 05m``, ``12m``, ``40s``: the duration in a log entry's heading."""
    total = max(0, int(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m" if minutes else f"{secs}s"


def format_log_entry(
    date: str,
    duration: str,
    goal: str,
    completed: str,
    blocked: str,
    next_steps: str,
    checkpoint_id: str = "",
) -> str:
    """One implementation-log entry in the protocol's template (with the session-end
    checkpoint's id, by which a rerun of the ritual knows its entry is written)."""
    return (
        f"## Session {date} ({duration})\n\n"
        f"**Goal**: {goal or '-'}\n"
        f"**Completed**: {completed or '-'}\n"
        f"**Blocked**: {blocked or 'none'}\n"
        f"**Next**: {next_steps or '-'}\n"
    ) + (f"**Checkpoint**: {checkpoint_id}\n" if checkpoint_id else "")
