"""The records of memory hygiene: consolidation runs, procedures and the worker's job leases.

Frozen dataclasses like ``cortex.core.memory_models``; ``to_dict()`` gives the JSON form the
CLI, MCP and HTTP adapters print.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

SHADOW = "shadow"
APPLY = "apply"
RUN_MODES = (SHADOW, APPLY)


@dataclass(frozen=True)
class ConsolidationRun:
    """The audit row of one consolidation run: what it read and what it changed (or, in
    shadow mode, would have changed)."""

    id: str
    scope: str
    project: str | None
    user_id: str | None
    mode: str
    input_count: int
    candidate_count: int
    promoted_count: int
    merged_count: int
    superseded_count: int
    conflicted_count: int
    model: str | None
    created_at: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "scope": self.scope,
            "project": self.project,
            "user_id": self.user_id,
            "mode": self.mode,
            "input_count": self.input_count,
            "candidate_count": self.candidate_count,
            "promoted_count": self.promoted_count,
            "merged_count": self.merged_count,
            "superseded_count": self.superseded_count,
            "conflicted_count": self.conflicted_count,
            "model": self.model,
            "created_at": self.created_at,
            "metadata": self.metadata,
        }


@dataclass(frozen=True)
class Procedure:
    """A reusable workflow: numbered steps under a stable ``procedure_key``, with the usage
    signals that rank it (how often it was used, when last)."""

    id: str
    procedure_key: str
    title: str
    steps: tuple[str, ...]
    scope: str = "global"
    project: str | None = None
    user_id: str | None = None
    source_session_id: str | None = None
    usage_count: int = 0
    last_used_at: str | None = None
    created_at: str = ""
    updated_at: str = ""
    deleted_at: str | None = None

    def text(self) -> str:
        """The procedure as the agent reads it: its title, then its numbered steps."""
        lines = [self.title] + [f"{n}. {step}" for n, step in enumerate(self.steps, 1)]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "procedure_key": self.procedure_key,
            "title": self.title,
            "steps": list(self.steps),
            "scope": self.scope,
            "project": self.project,
            "user_id": self.user_id,
            "source_session_id": self.source_session_id,
            "usage_count": self.usage_count,
            "last_used_at": self.last_used_at,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "deleted_at": self.deleted_at,
        }


@dataclass(frozen=True)
class JobState:
    """A worker job's lease and its last outcome, as the store keeps them."""

    name: str
    owner: str | None
    locked_until: str | None
    last_started_at: str | None
    last_finished_at: str | None
    last_status: str | None
    last_detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "owner": self.owner,
            "locked_until": self.locked_until,
            "last_started_at": self.last_started_at,
            "last_finished_at": self.last_finished_at,
            "last_status": self.last_status,
            "last_detail": self.last_detail,
        }
