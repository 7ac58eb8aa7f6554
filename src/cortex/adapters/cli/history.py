"""CLI commands of a session's history: ``session event|checkpoint|status|snapshot`` and
``compact``, over the event log and the compaction service."""

from __future__ import annotations

from collections.abc import Sequence

import click

from cortex.adapters.cli.runtime import (
    CONTEXT,
    Runtime,
    clean,
    pass_rt,
    session_option,
    text_or_stdin,
)
from cortex.errors import UnavailableError


def _session_id(rt: Runtime, session_id: str | None) -> str:
    return rt.sessions.resolve(rt.session_id(session_id)).session_id


def _cleaned(items: Sequence[str]) -> list[str]:
    return [clean(item) or "" for item in items]


@click.command("event", context_settings=CONTEXT)
@click.argument("content")
@click.option("--role", default="user", show_default=True, help="user, assistant or tool.")
@click.option(
    "--kind", default="message", show_default=True, help="message|checkpoint|summary|event"
)
@click.option(
    "--turn", "turn_index", type=int, help="Turn index (default: next for a user message)."
)
@click.option("--not-meaningful", is_flag=True, help="Keep it out of snapshots.")
@session_option()
@pass_rt
def session_event(
    rt: Runtime,
    content: str,
    role: str,
    kind: str,
    turn_index: int | None,
    not_meaningful: bool,
    session_id: str | None,
) -> None:
    """Append an event (CONTENT, or - for standard input) to a session.

    \b
    Example:
      cortex session event "We decided to keep SQLite" --role assistant
    """
    event = rt.services.events.append(
        rt.session_id(session_id),  # (a prefix is resolved where the event is stored)
        text_or_stdin(content),
        role=role,
        kind=kind,
        turn_index=turn_index,
        meaningful=not not_meaningful,
    )
    rt.emit(
        event.to_dict(), f"event {event.id}: turn {event.turn_index}, {event.token_count} tokens"
    )


@click.command("checkpoint", context_settings=CONTEXT)
@click.option("--summary", default="", help="What was done.")
@click.option("--type", "kind", default="manual", show_default=True, help="Checkpoint type.")
@click.option("--next-step", "next_steps", multiple=True, help="A next step (repeatable).")
@click.option("--decision", "decisions", multiple=True, help="A decision (repeatable).")
@click.option("--file", "files", multiple=True, help="A changed file (repeatable).")
@click.option("--resume", default="", help="Resume instructions.")
@session_option()
@pass_rt
def session_checkpoint(
    rt: Runtime,
    summary: str,
    kind: str,
    next_steps: tuple[str, ...],
    decisions: tuple[str, ...],
    files: tuple[str, ...],
    resume: str,
    session_id: str | None,
) -> None:
    """Write a checkpoint: pins, pending tasks, rules and decisions that must survive.

    \b
    Example:
      cortex session checkpoint --summary "auth middleware done" --next-step "add rate limits"
    """
    service = rt.services.compaction
    checkpoint = service.checkpoint(
        rt.session_id(session_id),  # (a prefix is resolved where the checkpoint is stored)
        type=kind,
        summary=clean(summary) or "",
        next_steps=_cleaned(next_steps),
        decisions=_cleaned(decisions),
        files_changed=_cleaned(files),
        resume_instructions=clean(resume) or "",
    )
    rt.emit(checkpoint.to_dict(), lambda: service.format_checkpoint(checkpoint).rstrip())


@click.command("status", context_settings=CONTEXT)
@click.option("--semantic-hint", is_flag=True, help="A unit of work just completed.")
@session_option()
@pass_rt
def session_status(rt: Runtime, semantic_hint: bool, session_id: str | None) -> None:
    """Show a session's status and whether compaction is due (and why).

    \b
    Example:
      cortex session status
    """
    status = rt.services.compaction.status(_session_id(rt, session_id), semantic_hint=semantic_hint)
    d = status.decision
    due = f"DUE ({d.trigger_type}: {d.reason})" if d.due else "not due"
    rt.emit(
        status.to_dict(),
        f"session {status.session_id}: {status.status}\n"
        f"since last compaction: {d.tokens:,} tokens, {d.turns} turns\n"
        f"compaction: {due}"
        + (f"\nhint: {d.hint}" if d.hint and not d.due else "")
        + f"\nlatest checkpoint: {status.latest_checkpoint_id or '-'} "
        f"({status.checkpoint_count} in all), compactions: {status.compactions}",
    )


@click.command("snapshot", context_settings=CONTEXT)
@click.option(
    "--trigger",
    default="manual",
    show_default=True,
    help="new_session|reset|manual|auto_compaction",
)
@click.option(
    "--slug",
    help="Short name: lowercase letters, digits, dashes (default: from the task or first message).",
)
@click.option("--list", "show_list", is_flag=True, help="List the session's snapshots instead.")
@session_option()
@pass_rt
def session_snapshot(
    rt: Runtime, trigger: str, slug: str | None, show_list: bool, session_id: str | None
) -> None:
    """Write a markdown transcript of the session's meaningful events and print it.

    \b
    Example:
      cortex session snapshot --trigger reset
    """
    log = rt.services.events
    try:
        sid = _session_id(rt, session_id)
    except UnavailableError as exc:  # client mode, the server down: the log is there
        if show_list:
            raise
        from cortex.services.remote.app import NO_SNAPSHOT

        raise UnavailableError(NO_SNAPSHOT) from exc
    if show_list:
        snaps = log.snapshots(sid)
        rt.emit(
            [s.to_dict() for s in snaps],
            "\n".join(
                f"{s.id}  {s.created_at[:19]}  {s.source_trigger:<15} {s.slug}" for s in snaps
            )
            or "no snapshots",
        )
        return
    snap = log.snapshot(sid, trigger, slug=clean(slug))
    rt.emit(snap.to_dict(), snap.transcript_md.rstrip())


# -- compact ---------------------------------------------------------------------------------
@click.group(context_settings=CONTEXT)
def compact() -> None:
    """Compaction: write-ahead checkpoint, snapshot and compaction event.

    \b
    Example:
      cortex compact run --if-due
    """


@compact.command("run", context_settings=CONTEXT)
@click.option("--if-due", is_flag=True, help="Only when the token/turn/inactivity budget says so.")
@click.option("--summary", default="", help="Summary to keep in the checkpoint.")
@session_option()
@pass_rt
def compact_run(rt: Runtime, if_due: bool, summary: str, session_id: str | None) -> None:
    """Compact a session: checkpoint first, then snapshot and compaction event.

    \b
    Example:
      cortex compact run --if-due
    """
    run = rt.services.compaction.run(
        _session_id(rt, session_id), force=not if_due, summary=clean(summary) or ""
    )
    if run.event is None:
        text = f"compaction not due: {run.decision.reason}"
    else:
        text = (
            f"compacted ({run.event.trigger_type}: {run.event.reason}); checkpoint "
            f"{run.event.checkpoint_id}, snapshot {run.snapshot.id if run.snapshot else '-'}"
        )
    rt.emit(run.to_dict(), text)


def register(group: click.Group) -> None:
    """Add ``compact`` to the CLI and the history commands to ``session``."""
    group.add_command(compact)
    session = group.commands["session"]
    assert isinstance(session, click.Group)
    for command in (session_event, session_checkpoint, session_status, session_snapshot):
        session.add_command(command)
