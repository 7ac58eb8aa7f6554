"""Pipeline tasks: where pending work comes from, and ``TaskService`` to list and edit it.

A ``TaskSource`` is the one seam between the session use cases and the tasks they carry:
``PipelineFile`` reads and edits a home's ``pipeline/state.json`` (the local engine, and
any real pipeline that writes that file); ``StoreTasks`` keeps a tenant's tasks in the
database (the team server, so that every machine of a tenant sees the same pending work).
Both hand tasks in the shape ``core.tasks.pipeline_tasks`` gives (``task_id -> {task_id,
title, stage, updated_at[, project]}``), so capture and restore run one code path whichever
source they read.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from cortex.clock import Clock
from cortex.config import Config
from cortex.core.plaintext import plain, storable
from cortex.core.redaction import redact, redact_value, refuse_secret
from cortex.core.tasks import (
    DONE_STAGES,
    KNOWN_STAGES,
    PENDING_STAGES,
    STAGES,
    TaskRecord,
    is_pending_stage,
    pipeline_tasks,
    task_in_project,
)
from cortex.errors import NotFoundError, ValidationError, command
from cortex.files import check_id
from cortex.services.base import Service

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any, Protocol

    from cortex.store.protocol import Store

    Tasks = Mapping[str, dict[str, Any]]
else:
    Protocol = object  # a protocol is for mypy only; nothing checks one at run time

MAX_TITLE_CHARS = 500


class TaskSource(Protocol):
    """Where a home's (or a tenant's) pipeline tasks live."""

    def version(self) -> object:
        """A value that changes whenever the tasks may have changed (reads are cached by it)."""
        ...

    def tasks(self) -> Tasks | None:
        """Every task by id; None when there is no task list at all. Raises ``CortexError``
        when the tasks cannot be read."""
        ...

    def pending(self) -> Tasks | None:
        """At least every task at a pending stage (a source may give them all)."""
        ...

    def upsert(
        self, task_id: str, title: str, stage: str, at: str, project: str | None
    ) -> dict[str, Any]:
        """Add the task or update its title and stage (``project``: None keeps the task's,
        ``""`` makes it every project's); the task as ``tasks`` gives it."""
        ...

    def set_stage(self, task_id: str, stage: str, at: str) -> dict[str, Any]:
        """Move an existing task to ``stage``; ``NotFoundError`` when there is none."""
        ...


class PipelineFile:
    """The tasks of a pipeline state file (read again only when the file changed)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def version(self) -> object:
        try:
            info = self.path.stat()
        except OSError:
            return None
        return (info.st_ino, info.st_size, info.st_mtime_ns)

    def tasks(self) -> Tasks | None:
        from cortex.services.pipeline import load_pipeline

        return load_pipeline(self.path)

    pending = tasks

    def upsert(
        self, task_id: str, title: str, stage: str, at: str, project: str | None
    ) -> dict[str, Any]:
        from cortex.services.pipeline import upsert_task

        return _normalized(upsert_task(self.path, task_id, title, stage, at, project))

    def set_stage(self, task_id: str, stage: str, at: str) -> dict[str, Any]:
        from cortex.services.pipeline import set_stage

        return _normalized(set_stage(self.path, task_id, stage, at))


def _normalized(entry: dict[str, Any]) -> dict[str, Any]:
    return pipeline_tasks({"active_tasks": [entry]})[str(entry["task_id"])]


class StoreTasks:
    """A tenant's tasks in its store; read afresh for each unit of work (``version`` moves
    with every write made through this source, and a server opens one per request)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._writes = 0

    def version(self) -> object:
        return (id(self), self._writes)

    def tasks(self) -> Tasks:
        return {t.task_id: t.to_dict() for t in self.store.list_tasks()}

    def pending(self) -> Tasks:
        return {t.task_id: t.to_dict() for t in self.store.list_tasks(stages=PENDING_STAGES)}

    def upsert(
        self, task_id: str, title: str, stage: str, at: str, project: str | None
    ) -> dict[str, Any]:
        with self.store.transaction():
            found = self.store.get_task(task_id)
            kept = found.project if found is not None else None
            task = TaskRecord(
                task_id=task_id,
                title=redact(title),
                stage=stage,
                created_at=found.created_at if found is not None else at,
                updated_at=at,
                project=kept if project is None else project or None,
                detail=found.detail if found is not None else {},
            )
            self.store.save_task(task)
        self._writes += 1
        return task.to_dict()

    def set_stage(self, task_id: str, stage: str, at: str) -> dict[str, Any]:
        with self.store.transaction():
            found = self.store.get_task(task_id)
            if found is None:
                raise NotFoundError(f"no task {task_id!r}; see {command('task list')}")
            task = TaskRecord(
                task_id, found.title, stage, found.created_at, at, found.project, found.detail
            )
            self.store.save_task(task)
        self._writes += 1
        return task.to_dict()


_READ_FIELDS = frozenset(
    "task_id id title name current_stage stage updated_at last_activity project".split()
)
"""The fields of a pipeline entry Cortex reads (``core.tasks.pipeline_tasks``)."""


def imported(tasks: Tasks, raw: Mapping[str, Any] | None, at: str) -> list[TaskRecord]:
    """A pipeline file's tasks as records to store: stage in lower case, title redacted,
    every field Cortex does not read kept (redacted) in ``detail``."""
    entries = _raw_entries(raw)
    records = []
    for task_id, task in tasks.items():
        extra = {k: v for k, v in entries.get(task_id, {}).items() if k not in _READ_FIELDS}
        records.append(
            TaskRecord(
                task_id=task_id,
                title=redact(str(task.get("title") or task_id)),
                stage=str(task.get("stage") or "").strip().lower(),
                created_at=str(task.get("updated_at") or at),
                updated_at=task.get("updated_at"),
                project=task.get("project"),
                detail=redact_value(extra),
            )
        )
    return records


def _raw_entries(raw: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """A pipeline document's entries by id, as written (for the fields Cortex does not read)."""
    entries = (raw or {}).get("active_tasks", (raw or {}).get("tasks"))
    if isinstance(entries, Mapping):
        pairs = [(str(k), v) for k, v in entries.items()]
    elif isinstance(entries, list):
        pairs = [(str(v.get("task_id", v.get("id"))), v) for v in entries if isinstance(v, dict)]
    else:
        pairs = []
    return {k: dict(v) for k, v in pairs if isinstance(v, Mapping)}


def task_view(task: Mapping[str, Any]) -> dict[str, Any]:
    """A task as ``cortex task`` and the HTTP API show it: its fields and ``pending``."""
    return {**task, "pending": is_pending_stage(str(task.get("stage") or ""))}


def check_stage(stage: str) -> str:
    """``stage`` in lower case if Cortex knows it, else a one-line ``ValidationError``."""
    cleaned = stage.strip().lower()
    if cleaned not in KNOWN_STAGES:
        raise ValidationError(f"unknown stage {stage!r}; use one of {', '.join(STAGES)}")
    return cleaned


def check_title(title: str) -> str:
    """``title`` on one line, within ``MAX_TITLE_CHARS``, else a ``ValidationError``."""
    flat = " ".join(str(title).split())
    if len(flat) > MAX_TITLE_CHARS:
        raise ValidationError(f"task title is over {MAX_TITLE_CHARS} characters; shorten it")
    return flat


class TaskService(Service):
    """List, add and finish pipeline tasks over one ``TaskSource``."""

    def __init__(
        self, store: Store, config: Config, clock: Clock | None, source: TaskSource
    ) -> None:
        super().__init__(store, config, clock)
        self.source = source

    def list_tasks(
        self, *, pending_only: bool = False, project: str | None = None
    ) -> list[dict[str, Any]]:
        """Tasks in order with their ``pending`` flag; of ``project`` (and of no project)
        when it is given; only pending ones with ``pending_only``."""
        plain(project, "project")
        read = self.source.pending() if pending_only else self.source.tasks()
        views = [task_view(task) for task in (read or {}).values()]
        return [
            v
            for v in views
            if (v["pending"] or not pending_only)
            and (project is None or task_in_project(v, project))
        ]

    def add(
        self,
        task_id: str,
        title: str,
        stage: str = "build",
        project: str | None = None,
        *,
        new_project: str | None = None,
    ) -> dict[str, Any]:
        """Add ``task_id`` or update its title and stage (see ``TaskSource.upsert``).

        ``project`` is the one asked for (``""``: every project's); None keeps an existing
        task's own and gives a new one ``new_project``, so that updating a task from another
        directory does not move it; a task moved to another project says where it was
        (``moved_from``, ``""`` for every project). An id that holds a credential is refused:
        ids are stored and shown as they are."""
        plain(task_id, "task_id")
        project, new_project = plain(project, "project"), plain(new_project, "project")
        tid = check_id(refuse_secret(task_id, "task id") or "", "task id")
        project = redact(project) if project else project
        new_project = redact(new_project) if new_project else new_project
        before = None
        if project is not None or new_project is not None:
            before = (self.source.tasks() or {}).get(tid)
        if project is None and before is None:
            project = new_project
        task = self.source.upsert(
            tid, redact(storable(check_title(title))), check_stage(stage), self.now_iso(), project
        )
        view = task_view(task)
        was = before.get("project") or "" if before is not None else None
        if was is not None and was != (view.get("project") or ""):
            view["moved_from"] = was
        return view

    def done(self, task_id: str) -> dict[str, Any]:
        """Mark ``task_id`` done: later preambles leave it out."""
        return task_view(
            self.source.set_stage(
                check_id(plain(task_id, "task_id"), "task id"), DONE_STAGES[0], self.now_iso()
            )
        )
