"""The pipeline task endpoints: a tenant's pending work, the same on every machine of it.

The tasks live in the tenant's database rows; the session starts and turns of the tenant
carry them in their preambles and records, as a laptop's do with its pipeline file.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import Field

from cortex.adapters.server.answers import TaskOut, TaskPut, Tasks, answers, once
from cortex.adapters.server.auth import DUPLICATE, Id, Json, Reader, Writer
from cortex.adapters.server.models import Mutation, Short
from cortex.core.tasks import STAGES
from cortex.services.hosting import apply_once
from cortex.services.tasks import MAX_TITLE_CHARS

router = APIRouter(prefix="/v1", tags=["tasks"])
Stage = Annotated[str, Field(pattern="^(?i:" + "|".join(STAGES) + ")$")]


class TaskIn(Mutation):
    title: Annotated[str, Field(min_length=1, max_length=MAX_TITLE_CHARS)]
    stage: Stage = Field(
        default="build", description="build, verify and validate count as pending."
    )
    project: Short | None = Field(
        default=None,
        description="The project identity the task belongs to; absent keeps the task's, "
        'and "" makes it every project\'s.',
    )
    new_project: Short | None = Field(
        default=None,
        description="With no project: the project a new task belongs to (an existing task "
        "keeps its own).",
    )


class TaskDoneIn(Mutation):
    pass


@router.get("/tasks", responses=answers(Tasks))
def listing(
    caller: Reader,
    pending: bool = False,
    project: Annotated[str | None, Query(max_length=200)] = None,
) -> Json:
    """The tenant's tasks in the order they were added, each with ``pending``; with
    ``pending=true`` only pending ones, with ``project`` that project's and those of none."""
    with caller.services() as app:
        found = app.tasks.list_tasks(pending_only=pending, project=project or None)
    return {"tasks": found}


@router.put("/tasks/{task_id}", responses=once(TaskPut))
def put(task_id: Id, body: TaskIn, caller: Writer) -> Json:
    """Add a task, or update its title and stage (its title is redacted)."""
    with caller.services() as app:
        task = apply_once(
            app,
            body.request_id,
            lambda: app.tasks.add(
                task_id, body.title, body.stage, body.project, new_project=body.new_project
            ),
        )
    return DUPLICATE if task is None else task


@router.post("/tasks/{task_id}/done", responses=once(TaskOut))
def done(task_id: Id, caller: Writer, body: TaskDoneIn | None = None) -> Json:
    """Mark a task done: later preambles leave it out (the body, with its ``request_id``, is
    optional)."""
    request_id = body.request_id if body is not None else None
    with caller.services() as app:
        task = apply_once(app, request_id, lambda: app.tasks.done(task_id))
    return DUPLICATE if task is None else task
