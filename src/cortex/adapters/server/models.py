"""Request bodies of the HTTP API: pydantic models with limits on every string and list.

Unknown fields are refused (a typo is a 422, not a silently ignored option).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cortex.core.tenancy import REQUEST_ID_PATTERN

Id = Annotated[str, Field(min_length=1, max_length=128)]
Short = Annotated[str, Field(max_length=200)]
Text = Annotated[str, Field(max_length=20_000)]
Words = Annotated[list[Annotated[str, Field(max_length=200)]], Field(max_length=100)]
Lines = Annotated[list[Annotated[str, Field(max_length=2000)]], Field(max_length=100)]
RequestId = Annotated[str | None, Field(default=None, pattern=f"^{REQUEST_ID_PATTERN}$")]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Mutation(Body):
    request_id: RequestId = None


class StartIn(Mutation):
    session_id: Id | None = None
    channel: Short = "api"
    project: Short | None = None
    project_name: Short | None = None
    keywords: Words = []
    workdir: Annotated[str, Field(max_length=4096)] | None = None
    agent_id: Short | None = None
    user_id: Short | None = None
    task_slug: Short | None = None
    parent_session: Id | None = None
    explain: bool = False


class TurnIn(Mutation):
    text: Text | None = None
    workdir: Annotated[str, Field(max_length=4096)] | None = None
    categories: Words = []
    learning_id: Short | None = None
    tool_name: Short | None = None
    tool_input: dict[str, Any] | None = None
    files: Annotated[list[Annotated[str, Field(max_length=4096)]], Field(max_length=200)] = []
    weight: Annotated[float, Field(ge=0, le=100)] = 1.0


class EndIn(Mutation):
    session_id: Id


class CheckpointIn(Mutation):
    session_id: Id
    reason: Annotated[str, Field(max_length=2000)] = ""
    decisions: Lines = []
    next_steps: Lines = []


class ContinueIn(Mutation):
    target_session_id: Id


class PinIn(Mutation):
    content: Annotated[str, Field(min_length=1, max_length=2000)]
    critical: bool = False
    confidence: Annotated[float, Field(ge=0, le=1)] = 1.0


class ContextIn(Body):
    session_id: Id | None = None
    project: Short | None = None
    mode: Literal["rules_only", "working", "long_term", "all"] = "all"
    budget_tokens: Annotated[int, Field(ge=0, le=200_000)] | None = None
    query: Annotated[str, Field(max_length=2000)] | None = None
    include_session_summary: bool = True


Layer = Literal["rule", "working", "long_term"]


class MemoryAddIn(Mutation):
    content: Annotated[str, Field(min_length=1, max_length=20_000)]
    type: Short | None = None
    layer: Layer | None = None
    tags: Words = []
    project: Short | None = None
    upsert_key: Short | None = None
    session_id: Id | None = None
    remember_intent: Literal["explicit", "implicit"] | None = None


class MemoryEditIn(Mutation):
    id: Id | None = None
    upsert_key: Short | None = None
    project: Short | None = None
    content: Annotated[str, Field(min_length=1, max_length=20_000)] | None = None
    tags: Words | None = None
    type: Short | None = None
    layer: Layer | None = None
    confidence: Annotated[float, Field(ge=0, le=1)] | None = None
    remember_intent: Literal["explicit", "implicit"] | None = None


class MemorySearchIn(Body):
    query: Annotated[str, Field(min_length=1, max_length=2000)]
    limit: Annotated[int, Field(ge=1, le=100)] = 10
    project: Short | None = None
    layer: Layer | None = None


class ConsolidateIn(Mutation):
    dry_run: bool = False
    project: Short | None = None
    user_id: Short | None = None
    extract: bool = True
