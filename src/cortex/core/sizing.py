"""Keep a session record under its size limit (NFR: at most 50 KB serialized).

``fit_record`` trims the least important content first and always ends within the limit:

1. the serialized topic accumulator (``topic_state``), which the next turn rebuilds;
2. confidence updates, then SOP interactions, then recent learnings, oldest first;
3. hot topics beyond 20;
4. long contents of NORMAL pins (cut, marked ``…[trimmed]``), then of CRITICAL pins;
5. NORMAL pins, lowest confidence and oldest first;
6. other long strings (topics, projects, task titles...), then surplus list items;
7. CRITICAL pins; 8. as a last resort, identity and time strings.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from cortex.core.models import PendingTask, Pin, SessionState

MAX_RECORD_BYTES = 50_000
MIN_RECORD_BYTES = 8_192
"""The smallest limit ``fit_record`` accepts: an emptied record with capped ids fits in it."""
TRIMMED = "…[trimmed]"
MAX_HOT_TOPICS = 20
MAX_LABEL_CHARS = 200
_PIN_CAPS = (4000, 1000, 250, 60)
_STRING_CAPS = (1000, 200, 50)
_LAST_RESORT_CAPS = (64, 16)
_MAX_INT = 2**53

T = TypeVar("T")
Step = Callable[[SessionState, int], SessionState]


def _json_len(value: Any) -> int:
    # ensure_ascii (the json default) escapes non-ASCII, so the text is ASCII: chars == bytes,
    # and it is never smaller than the UTF-8 form a store might write.
    return len(json.dumps(value, separators=(",", ":"), default=str))


def record_size(state: SessionState) -> int:
    """Bytes of the record as compact JSON (``state.to_dict()``, ASCII-escaped)."""
    return _json_len(state.to_dict())


def _safe_size(state: SessionState) -> int:
    """``record_size``, or "too big" when the record does not serialize (odd ``topic_state``)."""
    try:
        return record_size(state)
    except (ValueError, TypeError, RecursionError):
        return 2**62


def _drop_oldest(items: tuple[T, ...], overflow: int, size_of: Callable[[T], int]) -> tuple[T, ...]:
    """Drop items from the front until the dropped bytes (with commas) reach ``overflow``."""
    removed = 0
    for index, item in enumerate(items):
        if removed >= overflow:
            return items[index:]
        removed += size_of(item) + 1
    return ()


def _cut(text: str, cap: int, marker: str = TRIMMED) -> str:
    return text if len(text) <= cap else text[:cap] + marker


def _trim_pins(critical: bool, cap: int) -> Step:
    def step(state: SessionState, overflow: int) -> SessionState:
        pins = tuple(
            replace(
                pin,
                content=_cut(pin.content, cap),
                label=_cut(pin.label, MAX_LABEL_CHARS, "…"),
            )
            if pin.is_critical == critical
            else pin
            for pin in state.working_memory
        )
        return replace(state, working_memory=pins)

    return step


def _drop_pins(critical: bool) -> Step:
    def step(state: SessionState, overflow: int) -> SessionState:
        pins = state.working_memory
        order = sorted(
            (i for i, pin in enumerate(pins) if pin.is_critical == critical),
            key=lambda i: (pins[i].confidence, pins[i].pinned_at),
        )
        dropped = set(order[: _count_to_cover(order, pins, overflow)])
        kept = tuple(pin for i, pin in enumerate(pins) if i not in dropped)
        return replace(state, working_memory=kept)

    return step


def _count_to_cover(order: Sequence[int], pins: Sequence[Pin], overflow: int) -> int:
    """How many pins, taken in ``order``, free at least ``overflow`` bytes."""
    removed = 0
    for count, index in enumerate(order):
        if removed >= overflow:
            return count
        removed += _json_len(pins[index].to_dict()) + 1
    return len(order)


def _trim_strings(cap: int) -> Step:
    def step(state: SessionState, overflow: int) -> SessionState:
        tasks = tuple(
            PendingTask(
                task_id=_cut(t.task_id, cap, "…"),
                title=_cut(t.title, cap),
                stage=_cut(t.stage, cap, "…"),
                flagged_incomplete=t.flagged_incomplete,
                updated_at=t.updated_at if t.updated_at is None else _cut(t.updated_at, cap, ""),
                source=_cut(t.source, cap, ""),
            )
            for t in state.pending_tasks
        )
        optional = ("channel", "project", "user_id", "agent_id", "task_slug", "owner_host")
        changes: dict[str, Any] = {
            name: _cut(value, cap, "…")
            for name in optional
            if isinstance(value := getattr(state, name), str)
        }
        return replace(
            state,
            hot_topics=tuple(_cut(t, cap, "…") for t in state.hot_topics),
            active_projects=tuple(_cut(p, cap, "…") for p in state.active_projects),
            recent_learnings=tuple(_cut(i, cap, "") for i in state.recent_learnings),
            pending_tasks=tasks,
            **changes,
        )

    return step


def _drop_list_items(state: SessionState, overflow: int) -> SessionState:
    """Drop surplus pending tasks, then projects, then topics, each from the end of its list."""
    for name in ("pending_tasks", "active_projects", "hot_topics"):
        items: tuple[Any, ...] = getattr(state, name)
        size_of: Callable[[Any], int] = (
            (lambda t: _json_len(t.to_dict())) if name == "pending_tasks" else _json_len
        )
        kept = _drop_oldest(items[::-1], overflow, size_of)[::-1]
        overflow -= sum(size_of(x) + 1 for x in items[len(kept) :])
        changes: dict[str, Any] = {name: kept}
        state = replace(state, **changes)
        if overflow <= 0:
            break
    return state


def _last_resort(cap: int) -> Step:
    def step(state: SessionState, overflow: int) -> SessionState:
        names = (
            "session_id start_time end_time channel previous_session_id continued_by created_at "
            "updated_at state scope project user_id agent_id task_slug last_activity "
            "parent_session owner_host"
        ).split()
        changes: dict[str, Any] = {
            name: value[:cap] for name in names if isinstance(value := getattr(state, name), str)
        }

        def clamp(n: int) -> int:
            return max(-_MAX_INT, min(_MAX_INT, n))

        pid = state.owner_pid
        return replace(
            state,
            working_memory=(),
            hot_topics=(),
            active_projects=(),
            pending_tasks=(),
            recent_learnings=(),
            owner_pid=None if pid is None or clamp(pid) != pid else pid,
            schema_version=clamp(state.schema_version),
            checkpoint_count=clamp(state.checkpoint_count),
            **changes,
        )

    return step


def _drop_front(name: str, size_of: Callable[[Any], int]) -> Step:
    def step(state: SessionState, overflow: int) -> SessionState:
        changes: dict[str, Any] = {name: _drop_oldest(getattr(state, name), overflow, size_of)}
        return replace(state, **changes)

    return step


def _steps() -> list[Step]:
    """The trimming steps, least important content first (see the module docstring)."""
    return [
        lambda state, _overflow: replace(state, topic_state={}),
        _drop_front("confidence_updates", lambda c: _json_len(c.to_dict())),
        _drop_front("sop_interactions", lambda s: _json_len(s.to_dict())),
        _drop_front("recent_learnings", _json_len),
        lambda state, _overflow: replace(state, hot_topics=state.hot_topics[:MAX_HOT_TOPICS]),
        *(_trim_pins(False, cap) for cap in _PIN_CAPS),
        *(_trim_pins(True, cap) for cap in _PIN_CAPS),
        _drop_pins(False),
        *(_trim_strings(cap) for cap in _STRING_CAPS),
        _drop_list_items,
        _drop_pins(True),
        *(_last_resort(cap) for cap in _LAST_RESORT_CAPS),
    ]


def fit_record(state: SessionState, max_bytes: int = MAX_RECORD_BYTES) -> SessionState:
    """``state`` itself if it fits in ``max_bytes``, else a trimmed copy that does.

    Trims in the order of the module docstring, re-measuring after each step, and stops as
    soon as the record fits; it never raises on a record and always ends within the limit.

    Raises:
        ValueError: ``max_bytes`` is below ``MIN_RECORD_BYTES`` (a programming error).
    """
    if max_bytes < MIN_RECORD_BYTES:
        raise ValueError(f"max_bytes must be at least {MIN_RECORD_BYTES}, got {max_bytes}")
    size = _safe_size(state)
    for step in _steps():
        if size <= max_bytes:
            break
        trimmed = step(state, size - max_bytes)
        if trimmed != state:  # a step with nothing to trim costs no re-measure
            state = trimmed
            size = _safe_size(state)
    return state
