"""The pipeline state file (``pipeline/state.json``): where pending tasks come from.

Cortex reads it at capture and restore, and ``cortex task`` edits it for users without a
pipeline of their own. Edits keep every field Cortex does not know, so a real pipeline's file
survives a round trip; they are atomic and serialized by the file's lock.
"""

from __future__ import annotations

import json
from pathlib import Path

from cortex.core.redaction import redact
from cortex.core.tasks import pipeline_tasks
from cortex.errors import NotFoundError, ValidationError, command
from cortex.files import atomic_write_text, file_lock, read_json

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any


def load_pipeline(path: Path) -> dict[str, dict[str, Any]] | None:
    """Tasks of the file by id; None if the file does not exist.

    Raises ValidationError (one line, naming the file) when it is not a pipeline document.
    """
    read = _read(path)
    return None if read is None else read[1]


def _read(path: Path) -> tuple[Any, dict[str, dict[str, Any]]] | None:
    """The file's document as it is and its tasks by id; None if the file does not exist."""
    try:
        data = read_json(path)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValidationError(
            f"pipeline state file {path} is not valid JSON ({exc}); "
            "fix it or point pipeline_state_path elsewhere"
        ) from exc
    if data is None:
        return None
    try:
        return data, pipeline_tasks(data)
    except ValidationError as exc:
        raise ValidationError(f"pipeline state file {path}: {exc}") from exc


def _edit(path: Path, change: Any) -> dict[str, Any]:
    """Apply ``change(doc) -> task`` to the file's document under its lock; return the task."""
    with file_lock(path):
        try:
            doc = read_json(path)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValidationError(
                f"pipeline state file {path} is not valid JSON ({exc}); fix it before editing tasks"
            ) from exc
        doc = {"active_tasks": []} if doc is None else doc
        pipeline_tasks(doc)  # refuse to edit a document of the wrong shape
        task: dict[str, Any] = change(doc)
        atomic_write_text(path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return task


def _find(doc: dict[str, Any], task_id: str) -> dict[str, Any] | None:
    tasks = doc.get("active_tasks", doc.get("tasks", []))
    if isinstance(tasks, dict):
        found = tasks.get(task_id)
        return found if isinstance(found, dict) else None
    for task in tasks:
        if isinstance(task, dict) and str(task.get("task_id", task.get("id"))) == task_id:
            return task
    return None


def upsert_task(
    path: Path, task_id: str, title: str, stage: str, at: str, project: str | None = None
) -> dict[str, Any]:
    """Add a task or update its title and stage.

    ``project`` (a project identity) makes it pending for that project's sessions only; ``""``
    makes it every project's; None keeps what the task had.
    """

    def change(doc: dict[str, Any]) -> dict[str, Any]:
        task = _find(doc, task_id)
        if task is None:
            task = {"task_id": task_id}
            tasks = doc.setdefault("active_tasks", [])
            if isinstance(tasks, dict):
                tasks[task_id] = task
            else:
                tasks.append(task)
        task.update({"title": redact(title), "current_stage": stage, "updated_at": at})
        if project:
            task["project"] = project
        elif project == "":
            task.pop("project", None)
        return task

    return _edit(path, change)


def task_title(title: str, gate: str) -> str:
    """A protocol task's title in the pipeline: every preamble that lists it shows its gate."""
    return f"{title} [{gate}]"


def retitle_task(path: Path, task_id: str, title: str, at: str) -> None:
    """Give ``title`` to the task, when the pipeline holds it pending; nothing otherwise (no
    pipeline file is made, a task done keeps its last title)."""

    def change(doc: dict[str, Any]) -> dict[str, Any]:
        task = _find(doc, task_id)
        if task is not None and _pending(task):
            task.update({"title": redact(title), "updated_at": at})
        return task or {}

    if path.is_file():
        _edit(path, change)


def pending_title(path: Path, task_id: str) -> str | None:
    """The title of the task as the pipeline holds it pending (what ``retitle_task`` would
    replace); None when the file, the task or its pending stage is not there.

    Raises ValidationError (one line, naming the file) when it is not a pipeline document.
    """
    read = _read(path)
    task = None if read is None else _find(read[0], task_id)
    return str(task.get("title") or "") if task is not None and _pending(task) else None


def _pending(task: dict[str, Any]) -> bool:
    """Whether the file's entry is at a pending stage."""
    from cortex.core.tasks import PENDING_STAGES

    return task.get("current_stage", task.get("stage")) in PENDING_STAGES


def set_stage(path: Path, task_id: str, stage: str, at: str) -> dict[str, Any]:
    """Move an existing task to ``stage`` (e.g. ``done``)."""

    def change(doc: dict[str, Any]) -> dict[str, Any]:
        task = _find(doc, task_id)
        if task is None:
            raise NotFoundError(f"no task {task_id!r}; see {command('task list')}")
        task.pop("stage", None)
        task.update({"current_stage": stage, "updated_at": at})
        return task

    return _edit(path, change)
