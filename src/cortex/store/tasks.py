"""A tenant's pipeline tasks (the team server's pending work), in SQL both backends run.

Like the registry, the repository takes a backend's ``rows(sql, params)`` and
``execute(sql, params) -> rowcount``; the SQL uses ``%s`` placeholders, which SQLite's side
rewrites to ``?``. Every statement names the store's tenant. Tasks come back in the order
they were first added (``seq``), as a pipeline file keeps them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from cortex.core.tasks import TaskRecord
from cortex.store.records import dumps

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

    Rows = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
    Execute = Callable[[str, Sequence[Any]], int]


TASK_COLUMNS = "task_id, title, stage, created_at, updated_at, project, detail"


def task_from_row(row: Sequence[Any]) -> TaskRecord:
    task_id, title, stage, created_at, updated_at, project, detail = row
    try:
        extra = json.loads(detail) if detail else {}
    except ValueError:
        extra = {}
    return TaskRecord(
        task_id=str(task_id),
        title=str(title),
        stage=str(stage),
        created_at=str(created_at),
        updated_at=updated_at,
        project=project,
        detail=extra if isinstance(extra, dict) else {},
    )


class TaskRepository:
    """``TaskStore`` of one tenant over one backend's ``rows``/``execute``."""

    def __init__(self, rows: Rows, execute: Execute, tenant: str) -> None:
        self._rows = rows
        self._execute = execute
        self.tenant = tenant

    def _insert(self, task: TaskRecord, on_conflict: str) -> int:
        return self._execute(
            f"INSERT INTO tasks (tenant_id, {TASK_COLUMNS}) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
            f"ON CONFLICT (tenant_id, task_id) {on_conflict}",
            (self.tenant, task.task_id, task.title, task.stage, task.created_at,
             task.updated_at, task.project, dumps(dict(task.detail))),
        )  # fmt: skip

    def save_task(self, task: TaskRecord) -> None:
        self._insert(
            task,
            "DO UPDATE SET title = excluded.title, stage = excluded.stage, "
            "updated_at = excluded.updated_at, project = excluded.project, "
            "detail = excluded.detail",
        )

    def add_tasks(self, tasks: Sequence[TaskRecord]) -> int:
        return sum(self._insert(task, "DO NOTHING") for task in tasks)

    def get_task(self, task_id: str) -> TaskRecord | None:
        found = self._rows(
            f"SELECT {TASK_COLUMNS} FROM tasks WHERE tenant_id = %s AND task_id = %s",
            (self.tenant, task_id),
        )
        return task_from_row(found[0]) if found else None

    def list_tasks(
        self,
        *,
        stages: Sequence[str] | None = None,
        project: str | None = None,
        limit: int | None = None,
    ) -> list[TaskRecord]:
        if stages is not None and not stages:
            return []
        sql, params = self.tasks_query(stages=stages, project=project, limit=limit)
        return [task_from_row(row) for row in self._rows(sql, params)]

    def tasks_query(
        self,
        *,
        stages: Sequence[str] | None = None,
        project: str | None = None,
        limit: int | None = None,
    ) -> tuple[str, tuple[Any, ...]]:
        """The SELECT of ``list_tasks`` (a store may send it ahead of the call)."""
        where = ["tenant_id = %s"]
        params: list[Any] = [self.tenant]
        if stages is not None:
            where.append(f"stage IN ({', '.join('%s' for _ in stages)})")
            params += list(stages)
        if project is not None:
            where.append("(project IS NULL OR project = %s)")
            params.append(project)
        sql = f"SELECT {TASK_COLUMNS} FROM tasks WHERE {' AND '.join(where)} ORDER BY seq"
        if limit is not None:
            sql += " LIMIT %s"
            params.append(int(limit))
        return sql, tuple(params)
