"""CLI commands that connect Cortex to agent hosts: install, uninstall, doctor, hook."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from cortex.adapters import HOSTS
from cortex.adapters.cli.runtime import CONTEXT, Runtime, megabytes, pass_rt, project_option
from cortex.config import default_home
from cortex.errors import ConfigError

if TYPE_CHECKING:
    from cortex.adapters.hooks.doctor import Report
    from cortex.adapters.hooks.install import FileChange, Target

HOST = click.Choice(HOSTS)
FREE_HINT_BYTES = 16 * 1024 * 1024
"""Free pages in the database from which ``cortex doctor`` names ``cortex db vacuum``."""


F = TypeVar("F", bound=Callable[..., Any])


def _scope_options(command: F) -> F:
    command = click.option(
        "--dry-run", is_flag=True, help="Show the changes as a diff; write nothing."
    )(command)
    command = click.option(
        "--user", "user_scope", is_flag=True, help="Your user settings (the default)."
    )(command)
    return project_option(
        "This project's settings instead of your user settings.",
        "your user settings",
        directory=True,
    )(command)


def _target_for(rt: Runtime, host: str, project: Path | None, user_scope: bool) -> Target:
    if project is not None and user_scope:
        raise click.UsageError("choose one of --project DIR and --user")
    from cortex.adapters.hooks.install import cortex_command, hook_program, target

    home = rt.config.home
    custom_home = home if home != default_home({}) else None
    cortex_bin = cortex_command(rt.env)
    return target(
        host,
        project=project.absolute() if project is not None else None,
        user_home=Path.home(),
        cortex_bin=cortex_bin,
        cortex_home=custom_home.absolute() if custom_home else None,
        program=hook_program(rt.env, cortex_bin),
    )


def _report(rt: Runtime, changes: list[FileChange], dry_run: bool, verb: str) -> None:
    files = [c.to_dict() | ({"diff": c.diff()} if dry_run else {}) for c in changes]
    data = {"dry_run": dry_run, "files": files}
    lines = []
    for change in changes:
        what = change.added if verb == "added" else change.removed
        action, done = change.action, verb
        if dry_run and action != "unchanged":  # nothing was written: say what would be
            action, done = f"would be {action}", {"added": "would add"}.get(verb, "would remove")
        lines.append(f"{change.path}: {action}" + (f" ({done} {', '.join(what)})" if what else ""))
        lines += [f"  note: {note}" for note in change.notes]
        if dry_run and change.action != "unchanged":
            lines.append(change.diff().rstrip("\n"))
    rt.emit(data, "\n".join(lines))


@click.command("install", context_settings=CONTEXT)
@click.argument("host", type=HOST)
@click.option("--no-mcp", is_flag=True, help="Only the hooks, not the MCP server.")
@_scope_options
@pass_rt
def install_command(
    rt: Runtime,
    host: str,
    no_mcp: bool,
    project: Path | None,
    user_scope: bool,
    dry_run: bool,
) -> None:
    """Add Cortex's hooks and MCP server to HOST's settings (idempotent).

    Hooks run this install's hook client with its Python by absolute path (the `cortex`
    script instead when CORTEX_BIN is set); other hooks and MCP servers are kept.

    \b
    Examples:
      cortex install claude-code
      cortex install claude-code --project . --dry-run
      cortex install codex --user
    """
    from cortex.adapters.hooks.install import apply, plan

    if project is not None and not project.is_dir():  # a typo would make a tree of folders
        raise ConfigError(f"no directory {project}; give an existing project's directory")
    place = _target_for(rt, host, project, user_scope)
    with_mcp = not no_mcp and importlib.util.find_spec("mcp") is not None
    changes = plan(place, remove=False, with_mcp=with_mcp)
    if not with_mcp and not no_mcp:
        changes[0].notes.append(
            "MCP server not added: install the mcp extra (pip install 'cortex-continuity[mcp]') "
            "and rerun"
        )
    if not dry_run:
        apply(changes)
    _report(rt, changes, dry_run, "added")


@click.command("uninstall", context_settings=CONTEXT)
@click.argument("host", type=HOST)
@_scope_options
@pass_rt
def uninstall_command(
    rt: Runtime, host: str, project: Path | None, user_scope: bool, dry_run: bool
) -> None:
    """Remove exactly the hooks and MCP server `cortex install HOST` added.

    Settings folders left empty are removed too, and the home's hook server is stopped.

    \b
    Example:
      cortex uninstall claude-code --project .
    """
    from cortex.adapters.hooks.install import apply, plan, remove_empty_folders, stop_server

    place = _target_for(rt, host, project, user_scope)
    changes = plan(place, remove=True)
    if not dry_run:
        apply(changes)
        base = project.absolute() if project is not None else Path.home()
        for folder in remove_empty_folders(changes, base):
            changes[0].notes.append(f"removed the empty folder {folder}")
        stopped = stop_server(rt.config.home)
        if stopped is not None:
            changes[0].notes.append(f"stopped the hook server (pid {stopped})")
    _report(rt, changes, dry_run, "removed")


@click.command("doctor", context_settings=CONTEXT)
@project_option(
    "Project whose settings are checked along with your user settings.",
    "this directory",
    directory=True,
    default=".",
    show_default=True,
)
@pass_rt
@click.pass_context
def doctor_command(ctx: click.Context, rt: Runtime, project: Path) -> None:
    """Check that capture works: hooks installed, events arriving, database healthy.

    Without --home (or CORTEX_HOME) it checks the home the installed hooks use.

    Exits 1 when it does not, with one line per problem naming the fix.

    \b
    Example:
      cortex doctor
    """
    from cortex.adapters.hooks.doctor import diagnose

    named = rt.home is not None or bool(rt.env.get("CORTEX_HOME"))
    report = diagnose(rt.config, rt.clock, Path.home(), project.absolute(), follow_hooks=not named)
    rt.emit(report.to_dict(), lambda: _doctor_text(report))
    if not report.ok:
        ctx.exit(1)


def _database_text(db: dict[str, Any]) -> str:
    """What ``cortex doctor`` says of the database, in the parentheses after its path."""
    if not db.get("exists"):
        return "missing"
    text = f"quick_check {db.get('quick_check', '-')}, {db.get('migrations', 0)} migrations"
    free = db.get("free_bytes", 0)
    if free >= FREE_HINT_BYTES:
        text += f"; {megabytes(free)} of it free: `cortex db vacuum` hands it back"
    from cortex.services.app import MERGE_SEGMENTS

    segments = db.get("search_index_segments", 0)
    if segments >= MERGE_SEGMENTS:
        text += f"; search index in {segments} segments: `cortex db vacuum` merges them"
    return text


def _server_text(db: dict[str, Any]) -> str:
    """What ``cortex doctor`` of a client home says of its team server and journal."""
    text = "reachable" if db.get("reachable") else "NOT reachable"
    if db["waiting"]:
        text += f"; {db['waiting']} write(s) waiting in the journal: `cortex sync` delivers them"
    if db["held"]:
        text += f"; {db['held']} kept for another server or key in spool/held.jsonl"
    return text


def _doctor_text(report: Report) -> str:
    lines = [f"home: {report.home}", "hosts:"]
    for host, info in report.hosts.items():
        where = ", ".join(i["path"] for i in info["installed"]) or "not installed"
        last = info["last_event"]
        seen = (
            f"last event {last['event']} at {last['at'][:19]} ({'ok' if last['ok'] else 'FAILED'})"
            if last
            else "no event yet"
        )
        lines.append(f"  {host:<12} {where}; {seen}")
    db = report.database
    if "server" in db:
        lines.append(f"team server: {db['server']} ({_server_text(db)})")
    elif db:
        lines.append(f"database: {db['path']} ({_database_text(db)})")
    pid = report.server["pid"]
    lines.append(f"hook server: running, pid {pid}" if pid else "hook server: not running")
    lines.append(f"open sessions: {len(report.sessions)}")
    lines += [
        f"  {s['session_id']}  {s['channel']}  {s['project'] or '-'}  lease {s['lease']}"
        for s in report.sessions
    ]
    lines.append("ok: capture is working" if report.ok else "PROBLEMS:")
    lines += [f"  - {p}" for p in report.problems]
    return "\n".join(lines)


@click.command(
    "hook",
    context_settings={**CONTEXT, "ignore_unknown_options": True},
    add_help_option=False,
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="HOST")
@click.pass_context
def hook_command(ctx: click.Context, args: tuple[str, ...]) -> None:
    """Handle one agent hook event (JSON on stdin) for HOST; always exits 0.

    HOST is claude-code, codex, gemini or cursor. Hosts run this once per event (see
    `cortex install`); problems go to $CORTEX_HOME/logs/hooks.log. The first event starts a
    background hook server that answers later events faster; CORTEX_HOOK_SERVER=0 turns it off.

    \b
    Example:
      echo '{"hook_event_name":"Stop","session_id":"s1"}' | cortex hook claude-code
    """
    from cortex.adapters.hooks import main

    # `cortex hook ...` normally never reaches click (cortex.entry routes it first); this
    # command is for `cortex --help`, the reference docs and callers of the CLI's `run`.
    ctx.exit(main(list(args) or ["--help"]))


def register(group: click.Group) -> None:
    for command in (install_command, uninstall_command, doctor_command, hook_command):
        group.add_command(command)
