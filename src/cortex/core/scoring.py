"""Relevance of a prior session to the current one: pure functions.

The score mixes recency, topic overlap (Jaccard) and pending work. ``score_all`` filters and
ranks a batch; ``format_breakdown`` renders the debug text of `--explain`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from functools import lru_cache

from cortex.clock import hours_between
from cortex.core.models import ScoreBreakdown, ScoredSession, SessionState
from cortex.errors import ValidationError

RECENCY_WINDOW_HOURS = 168.0
RECENCY_WEIGHT = 0.4
TOPIC_WEIGHT = 0.35
TASK_WEIGHT = 0.25
TASK_STEP = 0.25
"""Each pending task adds this much to the task component, which saturates at 4 tasks."""

DEFAULT_THRESHOLD = 0.25

# Scores are sums of float products: 4 tasks at exactly 168 h is 0.25 in exact arithmetic
# and must pass a 0.25 threshold, so comparisons allow a rounding-sized slack.
_EPSILON = 1e-9


class _Normalized(frozenset[str]):
    """Words already stripped and lower-cased (``score_all`` normalizes its keywords once)."""


def _normalize(words: Iterable[str]) -> frozenset[str]:
    if isinstance(words, _Normalized):
        return words
    if isinstance(words, tuple):  # a session's hot topics: the same tuple at every restore
        return _normalize_tuple(words)
    return _Normalized(w.strip().lower() for w in words if w and w.strip())


@lru_cache(maxsize=1024)
def _normalize_tuple(words: tuple[str, ...]) -> frozenset[str]:
    return _Normalized(w.strip().lower() for w in words if w and w.strip())


def topic_overlap(keywords: Iterable[str], hot_topics: Iterable[str]) -> tuple[int, int, float]:
    """Jaccard overlap of two keyword sets, compared case-insensitively after stripping.

    Formula::

        jaccard = |K ∩ T| / max(|K ∪ T|, 1)

    Returns:
        ``(intersection size, union size, jaccard)``; jaccard is 0.0 when both are empty.
    """
    current = _normalize(keywords)
    topics = _normalize(hot_topics)
    inter = len(current & topics)
    union = len(current) + len(topics) - inter  # |K ∪ T| without building it
    return inter, union, inter / max(union, 1)


def recency_weight(hours_elapsed: float) -> float:
    """``max(0, 1 - h / 168)``: 1.0 for a session that just ended, 0.0 from 7 days on."""
    hours = hours_elapsed if hours_elapsed > 0 else 0.0
    return max(0.0, 1.0 - hours / RECENCY_WINDOW_HOURS)


def task_weight(task_count: int) -> float:
    """``min(1, n * 0.25)``: the pending-task component before weighting."""
    return min(1.0, max(0, task_count) * TASK_STEP)


def score_breakdown(
    session: SessionState, keywords: Iterable[str], hours_elapsed: float
) -> ScoreBreakdown:
    """Score one prior session against the current context keywords.

    Formula::

        score = recency * 0.4 + jaccard * 0.35 + min(1, tasks * 0.25) * 0.25
        recency = max(0, 1 - hours_elapsed / 168)
        jaccard = |keywords ∩ hot_topics| / max(|keywords ∪ hot_topics|, 1)

    Args:
        session: the prior session; its ``hot_topics`` and ``pending_tasks`` are used.
        keywords: the current session's context keywords.
        hours_elapsed: hours since the prior session ended (negative counts as 0).

    Returns:
        A ``ScoreBreakdown`` whose ``recency``, ``topic_overlap`` and ``pending_tasks`` hold the
        weighted contributions and whose ``total`` is their sum clamped to ``[0, 1]``.
    """
    return ScoreBreakdown(*_parts(session, keywords, hours_elapsed))


_Parts = tuple[float, float, float, float, float, int, int, int]
"""``ScoreBreakdown``'s fields in order, as a plain tuple."""


def _parts(session: SessionState, keywords: Iterable[str], hours_elapsed: float) -> _Parts:
    """``score_breakdown``'s fields: ``score_all`` builds the record only for the sessions it
    returns (a restore weighs ~50 candidates and keeps 3; a frozen record costs a setattr per
    field)."""
    hours = float(hours_elapsed) if hours_elapsed > 0 else 0.0
    inter, union, jaccard = topic_overlap(keywords, session.hot_topics)
    task_count = len(session.pending_tasks)
    recency = recency_weight(hours) * RECENCY_WEIGHT
    overlap = jaccard * TOPIC_WEIGHT
    tasks = task_weight(task_count) * TASK_WEIGHT
    total = min(1.0, max(0.0, recency + overlap + tasks))
    return (recency, overlap, tasks, total, hours, inter, union, task_count)


def score(session: SessionState, keywords: Iterable[str], hours_elapsed: float) -> float:
    """The relevance score in ``[0, 1]``: ``score_breakdown(...).total``."""
    return score_breakdown(session, keywords, hours_elapsed).total


def session_age_hours(session: SessionState, now: datetime) -> float:
    """Hours from the session's end (else last activity, else start) to ``now``, never negative.

    A field that does not parse is skipped in favour of the next one.

    Raises:
        ValidationError: when none of the three times parses.
    """
    for moment in (session.end_time, session.last_activity, session.start_time):
        if not moment:
            continue
        try:
            return hours_between(moment, now)
        except ValidationError:
            continue
    raise ValidationError(
        f"session {session.session_id!r} has no readable end, activity or start time; "
        "repair or delete the record"
    )


def score_all(
    sessions: Iterable[SessionState],
    keywords: Iterable[str],
    now: datetime,
    threshold: float = DEFAULT_THRESHOLD,
    limit: int | None = None,
) -> list[ScoredSession]:
    """Score a batch, keep those at or above ``threshold``, best first, at most ``limit``.

    Ties on score go to the most recently ended session, then to the smaller session id, so
    the order is deterministic. A session whose times cannot be read is left out: it cannot
    be aged, and one bad record must not stop a restore.
    """
    if limit is not None and limit <= 0:
        return []
    words = _normalize(list(keywords))
    kept: list[tuple[SessionState, float, _Parts]] = []
    for session in sessions:
        try:
            hours = session_age_hours(session, now)
        except ValidationError:
            continue
        parts = _parts(session, words, hours)
        if parts[3] + _EPSILON >= threshold:  # parts[3]: the total
            kept.append((session, hours, parts))
    kept.sort(key=lambda k: (-k[2][3], k[1], k[0].session_id))
    return [
        ScoredSession(session, parts[3], hours, ScoreBreakdown(*parts))
        for session, hours, parts in (kept if limit is None else kept[:limit])
    ]


def _fixed(value: float, places: int) -> str:
    """``value`` with ``places`` decimals, rounding halves up (0.0525 -> 0.053, as people do)."""
    from decimal import ROUND_HALF_UP, Decimal, InvalidOperation  # explain output only

    try:
        quantum = Decimal(1).scaleb(-places)
        return str(Decimal(repr(value)).quantize(quantum, rounding=ROUND_HALF_UP))
    except (InvalidOperation, ValueError):
        return repr(value)


def _hours_text(hours: float) -> str:
    text = _fixed(hours, 1)
    return text[:-2] if text.endswith(".0") else text


def format_breakdown(
    scored_or_breakdown: ScoredSession | ScoreBreakdown,
    session_id: str,
    threshold: float = DEFAULT_THRESHOLD,
) -> str:
    """The `--explain` debug text for one session (first 8 characters of its id).

    Example (48 h, 3 of 20 topics shared, 2 pending tasks)::

        [session:debug] Scoring session a1b2c3d4 (48h elapsed):
          recency: 0.714 × 0.4 = 0.286
          topic_overlap: 3/20 = 0.150 × 0.35 = 0.053
          pending_tasks: 2 tasks × 0.25 = 0.50 × 0.25 = 0.125
          TOTAL: 0.463 ✅ (threshold: 0.25)
    """
    b = (
        scored_or_breakdown.breakdown
        if isinstance(scored_or_breakdown, ScoredSession)
        else scored_or_breakdown
    )
    jaccard = b.overlap_count / max(b.union_count, 1)
    tasks = f"{b.task_count} task" + ("" if b.task_count == 1 else "s")
    mark = "✅" if b.total + _EPSILON >= threshold else "❌"
    return "\n".join(
        [
            f"[session:debug] Scoring session {session_id[:8]} "
            f"({_hours_text(b.hours_elapsed)}h elapsed):",
            f"  recency: {_fixed(recency_weight(b.hours_elapsed), 3)} × {RECENCY_WEIGHT}"
            f" = {_fixed(b.recency, 3)}",
            f"  topic_overlap: {b.overlap_count}/{b.union_count} = {_fixed(jaccard, 3)}"
            f" × {TOPIC_WEIGHT} = {_fixed(b.topic_overlap, 3)}",
            f"  pending_tasks: {tasks} × {TASK_STEP} = {_fixed(task_weight(b.task_count), 2)}"
            f" × {TASK_WEIGHT} = {_fixed(b.pending_tasks, 3)}",
            f"  TOTAL: {_fixed(b.total, 3)} {mark} (threshold: {threshold})",
        ]
    )
