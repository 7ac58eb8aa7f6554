"""The records' copy helpers: ``evolve`` is ``dataclasses.replace`` and ``made`` is the
class's call, both without the ``__init__``."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

import pytest

from cortex.core.models import (
    CRITICAL,
    PendingTask,
    Pin,
    ScoreBreakdown,
    SessionState,
    evolve,
    made,
)
from store_contract import full_session, t


@pytest.mark.parametrize(
    ("record", "changes"),
    [
        (full_session(), {"continued_by": "next", "updated_at": t(12)}),
        (full_session(), {"working_memory": (), "end_time": None, "owner_pid": 42}),
        (full_session(), {}),
        (SessionState("s", t(1)), {"topic_state": {"keywords": {"wal": 2.0}}}),
        (Pin("label", "content", t(1), CRITICAL, 0.5), {"label": "x", "confidence": 0.25}),
        (PendingTask("task-1", "Task", "build"), {"stage": "verify"}),
        (ScoreBreakdown(0.4, 0.1, 0.0, 0.5, 1.0), {"total": 0.25}),
    ],
)
def test_evolve_equals_replace(record: object, changes: dict[str, object]) -> None:
    made = evolve(record, **changes)
    assert made == replace(record, **changes)  # type: ignore[type-var]
    assert made is not record and type(made) is type(record)
    if not isinstance(record, SessionState):  # (its ``topic_state`` dict is unhashable)
        assert hash(made) == hash(replace(record, **changes))  # type: ignore[type-var]
    for name, value in changes.items():
        assert getattr(made, name) is value


def test_evolve_leaves_the_original_unchanged_and_stays_frozen() -> None:
    original = full_session()
    before = replace(original)
    made = evolve(original, hot_topics=("antenna",))
    assert original == before
    with pytest.raises(AttributeError):
        made.hot_topics = ()  # type: ignore[misc]


def test_evolve_refuses_a_name_that_is_not_a_field_as_replace_does() -> None:
    with pytest.raises(TypeError):
        replace(full_session(), colour="red")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="colour"):
        evolve(full_session(), colour="red")


@dataclass(frozen=True)
class _Checked:
    value: int
    doubled: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "doubled", self.value * 2)


def test_evolve_runs_init_for_a_record_that_computes_fields() -> None:
    """A record with ``__post_init__`` or non-init fields is copied by ``replace``: a plain
    attribute copy would keep the value computed from the old fields."""
    assert evolve(_Checked(1), value=5).doubled == 10


def test_made_equals_the_call_and_stays_frozen() -> None:
    session = full_session()
    values = {f.name: getattr(session, f.name) for f in fields(session)}
    record = made(SessionState, values)
    assert record == SessionState(**values) and type(record) is SessionState
    for name, value in values.items():
        assert getattr(record, name) is value
    with pytest.raises(AttributeError):
        record.hot_topics = ()  # type: ignore[misc]


def test_made_calls_init_for_a_partial_call_a_wrong_name_or_a_computed_field() -> None:
    assert made(SessionState, {"session_id": "s", "start_time": t(1)}) == SessionState("s", t(1))
    with pytest.raises(TypeError, match="colour"):
        made(SessionState, {"session_id": "s", "start_time": t(1), "colour": "red"})
    assert made(_Checked, {"value": 4}).doubled == 8


def test_a_session_read_from_its_dict_is_the_session() -> None:
    session = full_session()
    assert SessionState.from_dict(session.to_dict()) == session
