"""Relevance scoring."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cortex.clock import to_iso
from cortex.core.models import PendingTask, ScoredSession, SessionState
from cortex.core.scoring import (
    format_breakdown,
    score,
    score_all,
    score_breakdown,
    session_age_hours,
    topic_overlap,
)
from cortex.errors import ValidationError

NOW = datetime(2026, 2, 18, 9, 0, tzinfo=UTC)


def tasks(n: int) -> tuple[PendingTask, ...]:
    return tuple(PendingTask(f"task-{i:03d}", f"Task {i}", "build") for i in range(n))


def session(
    session_id: str = "a1b2c3d4-0000",
    *,
    hours_ago: float | None = 0.0,
    topics: tuple[str, ...] = (),
    n_tasks: int = 0,
    start_hours_ago: float = 500.0,
    last_activity: str | None = None,
) -> SessionState:
    return SessionState(
        session_id=session_id,
        start_time=to_iso(NOW - timedelta(hours=start_hours_ago)),
        end_time=None if hours_ago is None else to_iso(NOW - timedelta(hours=hours_ago)),
        hot_topics=topics,
        pending_tasks=tasks(n_tasks),
        last_activity=last_activity,
    )


TWENTY = tuple(f"topic{i}" for i in range(20))


@pytest.mark.parametrize(
    ("keywords", "hot_topics", "expected"),
    [
        (["Cortex", " session "], ["cortex", "hooks"], (1, 3, 1 / 3)),
        ([], [], (0, 0, 0.0)),
        (["a"], [], (0, 1, 0.0)),
        (["x", "X", "x "], ["x"], (1, 1, 1.0)),
        (["", "  ", "brain.db"], ["BRAIN.DB", ""], (1, 1, 1.0)),
        (["ham radio", "ft991a"], ["ham radio", "lbf-ham-radio"], (1, 3, 1 / 3)),
    ],
)
def test_topic_overlap_is_case_insensitive_jaccard(keywords, hot_topics, expected):
    inter, union, jaccard = topic_overlap(keywords, hot_topics)
    assert (inter, union) == expected[:2]
    assert jaccard == pytest.approx(expected[2])


def test_breakdown_holds_weighted_parts_and_counts():
    prior = session(topics=TWENTY, n_tasks=2)
    b = score_breakdown(prior, ["topic0", "topic1", "topic2"], 48)
    assert b.recency == pytest.approx((1 - 48 / 168) * 0.4)
    assert b.topic_overlap == pytest.approx(3 / 20 * 0.35)
    assert b.pending_tasks == pytest.approx(0.5 * 0.25)
    assert b.total == pytest.approx(b.recency + b.topic_overlap + b.pending_tasks)
    assert (b.overlap_count, b.union_count, b.task_count, b.hours_elapsed) == (3, 20, 2, 48.0)


@pytest.mark.parametrize(
    ("hours_elapsed", "overlap_topics", "n_tasks", "expected"),
    [
        (0, (), 0, 0.40),  # recency maxes at 0.40
        (0, TWENTY, 0, 0.75),  # identical topics add the full 0.35
        (168, (), 4, 0.25),  # tasks max at 0.25 from 4 tasks on
        (168, (), 10, 0.25),
        (0, TWENTY, 4, 1.0),
        (84, (), 1, 0.2 + 0.0625),
        (336, (), 0, 0.0),  # zero at 7+ days
    ],
)
def test_component_ranges(hours_elapsed, overlap_topics, n_tasks, expected):
    prior = session(topics=TWENTY, n_tasks=n_tasks)
    assert score(prior, overlap_topics, hours_elapsed) == pytest.approx(expected)


def test_api_guide_no_overlap_no_tasks_at_168h_is_below_threshold():
    assert score(session(topics=TWENTY), ["unrelated"], 168) < 0.25


def test_api_guide_four_pending_tasks_at_160h_reaches_threshold():
    assert score(session(n_tasks=4), [], 160) >= 0.25


def test_three_pending_tasks_alone_do_not_restore_an_old_session():
    # Spec contradiction: the spec says 3 pending tasks trigger restoration "regardless of age",
    # but its formula gives min(1, 3 * 0.25) * 0.25 = 0.1875 at 168 h with no overlap, below
    # the 0.25 threshold. The formula wins.
    assert score(session(n_tasks=3), [], 168) == pytest.approx(0.1875)
    assert score_all([session(n_tasks=3, hours_ago=168)], [], NOW) == []


def test_negative_hours_count_as_zero():
    assert score_breakdown(session(), [], -5).hours_elapsed == 0.0
    assert score(session(), [], -5) == pytest.approx(0.4)


def test_session_age_uses_end_time_then_last_activity_then_start():
    assert session_age_hours(session(hours_ago=48), NOW) == pytest.approx(48)
    open_one = session(hours_ago=None, last_activity=to_iso(NOW - timedelta(hours=3)))
    assert session_age_hours(open_one, NOW) == pytest.approx(3)
    assert session_age_hours(session(hours_ago=None, start_hours_ago=7), NOW) == pytest.approx(7)


def test_session_age_is_never_negative():
    assert session_age_hours(session(hours_ago=-10), NOW) == 0.0


def test_session_age_skips_an_unreadable_time():
    broken = SessionState("s", start_time=to_iso(NOW - timedelta(hours=5)), end_time="garbage")
    assert session_age_hours(broken, NOW) == pytest.approx(5)


def test_session_age_without_any_readable_time_raises_a_one_line_error():
    with pytest.raises(ValidationError, match="repair or delete the record"):
        session_age_hours(SessionState("s", start_time="nope", end_time="bad"), NOW)


def test_score_all_filters_sorts_and_reports_hours():
    fresh = session("fresh", hours_ago=1, topics=("cortex",))
    older = session("older", hours_ago=100, topics=("cortex",))
    stale = session("stale", hours_ago=200)
    result = score_all([stale, older, fresh], ["cortex"], NOW)
    assert [s.session.session_id for s in result] == ["fresh", "older"]
    assert result[0].hours_elapsed == pytest.approx(1)
    assert result[0].score == result[0].breakdown.total
    assert result[0].score > result[1].score


def test_score_all_breaks_ties_by_most_recent_end():
    # Past 168 h recency is 0, so equal tasks give equal scores; the newer end goes first.
    a = session("a", hours_ago=300, n_tasks=4)
    b = session("b", hours_ago=200, n_tasks=4)
    c = session("c", hours_ago=250, n_tasks=4)
    assert [s.session.session_id for s in score_all([a, b, c], [], NOW)] == ["b", "c", "a"]


def test_score_all_keeps_a_score_exactly_at_the_threshold():
    assert len(score_all([session(hours_ago=168, n_tasks=4)], [], NOW)) == 1


def test_score_all_returns_at_most_limit():
    sessions = [session(f"s{i}", hours_ago=i) for i in range(10)]
    result = score_all(sessions, [], NOW, limit=3)
    assert [s.session.session_id for s in result] == ["s0", "s1", "s2"]
    assert score_all(sessions, [], NOW, limit=0) == []
    assert len(score_all(sessions, [], NOW)) == 10


def test_score_all_uses_the_given_threshold():
    sessions = [session("a", hours_ago=0), session("b", hours_ago=120)]
    assert [s.session.session_id for s in score_all(sessions, [], NOW, threshold=0.35)] == ["a"]


def test_score_all_skips_a_session_with_no_readable_time():
    broken = SessionState("broken", start_time="not a time")
    assert [s.session.session_id for s in score_all([broken, session("ok")], [], NOW)] == ["ok"]


def test_format_breakdown_matches_the_debug_layout():
    # The spec's debug example prints "recency: 0.886" at 48 h, which is the decay factor, not the
    # recency weight; the formula gives 1 - 48/168 = 0.714, and the total follows from it.
    b = score_breakdown(session(topics=TWENTY, n_tasks=2), ["topic0", "topic1", "topic2"], 48)
    assert format_breakdown(b, "a1b2c3d4-5678-90ab") == (
        "[session:debug] Scoring session a1b2c3d4 (48h elapsed):\n"
        "  recency: 0.714 × 0.4 = 0.286\n"
        "  topic_overlap: 3/20 = 0.150 × 0.35 = 0.053\n"
        "  pending_tasks: 2 tasks × 0.25 = 0.50 × 0.25 = 0.125\n"
        "  TOTAL: 0.463 ✅ (threshold: 0.25)"
    )


def test_format_breakdown_below_threshold_and_from_a_scored_session():
    prior = session("deadbeefcafe", n_tasks=1)
    b = score_breakdown(prior, [], 200.25)
    scored = ScoredSession(prior, b.total, 200.25, b)
    assert format_breakdown(scored, prior.session_id, threshold=0.3) == (
        "[session:debug] Scoring session deadbeef (200.3h elapsed):\n"
        "  recency: 0.000 × 0.4 = 0.000\n"
        "  topic_overlap: 0/0 = 0.000 × 0.35 = 0.000\n"
        "  pending_tasks: 1 task × 0.25 = 0.25 × 0.25 = 0.063\n"
        "  TOTAL: 0.063 ❌ (threshold: 0.3)"
    )


@given(
    topics=st.lists(st.text(max_size=8), max_size=25),
    keywords=st.lists(st.text(max_size=8), max_size=25),
    n_tasks=st.integers(min_value=0, max_value=50),
    hours_elapsed=st.one_of(
        st.floats(min_value=-1e6, max_value=1e9, allow_nan=False), st.just(float("inf"))
    ),
)
def test_scores_stay_in_unit_interval(topics, keywords, n_tasks, hours_elapsed):
    b = score_breakdown(session(topics=tuple(topics), n_tasks=n_tasks), keywords, hours_elapsed)
    assert 0.0 <= b.total <= 1.0
    assert 0.0 <= b.recency <= 0.4
    assert 0.0 <= b.topic_overlap <= 0.35
    assert 0.0 <= b.pending_tasks <= 0.25


@given(st.floats(min_value=0, max_value=400), st.floats(min_value=0, max_value=400))
def test_score_never_increases_with_age(a, b):
    prior = session(topics=("cortex", "hooks"), n_tasks=2)
    early, late = sorted((a, b))
    assert score(prior, ["cortex"], late) <= score(prior, ["cortex"], early)


@given(
    st.lists(
        st.tuples(
            st.sampled_from([0.0, 1.0, 5.5, 40.0, 100.0, 170.0]),
            st.lists(st.sampled_from(["cortex", "hooks", "wal", "Radio "]), max_size=4),
            st.integers(min_value=0, max_value=5),
        ),
        max_size=12,
    ),
    st.sampled_from([0.0, 0.25, 0.4]),
    st.one_of(st.none(), st.integers(min_value=1, max_value=4)),
)
def test_score_all_is_score_breakdown_of_each_session_ranked_and_cut(items, threshold, limit):
    """``score_all`` builds the breakdown of the sessions it returns only: what it returns is
    exactly each session's ``score_breakdown`` above the threshold, best first, cut."""
    sessions = [
        session(f"s{i}", hours_ago=hours, topics=tuple(topics), n_tasks=n)
        for i, (hours, topics, n) in enumerate(items)
    ]
    keywords = ["cortex", "radio"]
    expected = []
    for prior in sessions:
        hours = session_age_hours(prior, NOW)
        b = score_breakdown(prior, keywords, hours)
        if b.total + 1e-9 >= threshold:
            expected.append(ScoredSession(prior, b.total, hours, b))
    expected.sort(key=lambda s: (-s.score, s.hours_elapsed, s.session.session_id))
    expected = expected if limit is None else expected[:limit]
    assert score_all(sessions, keywords, NOW, threshold, limit) == expected
