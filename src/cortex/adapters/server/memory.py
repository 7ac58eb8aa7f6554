"""The memory, context and metrics endpoints."""

from __future__ import annotations

from fastapi import APIRouter

from cortex.adapters.server.answers import (
    AddedOut,
    ConsolidationOut,
    ContextOut,
    ForgottenOut,
    Memories,
    MemoryOut,
    MemoryShown,
    Results,
    VerifyOut,
    answers,
    once,
)
from cortex.adapters.server.auth import DUPLICATE, Id, Json, Reader, Writer
from cortex.adapters.server.models import (
    ConsolidateIn,
    ContextIn,
    DeleteIn,
    MemoryAddIn,
    MemoryEditIn,
    MemoryListIn,
    MemorySearchIn,
)
from cortex.core.memory_models import ContextResult, ScoredMemory
from cortex.errors import NotFoundError, ValidationError
from cortex.services.app import Services
from cortex.services.hosting import apply_once

router = APIRouter(prefix="/v1", tags=["memories"])
_PAGE = 200


def _found(found: ScoredMemory) -> Json:
    return {"memory": found.memory.to_dict(), "score": round(found.score, 6), "why": found.why}


def context_out(result: ContextResult) -> Json:
    """The context as the MCP ``get_context`` tool shapes it."""
    lines = [f"- [rule] {r.memory.content}" for r in result.rules]
    lines += [f"- [procedure] {p.procedure.text()}" for p in result.procedures]
    lines += [f"- [{m.memory.layer}] {m.memory.content}" for m in result.memories]
    block = result.session
    return {
        "mode": result.mode,
        "text": "\n".join(lines),
        "rules": [_found(r) for r in result.rules],
        "procedures": [p.to_dict() for p in result.procedures],
        "memories": [_found(m) for m in result.memories],
        "used_tokens": result.used_tokens,
        "dropped": result.dropped,
        "compaction_required": block.compaction_required if block else None,
        "latest_checkpoint_id": block.latest_checkpoint_id if block else None,
        "query": result.query,
        "budget_tokens": result.budget_tokens,
        "session": block.to_dict() if block else None,
        "session_summary": result.summary.to_dict() if result.summary else None,
    }


@router.post("/context/get", responses=answers(ContextOut))
def get_context(body: ContextIn, caller: Reader) -> Json:
    """Rules, then working, then long-term memories relevant to the work, within a budget."""
    with caller.services() as app:
        result = app.memory.get_context(
            body.query,
            mode=body.mode,
            budget_tokens=body.budget_tokens,
            session_id=body.session_id,
            project=body.project,
            user_id=body.user_id,
            limit=body.limit,
            include_session_summary=body.include_session_summary,
        )
    return context_out(result)


@router.post("/memories/add", responses=once(AddedOut))
def add(body: MemoryAddIn, caller: Writer) -> Json:
    """Add a memory; with ``upsert_key`` it supersedes the live one of that key."""
    with caller.services() as app:
        fields = body.model_dump(exclude={"request_id", "content"})
        result = apply_once(
            app, body.request_id, lambda: app.memory.add(body.content, actor="api", **fields)
        )
    return DUPLICATE if result is None else result.to_dict()


def _by_key(app: Services, upsert_key: str, project: str | None) -> str:
    """The id of the live memory holding ``upsert_key`` (of ``project`` or global)."""
    offset = 0
    while page := app.memory.list(limit=_PAGE, offset=offset, project=project):
        for memory in page:
            if memory.upsert_key == upsert_key:
                return memory.id
        offset += _PAGE
    raise NotFoundError(f"no live memory with upsert_key {upsert_key!r}; add one first")


@router.post("/memories/edit", responses=once(MemoryOut))
def edit(body: MemoryEditIn, caller: Writer) -> Json:
    """Edit a live memory in place (audited), named by ``id`` or by ``upsert_key``."""
    if not body.id and not body.upsert_key:
        raise ValidationError("name the memory to edit: give id or upsert_key")
    changes = body.model_dump(exclude={"request_id", "id", "upsert_key", "project"})
    with caller.services() as app:
        memory_id = body.id or _by_key(app, str(body.upsert_key), body.project)
        edited = apply_once(
            app, body.request_id, lambda: app.memory.edit(memory_id, actor="api", **changes)
        )
    return DUPLICATE if edited is None else edited.to_dict()


@router.post("/memories/search", responses=answers(Results))
def search(body: MemorySearchIn, caller: Reader) -> Json:
    """Memories best matching ``query`` (the same ranking as ``cortex memory search``)."""
    scope = body.model_dump(exclude={"query", "limit", "expand"})
    with caller.services() as app:
        hits = app.memory.search(body.query, limit=body.limit, expand=body.expand, **scope)
    return {"results": [h.to_dict() for h in hits]}


@router.post("/memories/list", responses=answers(Memories))
def list_memories(body: MemoryListIn, caller: Reader) -> Json:
    """Live memories newest first (with ``include_history``, superseded and expired too)."""
    scope = body.model_dump(exclude={"limit", "offset"})
    with caller.services() as app:
        found = app.memory.list(limit=body.limit, offset=body.offset, **scope)
    return {"memories": [m.to_dict() for m in found]}


@router.post("/memories/consolidate", responses=once(ConsolidationOut))
def consolidate(body: ConsolidateIn, caller: Writer) -> Json:
    """One consolidation run over the tenant's memories (``dry_run``: shadow mode, nothing
    changes); the run's audit row and its actions."""
    with caller.services() as app:
        report = apply_once(
            app,
            body.request_id,
            lambda: app.consolidation.run(
                dry_run=body.dry_run,
                project=body.project,
                user_id=body.user_id,
                extract=body.extract,
                actor="api",
            ),  # fmt: skip
        )
    return DUPLICATE if report is None else report.to_dict()


@router.get("/memories/{memory_id}", responses=answers(MemoryShown))
def show(memory_id: Id, caller: Reader) -> Json:
    with caller.services() as app:
        found = app.memory.get(memory_id)
        return found.to_dict() | {"links": [vars(link) for link in app.memory.links(memory_id)]}


@router.delete("/memories/{memory_id}", responses=once(ForgottenOut, "The memory forgotten"))
def forget(memory_id: Id, caller: Writer, body: DeleteIn | None = None) -> Json:
    """Forget a memory: never returned again; the row stays for the audit trail (the body,
    with its ``request_id``, is optional)."""
    request_id = body.request_id if body is not None else None
    with caller.services() as app:
        gone = apply_once(app, request_id, lambda: app.memory.forget(memory_id, actor="api"))
    return DUPLICATE if gone is None else gone.to_dict() | {"deleted": True}


@router.get("/metrics/verify", tags=["metrics"], responses=answers(VerifyOut))
def verify(caller: Reader) -> Json:
    """Check the tenant's metrics hash chain."""
    with caller.services() as app:
        report = app.metrics.verify()
    return {"ok": report.ok, "checked": report.checked, "problems": report.problems}
