"""Pending-task detection: the pure parts.

The session service reads ``pipeline/state.json`` and passes the parsed JSON here; these
functions normalise it, turn in-progress tasks and task-like pins into ``PendingTask``s, and
decide at restore time which surfaced tasks are still pending.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from cortex.core.models import PendingTask, Pin
from cortex.core.redaction import redact
from cortex.errors import ValidationError

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

PENDING_STAGES = ("build", "verify", "validate")
DONE_STAGES = ("done", "complete", "completed", "closed", "cancelled", "abandoned")
STAGES = (
    PENDING_STAGES
    + tuple(
        "design review test testing plan planning research implement implementation deploy "
        "requirements spec draft".split()
    )
    + DONE_STAGES
)
"""Every stage Cortex knows, pending ones first (what ``cortex task add --stage`` accepts)."""
KNOWN_STAGES = frozenset(STAGES)
"""Words that ``scan_pins_for_tasks`` accepts as a stage in "stage: X" or "X stage"."""
SOURCE_PIPELINE = "pipeline_state"
SOURCE_PINS = "working_memory_scan"
MAX_TITLE_CHARS = 120

_FIX = "fix pipeline/state.json or delete it"
# Patterns as text, with their flags inline: ``re`` compiles each at its first use and keeps
# it in its own cache. Compiled at import, the ten cost every session start ~1.5 ms, and a
# start without task-like pins uses none of them.
_TASK_ID = r"(?i)\btask-\d+(?:-[a-z0-9]+)*"
_MARKERS = r"(?i)\[TASK\]|\bincomplete\b|\bTODO\b|\bin[- ]progress\b|\bWIP\b"
_OPEN_MARKERS = r"(?i)\bincomplete\b|\bin[- ]progress\b|\bWIP\b"
_NEGATED_DONE = (
    r"(?i)\b(?:not|isn't|aren't|never)\s+(?:yet\s+)?(?:done|completed?|finished|closed)\b"
)
_DONE = r"(?i)\b(?:done|completed?|finished|closed)\b|\[DONE\]|\[x\]|✅"
_STAGE_AFTER = r"(?i)\b(?:stage|phase)\s*[:=]?\s*([a-z][\w-]*)"
_STAGE_BEFORE = r"(?i)\b([a-z][\w-]*)\s+(?:stage|phase)\b"
_PROVENANCE = r"(?i)\s*\[inherited from [^\]]*\]"
_TAG = r"(?i)\[TASK\]\s*"
_SLUG = r"[^a-z0-9]+"


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _identifier(value: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _text(value)


def _normalize_task(raw: Any, default_id: str | None, position: int) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise ValidationError(f"pipeline task #{position} is not an object; {_FIX}")
    task_id = _identifier(raw.get("task_id")) or _identifier(raw.get("id")) or default_id
    if not task_id:
        raise ValidationError(f'pipeline task #{position} has no "task_id"; add one or {_FIX}')
    task = {
        "task_id": task_id,
        "title": _text(raw.get("title")) or _text(raw.get("name")) or task_id,
        "stage": _text(raw.get("current_stage")) or _text(raw.get("stage")) or "",
        "updated_at": _text(raw.get("updated_at")) or _text(raw.get("last_activity")),
    }
    project = _text(raw.get("project"))
    return task | {"project": project} if project else task


def pipeline_tasks(data: Any) -> dict[str, dict[str, Any]]:
    """Normalise a pipeline state document into ``task_id -> {task_id, title, stage, updated_at}``.

    Accepts ``{"active_tasks": [...]}``, ``{"active_tasks": {id: {...}}}`` and ``{"tasks": [...]}``;
    a task may spell its fields ``task_id|id``, ``title|name``, ``current_stage|stage`` and
    ``updated_at|last_activity``. A document with neither key has no tasks.

    Raises:
        ValidationError: the document, its task collection or a task has the wrong shape.
    """
    if not isinstance(data, Mapping):
        raise ValidationError(
            f'pipeline state must be a JSON object with an "active_tasks" list; {_FIX}'
        )
    entries = data.get("active_tasks", data.get("tasks"))
    if entries is None:
        return {}
    if isinstance(entries, Mapping):
        pairs: Iterable[tuple[str | None, Any]] = ((str(k), v) for k, v in entries.items())
    elif isinstance(entries, list):
        pairs = ((None, v) for v in entries)
    else:
        raise ValidationError(f'pipeline "active_tasks" must be a list or an object; {_FIX}')
    tasks: dict[str, dict[str, Any]] = {}
    for position, (default_id, raw) in enumerate(pairs, start=1):
        task = _normalize_task(raw, default_id, position)
        tasks.setdefault(task["task_id"], task)
    return tasks


@dataclass(frozen=True)
class TaskRecord:
    """A pipeline task as a store keeps it (a team server's tenant tasks).

    ``project`` None: every project's task. ``detail`` holds the fields of a pipeline file's
    entry that Cortex does not read, so that an imported task loses nothing.
    """

    task_id: str
    title: str
    stage: str
    created_at: str
    updated_at: str | None = None
    project: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The task as ``pipeline_tasks`` normalizes a file's entry (``project`` when set)."""
        task = {
            "task_id": self.task_id,
            "title": self.title,
            "stage": self.stage,
            "updated_at": self.updated_at,
        }
        return task | {"project": self.project} if self.project else task


def is_pending_stage(stage: str) -> bool:
    """Whether a task at ``stage`` is pending work (build, verify, validate)."""
    return stage.strip().lower() in PENDING_STAGES


def _is_done_stage(stage: str) -> bool:
    return stage.strip().lower() in DONE_STAGES


def task_in_project(task: Mapping[str, Any], project: str | None) -> bool:
    """A task names the project it belongs to, or none (then every session sees it)."""
    owner = task.get("project")
    return not owner or owner == project


def pending_from_pipeline(
    tasks: Mapping[str, Mapping[str, Any]],
    stages: Iterable[str] = PENDING_STAGES,
    project: str | None = None,
) -> list[PendingTask]:
    """Tasks whose stage is one of ``stages`` (build/verify/validate), in document order,
    of ``project`` or of no project (``task_in_project``); titles redacted (a pipeline's file
    is written by tools Cortex does not control)."""
    wanted = {s.lower() for s in stages}
    return [
        PendingTask(
            task_id=str(task["task_id"]),
            title=redact(str(task.get("title") or task["task_id"])),
            stage=str(task.get("stage") or ""),
            flagged_incomplete=False,
            updated_at=task.get("updated_at"),
            source=SOURCE_PIPELINE,
        )
        for task in tasks.values()
        if str(task.get("stage") or "").lower() in wanted and task_in_project(task, project)
    ]


def _pin_is_done(text: str) -> bool:
    """Marked done ("done", "completed", ✅...) and not also marked open (WIP, in progress)."""
    cleaned = re.sub(_NEGATED_DONE, " ", text)
    return bool(re.search(_DONE, cleaned)) and not re.search(_OPEN_MARKERS, cleaned)


def _stage_of(text: str) -> str:
    for pattern in (_STAGE_AFTER, _STAGE_BEFORE):
        for match in re.finditer(pattern, text):
            if match.group(1).lower() in KNOWN_STAGES:
                return match.group(1).lower()
    return "in-progress"


def _title_of(pin: Pin, task_id: str | None) -> str:
    label = re.sub(_TAG, "", re.sub(_PROVENANCE, "", pin.label)).strip()
    if not label or label.lower() == (task_id or "").lower():
        lines = pin.content.strip().splitlines()
        label = re.sub(_TAG, "", lines[0]).strip() if lines else ""
    flat = " ".join(label.split()) or task_id or "untitled task"
    return flat if len(flat) <= MAX_TITLE_CHARS else flat[: MAX_TITLE_CHARS - 1] + "…"


def _pin_task_id(pin: Pin, found: re.Match[str] | None) -> str:
    if found:
        return found.group().lower()
    label = re.sub(_TAG, "", re.sub(_PROVENANCE, "", pin.label)).lower()
    slug = re.sub(_SLUG, "-", label).strip("-")[:40].strip("-")
    return "pin:" + (slug or "untitled")


def scan_pins_for_tasks(pins: Iterable[Pin]) -> list[PendingTask]:
    """Tasks that pins mention as unfinished (``task-NNN``, ``[TASK]``, TODO, WIP, ...).

    A pin marked done is skipped. The id is the first ``task-NNN[-slug]`` in the pin, else
    ``pin:<label slug>``; the stage is read from "stage: X" / "X stage" when it names a known
    stage, else ``in-progress``; the title is the label (or the content's first line).
    """
    found: list[PendingTask] = []
    for pin in pins:
        text = f"{re.sub(_PROVENANCE, '', pin.label)}\n{pin.content}"
        task_match = re.search(_TASK_ID, text)
        if not (task_match or re.search(_MARKERS, text)) or _pin_is_done(text):
            continue
        task_id = _pin_task_id(pin, task_match)
        found.append(
            PendingTask(
                task_id=task_id,
                title=_title_of(pin, task_match.group() if task_match else None),
                stage=_stage_of(text),
                flagged_incomplete=True,
                updated_at=pin.pinned_at or None,
                source=SOURCE_PINS,
            )
        )
    return merge_tasks(found)


def _refreshed(task: PendingTask, current: Mapping[str, Any]) -> PendingTask:
    return PendingTask(
        task_id=task.task_id,
        title=str(current.get("title") or task.title),
        stage=str(current.get("stage") or task.stage),
        flagged_incomplete=task.flagged_incomplete,
        updated_at=current.get("updated_at") or task.updated_at,
        source=task.source,
    )


def still_pending(
    tasks: Iterable[PendingTask],
    pipeline: Mapping[str, Mapping[str, Any]] | None,
    project: str | None = None,
) -> list[PendingTask]:
    """The surfaced tasks that are still pending now (filtered on restore).

    ``pipeline`` is ``pipeline_tasks(...)`` of the current file, or None when the file is
    missing. Pipeline-sourced tasks are dropped when done or absent (or when there is no
    file); pin-sourced tasks are dropped only when the pipeline marks them done. A task the
    pipeline knows gets its current stage and title; one it says belongs to a project other
    than ``project`` is dropped (a record written before tasks named their project).
    """
    by_id = {str(k).lower(): v for k, v in (pipeline or {}).items()}
    kept: list[PendingTask] = []
    for task in tasks:
        current = by_id.get(task.task_id.lower())
        if current is None:
            if task.source == SOURCE_PIPELINE:
                continue
            kept.append(task)
        elif not _is_done_stage(str(current.get("stage") or "")) and task_in_project(
            current, project
        ):
            kept.append(_refreshed(task, current))
    return kept


def merge_tasks(*groups: Iterable[PendingTask]) -> list[PendingTask]:
    """All tasks of ``groups`` in order, one per task id (case-insensitive); the first wins."""
    seen: set[str] = set()
    merged: list[PendingTask] = []
    for group in groups:
        for task in group:
            key = task.task_id.lower()
            if key not in seen:
                seen.add(key)
                merged.append(task)
    return merged
