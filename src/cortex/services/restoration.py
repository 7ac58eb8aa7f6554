"""Restoration planning: what a new session inherits.

Pure, in two steps with the session service's I/O between them: ``select_contributors``
scores the candidate prior sessions (loaded with their CRITICAL pins only) against the new
session's keywords and picks the contributors; the service then loads all the pins of the
one or two sessions whose standard pins may pass on; ``plan_restoration`` decides which pins
are inherited (decayed, provenance-labelled, capped), which tasks are still pending, and the
preamble. Every decision is recorded as a reason so a user can ask why
(``cortex session start --explain``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from cortex.clock import hours_between
from cortex.config import Config
from cortex.core.decay import apply_decay
from cortex.core.models import PendingTask, Pin, ScoredSession, SessionState
from cortex.core.pins import InheritDecision, inherited_copy, merge_inherited
from cortex.core.preamble import format_preamble, unique_casefold
from cortex.core.scoring import format_breakdown, score_all, session_age_hours
from cortex.core.tasks import merge_tasks, still_pending

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

STANDARD_PIN_MIN_SCORE = 0.4
"""Standard pins of sessions other than the most recent qualifying one need this score."""

UNKNOWN_PIPELINE: Mapping[str, dict[str, Any]] = {"__unknown__": {}}
"""Pass as ``pipeline`` when the pipeline file is unreadable: tasks are then kept unfiltered."""


@dataclass(frozen=True)
class DecayRecord:
    """One pin evaluated for inheritance: the ``confidence_decay_applied`` metric's fields."""

    memory_id: str
    original_confidence: float
    decayed_confidence: float
    hours_elapsed: float
    excluded: bool


@dataclass(frozen=True)
class RestorePlan:
    """The outcome of planning; empty ``scored`` and no CRITICAL pins means a cold start."""

    scored: tuple[ScoredSession, ...]
    contributors: tuple[SessionState, ...]
    pins: tuple[Pin, ...]
    inherited: tuple[Pin, ...]
    decisions: tuple[InheritDecision, ...]
    decay: tuple[DecayRecord, ...]
    pending_tasks: tuple[PendingTask, ...]
    task_ages: Mapping[str, str]
    hot_topics: tuple[str, ...]
    active_projects: tuple[str, ...]
    preamble: str | None
    explain: tuple[str, ...] = field(default=())

    @property
    def is_cold(self) -> bool:
        return not self.contributors

    def score_of(self, session_id: str) -> float:
        """The relevance score of ``session_id`` (0.0 for a CRITICAL-only or forced source)."""
        for scored in self.scored:
            if scored.session.session_id == session_id:
                return scored.score
        return 0.0


def _stamp(iso: str | None) -> str:
    """Compact provenance time: ``2026-02-18T09:00Z``."""
    return (iso or "")[:16] + "Z" if iso else "unknown"


def _candidate_pins(
    sessions: Sequence[SessionState],
    now: datetime,
    config: Config,
    *,
    kind: str,
    use_floor: bool = True,
) -> tuple[list[Pin], list[DecayRecord]]:
    """Decayed, provenance-labelled copies of the sessions' pins, newest label wins.

    ``kind`` is ``critical`` (CRITICAL pins only), ``standard`` (the others) or ``all``.
    """
    out: list[Pin] = []
    records: list[DecayRecord] = []
    seen: set[str] = set()
    for session in sessions:
        if not session.working_memory:  # most candidates hold no CRITICAL pin: no age needed
            continue
        hours = session_age_hours(session, now)
        for pin in session.working_memory:
            if (kind == "critical" and not pin.is_critical) or (
                kind == "standard" and pin.is_critical
            ):
                continue
            decayed = apply_decay(pin.confidence, hours, config.decay_min_floor)
            excluded = use_floor and not pin.is_critical and decayed < config.decay_min_floor
            records.append(
                DecayRecord(
                    f"{session.session_id}:{pin.label}",
                    pin.confidence,
                    round(decayed, 4),
                    round(hours, 2),
                    excluded,
                )
            )
            key = pin.label.casefold()
            if excluded or key in seen:
                continue
            seen.add(key)
            out.append(inherited_copy(pin, session.session_id, _stamp(session.end_time), decayed))
    return out, records


def _pending(
    contributors: Sequence[SessionState], pipeline: Mapping[str, dict[str, Any]] | None
) -> tuple[list[PendingTask], dict[str, str]]:
    """Tasks of the contributing sessions still pending now, and each task's last activity."""
    groups = [list(s.pending_tasks) for s in contributors]
    tasks = merge_tasks(*groups)
    if pipeline is not UNKNOWN_PIPELINE:
        project = contributors[0].project if contributors else None
        tasks = still_pending(tasks, pipeline, project)
    ages: dict[str, str] = {}
    for session in contributors:
        for task in session.pending_tasks:
            ages.setdefault(task.task_id, task.updated_at or session.end_time or "")
    return tasks, ages


def _standard_sources(scored: Sequence[ScoredSession], explain: list[str]) -> list[SessionState]:
    """Sessions whose standard pins may be inherited, in priority order.

    The most recent qualifying session always gives its pins (so pins survive a 48 h gap,
    when recency alone scores 0.286); the other contributors only when they score at
    least 0.4. See docs/spec-decisions.md.
    """
    if not scored:
        return []
    latest = max(scored, key=lambda s: s.session.end_time or s.session.start_time)
    sources = [latest.session]
    for item in scored:
        if item is latest:
            continue
        if item.score >= STANDARD_PIN_MIN_SCORE:
            sources.append(item.session)
        else:
            explain.append(
                f"standard pins of {item.session.session_id[:8]} not inherited: "
                f"score {item.score:.3f} < {STANDARD_PIN_MIN_SCORE} and a more "
                "recent session qualified"
            )
    return sources


@dataclass(frozen=True)
class Selection:
    """Step one of a restoration: which candidates qualify and whose standard pins may pass on.

    ``candidates`` are as loaded (possibly with their CRITICAL pins only); the caller loads
    all the pins of ``standard_sources`` before ``plan_restoration``.
    """

    candidates: tuple[SessionState, ...]
    scored: tuple[ScoredSession, ...]
    standard_sources: tuple[SessionState, ...]
    explain: tuple[str, ...]
    last: SessionState | None = None
    """The project's most recent completed session, whatever its age or score: its pending
    tasks and CRITICAL pins always pass on (the work left open before a break)."""
    ages: tuple[float, ...] = ()
    """Hours since each candidate ended (else started), in order: both windows use them."""


def select_contributors(
    candidates: Sequence[SessionState],
    keywords: Sequence[str],
    now: datetime,
    config: Config,
    *,
    explain_all: bool = False,
    explained: bool = True,
    last: SessionState | None = None,
) -> Selection:
    """Score ``candidates`` (completed, same project, newest first) and pick the contributing
    sessions.

    ``last`` is the project's most recent completed session when ``candidates`` (the
    window) hold none; otherwise the newest candidate is. The score breakdown of every
    candidate is explained with ``explain_all``; otherwise only that of the sessions that
    qualified (the cheap default); none when ``explained`` is false (nobody will read them: a
    breakdown is a dozen decimal roundings per session, on every hook-path start).
    """
    ages = tuple(hours_between(s.end_time or s.start_time, now) for s in candidates)
    lookback = config.lookback_days * 24
    in_window = [s for s, age in zip(candidates, ages, strict=True) if age <= lookback]
    scored = score_all(
        in_window, keywords, now, config.relevance_threshold, config.max_sessions_scored
    )
    shown = score_all(in_window, keywords, now, 0.0, None) if explain_all else scored
    threshold = config.relevance_threshold
    explain = [format_breakdown(s, s.session.session_id, threshold) for s in shown if explained]
    sources = _standard_sources(scored, explain)
    last = candidates[0] if candidates else last
    return Selection(tuple(candidates), tuple(scored), tuple(sources), tuple(explain), last, ages)


def plan_restoration(
    selection: Selection,
    sources: Sequence[SessionState],
    current_pins: Sequence[Pin],
    now: datetime,
    config: Config,
    pipeline: Mapping[str, dict[str, Any]] | None,
    recovered: Sequence[str] = (),
) -> RestorePlan:
    """Plan what a new session inherits, given the ``selection`` and its standard ``sources``
    (``selection.standard_sources`` with all of their pins). ``recovered``: the sessions of
    this project that crash recovery closed at this start, named in the preamble whether or
    not they contribute."""
    scored = list(selection.scored)
    contributors = [s.session for s in scored]
    explain = list(selection.explain)
    standard, decay = _candidate_pins(sources, now, config, kind="standard")
    window = config.critical_inheritance_days * 24
    critical_window = [
        s for s, age in zip(selection.candidates, selection.ages, strict=True) if age <= window
    ]
    last = selection.last
    if last is not None and last not in critical_window:
        critical_window.insert(0, last)  # newest first: its CRITICAL pins win a label
    critical, critical_decay = _candidate_pins(critical_window, now, config, kind="critical")
    task_sources = [s.session for s in scored]
    if last is not None and last not in task_sources and last.pending_tasks:
        task_sources.append(last)  # the project's last session always hands its tasks on
    for session in task_sources:
        if session not in contributors:
            contributors.append(session)
    pins, decisions = merge_inherited(
        current_pins, critical + standard, max_inherited=config.max_inherited_pins
    )
    # A session outside the scored ones contributes only when one of its CRITICAL pins was
    # actually inherited (one whose pins all collided or hit the cap gave nothing).
    given = {d.source_session_id for d in decisions if d.outcome == "added"}
    for session in critical_window:
        if session.session_id in given and session not in contributors:
            contributors.append(session)
    explain += [
        f"pin {d.label!r} from {d.source_session_id[:8]}: {d.outcome} "
        f"(confidence {d.confidence:.3f})"
        for d in decisions
    ]
    explain += [
        f"pin {r.memory_id.split(':', 1)[-1]!r}: dropped, decayed confidence "
        f"{r.decayed_confidence:.3f} < floor {config.decay_min_floor}"
        for r in decay
        if r.excluded
    ]
    return _finish(
        scored,
        contributors,
        task_sources,
        current_pins,
        pins,
        decisions,
        decay + critical_decay,
        pipeline,
        now,
        explain,
        recovered,
    )


def _finish(
    scored: Sequence[ScoredSession],
    contributors: Sequence[SessionState],
    sources: Sequence[SessionState],
    current_pins: Sequence[Pin],
    pins: tuple[Pin, ...],
    decisions: Sequence[InheritDecision],
    decay: Sequence[DecayRecord],
    pipeline: Mapping[str, dict[str, Any]] | None,
    now: datetime,
    explain: list[str],
    recovered: Sequence[str] = (),
) -> RestorePlan:
    """Pending tasks, topics, projects and the preamble from the chosen ``sources``."""
    inherited = tuple(p for p in pins if p not in current_pins)
    tasks, ages = _pending(sources, pipeline)
    dropped = {t.task_id for s in sources for t in s.pending_tasks} - {t.task_id for t in tasks}
    explain += [f"task {t}: dropped (done or no longer in the pipeline)" for t in sorted(dropped)]
    hot = tuple(unique_casefold((t for s in sources for t in s.hot_topics), 20))
    projects = tuple(unique_casefold((p for s in sources for p in s.active_projects), 10))
    preamble = None
    if contributors:
        preamble = format_preamble(
            session_count=len(contributors),
            inherited_pins=inherited,
            pending_tasks=tasks,
            hot_topics=hot,
            active_projects=projects,
            now=now,
            task_ages=ages,
            crash_recovered=[
                *recovered,
                *(s.session_id for s in contributors if s.crashed),
            ],
        )
    return RestorePlan(
        tuple(scored),
        tuple(contributors),
        pins,
        inherited,
        tuple(decisions),
        tuple(decay),
        tuple(tasks),
        ages,
        hot,
        projects,
        preamble,
        tuple(explain),
    )


def plan_forced(
    target: SessionState,
    current_pins: Sequence[Pin],
    now: datetime,
    config: Config,
    pipeline: Mapping[str, dict[str, Any]] | None,
) -> RestorePlan:
    """Inherit everything from ``target`` whatever its age or score (pin cap holds)."""
    candidates, decay = _candidate_pins([target], now, config, kind="all", use_floor=False)
    candidates.sort(key=lambda p: (not p.is_critical, -p.confidence))
    pins, decisions = merge_inherited(
        current_pins, candidates, max_inherited=config.max_inherited_pins
    )
    explain = [f"pin {d.label!r}: {d.outcome}" for d in decisions]
    return _finish(
        (), [target], [target], current_pins, pins, decisions, decay, pipeline, now, explain
    )
