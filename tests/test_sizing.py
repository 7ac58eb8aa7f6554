"""Record size limit (50 KB serialized): fit_record trims least important content first."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cortex.core.models import (
    CRITICAL,
    ConfidenceUpdate,
    PendingTask,
    Pin,
    SessionState,
    SOPInteraction,
)
from cortex.core.sizing import (
    MAX_RECORD_BYTES,
    MIN_RECORD_BYTES,
    TRIMMED,
    fit_record,
    record_size,
    tasks_that_can_fit,
)
from cortex.errors import ValidationError

T0 = "2026-02-18T09:00:00.000000Z"


def state(**fields: object) -> SessionState:
    return SessionState(session_id="s-1", start_time=T0, **fields)  # type: ignore[arg-type]


def updates(n: int) -> tuple[ConfidenceUpdate, ...]:
    return tuple(ConfidenceUpdate(f"mem-{i}", 0.5, 0.6, "sop_boost", T0) for i in range(n))


def test_record_size_is_the_utf8_bytes_the_store_writes():
    s = state(hot_topics=("héllo", "中文"))
    stored = json.dumps(s.to_dict(), separators=(",", ":"), ensure_ascii=False)
    assert record_size(s) == len(stored.encode("utf-8"))


def test_a_record_that_fits_is_returned_unchanged():
    s = state(working_memory=(Pin("a", "b", T0),), hot_topics=tuple(f"t{i}" for i in range(30)))
    assert fit_record(s) is s
    assert MAX_RECORD_BYTES == 50_000


def test_topic_state_goes_first():
    s = state(
        topic_state={"keywords": [[f"k{i}", 1.0] for i in range(5000)]},
        confidence_updates=updates(10),
    )
    fitted = fit_record(s)
    assert fitted.topic_state == {}
    assert fitted.confidence_updates == s.confidence_updates


def test_confidence_updates_then_sops_go_oldest_first():
    sops = tuple(SOPInteraction(f"/sops/{i}.md", T0, True) for i in range(10))
    s = state(confidence_updates=updates(2000), sop_interactions=sops)
    fitted = fit_record(s)
    assert record_size(fitted) <= MAX_RECORD_BYTES
    assert fitted.sop_interactions == sops
    assert 0 < len(fitted.confidence_updates) < 2000
    assert fitted.confidence_updates == s.confidence_updates[-len(fitted.confidence_updates) :]


def test_learnings_go_oldest_first_before_any_pin_is_touched():
    pins = (Pin("note", "x" * 1000, T0),)
    s = state(recent_learnings=tuple(f"memory-{i:06d}" for i in range(5000)), working_memory=pins)
    fitted = fit_record(s)
    assert fitted.working_memory == pins
    assert fitted.recent_learnings[-1] == "memory-004999"
    assert fitted.recent_learnings == s.recent_learnings[-len(fitted.recent_learnings) :]


def test_normal_pins_are_trimmed_before_critical_ones():
    normal = Pin("normal", "n" * 60_000, T0)
    critical = Pin("critical", "c" * 20_000, T0, importance=CRITICAL)
    fitted = fit_record(state(working_memory=(normal, critical)))
    assert record_size(fitted) <= MAX_RECORD_BYTES
    trimmed, kept = fitted.working_memory
    assert trimmed.content == "n" * 4000 + TRIMMED
    assert kept == critical


def test_critical_pins_are_trimmed_when_normal_trimming_is_not_enough():
    critical = Pin("critical", "c" * 80_000, T0, importance=CRITICAL)
    fitted = fit_record(state(working_memory=(Pin("normal", "short", T0), critical)))
    assert [p.content for p in fitted.working_memory] == ["short", "c" * 4000 + TRIMMED]


def test_pins_that_cannot_fit_are_refused_never_dropped():
    normal = tuple(Pin(f"n{i}", "x" * 50, T0, confidence=i / 1000) for i in range(600))
    critical = tuple(Pin(f"c{i}", "y" * 50, T0, importance=CRITICAL) for i in range(3))
    with pytest.raises(ValidationError) as caught:
        fit_record(state(working_memory=normal + critical))
    assert str(caught.value) == (
        "session s-1 would exceed 50,000 bytes even with its 603 pins cut to 200 characters; "
        "remove a pin with `cortex pin remove LABEL`"
    )


def test_pending_tasks_go_before_any_pin_is_touched():
    pins = tuple(Pin(f"pin {i}", f"note {i} " + "p" * 3000, T0) for i in range(10))
    tasks = tuple(
        PendingTask(f"task-{i}", f"Task number {i} of the pipeline", "build", updated_at=f"{i:04d}")
        for i in range(300)
    )
    flagged = PendingTask("task-pin", "from a pin", "in-progress", flagged_incomplete=True)
    fitted = fit_record(state(working_memory=pins, pending_tasks=(flagged, *tasks)))
    assert record_size(fitted) <= MAX_RECORD_BYTES
    assert fitted.working_memory == pins
    kept = fitted.pending_tasks
    assert kept[0] == flagged and 0 < len(kept) < 301
    assert kept[1:] == tasks[-(len(kept) - 1) :]  # the oldest pipeline tasks went first


def test_a_long_pipeline_trimmed_first_fits_to_the_same_record():
    tasks = tuple(
        PendingTask(f"task-{i}", f"Task {i} " + "t" * 200, "build", updated_at=f"{i:04d}")
        for i in range(1000)
    )
    trimmed = tasks_that_can_fit(tasks)
    assert (
        trimmed == tasks[-len(trimmed) :]
        and len(json.dumps([t.to_dict() for t in trimmed], separators=(",", ":")))
        <= MAX_RECORD_BYTES
    )
    assert tasks_that_can_fit(tasks[:3]) == tasks[:3]
    pins = tuple(Pin(f"pin {i}", "p" * 1000, T0) for i in range(5))
    whole = fit_record(state(working_memory=pins, pending_tasks=tasks))
    assert fit_record(state(working_memory=pins, pending_tasks=trimmed)) == whole


def test_non_ascii_pins_are_cut_evenly_after_topics_and_learnings():
    pins = tuple(Pin(f"note {i}", "é" * 4000, T0) for i in range(10))
    s = state(
        working_memory=pins,
        hot_topics=tuple(f"topic{i}" for i in range(20)),
        recent_learnings=tuple(f"mem-{i}" for i in range(50)),
    )
    fitted = fit_record(s)
    assert MAX_RECORD_BYTES - 1000 < record_size(fitted) <= MAX_RECORD_BYTES
    assert [p.label for p in fitted.working_memory] == [p.label for p in pins]
    lengths = {len(p.content) for p in fitted.working_memory}
    assert len(lengths) == 1  # every pin cut to the same length
    (length,) = lengths
    assert 2000 < length < 2500 and fitted.working_memory[0].content.endswith(TRIMMED)
    assert fitted.hot_topics == () and fitted.recent_learnings == ()


def test_only_the_longest_pins_are_cut():
    short = Pin("short", "s" * 300, T0)
    pins = (short, *(Pin(f"long {i}", "l" * 30_000, T0) for i in range(2)))
    fitted = fit_record(state(working_memory=pins))
    assert fitted.working_memory[0] == short
    assert len(fitted.working_memory[1].content) == len(fitted.working_memory[2].content) > 4000


def test_hot_topics_beyond_twenty_and_long_strings():
    s = state(
        hot_topics=tuple("t" * 3000 + str(i) for i in range(40)),
        active_projects=tuple("p" * 30_000 for _ in range(2)),
    )
    fitted = fit_record(s)
    assert record_size(fitted) <= MAX_RECORD_BYTES
    assert len(fitted.hot_topics) <= 20
    assert all(len(p) <= 1001 for p in fitted.active_projects)


def test_a_ten_megabyte_pin_and_thousands_of_learnings():
    s = state(
        working_memory=(
            Pin("huge", "z" * 10_000_000, T0),
            Pin("rule", "never push to main", T0, importance=CRITICAL),
        ),
        recent_learnings=tuple(f"mem-{i}" for i in range(10_000)),
        pending_tasks=(PendingTask("task-4", "Persistence", "build"),),
    )
    fitted = fit_record(s)
    assert record_size(fitted) <= MAX_RECORD_BYTES
    assert fitted.working_memory[1].content == "never push to main"
    assert fitted.working_memory[0].content.endswith(TRIMMED)
    assert fitted.pending_tasks == s.pending_tasks
    assert fitted.session_id == "s-1"


def test_even_an_absurd_record_fits_the_minimum():
    astral = "\U0001f600" * 5000
    s = SessionState(
        session_id=astral,
        start_time=astral,
        channel=astral,
        project=astral,
        owner_host=astral,
        owner_pid=10**30,
        checkpoint_count=10**30,
        pending_tasks=tuple(PendingTask(astral, astral, astral) for _ in range(50)),
        topic_state={"odd": object()},
    )
    fitted = fit_record(s, MIN_RECORD_BYTES)
    assert record_size(fitted) <= MIN_RECORD_BYTES


def test_a_limit_below_the_minimum_is_a_programming_error():
    with pytest.raises(ValueError, match="max_bytes must be at least"):
        fit_record(state(), 100)


_text = st.text(max_size=50)
_big_text = st.one_of(_text, st.integers(min_value=0, max_value=200_000).map(lambda n: "é" * n))
_pins = st.builds(
    Pin,
    label=_text,
    content=_big_text,
    pinned_at=_text,
    importance=st.sampled_from(["NORMAL", CRITICAL]),
    confidence=st.floats(min_value=0, max_value=1),
)
_tasks = st.builds(PendingTask, task_id=_text, title=_big_text, stage=_text)


@settings(max_examples=40, deadline=None)
@given(
    pins=st.lists(_pins, max_size=12),
    tasks=st.lists(_tasks, max_size=5),
    learnings=st.integers(min_value=0, max_value=6000),
    topics=st.lists(_big_text, max_size=30),
    updates_count=st.integers(min_value=0, max_value=800),
    max_bytes=st.integers(min_value=MIN_RECORD_BYTES, max_value=120_000),
)
def test_fit_record_fits_or_refuses_and_never_drops_a_pin(
    pins, tasks, learnings, topics, updates_count, max_bytes
):
    s = state(
        working_memory=tuple(pins),
        pending_tasks=tuple(tasks),
        recent_learnings=tuple(f"mem-{i}" for i in range(learnings)),
        hot_topics=tuple(topics),
        confidence_updates=updates(updates_count),
        topic_state={"keywords": [["k", 1.0]] * 100},
    )
    try:
        fitted = fit_record(s, max_bytes)
    except ValidationError:
        assert max_bytes < MAX_RECORD_BYTES or len(pins) > 10
        return
    assert record_size(fitted) <= max_bytes
    assert len(fitted.working_memory) == len(pins)
    if record_size(s) <= max_bytes:
        assert fitted is s


_valid_pins = st.builds(
    Pin,
    label=st.text(min_size=1, max_size=200),
    content=st.text(min_size=1, max_size=4000),
    pinned_at=st.just(T0),
    importance=st.sampled_from(["NORMAL", CRITICAL]),
)


@settings(max_examples=30, deadline=None)
@given(pins=st.lists(_valid_pins, max_size=10), tasks=st.lists(_tasks, max_size=400))
def test_pins_a_user_can_add_always_fit_with_any_pipeline(pins, tasks):
    fitted = fit_record(state(working_memory=tuple(pins), pending_tasks=tuple(tasks)))
    assert record_size(fitted) <= MAX_RECORD_BYTES
    assert [p.label for p in fitted.working_memory] == [p.label for p in pins]
