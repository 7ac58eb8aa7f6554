"""What every CLI command shares: the runtime the global options resolve to (``plain.Runtime``,
which needs no click), the lazy command groups, and the options and helpers commands repeat."""

from __future__ import annotations

import errno
import importlib
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from click.core import ParameterSource

from cortex.adapters.cli.plain import Runtime as Runtime
from cortex.adapters.cli.plain import clean as clean
from cortex.config import SETTINGS_BY_NAME, coerce
from cortex.errors import ConfigError, param, refuse_empty
from cortex.files import check_id

if TYPE_CHECKING:
    from cortex.core.server_numbers import ServerNumber
    from cortex.services.hosting import ServiceHost

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
SESSION_HELP = "Session (default: the current active one)."
F = TypeVar("F", bound=Callable[..., Any])


def session_option(help: str = SESSION_HELP) -> Callable[[F], F]:
    """The ``--session-id`` option every session-scoped command takes (its help may differ)."""

    def decorate(command: F) -> F:
        return click.option("--session-id", help=help, callback=given_id)(command)

    return decorate


def given_id(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """An id option given empty (``--session-id "$UNSET"``) is refused as an invalid id: only
    an omitted one means the default session."""
    if value == "":
        check_id(value)
    return value


def project_option(
    help: str, omitted: str, *, directory: bool = False, **kwargs: Any
) -> Callable[[F], F]:
    """The ``--project`` option of a command (every one of them takes it through here):
    ``omitted`` says what leaving it out means; with ``directory`` its value is a directory
    (a ``Path``). A value given empty or blank (``--project "$UNSET"``) is refused: only an
    omitted one means the default, never another project (or the current directory)."""
    instead = f"a directory ({param('project', '.')})" if directory else "a project name"
    folder = click.Path(file_okay=False, path_type=Path)

    def checked(ctx: click.Context, option: click.Parameter, value: str | None) -> Any:
        refuse_empty(value, param("project"), omitted, instead)
        return folder.convert(value, option, ctx) if directory and value is not None else value

    def decorate(command: F) -> F:
        shown = "DIR" if directory else None
        option = click.option("--project", help=help, metavar=shown, callback=checked, **kwargs)
        return option(command)

    return decorate


def user_option(help: str, omitted: str) -> Callable[[F], F]:
    """The ``--user`` option of a command that stores or filters by user: a value given empty
    or blank (``--user "$UNSET"``) is refused, never taken for no user (``omitted``)."""
    checked = filled(omitted, "a user id", named=param("user_id"))
    return click.option("--user", "user_id", help=help, callback=checked)


def filled(
    omitted: str, instead: str, *, named: str | None = None
) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """The callback of an option whose value given empty or blank (``--layer "$UNSET"``) is
    refused, as ``--project``'s and ``--user``'s are, never taken for leaving it out
    (``omitted``); ``instead`` says what to give, ``named`` how the message names the option
    (its longest flag by default)."""

    def checked(ctx: click.Context, option: click.Parameter, value: Any) -> Any:
        flag = named or max(getattr(option, "opts", [option.name or ""]), key=len)
        return refuse_empty(value, flag, omitted, instead) if isinstance(value, str) else value

    return checked


class UsageLine(click.ClickException):
    """A usage error (a bad option value) shown as one ``error:`` line; exit code 2."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.message}", err=True)


def database(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A ``--db`` option's callback: an empty value (an unset shell variable) is refused rather
    than opened as a throwaway database."""
    if value is not None and not value.strip():
        raise UsageLine("--db is empty; give a postgresql:// URL or a SQLite path")
    return value


def listen_address(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    """A ``--host`` option's callback: an empty or blank value (an unset shell variable) is
    refused, since uvicorn would take it for every interface of the machine."""
    if not value.strip():
        raise UsageLine("--host is empty; omit it for 127.0.0.1 or give an address to listen on")
    return value


def check_listen(host: str, port: int) -> None:
    """A one-line error now, rather than uvicorn's traceback or its log and exit code 3 later,
    when ``host`` names no address of this machine (a usage error) or ``port`` is taken."""
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (OSError, UnicodeError) as exc:  # (UnicodeError: a name IDNA cannot encode)
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageLine(
            f"--host {host!r} is not an address to listen on ({reason}); give an IP address "
            "of this machine, e.g. 127.0.0.1 or 0.0.0.0"
        ) from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as exc:
            raise ConfigError(
                f"port {port} on {host} is not free ({exc.strerror}); pick another with --port"
                if exc.errno == errno.EADDRINUSE
                else f"cannot listen on {host} port {port} ({exc.strerror}); give an address "
                "of this machine with --host, or another --port"
            ) from exc


def server_host(rt: Runtime, db_url: str, **options: Any) -> ServiceHost:
    """The team server's database ``db_url`` as this command's ``ServiceHost`` (``serve``,
    ``tenant``, ``key``, ``server import``, ``worker --db``): the tenants' homes under the
    home's ``server`` directory, the command's clock (``--now``, as on a home), closed with
    the command. ``options`` go to ``ServiceHost`` (``secret``, ``lock_timeout``)."""
    from cortex.services.hosting import ServiceHost

    host = ServiceHost(db_url, rt.config.home / "server", clock=rt.clock, **options)
    click.get_current_context().call_on_close(host.close)
    return host


class Share(click.FloatRange):
    """A number from 0 to 1 (a rate, a confidence); NaN, which ``FloatRange`` lets by, is
    refused as any value out of the range is."""

    def __init__(self) -> None:
        super().__init__(0, 1)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if number != number:  # NaN
            self.fail(f"{value!r} is not in the range {self._describe_range()}.", param, ctx)
        return number


def number_option(number: ServerNumber[int] | ServerNumber[float], help: str) -> Callable[[F], F]:
    """The option of ``number`` (of ``cortex serve`` or ``cortex worker``), from its variable
    when the flag is not given, checked as a server's worker process checks that variable (NaN
    too, which click's ``FloatRange`` lets by)."""

    def check(ctx: click.Context, param: click.Parameter, value: str) -> float:
        try:
            if ctx.get_parameter_source(param.name or "") is ParameterSource.ENVIRONMENT:
                return number.read({number.env: value})  # said as a worker would say it
            return number.convert(value)
        except ConfigError as exc:
            raise UsageLine(str(exc)) from None
        except ValueError as exc:
            raise UsageLine(f"{number.flag} {exc}; give a value in that range") from None

    return click.option(
        number.flag,
        default=str(number.default),
        show_default=True,
        callback=check,
        envvar=number.env,
        show_envvar=True,
        metavar=number.metavar,
        help=f"{help}, {number.range_text}.",
    )


def check_assignments(overrides: Mapping[str, str]) -> None:
    """A ``--set`` naming no setting, or with a value of the wrong type or range, is a
    usage error (exit 2), caught before any file or database is read."""
    for name, raw in overrides.items():
        setting = SETTINGS_BY_NAME.get(name)
        if setting is None:
            raise UsageLine(f"unknown setting {name!r}; see `cortex config show` for names")
        try:
            coerce(setting, raw, Path("~"), "flag")
        except ConfigError as exc:
            raise UsageLine(str(exc)) from exc


def megabytes(size: int) -> str:
    """A size in bytes as people read it in a command's text: ``466.5 MB``."""
    return f"{size / 1e6:,.1f} MB"


def text_or_stdin(text: str) -> str:
    """The argument, or standard input when it is ``-`` (a long text, a pipe); bytes that are
    not text in the input's encoding become U+FFFD, as undecodable arguments do (``clean``)."""
    if text != "-":
        return clean(text) or ""
    stream = sys.stdin
    raw = getattr(stream, "buffer", None)
    if raw is None:  # a text stream with no bytes under it
        return clean(stream.read()) or ""
    return str(raw.read().decode(stream.encoding or "utf-8", "replace"))


pass_rt = click.make_pass_decorator(Runtime)

# Commands defined in other modules, loaded only when named (or when help lists them), so that
# `cortex session start` does not import the memory engine, the MCP layer or the installers.
LAZY_COMMANDS = {
    "cortex.adapters.cli.admin": ("task", "metrics", "archive", "config", "db", "demo"),
    "cortex.adapters.cli.servers": ("mcp", "bridge", "ui"),
    "cortex.adapters.cli.memory": ("memory",),
    "cortex.adapters.cli.history": (
        "compact",
        "session event",
        "session checkpoint",
        "session status",
        "session snapshot",
    ),
    "cortex.adapters.cli.integrations": ("install", "uninstall", "doctor", "hook"),
    "cortex.adapters.cli.tenancy": ("serve", "tenant", "key", "server"),
    "cortex.adapters.cli.client": ("sync",),
    "cortex.adapters.cli.protocol": (
        "checkpoint",
        "task init",
        "task start",
        "task end",
        "task status",
        "task sweep",
        "task fail",
        "task pass",
        "task budget",
        "task safety",
        "task gates",
        "session timeline",
        "session state",
    ),
    "cortex.adapters.cli.openclaw": ("openclaw",),
    "cortex.adapters.cli.hygiene": ("consolidate", "worker", "procedure"),
}
_loaded: set[str] = set()


def _load(module: str, ctx: click.Context) -> None:
    """Import ``module`` and let it register its commands on the root group (once)."""
    if module not in _loaded:
        _loaded.add(module)
        importlib.import_module(module).register(ctx.find_root().command)


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
            _load(module, ctx)
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            module = self._lazy(ctx).get(cmd_name)
            if module is not None:
                _load(module, ctx)
        return super().get_command(ctx, cmd_name)
