"""Request bodies of the HTTP API: pydantic models with limits on every string and list.

Unknown fields are refused (a typo is a 422, not a silently ignored option), and so is a value
of another JSON type than the document declares (strict): ``"5"`` for an integer, ``"true"``
or ``1`` for a boolean, ``"0.5"`` for a number, ``5`` for a string. A number is a JSON
integer or fraction (``1`` for ``1.0`` is fine), and an integer may be written ``5.0``, which
JSON Schema counts as an integer; ``5.5`` is refused, never cut to ``5``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from cortex.core.tenancy import REQUEST_ID_PATTERN


def _integral(value: object) -> object:
    """A JSON number without a fractional part (``5.0``) as the integer JSON Schema counts
    it; anything else as it came, for the strict check to refuse."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


INTEGRAL = BeforeValidator(_integral)
"""The last annotation of every integer field of a body, after its bounds (so that the
document still states them)."""
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@+-]*$"
"""A safe id (no '/'); '..' inside one is refused with 400 (the pattern cannot say it)."""
Id = Annotated[str, Field(min_length=1, max_length=128, pattern=ID_PATTERN)]
Short = Annotated[str, Field(max_length=200)]
Kind = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
"""A memory type: 1-64 letters, digits, - or _ (e.g. note, preference, decision)."""
Kinds = Annotated[list[Kind], Field(max_length=20)]
Text = Annotated[str, Field(max_length=20_000)]
Words = Annotated[list[Annotated[str, Field(max_length=200)]], Field(max_length=100)]
Lines = Annotated[list[Annotated[str, Field(max_length=2000)]], Field(max_length=100)]
MAX_OFFSET = 1_000_000
"""The largest ``offset`` of a listing (past it a 422: no backend is asked for a number it cannot
hold)."""
Offset = Annotated[int, Field(ge=0, le=MAX_OFFSET), INTEGRAL]
RequestId = Annotated[str | None, Field(default=None, pattern=f"^{REQUEST_ID_PATTERN}$")]
TaskSlug = Annotated[
    str,
    Field(
        pattern=r"^([a-z0-9][a-z0-9._-]{0,79})?$",
        description="The task's folder name (e.g. feat-user-auth); '..' inside one is refused "
        'with 400 (the pattern cannot say it), and "" is none.',
    ),
]


class Strict(BaseModel):
    """An answer's model: every field it carries, no other (``additionalProperties: false``)."""

    model_config = ConfigDict(extra="forbid")


class ParamPart(Strict):
    """A parameter an error names: its name as the services' keyword (this API's field or
    query parameter), an example ``value`` and the command line's placeholder (``metavar``)."""

    param: str
    value: str | None = None
    metavar: str | None = None


class CommandPart(Strict):
    """A next step an error names: a ``cortex`` command (``session start``) and what follows
    it (``args``); this API's message names the endpoint that does the same."""

    command: str
    args: str | None = None


ErrorCode = Literal[
    "unauthorized",
    "forbidden",
    "not_found",
    "method_not_allowed",
    "conflict",
    "validation_error",
    "payload_too_large",
    "unsupported_media_type",
    "rate_limited",
    "unavailable",
    "internal",
]


class ErrorDetail(Strict):
    code: ErrorCode = Field(
        description="Stable, for a program to branch on (the message is for people)."
    )
    message: str = Field(description="One line naming the next step.")
    parts: list[str | ParamPart | CommandPart] | None = Field(
        default=None,
        description="An error a Cortex service raised: its message as text and references "
        "to the parameters and commands it names, for a client to render in its own terms "
        "(joined in these terms they make `message`). Absent from other errors.",
    )


class ErrorOut(Strict):
    """Every error's body."""

    error: ErrorDetail


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut, "description": why}
    for status, why in (
        (400, "Bad input the schema cannot express (e.g. '..' in an id, an unknown session)"),
        (401, "Missing, unknown or revoked API key"),
        (403, "The key's scopes do not allow this"),
        (404, "No such session, memory, pin or task in this tenant"),
        (405, "The path takes other methods: see the Allow header"),
        (409, "Conflicts with the current state"),
        (413, "Request body too large"),
        (415, "The body is not sent as Content-Type: application/json"),
        (422, "The body or a parameter fails the schema"),
        (429, "Rate limited: wait Retry-After seconds"),
        (500, "A fault of the server (its log has the traceback)"),
        (503, "The database is unavailable or busy, or the tenant's settings are invalid"),
    )
}  # fmt: skip
PROBE_ERRORS: dict[int | str, dict[str, Any]] = {
    status: ERROR_RESPONSES[status] for status in (405, 413, 500)
}
"""What a probe (``/healthz``, ``/readyz``) may answer besides its 200: no key, no body."""


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Mutation(Body):
    request_id: RequestId = None


class DeleteIn(Mutation):
    """The optional body of a DELETE: only its ``request_id`` (a retry of a delete that
    succeeded answers ``{"duplicate": true}``, not a 404)."""


class StartIn(Mutation):
    session_id: Id | None = None
    channel: Short = "api"
    project: Short | None = None
    project_name: Short | None = None
    keywords: Words = []
    workdir: Annotated[str, Field(max_length=4096)] | None = None
    agent_id: Short | None = None
    user_id: Short | None = None
    task_slug: TaskSlug | None = None
    parent_session: Id | None = None
    explain: bool = False
    keep_ended: bool = False
    """A session that ended normally stays ended (409) instead of reopening; one crash
    recovery closed is reopened (a client's hook journals this reopen offline)."""


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


class CompactionIn(Mutation):
    trigger: Literal["auto", "manual"] = "auto"
    summary: Annotated[str, Field(max_length=20_000)] = ""


class EventIn(Mutation):
    content: Annotated[str, Field(min_length=1, max_length=64_000)]
    role: Literal["user", "assistant", "tool"] = "user"
    kind: Literal["message", "checkpoint", "summary", "event"] = "message"
    meaningful: bool = True


class SnapshotIn(Mutation):
    trigger: Literal["new_session", "reset", "manual", "auto_compaction"] = "manual"
    slug: Short | None = None


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
    budget_tokens: Annotated[int, Field(ge=0, le=200_000), INTEGRAL] | None = None
    query: Annotated[str, Field(max_length=2000)] | None = None
    include_session_summary: bool = False
    user_id: Short | None = None
    limit: Annotated[int, Field(ge=1, le=100), INTEGRAL] = 20


Layer = Literal["rule", "working", "long_term"]


MemoryText = Annotated[
    str,
    Field(
        min_length=1,
        description="Over 64 KB (after redaction) it is stored cut, with a marker line, as in "
        "a local home; the request body is at most 1 MiB.",
    ),
]


class MemoryAddIn(Mutation):
    content: MemoryText
    type: Kind | None = None
    layer: Layer | None = None
    scope: Literal["global", "project"] | None = None
    tags: Words = []
    project: Short | None = None
    user_id: Short | None = None
    confidence: Annotated[float, Field(ge=0, le=1)] = 1.0
    expires_at: Short | None = None
    upsert_key: Short | None = None
    session_id: Id | None = None
    remember_intent: Literal["explicit", "implicit"] | None = None


class MemoryEditIn(Mutation):
    id: Id | None = None
    upsert_key: Short | None = None
    project: Short | None = None
    content: MemoryText | None = None
    tags: Words | None = None
    type: Kind | None = None
    layer: Layer | None = None
    confidence: Annotated[float, Field(ge=0, le=1)] | None = None
    remember_intent: Literal["explicit", "implicit"] | None = None


class MemoryScopeIn(Body):
    """Which memories a list or search sees (a project's plus global ones by default)."""

    project: Short | None = None
    layer: Layer | None = None
    user_id: Short | None = None
    session_id: Id | None = None
    types: Kinds = []
    tags: Words = []
    all_projects: bool = False


class MemorySearchIn(MemoryScopeIn):
    query: Annotated[str, Field(min_length=1, max_length=2000)]
    limit: Annotated[int, Field(ge=1, le=100), INTEGRAL] = 10
    expand: bool = True


class MemoryListIn(MemoryScopeIn):
    limit: Annotated[int, Field(ge=1, le=1000), INTEGRAL] = 50
    offset: Offset = 0
    include_history: bool = False


class ConsolidateIn(Mutation):
    dry_run: bool = False
    project: Short | None = None
    user_id: Short | None = None
    extract: bool = True
