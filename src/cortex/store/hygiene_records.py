"""Rows of the memory-hygiene tables every backend shares: consolidation runs, procedures and
the worker's job leases (``m015_memory_hygiene``).

JSON columns (a run's ``metadata``, a procedure's ``steps``) read back as text on SQLite and
as values on PostgreSQL (JSONB); ``json_value`` takes either.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from cortex.core.hygiene import ConsolidationRun, JobState, Procedure
from cortex.store.records import json_value

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

RUN_COLUMNS = (
    "id",
    "scope",
    "project_id",
    "user_id",
    "mode",
    "input_count",
    "candidate_count",
    "promoted_count",
    "merged_count",
    "superseded_count",
    "conflicted_count",
    "model",
    "created_at",
    "metadata",
)
PROCEDURE_COLUMNS = (
    "id",
    "procedure_key",
    "title",
    "steps",
    "scope",
    "project_id",
    "user_id",
    "source_session_id",
    "usage_count",
    "last_used_at",
    "created_at",
    "updated_at",
    "deleted_at",
)
JOB_COLUMNS = (
    "name",
    "owner",
    "locked_until",
    "last_started_at",
    "last_finished_at",
    "last_status",
    "last_detail",
)


def run_values(run: ConsolidationRun) -> tuple[Any, ...]:
    """``run`` as the values of ``RUN_COLUMNS`` (``metadata`` as a Python dict)."""
    return (
        run.id,
        run.scope,
        run.project,
        run.user_id,
        run.mode,
        run.input_count,
        run.candidate_count,
        run.promoted_count,
        run.merged_count,
        run.superseded_count,
        run.conflicted_count,
        run.model,
        run.created_at,
        run.metadata,
    )


def run_from_row(row: Sequence[Any]) -> ConsolidationRun:
    data = dict(zip(RUN_COLUMNS, row, strict=True))
    counts = {k: int(data[k]) for k in RUN_COLUMNS[5:11]}
    return ConsolidationRun(
        id=str(data["id"]),
        scope=str(data["scope"]),
        project=data["project_id"],
        user_id=data["user_id"],
        mode=str(data["mode"]),
        model=data["model"],
        created_at=str(data["created_at"]),
        metadata=json_value(data["metadata"], dict, "consolidation run metadata"),
        **counts,
    )


def procedure_values(p: Procedure) -> tuple[Any, ...]:
    """``p`` as the values of ``PROCEDURE_COLUMNS`` (``steps`` as a Python list)."""
    return (
        p.id,
        p.procedure_key,
        p.title,
        list(p.steps),
        p.scope,
        p.project,
        p.user_id,
        p.source_session_id,
        p.usage_count,
        p.last_used_at,
        p.created_at,
        p.updated_at,
        p.deleted_at,
    )


def procedure_from_row(row: Sequence[Any]) -> Procedure:
    data = dict(zip(PROCEDURE_COLUMNS, row[: len(PROCEDURE_COLUMNS)], strict=True))
    return Procedure(
        id=str(data["id"]),
        procedure_key=str(data["procedure_key"]),
        title=str(data["title"]),
        steps=tuple(str(s) for s in json_value(data["steps"], list, "procedure steps")),
        scope=str(data["scope"]),
        project=data["project_id"],
        user_id=data["user_id"],
        source_session_id=data["source_session_id"],
        usage_count=int(data["usage_count"]),
        last_used_at=data["last_used_at"],
        created_at=str(data["created_at"]),
        updated_at=str(data["updated_at"]),
        deleted_at=data["deleted_at"],
    )


def job_from_row(row: Sequence[Any]) -> JobState:
    data = dict(zip(JOB_COLUMNS, row, strict=True))
    detail = data["last_detail"]
    return JobState(
        name=str(data["name"]),
        owner=data["owner"],
        locked_until=data["locked_until"],
        last_started_at=data["last_started_at"],
        last_finished_at=data["last_finished_at"],
        last_status=data["last_status"],
        last_detail=json.loads(detail) if isinstance(detail, str) and detail else {},
    )
