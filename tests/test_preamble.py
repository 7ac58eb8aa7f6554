"""The continuity preamble and the pins block."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cortex.clock import to_iso
from cortex.core.models import CRITICAL, PendingTask, Pin
from cortex.core.preamble import format_age, format_pins_block, format_preamble

NOW = datetime(2026, 2, 18, 9, 0, tzinfo=UTC)


def ago(hours: float) -> str:
    return to_iso(NOW - timedelta(hours=hours))


def pin(label: str, content: str = "content", importance: str = "NORMAL") -> Pin:
    return Pin(label=label, content=content, pinned_at=ago(1), importance=importance)


PINS = (pin("ft991a control"), pin("pipeline state"), pin("AUGUR weekly"))
TASKS = (
    PendingTask(
        "task-004-session-persistence",
        "Cross-Session State Preservation",
        "design",
        updated_at=ago(2),
    ),
    PendingTask("task-003-pre-action-hooks", "Pre-Action Hook System", "done"),
)
TOPICS = ("cortex", "session", "persistence", "brain.db", "pipeline", "hooks")
PROJECTS = ("helios/extensions/cortex", "lbf-ham-radio")


def render(**overrides: object) -> str | None:
    args: dict[str, object] = {
        "session_count": 2,
        "inherited_pins": PINS,
        "pending_tasks": TASKS,
        "hot_topics": TOPICS,
        "active_projects": PROJECTS,
        "now": NOW,
        "task_ages": {"task-003-pre-action-hooks": ago(30)},
    }
    args.update(overrides)
    return format_preamble(**args)  # type: ignore[arg-type]


def test_the_api_guide_example_exactly():
    assert render() == (
        "[SESSION CONTINUITY — inherited from 2 prior session(s)]\n"
        "\n"
        "PENDING TASKS:\n"
        "- [task-004-session-persistence] Cross-Session State Preservation"
        " (last stage: design, 2h ago)\n"
        "- [task-003-pre-action-hooks] Pre-Action Hook System (last stage: done, 1d ago)\n"
        "\n"
        "ACTIVE PROJECTS: helios/extensions/cortex, lbf-ham-radio\n"
        "\n"
        "HOT TOPICS: cortex, session, persistence, brain.db, pipeline, hooks\n"
        "\n"
        "WORKING MEMORY RESTORED: 3 pins inherited "
        "(see all with `cortex pin list` or the working_memory_view tool)"
    )


def test_cold_start_is_silent():
    assert render(session_count=0) is None


def test_nothing_to_say_is_silent_even_with_projects():
    assert render(inherited_pins=(), pending_tasks=(), hot_topics=()) is None
    assert render(inherited_pins=(), pending_tasks=(), hot_topics=("", "  ")) is None


def test_empty_sections_are_left_out_with_their_blank_line():
    assert render(inherited_pins=(), pending_tasks=(), active_projects=()) == (
        "[SESSION CONTINUITY — inherited from 2 prior session(s)]\n"
        "\n"
        "HOT TOPICS: cortex, session, persistence, brain.db, pipeline, hooks"
    )
    assert render(session_count=1, pending_tasks=(), hot_topics=(), inherited_pins=PINS[:1]) == (
        "[SESSION CONTINUITY — inherited from 1 prior session(s)]\n"
        "\n"
        "ACTIVE PROJECTS: helios/extensions/cortex, lbf-ham-radio\n"
        "\n"
        "WORKING MEMORY RESTORED: 1 pins inherited "
        "(see all with `cortex pin list` or the working_memory_view tool)"
    )


def test_crash_recovered_sessions_are_named_after_the_header():
    text = render(
        pending_tasks=(),
        active_projects=(),
        inherited_pins=(),
        crash_recovered=("a1b2c3d4-1111-2222", "ffee0011-3333", "a1b2c3d4-1111-2222"),
    )
    assert text == (
        "[SESSION CONTINUITY — inherited from 2 prior session(s)]\n"
        "RECOVERED AFTER CRASH: a1b2c3d4, ffee0011\n"
        "\n"
        "HOT TOPICS: cortex, session, persistence, brain.db, pipeline, hooks"
    )


def test_topics_and_projects_are_deduplicated_and_truncated():
    text = render(
        inherited_pins=(),
        pending_tasks=(),
        hot_topics=("Cortex", "cortex", " hooks ", "", "pipeline", "brain.db"),
        active_projects=("a", "A", "b", "c"),
        max_topics=3,
        max_projects=2,
    )
    assert text == (
        "[SESSION CONTINUITY — inherited from 2 prior session(s)]\n"
        "\n"
        "ACTIVE PROJECTS: a, b\n"
        "\n"
        "HOT TOPICS: Cortex, hooks, pipeline"
    )


def test_absolute_dates():
    text = render(date_format="absolute", hot_topics=(), active_projects=(), inherited_pins=())
    assert text == (
        "[SESSION CONTINUITY — inherited from 2 prior session(s)]\n"
        "\n"
        "PENDING TASKS:\n"
        "- [task-004-session-persistence] Cross-Session State Preservation"
        " (last stage: design, 2026-02-18)\n"
        "- [task-003-pre-action-hooks] Pre-Action Hook System (last stage: done, 2026-02-17)"
    )


def test_task_without_age_stage_or_title():
    task = PendingTask("task-9", "  multi\nline   title ", "", updated_at="not a time")
    untitled = PendingTask("task-10", "", "build")
    text = render(pending_tasks=(task, untitled), hot_topics=(), active_projects=(), task_ages={})
    assert text is not None
    assert text.splitlines()[3:5] == [
        "- [task-9] multi line title (last stage: unknown)",
        "- [task-10] task-10 (last stage: build)",
    ]


def test_task_ages_take_precedence_over_updated_at():
    task = PendingTask("t", "T", "build", updated_at=ago(1))
    text = render(pending_tasks=(task,), task_ages={"t": ago(100)})
    assert text is not None and "(last stage: build, 4d ago)" in text


@pytest.mark.parametrize(
    ("hours", "expected"),
    [
        (0, "0h ago"),
        (0.9, "0h ago"),
        (23.99, "23h ago"),
        (24, "1d ago"),
        (71, "2d ago"),
        (-5, "0h ago"),
        (24 * 400, "400d ago"),
    ],
)
def test_relative_age(hours: float, expected: str):
    assert format_age(ago(hours), NOW) == expected


def test_age_of_nothing_is_nothing():
    assert format_age(None, NOW) is None
    assert format_age("yesterday", NOW) is None


def test_cap_drops_task_lines_from_the_end_with_a_count():
    tasks = tuple(PendingTask(f"task-{i:03d}", f"Title {i}", "build") for i in range(50))
    text = render(
        pending_tasks=tasks,
        hot_topics=("cortex",),
        active_projects=(),
        inherited_pins=(),
        task_ages={},
        max_chars=200,
    )
    assert text == (
        "[SESSION CONTINUITY — inherited from 2 prior session(s)]\n"
        "\n"
        "PENDING TASKS:\n"
        "- [task-000] Title 0 (last stage: build)\n"
        "- [task-001] Title 1 (last stage: build)\n"
        "- … 48 more\n"
        "\n"
        "HOT TOPICS: cortex"
    )


def test_cap_drops_topics_after_tasks_then_cuts():
    text = render(pending_tasks=TASKS[:1], inherited_pins=(), active_projects=(), max_chars=90)
    assert text == (
        "[SESSION CONTINUITY — inherited from 2 prior session(s)]\n\nPENDING TASKS:\n- … 1 more"
    )
    tiny = render(max_chars=20)
    assert tiny == "[SESSION CONTINUITY…"
    assert render(max_chars=0) is None


def test_cap_handles_thousands_of_tasks_quickly():
    tasks = tuple(PendingTask(f"task-{i}", "x" * 50, "build") for i in range(20_000))
    text = render(pending_tasks=tasks, max_chars=8000)
    assert text is not None and len(text) <= 8000
    assert "more\n\nACTIVE PROJECTS" in text


_texts = st.text(max_size=40)


@given(
    session_count=st.integers(min_value=0, max_value=5),
    pins=st.lists(st.builds(pin, _texts, _texts), max_size=4),
    tasks=st.lists(st.builds(PendingTask, _texts, _texts, _texts), max_size=30),
    topics=st.lists(_texts, max_size=30),
    projects=st.lists(_texts, max_size=10),
    crashed=st.lists(_texts, max_size=3),
    max_chars=st.integers(min_value=1, max_value=3000),
)
def test_never_exceeds_max_chars(session_count, pins, tasks, topics, projects, crashed, max_chars):
    text = format_preamble(
        session_count=session_count,
        inherited_pins=pins,
        pending_tasks=tasks,
        hot_topics=topics,
        active_projects=projects,
        now=NOW,
        max_chars=max_chars,
        crash_recovered=crashed,
    )
    if text is not None:
        assert 0 < len(text) <= max_chars
        assert text.startswith("[SESSION CONTINUITY"[: max_chars - 1])


def test_pins_block():
    pins = (
        pin("pipeline state", "task-004 in build"),
        pin("api keys", "never commit .env", importance=CRITICAL),
        Pin.from_dict({"content": "a pin with no label\nsecond line", "pinnedAt": ago(1)}),
    )
    assert format_pins_block(pins) == (
        "WORKING MEMORY PINS:\n"
        "- [CRITICAL] api keys: never commit .env\n"
        "- pipeline state: task-004 in build\n"
        "- a pin with no label second line"
    )


def test_pins_block_is_none_when_empty():
    assert format_pins_block(()) is None


def test_pins_block_cap_counts_what_it_leaves_out():
    pins = tuple(pin(f"label {i}", "c" * 30) for i in range(10))
    text = format_pins_block(pins, max_chars=120)
    assert text == (
        f"WORKING MEMORY PINS:\n- label 0: {'c' * 30}\n- label 1: {'c' * 30}\n- … 8 more"
    )


@given(
    st.lists(st.builds(pin, _texts, st.text(max_size=600)), min_size=1, max_size=20),
    st.integers(min_value=1, max_value=2500),
)
def test_pins_block_never_exceeds_max_chars(pins, max_chars):
    text = format_pins_block(pins, max_chars=max_chars)
    assert text is not None and 0 < len(text) <= max_chars
