"""CLI commands of the memory lifecycle: ``memory add|list|search|recall|show|edit|forget``,
the hygiene views ``memory stale|review``, and ``memory embed`` (hybrid search's backfill)."""

from __future__ import annotations

from collections.abc import Sequence

import click

from cortex.adapters.cli import plain
from cortex.adapters.cli.plain import format_memory
from cortex.adapters.cli.runtime import (
    CONTEXT,
    F,
    Runtime,
    UsageLine,
    clean,
    filled,
    pass_rt,
    project_option,
    session_option,
    text_or_stdin,
    user_option,
)
from cortex.core.memory_models import ContextResult, Memory
from cortex.services.review import ReviewQueue


@click.group(context_settings=CONTEXT)
def memory() -> None:
    """Layered memories: rules, working memory (expires) and long-term memory.

    \b
    Example:
      cortex memory add "Deploys go to eu-west-1" --project api
    """


@memory.command("add", context_settings=CONTEXT)
@click.argument("content")
@click.option(
    "--layer",
    help="rule, working or long_term (default: long_term; rule for rules).",
    callback=filled("the default layer", "rule, working or long_term"),
)
@click.option("--type", "kind", help="Memory type, e.g. rule, preference, decision, fact.")
@click.option(
    "--scope",
    help="global or project (default: project when --project is given).",
    callback=filled("the default scope", "global or project"),
)
@project_option("Project the memory belongs to.", "the session's project")
@user_option("User the memory belongs to.", "a memory of no user")
@click.option("--tags", help="Comma-separated tags.")
@click.option("--upsert-key", help="Replace the live memory with this key (one current truth).")
@session_option("Session the memory came from (its project is the default).")
@click.option("--explicit", is_flag=True, help="remember_intent=explicit: the user asked for it.")
@click.option("--confidence", default=1.0, show_default=True, type=float)
@click.option(
    "--expires-at",
    metavar="ISO-8601",
    help="Expiry, later than now (working memory: now + TTL).",
    callback=filled("the layer's default expiry", "an ISO-8601 time"),
)
@pass_rt
def memory_add(
    rt: Runtime,
    content: str,
    layer: str | None,
    kind: str | None,
    scope: str | None,
    project: str | None,
    user_id: str | None,
    tags: str | None,
    upsert_key: str | None,
    session_id: str | None,
    explicit: bool,
    confidence: float,
    expires_at: str | None,
) -> None:
    """Add a memory (CONTENT, or - to read standard input).

    \b
    Example:
      cortex memory add "Deploys go to eu-west-1" --project api --upsert-key deploy-region
    """
    result = rt.services.memory.add(
        text_or_stdin(content),
        layer=layer,
        type=kind,
        scope=scope,
        project=rt.project(project),
        user_id=user_id,
        tags=clean(tags),
        upsert_key=clean(upsert_key),
        session_id=session_id,
        remember_intent="explicit" if explicit else None,
        confidence=confidence,
        expires_at=expires_at,
        actor="cli",
    )
    note = f" (supersedes {result.superseded_id})" if result.superseded_id else ""
    rt.emit(result.to_dict(), f"added {result.memory.layer} memory {result.memory.id}{note}")


def _scope_options(command: F) -> F:
    """The filter options ``list`` and ``search`` share."""
    for option in reversed(
        [
            click.option(
                "--layer",
                help="Only this layer: rule, working or long_term.",
                callback=filled("every layer", "rule, working or long_term"),
            ),
            project_option("This project's memories plus global ones.", "global memories only"),
            click.option("--user", "user_id", help="This user's memories plus shared ones."),
            session_option("Only memories from this session."),
            click.option("--type", "types", multiple=True, help="Only this type (repeatable)."),
            click.option("--tags", help="Only memories with all these comma-separated tags."),
        ]
    ):
        command = option(command)
    return command


@memory.command("list", context_settings=CONTEXT)
@_scope_options
@click.option("--all-projects", is_flag=True, help="Every project's memories.")
@click.option("--history", is_flag=True, help="Also superseded and expired memories.")
@click.option("--limit", default=50, show_default=True, type=int)
@click.option("--offset", default=0, show_default=True, type=int)
@pass_rt
def memory_list(rt: Runtime, /, limit: int, offset: int, history: bool, **scope: object) -> None:
    """List live memories, newest first.

    \b
    Example:
      cortex memory list --layer long_term --project api
    """
    service = rt.services.memory
    scope = {**scope, "project": rt.project(scope.get("project"))}  # type: ignore[arg-type]
    found = service.list(limit=limit, offset=offset, include_history=history, **scope)

    def text() -> str:
        lines = [format_memory(m) for m in found] or ["no memories"]
        if not (scope.get("project") or scope.get("session_id") or scope.get("all_projects")):
            widened = {**scope, "all_projects": True}
            lines += _hidden_note(service.list(limit=1000, offset=0, **widened))
        return "\n".join(lines)

    rt.emit([m.to_dict() for m in found], text)


def _hidden_note(everything: Sequence[Memory]) -> list[str]:
    """The line saying how many project memories a list without --project left out."""
    hidden = sum(m.scope == "project" for m in everything)
    if not hidden:
        return []
    count = f"{hidden:,}+" if len(everything) >= 1000 else f"{hidden:,}"
    noun = "memory" if hidden == 1 else "memories"
    return [f"{count} project {noun} hidden; add --project NAME or --all-projects"]


@memory.command("search", context_settings=CONTEXT)
@click.argument("query", nargs=-1, required=True)
@_scope_options
@click.option(
    "--limit",
    default=10,
    show_default=True,
    type=int,
    help="Most results, 1-1000; the first 10 are those of a search of 10, whatever the limit.",
)
@click.option("--no-expand", is_flag=True, help="Skip the one-hop expansion over links.")
@pass_rt
def memory_search(
    rt: Runtime, /, query: tuple[str, ...], limit: int, no_expand: bool, **scope: object
) -> None:
    """Search memories: full text (BM25), fallback LIKE, plus linked memories. The query's
    words may come as one argument or several.

    \b
    Example:
      cortex memory search "which region do we deploy to?" --project api
      cortex memory search deploy region --limit 3
    """
    plain.memory_search(rt, " ".join(query), limit, no_expand, **scope)


@memory.command("recall", context_settings=CONTEXT)
@click.argument("query", nargs=-1)
@click.option("--mode", default="all", show_default=True, help="rules_only|working|long_term|all")
@click.option(
    "--layer",
    type=click.Choice(["rule", "working", "long_term"]),
    help="Layer filter: rule, working or long_term (same as the matching --mode).",
)
@click.option("--budget", "budget_tokens", type=int, help="Most tokens of memory to return.")
@session_option("Add the session block; the session's project by default.")
@project_option("This project's memories plus global ones.", "the session's project")
@click.option("--user", "user_id", help="This user's memories plus shared ones.")
@click.option("--limit", default=20, show_default=True, type=int, help="Most per layer.")
@click.option(
    "--session-summary",
    is_flag=True,
    help="With --session-id: the latest snapshot headers and checkpoint summary.",
)
@pass_rt
def memory_recall(
    rt: Runtime,
    query: tuple[str, ...],
    mode: str,
    layer: str | None,
    budget_tokens: int | None,
    session_id: str | None,
    project: str | None,
    user_id: str | None,
    limit: int,
    session_summary: bool,
) -> None:
    """Assemble context: rules, then working, then long-term memories, within a budget.
    The query's words may come as one argument or several.

    \b
    Example:
      cortex memory recall "auth refactor" --mode all --budget 4000 --project api
    """
    if layer is not None:
        mode = {"rule": "rules_only"}.get(layer, layer)
    result = rt.services.memory.get_context(
        clean(" ".join(query)) or None,
        mode=mode,
        budget_tokens=budget_tokens,
        session_id=session_id,
        project=rt.project(project),
        user_id=user_id,
        limit=limit,
        include_session_summary=session_summary,
    )
    rt.emit(result.to_dict(), lambda: format_context(result))


def format_context(r: ContextResult) -> str:
    budget = "no budget" if r.budget_tokens is None else f"budget {r.budget_tokens:,}"
    lines = [f"context ({r.mode}): {r.used_tokens:,} tokens, {budget}, {r.dropped} dropped"]
    if r.rules:  # a heading only over something
        lines += ["RULES:"] + [f"- {s.memory.content}" for s in r.rules]
    if r.procedures:
        lines += ["PROCEDURES:"] + [p.procedure.text() for p in r.procedures]
    if r.memories:
        lines += ["MEMORIES:"] + [f"- [{s.memory.layer}] {s.memory.content}" for s in r.memories]
    if r.session is not None:
        s = r.session
        lines.append(
            f"SESSION {s.session_id}: {s.status}, compaction "
            f"{'required' if s.compaction_required else 'not required'}"
            + (f" ({s.trigger_hint})" if s.trigger_hint else "")
            + f", latest checkpoint {s.latest_checkpoint_id or '-'}"
        )
    if r.summary is not None:
        if r.summary.checkpoint_summary:
            lines.append(f"LAST CHECKPOINT: {r.summary.checkpoint_summary}")
        lines += [f"SNAPSHOT {n.slug} ({n.source_trigger}, {n.message_count} messages, "
                  f"{n.created_at})" for n in r.summary.snapshots]  # fmt: skip
    return "\n".join(lines)


@memory.command("show", context_settings=CONTEXT)
@click.argument("memory_id")
@pass_rt
def memory_show(rt: Runtime, memory_id: str) -> None:
    """Show one memory, live or not, with its links.

    \b
    Example:
      cortex memory show 3f2a9c1e
    """
    service = rt.services.memory
    found = service.get(memory_id)
    links = [vars(link) for link in service.links(memory_id)]
    rt.emit(
        found.to_dict() | {"links": links},
        lambda: (
            format_memory(found)
            + "".join(f"\n    {lk['kind']}: {lk['from_id']} -> {lk['to_id']}" for lk in links)
        ),
    )


@memory.command("edit", context_settings=CONTEXT)
@click.argument("memory_id")
@click.option("--content", help="New content (- reads standard input).")
@click.option(
    "--layer",
    help="Move to rule, working or long_term.",
    callback=filled("the layer it has", "rule, working or long_term"),
)
@click.option("--type", "kind", help="New type.")
@click.option("--tags", help="Replace the tags (comma-separated).")
@click.option("--confidence", type=float, help="New confidence, 0-1.")
@click.option("--explicit", is_flag=True, help="Mark remember_intent=explicit (confirmed now).")
@click.option("--upsert-key", help="Set the upsert key ('' clears it).")
@pass_rt
def memory_edit(
    rt: Runtime,
    memory_id: str,
    content: str | None,
    layer: str | None,
    kind: str | None,
    tags: str | None,
    confidence: float | None,
    explicit: bool,
    upsert_key: str | None,
) -> None:
    """Edit a live memory in place (audited).

    \b
    Example:
      cortex memory edit 3f2a9c1e --confidence 0.6 --tags infra,deploy
    """
    changes = (content, layer, kind, tags, confidence, upsert_key)
    if all(change is None for change in changes) and not explicit:
        raise UsageLine(
            "nothing to change; pass --content, --layer, --type, --tags, --confidence, "
            "--explicit or --upsert-key"
        )
    edited = rt.services.memory.edit(
        memory_id,
        actor="cli",
        content=text_or_stdin(content) if content is not None else None,
        layer=layer,
        type=kind,
        tags=clean(tags),
        confidence=confidence,
        remember_intent="explicit" if explicit else None,
        upsert_key=clean(upsert_key),
    )
    rt.emit(edited.to_dict(), f"edited {edited.id}")


@memory.command("forget", context_settings=CONTEXT)
@click.argument("memory_id")
@pass_rt
def memory_forget(rt: Runtime, memory_id: str) -> None:
    """Forget a memory: never returned again; the row stays for the audit trail.

    \b
    Example:
      cortex memory forget 3f2a9c1e
    """
    gone = rt.services.memory.forget(memory_id, actor="cli")
    rt.emit(gone.to_dict(), f"forgot {gone.id}")


@memory.command("embed", context_settings=CONTEXT)
@click.option("--batch", default=256, show_default=True, type=click.IntRange(1, 10_000),
              help="Memories embedded per step.")  # fmt: skip
@pass_rt
def memory_embed(rt: Runtime, batch: int) -> None:
    """Embed the memories added before the embedder setting was on, for hybrid search.

    Memories are embedded as they are added once ``embedder`` is set; this embeds the older
    ones, and all of them again when the setting names another model (a count on stderr after
    each batch). It needs the embeddings extra.

    \b
    Examples:
      CORTEX_EMBEDDER=minilm cortex memory embed
      cortex --set embedder=~/models/nomic-embed-text-v1.5 memory embed
    """
    service = rt.services.memory

    def progress(done: int) -> None:
        click.echo(f"embed: {done} memories", err=True)

    count = service.embed_missing(batch=batch, progress=progress)
    model = service.embedder.model if service.embedder is not None else None
    rt.emit({"embedded": count, "model": model}, f"embedded {count} memories ({model})")


@memory.command("stale", context_settings=CONTEXT)
@click.option("--days", type=click.IntRange(0, 36500), help="Not confirmed for this many days "
              "(default: the stale_after_days setting).")  # fmt: skip
@project_option("This project's memories plus global ones.", "global memories only")
@click.option("--all-projects", is_flag=True, help="Every project's memories.")
@click.option(
    "--layer",
    help="Only this layer: rule, working or long_term.",
    callback=filled("every layer", "rule, working or long_term"),
)
@click.option("--superseded", is_flag=True, help="Also superseded and expired memories.")
@click.option("--limit", default=50, show_default=True, type=int)
@pass_rt
def memory_stale(
    rt: Runtime,
    days: int | None,
    project: str | None,
    all_projects: bool,
    layer: str | None,
    superseded: bool,
    limit: int,
) -> None:
    """List memories nobody confirmed or changed for a while, least recently confirmed first.

    Confirm one with `cortex memory review --keep ID`, forget one with --drop.

    \b
    Example:
      cortex memory stale --days 30 --project api
    """
    found = rt.services.review.stale(
        days=days, limit=limit, superseded=superseded, project=rt.project(project),
        all_projects=all_projects, layer=layer,
    )  # fmt: skip
    rt.emit([m.to_dict() for m in found],
            lambda: "\n".join(format_memory(m) for m in found) or "no stale memories")  # fmt: skip


@memory.command("review", context_settings=CONTEXT)
@project_option("This project's memories plus global ones.", "global memories only")
@click.option("--all-projects", is_flag=True, help="Every project's memories.")
@click.option("--keep", "keep", multiple=True, metavar="ID", help="Confirm this memory.")
@click.option("--drop", "drop", multiple=True, metavar="ID", help="Forget this memory.")
@click.option("--prefer", nargs=2, metavar="WINNER LOSER", help="WINNER supersedes LOSER.")
@click.option("--limit", default=20, show_default=True, type=int, help="Most items per section.")
@pass_rt
def memory_review(
    rt: Runtime,
    project: str | None,
    all_projects: bool,
    keep: tuple[str, ...],
    drop: tuple[str, ...],
    prefer: tuple[str, str] | None,
    limit: int,
) -> None:
    """Show what needs a verdict (conflicts, pending shadow proposals, stale memories), or
    give verdicts with --keep, --drop and --prefer.

    \b
    Examples:
      cortex memory review --project api
      cortex memory review --prefer 3f2a... 9b1c...   # the first supersedes the second
      cortex memory review --keep 3f2a... --drop 9b1c...
    """
    review = rt.services.review
    if keep or drop or prefer:
        done = [{"kept": review.keep(i).id} for i in keep]
        done += [{"dropped": review.drop(i).id} for i in drop]
        if prefer:
            done.append({"preferred": review.prefer(*prefer).id, "over": prefer[1]})
        rt.emit(done, "\n".join(" ".join(f"{k} {v}" for k, v in d.items()) for d in done))
        return
    queue = review.queue(limit=limit, project=rt.project(project), all_projects=all_projects)
    rt.emit(queue.to_dict(), lambda: format_queue(queue))


def format_queue(queue: ReviewQueue) -> str:
    lines = []
    if queue.conflicts:
        lines.append("CONFLICTS (keep one with --prefer WINNER LOSER):")
        for a, b in queue.conflicts:
            lines += [format_memory(a), format_memory(b), ""]
    if queue.proposals:
        lines.append(
            f"PROPOSED BY SHADOW RUN {queue.shadow_run_id} (apply: cortex consolidate run):"
        )
        lines += [f"- {p['kind']} {p['other_id']} into {p['keep_id']}: {p['reason']}"
                  for p in queue.proposals]  # fmt: skip
    if queue.stale:
        lines.append("STALE (confirm with --keep ID, forget with --drop ID):")
        lines += [format_memory(m) for m in queue.stale]
    return "\n".join(lines) or "nothing to review"


def register(group: click.Group) -> None:
    """Add ``memory`` to the CLI."""
    group.add_command(memory)
