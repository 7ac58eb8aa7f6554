"""The ``cortex`` command line: thin click commands over the services.

Each command parses, calls one service method and prints: text for people, ``--json`` for
machines. Errors a user can cause print one line naming the next step and exit 1.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from cortex.clock import Clock, FixedClock, SystemClock, to_iso
from cortex.config import Config, load_config, parse_assignments
from cortex.core.models import Pin, SessionState
from cortex.errors import CortexError
from cortex.services.app import Services

if TYPE_CHECKING:
    from cortex.services.sessions.manager import SessionPersistenceManager

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
SESSION_HELP = "Session (default: the current active one)."
F = TypeVar("F", bound=Callable[..., Any])


def session_option(help: str = SESSION_HELP) -> Callable[[F], F]:
    """The ``--session-id`` option every session-scoped command takes (its help may differ)."""

    def decorate(command: F) -> F:
        return click.option("--session-id", help=help)(command)

    return decorate


@dataclass
class Runtime:
    """What the global options resolve to; opens the store only when a command needs it."""

    home: Path | None
    now: str | None
    as_json: bool
    overrides: dict[str, str]
    env: Mapping[str, str] = field(default_factory=dict)
    """The process environment, as ``run`` passed it in (nothing else reads it)."""

    @cached_property
    def config(self) -> Config:
        """Resolved once per command (it reads config.toml and openclaw.json)."""
        return load_config(self.home, self.env, self.overrides)

    @cached_property
    def clock(self) -> Clock:
        return FixedClock(self.now) if self.now else SystemClock()

    def now_iso(self) -> str:
        """The command's current time (the fixed ``--now`` or the clock), without a database."""
        return to_iso(self.clock.now())

    @cached_property
    def services(self) -> Services:
        """The services over the home's database, opened on first use, closed with the command."""
        services = Services.open(self.config, self.clock)
        ctx = click.get_current_context(silent=True)
        if ctx is not None:
            ctx.call_on_close(services.close)
        return services

    @property
    def sessions(self) -> SessionPersistenceManager:
        return self.services.sessions

    def emit(self, data: Any, text: str | Callable[[], str] | None) -> None:
        """Print ``data`` as JSON with --json, else ``text`` (nothing when it is empty)."""
        if self.as_json:
            click.echo(json.dumps(data, indent=2, ensure_ascii=False))
            return
        shown = text() if callable(text) else text
        if shown:
            click.echo(shown)


def clean(text: str | None) -> str | None:
    """Make argv text storable: undecodable bytes become U+FFFD instead of failing later."""
    if text is None:
        return None
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


pass_rt = click.make_pass_decorator(Runtime)

# Commands defined in other modules, loaded only when named (or when help lists them), so that
# `cortex session start` does not import the memory engine, the MCP layer or the installers.
LAZY_COMMANDS = {
    "cortex.adapters.cli.admin": ("task", "metrics", "archive", "config", "db", "demo"),
    "cortex.adapters.cli.servers": ("mcp", "bridge"),
    "cortex.adapters.cli.memory": (
        "memory",
        "compact",
        "session event",
        "session checkpoint",
        "session status",
        "session snapshot",
    ),
    "cortex.adapters.cli.integrations": ("install", "uninstall", "doctor", "hook"),
}
_loaded: set[str] = set()


def _load(module: str) -> None:
    """Import ``module`` and let it register its commands on the root group (once)."""
    if module not in _loaded:
        _loaded.add(module)
        importlib.import_module(module).register(cli)


class LazyGroup(click.Group):
    """A click group whose commands from ``LAZY_COMMANDS`` are imported on first use."""

    def _lazy(self, ctx: click.Context) -> dict[str, str]:
        prefix = " ".join(ctx.command_path.split()[1:])
        found = {}
        for module, names in LAZY_COMMANDS.items():
            for name in names:
                parent, _, leaf = name.rpartition(" ")
                if parent == prefix:
                    found[leaf] = module
        return found

    def list_commands(self, ctx: click.Context) -> list[str]:
        for module in set(self._lazy(ctx).values()):
            _load(module)
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            module = self._lazy(ctx).get(cmd_name)
            if module is not None:
                _load(module)
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings=CONTEXT)
@click.option(
    "--home",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="CORTEX_HOME",
    help="Cortex home (brain.db, config.toml). Default: $CORTEX_HOME or ~/.cortex.",
)
@click.option(
    "--now",
    envvar="CORTEX_NOW",
    metavar="ISO-8601",
    help="Fixed clock for this run, e.g. 2026-02-18T09:00:00Z (replays, tests).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Machine-readable JSON output (also after a command)."
)
@click.option(
    "--set",
    "assignments",
    multiple=True,
    metavar="NAME=VALUE",
    help="Override a setting for this run (beats env and config.toml).",
)
@click.version_option(package_name="cortex-continuity", prog_name="cortex")
@click.pass_context
def cli(
    ctx: click.Context,
    home: Path | None,
    now: str | None,
    as_json: bool,
    assignments: tuple[str, ...],
) -> None:
    """Cortex: session continuity and memory for AI agents.

    \b
    Examples:
      cortex session start --project api --keywords "auth refactor"
      cortex pin add deploy-cmd "make deploy ENV=staging" --critical
      cortex --json session show 3f2a...
      cortex demo
    """
    env = ctx.obj if isinstance(ctx.obj, Mapping) else {}  # what ``run`` passed in
    ctx.obj = Runtime(home, now, as_json, parse_assignments(assignments), env)


# -- session ---------------------------------------------------------------------------------
@cli.group(cls=LazyGroup, context_settings=CONTEXT)
def session() -> None:
    """Start, record, end, continue and inspect sessions."""


@session.command("start", context_settings=CONTEXT)
@session_option("Use this id (default: a new UUID).")
@click.option("--channel", default="cli", show_default=True, help="Channel name.")
@click.option("--project", help="Project this session works on (restoration stays within it).")
@click.option("--keywords", default="", help="Words describing the current context.")
@click.option("--workdir", help="Working directory (its project name becomes a keyword).")
@click.option(
    "--explain",
    is_flag=True,
    help="Also show why each session, pin and task was or was not restored.",
)
@pass_rt
def session_start(
    rt: Runtime,
    session_id: str | None,
    channel: str,
    project: str | None,
    keywords: str,
    workdir: str | None,
    explain: bool,
) -> None:
    """Open a session and print the continuity preamble (nothing on a cold start).

    \b
    Example:
      cortex session start --project lbf-ham-radio --keywords "ft991a cat control"
    """
    ctx = rt.sessions.on_session_start(
        session_id,
        channel,
        project=clean(project),
        keywords=[clean(keywords) or ""],
        workdir=clean(workdir),
        explain=explain,
    )
    data = ctx.to_dict() | ({"explain": list(ctx.explain)} if explain else {})
    lines = [ctx.preamble or ""] if ctx.preamble else []
    if explain:
        lines.append(
            "WHY:\n"
            + (
                "\n".join(f"  {r}" for r in ctx.explain)
                or "  no prior session of this project in the lookback window"
            )
        )
    rt.emit(data, "\n\n".join(lines))
    if not rt.as_json:
        click.echo(f"session {ctx.session_id} started", err=True)


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
        session_id,
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
    state = rt.sessions.on_session_end(session_id)
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
    """Inherit everything from TARGET_ID, whatever its age or score (FR-011).

    \b
    Example:
      cortex session continue 3f2a9c1e-...
    """
    ctx = rt.sessions.force_inherit_session(target_id, session_id)
    rt.emit(ctx.to_dict(), ctx.preamble or f"nothing to inherit from {target_id}")


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
      cortex session chain 3f2a9c1e-... --depth 10
    """
    chain = rt.sessions.get_session_chain(session_id, depth)
    rt.emit([s.to_dict() for s in chain], lambda: format_session_rows(chain))


@session.command("list", context_settings=CONTEXT)
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 10000))
@click.option("--project", help="Only sessions of this project.")
@pass_rt
def session_list(rt: Runtime, limit: int, project: str | None) -> None:
    """List sessions, newest first.

    \b
    Example:
      cortex session list --limit 5
    """
    states = rt.sessions.list_sessions(limit, project)
    rt.emit(
        [s.to_dict() for s in states],
        lambda: (
            format_session_rows(states) or "no sessions yet; start one with `cortex session start`"
        ),
    )


@session.command("show", context_settings=CONTEXT)
@click.argument("session_id", required=False)
@pass_rt
def session_show(rt: Runtime, session_id: str | None) -> None:
    """Show one session (default: the current active one).

    \b
    Example:
      cortex --json session show 3f2a9c1e-...
    """
    state = rt.sessions.resolve(session_id)
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
@cli.group(context_settings=CONTEXT)
def pin() -> None:
    """Working-memory pins of the current session (10 at most)."""


@pin.command("add", context_settings=CONTEXT)
@click.argument("label")
@click.argument("content")
@click.option(
    "--critical",
    is_flag=True,
    help="CRITICAL: inherited for critical_inheritance_days whatever the relevance score.",
)
@click.option("--confidence", default=1.0, show_default=True, type=click.FloatRange(0, 1))
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
        session_id,
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
    pins = rt.sessions.list_pins(session_id)
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
    removed = rt.sessions.remove_pin(clean(label) or "", session_id)
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
            f"{(s.project or '-')[:20]:<20}  pins={len(s.working_memory)} "
            f"tasks={len(s.pending_tasks)}  {', '.join(s.hot_topics[:5])}"
        )
    return "\n".join(rows)


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


def _json_first(argv: Sequence[str]) -> list[str]:
    """Accept ``--json`` anywhere before ``--`` (``cortex memory list --json``): it is a global
    option, so move it in front of the command."""
    args = list(argv)
    end = args.index("--") if "--" in args else len(args)
    if "--json" not in args[1:end]:
        return args
    return ["--json", *(a for i, a in enumerate(args) if not (a == "--json" and i < end))]


def run(argv: Sequence[str]) -> int:
    """Run the CLI; turn CortexError into one line on stderr and exit code 1."""
    logging.basicConfig(level=logging.WARNING, format="cortex: %(message)s")
    debug = logging.getLogger("cortex.debug")
    debug.setLevel(logging.INFO)
    env = dict(os.environ)  # the entry point reads the environment; commands get it passed
    try:
        code = cli.main(args=_json_first(argv), prog_name="cortex", standalone_mode=False, obj=env)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 1
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except CortexError as exc:
        click.echo(f"error: {exc}", err=True)
        return 1
    except Exception as exc:
        if env.get("CORTEX_RAISE_ERRORS") == "1" or "pytest" in sys.modules:
            raise
        click.echo(
            f"error: unexpected {type(exc).__name__}: {exc}; rerun with "
            "CORTEX_RAISE_ERRORS=1 for a traceback and report it",
            err=True,
        )
        return 1
    return code if isinstance(code, int) else 0
