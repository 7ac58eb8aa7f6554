"""CLI commands of OpenClaw file mode: ``openclaw memory bootstrap|flush|snapshot|sync|remember``.

Each one calls one method of ``FileModeService`` over the workspace the options (or the
``file_mode_*`` settings) name. They work whether or not ``file_mode_enabled`` is set: that
setting only decides whether the bridge runs the triggers on its own.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cortex.adapters.cli.runtime import (
    CONTEXT,
    F,
    Runtime,
    clean,
    pass_rt,
    project_option,
    session_option,
    text_or_stdin,
)

if TYPE_CHECKING:
    from cortex.services.filemode import FileModeService, SyncReport, Written


def _workspace_options(command: F) -> F:
    """The options every file-mode command shares."""
    for option in reversed(
        [
            click.option(
                "--workspace",
                type=click.Path(file_okay=False, path_type=Path),
                help="Workspace directory (default: the file_mode_workspace setting).",
            ),
            click.option(
                "--layout",
                type=click.Choice(["rfc", "openclaw"]),
                help="rfc: memory.md, memory/daily/, memory/snapshots/; openclaw: MEMORY.md, "
                "memory/YYYY-MM-DD.md (default: the file_mode_layout setting).",
            ),
        ]
    ):
        command = option(command)
    return command


def _filemode(rt: Runtime, workspace: Path | None, layout: str | None) -> FileModeService:
    config = rt.config
    if workspace is not None:
        config = replace(config, file_mode_workspace=workspace.expanduser().absolute())
    if layout is not None:
        config = replace(config, file_mode_layout=layout)
    return rt.services.rebind(config, rt.clock).filemode


def _written(w: Written) -> str:
    return f"{'wrote' if w.appended else 'already in'} {w.path} ({w.id})"


def _sync_text(r: SyncReport) -> str:
    lines = [
        f"{r.semantic_file}: {r.exported} entries"
        + (f" ({r.omitted} more in the database only)" if r.omitted else "")
        + (", rewritten" if r.rewritten else ", unchanged")
        + f"; imported {r.imported}, edited {r.edited}, forgotten {r.forgotten}; "
        f"daily logs read {r.daily_logs}"
        + (f"; {r.deferred} left for the next sync" if r.deferred else "")
    ]
    return "\n".join(lines + [f"note: {n}" for n in r.notes])


@click.group(context_settings=CONTEXT)
def openclaw() -> None:
    """OpenClaw integration commands.

    \b
    Example:
      cortex openclaw memory sync --workspace ~/.openclaw/workspace
    """


@openclaw.group("memory", context_settings=CONTEXT)
def memory_group() -> None:
    """File mode: memory.md, daily logs and snapshots in an OpenClaw workspace.

    \b
    Example:
      cortex openclaw memory bootstrap --workspace ~/.openclaw/workspace
    """


@memory_group.command("sync", context_settings=CONTEXT)
@_workspace_options
@project_option("Project whose memories the files hold (default: global ones).", "global memories")
@pass_rt
def memory_sync(
    rt: Runtime, workspace: Path | None, layout: str | None, project: str | None
) -> None:
    """Sync the workspace's memory files and the database, both ways.

    Hand edits in memory.md win (new lines are remembered, deleted lines forgotten); new
    entries in the daily logs are imported once; memory.md is then rewritten from the database.

    \b
    Example:
      cortex openclaw memory sync --workspace ~/.openclaw/workspace --layout openclaw
    """
    report = _filemode(rt, workspace, layout).sync(clean(project))
    rt.emit(report.to_dict(), lambda: _sync_text(report))


@memory_group.command("bootstrap", context_settings=CONTEXT)
@_workspace_options
@project_option("Project whose memories the files hold (default: global ones).", "global memories")
@click.option("--no-sync", is_flag=True, help="Only read the files; do not sync first.")
@pass_rt
def memory_bootstrap(
    rt: Runtime, workspace: Path | None, layout: str | None, project: str | None, no_sync: bool
) -> None:
    """Print what a new session reads: memory.md, then yesterday's and today's daily logs.

    \b
    Example:
      cortex openclaw memory bootstrap --workspace ~/.openclaw/workspace
    """
    boot = _filemode(rt, workspace, layout).bootstrap(clean(project), sync=not no_sync)
    rt.emit(boot.to_dict(), lambda: boot.text or "no memory files yet")


@memory_group.command("flush", context_settings=CONTEXT)
@_workspace_options
@session_option()
@click.option("--checkpoint-id", help="Append this checkpoint (default: write a new one).")
@click.option("--summary", default="", help="Summary of the new checkpoint.")
@pass_rt
def memory_flush(
    rt: Runtime,
    workspace: Path | None,
    layout: str | None,
    session_id: str | None,
    checkpoint_id: str | None,
    summary: str,
) -> None:
    """Pre-compaction flush: write a checkpoint and append it to today's daily log.

    \b
    Example:
      cortex openclaw memory flush --session-id 3f2a9c1e-... --summary "auth refactor, step 3"
    """
    sid = rt.sessions.resolve(session_id).session_id
    written = _filemode(rt, workspace, layout).flush(
        sid, checkpoint_id=checkpoint_id, summary=text_or_stdin(summary)
    )
    rt.emit(written.to_dict(), _written(written))


@memory_group.command("snapshot", context_settings=CONTEXT)
@_workspace_options
@session_option()
@click.option(
    "--trigger",
    type=click.Choice(["reset", "new_session", "manual"]),
    default="manual",
    show_default=True,
    help="Why: /reset, /new, or by hand.",
)
@click.option("--slug", help="File name (lowercase letters, digits, dashes; default: the topic).")
@pass_rt
def memory_snapshot(
    rt: Runtime,
    workspace: Path | None,
    layout: str | None,
    session_id: str | None,
    trigger: str,
    slug: str | None,
) -> None:
    """Write the session's transcript to a new snapshot file (before /new or /reset).

    \b
    Example:
      cortex openclaw memory snapshot --trigger reset --slug auth-refactor
    """
    sid = rt.sessions.resolve(session_id).session_id
    written = _filemode(rt, workspace, layout).snapshot(sid, trigger, slug=slug)
    rt.emit(written.to_dict(), _written(written))


@memory_group.command("remember", context_settings=CONTEXT)
@click.argument("content")
@_workspace_options
@click.option("--episodic", is_flag=True, help="An event of today: to the daily log.")
@project_option("Project the memory belongs to.", "the session's project")
@session_option("Session the memory came from (its project is the default).")
@pass_rt
def memory_remember(
    rt: Runtime,
    content: str,
    workspace: Path | None,
    layout: str | None,
    episodic: bool,
    project: str | None,
    session_id: str | None,
) -> None:
    """Remember CONTENT (or - for standard input): semantic to memory.md, episodic to the log.

    \b
    Examples:
      cortex openclaw memory remember "The user prefers tabs"
      cortex openclaw memory remember "Shipped the auth refactor" --episodic
    """
    written = _filemode(rt, workspace, layout).remember(
        text_or_stdin(content),
        kind="episodic" if episodic else "semantic",
        project=clean(project),
        session_id=session_id,
    )
    rt.emit(written.to_dict(), _written(written))


def register(group: click.Group) -> None:
    """Add ``openclaw`` to the CLI."""
    group.add_command(openclaw)
