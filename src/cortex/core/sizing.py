"""Keep a session record under its size limit (at most 50 KB serialized).

``fit_record`` trims the least valuable content first and stops as soon as the record fits:

1. the serialized topic accumulator (``topic_state``), which the next turn rebuilds;
2. confidence updates, then SOP interactions, oldest first; hot topics beyond 20;
3. pin content beyond what a pin may hold (``MAX_PIN_CHARS``), NORMAL pins before CRITICAL
   ones, and labels beyond ``MAX_LABEL_CHARS``: text no ``pin add`` could have stored;
4. recent learnings, oldest first; very long strings (topics, projects, task titles...);
5. pending tasks: pipeline tasks, oldest and lowest stage first, before the tasks pins flag
   (the pipeline file still holds them; every turn re-reads it);
6. hot topics from the least hot, then active projects; short caps on other strings;
7. pin content, cut evenly: the longest pins are cut to one common length (marked
   ``…[trimmed]``), NORMAL pins first, never below ``MIN_PIN_CHARS``;
8. as a last resort, identity and time strings.

Pins are never dropped: a record that still does not fit is refused with a
``ValidationError`` (one line, naming the next step), so the write that caused it fails
instead of losing a pin silently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from cortex.core.jsontext import compact_encoder
from cortex.core.models import PendingTask, Pin, SessionState
from cortex.core.pins import MAX_LABEL_CHARS, MAX_PIN_CHARS
from cortex.errors import ValidationError, command

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any, TypeVar

    T = TypeVar("T")

MAX_RECORD_BYTES = 50_000
MIN_RECORD_BYTES = 8_192
"""The smallest limit ``fit_record`` accepts."""
TRIMMED = "…[trimmed]"
MAX_HOT_TOPICS = 20
MIN_PIN_CHARS = 200
"""Pin content is never cut below this; a record that needs more is refused."""
_STRING_CAPS = (1000, 200)
_SHORT_CAPS = (50,)
_LAST_RESORT_CAPS = (64, 16)
_MAX_INT = 2**53
_STAGE_RANK = {"build": 0, "verify": 1, "validate": 2}

Step = Callable[[SessionState, int], SessionState]


_COMPACT = compact_encoder(default=str)
"""Compact JSON, ``ensure_ascii=False``, from an encoder built once (a record's ``to_dict``
holds no cycle; one that did would raise ``RecursionError``, which ``_safe_size`` takes as
"too big", as it takes ``json.dumps``'s ``ValueError``)."""


def _json_len(value: Any) -> int:
    """UTF-8 bytes of ``value`` as the stores write it (compact JSON, ``ensure_ascii=False``)."""
    return len(_COMPACT(value).encode("utf-8", "surrogatepass"))


def record_size(state: SessionState) -> int:
    """Bytes of the record as stored: compact JSON of ``state.to_dict()``, UTF-8."""
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


def _cut_pins(pins: tuple[Pin, ...], critical: bool, cap: int) -> tuple[Pin, ...]:
    return tuple(
        replace(pin, content=_cut(pin.content, cap)) if pin.is_critical == critical else pin
        for pin in pins
    )


def _over_limit_pins(critical: bool) -> Step:
    """Cut content no pin may hold (and over-long labels) of NORMAL or CRITICAL pins."""

    def step(state: SessionState, overflow: int) -> SessionState:
        pins = tuple(
            replace(pin, label=_cut(pin.label, MAX_LABEL_CHARS, "…"))
            if pin.is_critical == critical
            else pin
            for pin in _cut_pins(state.working_memory, critical, MAX_PIN_CHARS)
        )
        return replace(state, working_memory=pins)

    return step


def _even_cut_pins(critical: bool) -> Step:
    """Cut the longest pins of one importance to a common length, just enough to fit.

    The largest common cap (not below ``MIN_PIN_CHARS``) whose record fits is found by
    bisection, so short pins stay whole and no pin is cut to nothing.
    """

    def step(state: SessionState, overflow: int) -> SessionState:
        pins = state.working_memory
        longest = max((len(p.content) for p in pins if p.is_critical == critical), default=0)
        if longest <= MIN_PIN_CHARS:
            return state
        limit = record_size(state) - overflow  # the byte limit fit_record is aiming for

        def fits(cap: int) -> bool:
            trimmed = replace(state, working_memory=_cut_pins(pins, critical, cap))
            return _safe_size(trimmed) <= limit

        if not fits(MIN_PIN_CHARS):
            return replace(state, working_memory=_cut_pins(pins, critical, MIN_PIN_CHARS))
        low, high = MIN_PIN_CHARS, longest  # fits(low) holds; find the largest cap that fits
        while low < high:
            middle = (low + high + 1) // 2
            if fits(middle):
                low = middle
            else:
                high = middle - 1
        return replace(state, working_memory=_cut_pins(pins, critical, low))

    return step


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


def _task_value(task: PendingTask) -> tuple[bool, str, int]:
    """Sort key, least valuable first: pipeline before flagged, oldest, earliest stage."""
    return (
        task.flagged_incomplete,
        task.updated_at or "",
        _STAGE_RANK.get(task.stage.lower(), -1),
    )


def _without_least_valuable(
    tasks: tuple[PendingTask, ...], overflow: int, sizes: list[int]
) -> tuple[PendingTask, ...]:
    """Drop the least valuable tasks until ``overflow`` bytes are freed; order kept."""
    order = sorted(range(len(tasks)), key=lambda i: (_task_value(tasks[i]), -i))
    dropped: set[int] = set()
    removed = 0
    for index in order:
        if removed >= overflow:
            break
        dropped.add(index)
        removed += sizes[index] + 1
    return tuple(task for i, task in enumerate(tasks) if i not in dropped)


def _drop_tasks(state: SessionState, overflow: int) -> SessionState:
    """Drop the least valuable pending tasks until ``overflow`` bytes are freed; order kept."""
    tasks = state.pending_tasks
    sizes = [_json_len(task.to_dict()) for task in tasks]
    return replace(state, pending_tasks=_without_least_valuable(tasks, overflow, sizes))


def tasks_that_can_fit(
    tasks: tuple[PendingTask, ...], max_bytes: int = MAX_RECORD_BYTES
) -> tuple[PendingTask, ...]:
    """``tasks`` without the least valuable ones that ``fit_record`` would drop in any record:
    those beyond ``max_bytes`` of tasks alone. Lets a caller trim a long pipeline once, before
    it takes the write lock, instead of re-measuring hundreds of tasks while holding it."""
    sizes = [_json_len(task.to_dict()) for task in tasks]
    overflow = sum(sizes) + len(sizes) - max_bytes
    return tasks if overflow <= 0 else _without_least_valuable(tasks, overflow, sizes)


def _drop_from_end(name: str) -> Step:
    """Drop items from the end of a ranked list (the least hot topic, the last project)."""

    def step(state: SessionState, overflow: int) -> SessionState:
        items: tuple[str, ...] = getattr(state, name)
        changes: dict[str, Any] = {name: _drop_oldest(items[::-1], overflow, _json_len)[::-1]}
        return replace(state, **changes)

    return step


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
    """The trimming steps, least valuable content first (see the module docstring)."""
    return [
        lambda state, _overflow: replace(state, topic_state={}),
        _drop_front("confidence_updates", lambda c: _json_len(c.to_dict())),
        _drop_front("sop_interactions", lambda s: _json_len(s.to_dict())),
        lambda state, _overflow: replace(state, hot_topics=state.hot_topics[:MAX_HOT_TOPICS]),
        _over_limit_pins(False),
        _over_limit_pins(True),
        _drop_front("recent_learnings", _json_len),
        *(_trim_strings(cap) for cap in _STRING_CAPS),
        _drop_tasks,
        _drop_from_end("hot_topics"),
        _drop_from_end("active_projects"),
        *(_trim_strings(cap) for cap in _SHORT_CAPS),
        _even_cut_pins(False),
        _even_cut_pins(True),
        *(_last_resort(cap) for cap in _LAST_RESORT_CAPS),
    ]


def fit_record(state: SessionState, max_bytes: int = MAX_RECORD_BYTES) -> SessionState:
    """``state`` itself if it fits in ``max_bytes``, else a trimmed copy that does.

    Trims in the order of the module docstring, re-measuring after each step, and stops as
    soon as the record fits. Every pin is kept (its content may be cut, evenly).

    Raises:
        ValidationError: even trimmed, the pins do not fit (one line, naming the next step).
        ValueError: ``max_bytes`` is below ``MIN_RECORD_BYTES`` (a programming error).
    """
    if max_bytes < MIN_RECORD_BYTES:
        raise ValueError(f"max_bytes must be at least {MIN_RECORD_BYTES}, got {max_bytes}")
    size = _safe_size(state)
    if size <= max_bytes:  # the common case: no trimming steps to build
        return state
    for step in _steps():
        if size <= max_bytes:
            return state
        trimmed = step(state, size - max_bytes)
        if trimmed != state:  # a step with nothing to trim costs no re-measure
            state = trimmed
            size = _safe_size(state)
    if size > max_bytes:
        raise ValidationError(
            f"session {_cut(state.session_id, 64, '…')} would exceed {max_bytes:,} bytes even "
            f"with its {len(state.working_memory)} pins cut to {MIN_PIN_CHARS} characters; "
            f"remove a pin with {command('pin remove', ' LABEL')}"
        )
    return state
