"""The ``session`` and ``pin`` commands: start, record, end, continue and inspect sessions;
the working-memory pins of the current one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from cortex.adapters.cli import plain
from cortex.adapters.cli.runtime import (
    CONTEXT,
    LazyGroup,
    Runtime,
    Share,
    clean,
    filled,
    pass_rt,
    project_option,
    session_option,
)
from cortex.core.models import Pin, SessionState
from cortex.core.preamble import format_continue_summary
from cortex.services.project import project_label


@click.group(cls=LazyGroup, context_settings=CONTEXT)
def session() -> None:
    """Start, record, end, continue and inspect sessions.

    \b
    Examples:
      cortex session start --project api --keywords "auth refactor"
      cortex session end
    """


@session.command("start", context_settings=CONTEXT)
@session_option("Use this id (default: a new UUID).")
@click.option(
    "--channel",
    default="cli",
    show_default=True,
    help="Channel name.",
    callback=filled("the default channel", "a channel name"),
)
@project_option(
    "Project this session works on (restoration stays within it).", "this directory's project"
)
@click.option("--keywords", default="", help="Words describing the current context.")
@click.option("--workdir", help="Working directory (its project name becomes a keyword).")
@click.option(
    "--explain",
    is_flag=True,
    help="Also show why each session, pin and task was or was not restored.",
)
@pass_rt
def session_start(rt: Runtime, /, **options: Any) -> None:
    """Open a session and print the continuity preamble (nothing on a cold start).

    \b
    Example:
      cortex session start --project lbf-ham-radio --keywords "ft991a cat control"
    """
    plain.session_start(rt, **options)


@session.command("record", context_settings=CONTEXT)
@session_option()
@click.option("--text", help="Text of the turn (prompt, message) to mine for topics.")
@click.option("--workdir", help="A working directory used this turn.")
@click.option("--category", "categories", multiple=True, help="Memory category accessed.")
@click.option("--learning-id", help="Id of a memory created this turn.")
@click.option("--tool", "tool_name", help="Tool called this turn.")
@click.option("--file", "files", multiple=True, help="A file touched this turn.")
@pass_rt
def session_record(
    rt: Runtime,
    session_id: str | None,
    text: str | None,
    workdir: str | None,
    categories: tuple[str, ...],
    learning_id: str | None,
    tool_name: str | None,
    files: tuple[str, ...],
) -> None:
    """Record one turn's signals (crash-safe incremental capture).

    \b
    Example:
      cortex session record --text "wire the CAT control" --workdir ~/Projects/lbf-ham-radio
    """
    state = rt.sessions.record(
        rt.session_id(session_id),
        text=clean(text),
        workdir=clean(workdir),
        categories=categories,
        learning_id=learning_id,
        tool_name=tool_name,
        files=[clean(f) or "" for f in files],
    )
    rt.emit(state.to_dict(), f"recorded; hot topics: {', '.join(state.hot_topics[:10])}")


@session.command("end", context_settings=CONTEXT)
@session_option()
@pass_rt
def session_end(rt: Runtime, session_id: str | None) -> None:
    """Capture the final state of a session and close it.

    \b
    Example:
      cortex session end
    """
    state = rt.sessions.on_session_end(rt.session_id(session_id))
    rt.emit(
        state.to_dict(),
        f"session {state.session_id} captured: "
        f"{len(state.working_memory)} pins, {len(state.pending_tasks)} pending tasks, "
        f"{len(state.hot_topics)} hot topics",
    )


@session.command("continue", context_settings=CONTEXT)
@click.argument("target_id")
@session_option("Session that inherits (default: the current active one).")
@pass_rt
def session_continue(rt: Runtime, target_id: str, session_id: str | None) -> None:
    """Inherit everything from TARGET_ID, whatever its age or score.

    \b
    Example:
      cortex session continue 3f2a9c1e
    """
    ctx = rt.sessions.force_inherit_session(target_id, rt.session_id(session_id))
    if rt.queued():  # the server has not applied it: nothing inherited to summarize yet
        rt.emit(ctx.to_dict(), None)
        return
    summary = format_continue_summary(rt.sessions.resolve(target_id), ctx)
    rt.emit(ctx.to_dict() | {"summary": summary}, summary)


@session.command("chain", context_settings=CONTEXT)
@click.argument("session_id")
@click.option(
    "--depth",
    default=5,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="How many sessions, counting this one.",
)
@pass_rt
def session_chain(rt: Runtime, session_id: str, depth: int) -> None:
    """Show the chain of sessions ending at SESSION_ID, oldest first.

    \b
    Example:
      cortex session chain 3f2a9c1e --depth 10
    """
    chain = rt.sessions.get_session_chain(session_id, depth)
    rt.emit([s.to_dict() for s in chain], lambda: format_session_rows(chain))


@session.command("list", context_settings=CONTEXT)
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 10000))
@project_option(
    "Only sessions of this project: its name, a path, a remote (org/repo) or its id.",
    "every project's sessions",
)
@click.option("--task", "slug", help="Only sessions of this protocol task, oldest first.")
@pass_rt
def session_list(rt: Runtime, limit: int, project: str | None, slug: str | None) -> None:
    """List sessions, newest first (a task's: oldest first, with their lifecycle state).

    \b
    Examples:
      cortex session list --limit 5
      cortex session list --task feat-user-auth
    """
    if slug is not None:
        rows = rt.services.protocol.session_rows(slug)[-limit:]
        rt.emit(rows, lambda: format_task_sessions(rows) or f"no sessions of task {slug}")
        return
    states = rt.sessions.list_sessions(limit, project)
    rt.emit(
        [s.to_dict() for s in states], lambda: format_session_rows(states) or _none(rt, project)
    )


def _none(rt: Runtime, project: str | None) -> str:
    """Why a listing is empty: no session at all, or none of the project asked for."""
    if project is None or not rt.sessions.list_sessions(1):
        return "no sessions yet; start one with `cortex session start`"
    return (
        f"no sessions of project {project!r}; match a name, a path, a remote (org/repo) or "
        "an id, or see them all with `cortex session list`"
    )


@session.command("show", context_settings=CONTEXT)
@click.argument("session_id", required=False)
@pass_rt
def session_show(rt: Runtime, session_id: str | None) -> None:
    """Show one session (default: the current active one).

    \b
    Example:
      cortex --json session show 3f2a9c1e
    """
    state = rt.sessions.resolve(rt.session_id(session_id))
    rt.emit(state.to_dict(), lambda: format_session(state))


@session.command("recover", context_settings=CONTEXT)
@pass_rt
def session_recover(rt: Runtime) -> None:
    """Close sessions whose lease lapsed (crashed) with a recovery record.

    \b
    Example:
      cortex session recover
    """
    states = rt.sessions.detect_and_recover_crashed("")
    rt.emit(
        [s.to_dict() for s in states],
        f"recovered {len(states)} crashed session(s)"
        + "".join(f"\n  {s.session_id} (last activity {s.end_time})" for s in states),
    )


# -- pins ------------------------------------------------------------------------------------
@click.group(context_settings=CONTEXT)
def pin() -> None:
    """Working-memory pins of the current session (10 at most).

    \b
    Example:
      cortex pin add deploy-cmd "make deploy ENV=staging" --critical
    """


@pin.command("add", context_settings=CONTEXT)
@click.argument("label")
@click.argument("content")
@click.option(
    "--critical",
    is_flag=True,
    help="CRITICAL: inherited for critical_inheritance_days whatever the relevance score.",
)
@click.option("--confidence", default=1.0, show_default=True, type=Share())
@session_option()
@pass_rt
def pin_add(
    rt: Runtime, label: str, content: str, critical: bool, confidence: float, session_id: str | None
) -> None:
    """Pin CONTENT under LABEL (the same label replaces the old pin).

    \b
    Example:
      cortex pin add "ft991a control" "CAT over USB at 38400 baud" --critical
    """
    added = rt.sessions.add_pin(
        clean(label) or "",
        clean(content) or "",
        rt.session_id(session_id),
        critical=critical,
        confidence=confidence,
    )
    rt.emit(
        added.to_dict(), f"pinned {added.label!r}" + (" (CRITICAL)" if added.is_critical else "")
    )


@pin.command("list", context_settings=CONTEXT)
@session_option()
@pass_rt
def pin_list(rt: Runtime, session_id: str | None) -> None:
    """List the pins of a session.

    \b
    Example:
      cortex pin list
    """
    pins = rt.sessions.list_pins(rt.session_id(session_id))
    rt.emit([p.to_dict() for p in pins], lambda: format_pins(pins) or "no pins")


@pin.command("remove", context_settings=CONTEXT)
@click.argument("label")
@session_option()
@pass_rt
def pin_remove(rt: Runtime, label: str, session_id: str | None) -> None:
    """Remove the pin labelled LABEL.

    \b
    Example:
      cortex pin remove "ft991a control"
    """
    removed = rt.sessions.remove_pin(clean(label) or "", rt.session_id(session_id))
    rt.emit(removed.to_dict(), f"removed {removed.label!r}")


# -- rendering -------------------------------------------------------------------------------
def format_pins(pins: Sequence[Pin]) -> str:
    return "\n".join(
        f"- {p.label}{' [CRITICAL]' if p.is_critical else ''} (confidence {p.confidence:.2f}): "
        f"{p.content}"
        for p in pins
    )


def format_session_rows(states: Sequence[SessionState]) -> str:
    rows = []
    for s in states:
        status = "crash-recovered" if s.crash_recovered else ("open" if s.is_open else "ended")
        rows.append(
            f"{s.session_id}  {s.start_time[:16]}  {status:<15}  "
            f"{project_label(s.project)[:32]:<32}  pins={len(s.working_memory)} "
            f"tasks={len(s.pending_tasks)}  {', '.join(s.hot_topics[:5])}"
        )
    return "\n".join(rows)


def format_task_sessions(rows: Sequence[dict[str, Any]]) -> str:
    """A task's sessions as the protocol's session metadata, one line each."""
    return "\n".join(
        f"{r['session_id']}  {r['started_at'][:16]}  {r['state']:<10} "
        f"gate={r['current_gate'] or '-'}"
        f"  checkpoints={r['checkpoint_count']}  parent={r['parent_session'] or '-'}"
        f"  children={','.join(r['child_sessions']) or '-'}"
        for r in rows
    )


def format_session(s: SessionState) -> str:
    lines = [
        f"session   {s.session_id}",
        f"state     {s.state}" + (" (crash recovered)" if s.crash_recovered else ""),
        f"started   {s.start_time}",
        f"ended     {s.end_time or '-'}",
        f"channel   {s.channel}",
        f"project   {s.project or '-'}",
        f"previous  {s.previous_session_id or '-'}",
        f"continued {s.continued_by or '-'}",
        f"topics    {', '.join(s.hot_topics) or '-'}",
        f"projects  {', '.join(s.active_projects) or '-'}",
    ]
    lines += ["tasks"] + [f"  - [{t.task_id}] {t.title} ({t.stage})" for t in s.pending_tasks]
    lines += ["pins"] + ["  " + line for line in format_pins(s.working_memory).splitlines()]
    return "\n".join(lines)


def register(group: click.Group) -> None:
    """Add ``session`` and ``pin`` to the root group."""
    group.add_command(session)
    group.add_command(pin)
