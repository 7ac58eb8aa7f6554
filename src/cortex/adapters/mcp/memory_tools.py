"""The MCP tools over long-term memory, checkpoints and snapshots (registered by ``server``).

Each tool is one small method over ``MemoryService`` or ``CompactionService`` (and its
``EventLog``), which share the session tools' services. Memories are scoped to this directory's
project (the same id the sessions carry) plus global ones; a memory added while a session is
open records that session as its source.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from pydantic import Field
from typing_extensions import TypedDict

from cortex.adapters.mcp.scope import QueuedOut, SessionIdArg, ToolContext, given, tool_errors
from cortex.core.memory_models import Memory, ScoredMemory
from cortex.core.transcripts import format_checkpoint
from cortex.services.memory import MAX_KEY_CHARS
from cortex.services.memory_checks import MAX_FILTER_TAGS

Layer = Literal["rule", "working", "long_term"]
Mode = Literal["rules_only", "working", "long_term", "all"]
MAX_OFFSET = 1_000_000_000
"""More memories than a project holds, less than SQLite's largest integer."""
TAGS_CAP = f"at most {MAX_FILTER_TAGS}"
Texts = Annotated[tuple[Annotated[str, Field(max_length=2000)], ...], Field(max_length=50)]


class MemoryOut(TypedDict):
    id: str
    content: str
    layer: str
    type: str
    scope: str
    project: str | None
    tags: list[str]
    upsert_key: str | None
    confidence: float
    created_at: str
    expires_at: str | None


class FoundOut(TypedDict):
    memory: MemoryOut
    score: float
    why: str


class AddOut(TypedDict):
    memory: MemoryOut
    superseded_id: str | None
    queued: QueuedOut | None


class ForgetOut(MemoryOut):
    queued: QueuedOut | None


class SearchOut(TypedDict):
    query: str
    results: list[FoundOut]


class ContextOut(TypedDict):
    mode: str
    text: str
    rules: list[FoundOut]
    memories: list[FoundOut]
    used_tokens: int
    dropped: int
    compaction_required: bool | None
    latest_checkpoint_id: str | None
    session_summary: dict[str, Any] | None


class ListOut(TypedDict):
    memories: list[MemoryOut]
    count: int


class ActionOut(TypedDict):
    kind: str
    keep_id: str
    other_id: str | None
    reason: str


class ConsolidateOut(TypedDict):
    run_id: str
    applied: bool
    input_count: int
    promoted_count: int
    merged_count: int
    superseded_count: int
    conflicted_count: int
    actions: list[ActionOut]


class CheckpointOut(TypedDict):
    checkpoint_id: str
    session_id: str
    text: str
    queued: QueuedOut | None


class SnapshotOut(TypedDict):
    snapshot_id: str
    session_id: str
    slug: str
    message_count: int
    transcript_md: str


def memory_out(memory: Memory) -> MemoryOut:
    return {
        "id": memory.id,
        "content": memory.content,
        "layer": memory.layer,
        "type": memory.type,
        "scope": memory.scope,
        "project": memory.project,
        "tags": list(memory.tags),
        "upsert_key": memory.upsert_key,
        "confidence": memory.confidence,
        "created_at": memory.created_at,
        "expires_at": memory.expires_at,
    }


def found_out(found: ScoredMemory) -> FoundOut:
    return {"memory": memory_out(found.memory), "score": round(found.score, 6), "why": found.why}


def context_text(
    rules: list[FoundOut], memories: list[FoundOut], procedures: Sequence[str] = ()
) -> str:
    """The context as lines the model can read at a glance: rules, the workflows that fit the
    task, then memories."""
    lines = [f"- [rule] {r['memory']['content']}" for r in rules]
    lines += [f"- [procedure] {text}" for text in procedures]
    lines += [f"- [{m['memory']['layer']}] {m['memory']['content']}" for m in memories]
    return "\n".join(lines)


class MemoryTools:
    """Memory, checkpoint and snapshot tools over the shared ``ToolContext``."""

    def __init__(self, context: ToolContext) -> None:
        self.context = context

    async def add_memory(
        self,
        ctx: Context,
        content: Annotated[
            str, Field(description="The fact, decision or preference, in one or a few lines.")
        ],
        layer: Annotated[
            Layer,
            Field(
                description="long_term: kept until superseded or forgotten; working: a "
                "scratchpad note that expires (24 h by default); rule: always put in context."
            ),
        ] = "long_term",
        type: Annotated[
            str, Field(description="A kind, e.g. note, decision, preference.", max_length=64)
        ] = "note",
        tags: Annotated[
            tuple[Annotated[str, Field(max_length=64)], ...],
            Field(description="Words to find it by.", max_length=20),
        ] = (),
        upsert_key: Annotated[
            str | None,
            Field(
                description="A stable name for this fact, e.g. 'db-port'. A new memory with "
                "the same key replaces the old one (which is kept as history).",
                max_length=MAX_KEY_CHARS,
            ),
        ] = None,
        scope: Annotated[
            Literal["project", "global"],
            Field(description="project: only this project sees it; global: every project."),
        ] = "project",
    ) -> AddOut:
        """Remember something beyond this session: a decision, a fact about the project, a
        user preference.

        Use it when the user says "remember ...", when a decision is made that later sessions
        must respect, or when you learn a durable fact (a port, a convention, a command). Use
        working_memory_pin instead for what this session must keep in view right now. Pass an
        upsert_key for facts that change (the newest wins; the old one is kept as history).
        Credentials are redacted before storage. Returns the stored memory and, on an upsert,
        the id of the memory it replaced.
        """
        with tool_errors():
            since = self.context.mark()
            session = await self.context.open_session(ctx)
            project = (await self.context.identity(ctx)).id
            added = self.context.services.memory.add(
                content,
                layer=layer,
                type=type,
                tags=tags,
                upsert_key=upsert_key,
                scope=scope,
                project=project if scope == "project" else None,
                session_id=session,
                remember_intent="explicit",
                actor="mcp",
            )
        return {
            "memory": memory_out(added.memory),
            "superseded_id": added.superseded_id,
            "queued": self.context.queued(since),
        }

    async def search_memories(
        self,
        ctx: Context,
        query: Annotated[str, Field(description="Words to look for.", max_length=2000)],
        layer: Annotated[Layer | None, Field(description="Only this layer.")] = None,
        limit: Annotated[int, Field(description="Most results.", ge=1, le=50)] = 10,
    ) -> SearchOut:
        """Search the memories of this project (and global ones) by words.

        Use it before answering from assumption: earlier decisions, conventions, facts the user
        told an earlier session. Results come best first, each with a score and a one-line
        reason it matched.
        """
        with tool_errors():
            project = (await self.context.identity(ctx)).id
            found = self.context.services.memory.search(
                query, limit=limit, layer=layer, project=project
            )
        return {"query": query, "results": [found_out(f) for f in found]}

    async def list_memories(
        self,
        ctx: Context,
        layer: Annotated[Layer | None, Field(description="Only this layer.")] = None,
        types: Annotated[
            tuple[Annotated[str, Field(max_length=64)], ...],
            Field(description="Only these types, e.g. decision, preference.", max_length=20),
        ] = (),
        tags: Annotated[
            Annotated[
                tuple[Annotated[str, Field(max_length=64)], ...],
                Field(max_length=MAX_FILTER_TAGS),
            ]
            | str,
            Field(description=f"Only memories with all these tags (a list or 'a,b'), {TAGS_CAP}."),
        ] = (),
        limit: Annotated[int, Field(description="Most memories.", ge=1, le=200)] = 50,
        offset: Annotated[int, Field(description="Skip this many first.", ge=0, le=MAX_OFFSET)] = 0,
    ) -> ListOut:
        """List the live memories of this project (and global ones), newest first.

        Use it to see what is remembered without a query: the rules (layer=rule), the working
        scratchpad (layer=working), or long-term facts of a type. layer=long_term excludes
        rules and working notes. Use search_memories to find memories by words.
        """
        with tool_errors():
            project = (await self.context.identity(ctx)).id
            found = self.context.services.memory.list(
                limit=limit, offset=offset, layer=layer, types=types, tags=tags, project=project
            )
        return {"memories": [memory_out(m) for m in found], "count": len(found)}

    async def consolidate_memories(
        self,
        ctx: Context,
        dry_run: Annotated[
            bool,
            Field(description="true (the default): only report what would change."),
        ] = True,
    ) -> ConsolidateOut:
        """Tidy this project's memories: merge duplicates, let a newer explicit statement
        replace an older one on the same subject, link conflicting statements, and promote
        facts stated in recent sessions to long-term memory.

        Call it with dry_run=true first and read the actions; call with dry_run=false to apply
        them when they look right, or when the user asks to clean up memory. Nothing is ever
        deleted: replaced memories stay as history, and every run is recorded.
        """
        with tool_errors():
            project = (await self.context.identity(ctx)).id
            report = self.context.services.consolidation.run(
                dry_run=dry_run, project=project, actor="mcp"
            )
        run = report.run
        return {
            "run_id": run.id,
            "applied": report.applied,
            "input_count": run.input_count,
            "promoted_count": run.promoted_count,
            "merged_count": run.merged_count,
            "superseded_count": run.superseded_count,
            "conflicted_count": run.conflicted_count,
            "actions": [
                {"kind": a.kind, "keep_id": a.keep_id, "other_id": a.other_id, "reason": a.reason}
                for a in report.actions
            ],
        }

    async def get_context(
        self,
        ctx: Context,
        query: Annotated[
            str | None, Field(description="What you are working on.", max_length=2000)
        ] = None,
        mode: Annotated[
            Mode, Field(description="Which layers besides the rules: all by default.")
        ] = "all",
        budget_tokens: Annotated[
            int | None, Field(description="Most tokens of memory to return.", ge=0, le=200_000)
        ] = None,
        session_id: SessionIdArg = None,
        include_session_summary: Annotated[
            bool,
            Field(
                description="Also list the session's latest snapshot headers and its latest "
                "checkpoint summary (after a compaction or a reset)."
            ),
        ] = False,
    ) -> ContextOut:
        """Get the memories relevant to the current work: rules first, then working and
        long-term memories, within a token budget.

        Call it at the start of a task (with a query describing the task) or after a context
        compaction. With an open session it also says whether compaction is due and names the
        latest checkpoint. Returns the items and a ready-to-read text block.
        """
        with tool_errors():
            sid = given(session_id) or await self.context.open_session(ctx)
            project = (await self.context.identity(ctx)).id
            result = self.context.services.memory.get_context(
                query, mode=mode, budget_tokens=budget_tokens, session_id=sid, project=project,
                include_session_summary=include_session_summary,
            )  # fmt: skip
        rules = [found_out(r) for r in result.rules]
        memories = [found_out(m) for m in result.memories]
        block = result.session
        return {
            "mode": result.mode,
            "text": context_text(rules, memories, [p.procedure.text() for p in result.procedures]),
            "rules": rules,
            "memories": memories,
            "used_tokens": result.used_tokens,
            "dropped": result.dropped,
            "compaction_required": block.compaction_required if block else None,
            "latest_checkpoint_id": block.latest_checkpoint_id if block else None,
            "session_summary": result.summary.to_dict() if result.summary else None,
        }

    async def forget_memory(
        self,
        ctx: Context,
        memory_id: Annotated[str, Field(description="The memory's id.", max_length=128)],
    ) -> ForgetOut:
        """Forget a memory that is wrong or no longer wanted (the user asks you to, or it was
        superseded by events). It is never returned again; the record is kept for audit.
        Returns the forgotten memory.
        """
        with tool_errors():
            since = self.context.mark()
            forgotten = self.context.services.memory.forget(memory_id, actor="mcp")
        return {**memory_out(forgotten), "queued": self.context.queued(since)}

    async def checkpoint_session(
        self,
        ctx: Context,
        summary: Annotated[
            str, Field(description="Where the work stands, in a few lines.", max_length=4000)
        ] = "",
        next_steps: Annotated[Texts, Field(description="What to do next, in order.")] = (),
        decisions: Annotated[Texts, Field(description="Decisions made so far.")] = (),
        session_id: SessionIdArg = None,
    ) -> CheckpointOut:
        """Write a checkpoint of the current session: what must survive a restart or a
        compaction (pins, pending tasks, rules, decisions, working memories, next steps).

        Call it at a milestone, before a risky step, or before stopping mid-task; a later
        session or your own context after compaction resumes from it. Returns the checkpoint
        id and its text as it will be re-injected.
        """
        with tool_errors():
            since = self.context.mark()
            sid = await self.context.session_id_for(ctx, session_id)
            checkpoint = self.context.services.compaction.checkpoint(
                sid, summary=summary, next_steps=next_steps, decisions=decisions
            )
        return {
            "checkpoint_id": checkpoint.checkpoint_id,
            "session_id": sid,
            "text": format_checkpoint(checkpoint),
            "queued": self.context.queued(since),
        }

    async def snapshot_session(self, ctx: Context, session_id: SessionIdArg = None) -> SnapshotOut:
        """Save and return a markdown transcript of the current session's meaningful events
        (prompts, answers, checkpoints, summaries), as recorded so far.

        Use it to review what a session did, or to hand a session's story to the user.
        Each call stores a new snapshot.
        """
        with tool_errors():
            sid = await self.context.session_id_for(ctx, session_id)
            snap = self.context.services.events.snapshot(sid, "manual")
        return {
            "snapshot_id": snap.id,
            "session_id": sid,
            "slug": snap.slug,
            "message_count": snap.message_count,
            "transcript_md": snap.transcript_md,
        }
