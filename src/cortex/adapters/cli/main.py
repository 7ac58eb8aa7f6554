"""The ``cortex`` command line: thin click commands over the services.

Each command parses, calls one service method and prints: text for people, ``--json`` for
machines. Errors a user can cause print one line naming the next step and exit 1. The
``session`` and ``pin`` commands load with the root group; the others (``runtime``'s
``LAZY_COMMANDS``) only when named.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import click
from click.core import ParameterSource

from cortex.adapters.cli import sessions
from cortex.adapters.cli.plain import error_line, setup_logging, unexpected
from cortex.adapters.cli.runtime import CONTEXT, LazyGroup, Runtime, UsageLine
from cortex.config import parse_assignments
from cortex.errors import ConfigError, CortexError


def _home(ctx: click.Context, param: click.Parameter, value: str | None) -> Path | None:
    """``--home`` (or ``CORTEX_HOME``) as a one-line usage error when it cannot be a home: an
    empty one (``--home "$UNSET"`` was the current directory), a file, a folder not readable."""
    if value is None:
        return None
    from_env = ctx.get_parameter_source("home") is ParameterSource.ENVIRONMENT
    named = "CORTEX_HOME" if from_env else "--home"
    if not value.strip():
        raise UsageLine(f"{named} is empty; omit it for the default home or give a directory")
    if os.path.exists(value) and not os.path.isdir(value):
        raise UsageLine(
            f"{named} {value!r} is a file; give a directory (one that is missing is created)"
        )
    if os.path.isdir(value) and not os.access(value, os.R_OK | os.X_OK):
        raise UsageLine(f"{named} {value!r} is not readable; check its permissions")
    return Path(value)


@click.group(cls=LazyGroup, context_settings=CONTEXT)
@click.option(
    "--home",
    callback=_home,
    metavar="DIR",
    envvar="CORTEX_HOME",
    help="Cortex home (brain.db, config.toml). Default: $CORTEX_HOME or ~/.cortex.",
)
@click.option(
    "--now",
    envvar="CORTEX_NOW",
    metavar="ISO-8601",
    help="Fixed clock for this run, e.g. 2026-02-18T09:00:00Z (replays, tests; years 1970-9000).",
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
    try:
        overrides = parse_assignments(assignments)
    except ConfigError as exc:  # a malformed --set is a usage error, as a bad value is
        raise UsageLine(str(exc)) from None
    ctx.obj = Runtime(home, now, as_json, overrides, env)


sessions.register(cli)


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
    setup_logging()
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
        click.echo(error_line(exc), err=True)
        return 1
    except Exception as exc:
        return unexpected(exc, env)
    return code if isinstance(code, int) else 0
