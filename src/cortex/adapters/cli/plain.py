"""The part of the command line that needs no click: the runtime the global options resolve
to, output written as ``click.echo`` writes it, and the bodies of ``session start`` and
``memory search``.

Those two commands are what scripts and agents run most, and importing click (with its
command tree) was a third of such a process. ``run`` serves them when their arguments are
plain (options this module knows, each once, with values that cannot be mistaken for options:
see ``parse``) and the standard streams are ordinary text files; it returns None for anything
else (``--help``, a typo, ``--set``, an unusual value), which the click command line then
handles, errors and all. Both paths call the same command bodies below, so a command's output,
exit code and error lines are the same either way (``tests/test_cli_plain.py`` runs both).
"""

from __future__ import annotations

import cortex.codecache  # noqa: F401 - first: json's patterns come compiled from the cache

# isort: split
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from cortex.clock import Clock, FixedClock, SystemClock, to_iso
from cortex.config import Config, load_config
from cortex.errors import CortexError, Surface
from cortex.logs import configure
from cortex.services.app import Services, queued_line

CLI = Surface(
    "{name}",
    "{name} {value}",
    {
        "add_tokens": "--tokens",
        "budget_tokens": "--budget",
        "procedure_key": "--key",
        "user_id": "--user",
    },
    flags=True,
)
"""How an error names a parameter here: as its flag (``--session-id ID``, ``--tokens 5``)."""


_ESCAPED = {c: f"\\x{c:02x}" for c in (*range(32), 127)} | {9: "\\t", 10: "\\n", 13: "\\r"}
"""Control characters as an error line shows them: a path a person gave may hold one."""


def error_line(exc: CortexError) -> str:
    """The one line a ``CortexError`` prints, in the command line's terms. A control character
    in it (a newline or an escape sequence in a path a message quotes as it is) is escaped, so
    the line stays one line and the terminal shows it rather than obeying it."""
    return f"error: {exc.render(CLI).translate(_ESCAPED)}"


TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

    from cortex.core.memory_models import Memory, ScoredMemory
    from cortex.services.project import ProjectIdentity
    from cortex.services.sessions.manager import SessionPersistenceManager

_ANSI = r"\033\[[0-?]*[ -/]*[@-~]"
"""What ``click.echo`` strips from text that does not go to a terminal."""


def echo(text: str, err: bool = False) -> None:
    """``click.echo(text, err=err)``: through click when it is loaded (the click command line),
    else the same bytes written the same way (plain streams only: see ``_plain_streams``)."""
    click = sys.modules.get("click")
    if click is not None:
        click.echo(text, err=err)
        return
    stream = sys.stderr if err else sys.stdout
    out = text + "\n"
    if not _isatty(stream):
        import re

        out = re.sub(_ANSI, "", out)
    stream.write(out)
    stream.flush()


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except Exception:  # noqa: BLE001 - as click.echo decides it
        return False


def _plain_streams() -> bool:
    """Whether stdout and stderr are text files that ``click.echo`` would write to as they are
    (not missing, not binary, not ASCII: click rewraps those)."""
    import codecs
    import io

    for stream in (sys.stdout, sys.stderr):
        if type(stream) is not io.TextIOWrapper or stream.errors is None:
            return False
        try:
            if codecs.lookup(stream.encoding).name == "ascii":
                return False
        except LookupError:
            return False
    return True


def setup_logging() -> None:
    """Warnings as one ``cortex: ...`` line on stderr; ``cortex.debug`` lines when enabled."""
    import logging

    logging.basicConfig(level=logging.WARNING, format="cortex: %(message)s")
    logging.getLogger("cortex.debug").setLevel(logging.INFO)


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
        if self.overrides:  # (only the click command line takes --set)
            from cortex.adapters.cli.runtime import check_assignments

            check_assignments(self.overrides)
        return load_config(self.home, self.env, self.overrides)

    @cached_property
    def clock(self) -> Clock:
        return FixedClock(self.now) if self.now else SystemClock()

    def now_iso(self) -> str:
        """The command's current time (the fixed ``--now`` or the clock), without a database."""
        return to_iso(self.clock.now())

    @cached_property
    def services(self) -> Services:
        """The services over the home's database, opened on first use, closed with the command
        (by click's context, or by ``run``). A write queued for a server is said by the
        command's answer (``emit``), not by a log line too."""
        services = Services.open(self.config, self.clock).answers_queued()
        click = sys.modules.get("click")
        ctx = click.get_current_context(silent=True) if click is not None else None
        if ctx is not None:
            ctx.call_on_close(services.close)
        return services

    @property
    def sessions(self) -> SessionPersistenceManager:
        return self.services.sessions

    def session_id(self, given: str | None) -> str:
        """``given``, or the session a command run here means: the current one of this
        directory's project, never another project's (``current_session``). Only an omitted
        id means the current session: an empty one (an unset shell variable) is refused."""
        if given is not None:
            from cortex.files import check_id

            return check_id(given)
        return self.sessions.current_session(self.here()).session_id

    def here(self) -> ProjectIdentity:
        """The project of the directory this command runs in (the harness's, when set)."""
        from cortex.services.project import harness_project_dir, project_identity

        where = harness_project_dir(self.env) or os.getcwd()
        return project_identity(where, self.config.home / "cache", self.env)

    def project(self, typed: str | None) -> str | None:
        """The stored project a typed ``--project`` means (``project_named``: ``api`` names
        the project the hooks record as ``git:github.com/acme-corp/api#...``); None when none
        was given. In client mode the server's store decides, as for everything else."""
        text = clean(typed)
        if text is None or self.config.server_url:
            return text
        if self.services.store.project_known(text.strip()):
            return text.strip()  # a stored project: no matching (a search loads none of it)
        return self.sessions.project_named(text)

    def queued(self) -> dict[str, Any] | None:
        """What this command's writes left waiting for the server (client mode; None when
        the server took them all, or on a local store)."""
        return self.services.queued() if "services" in self.__dict__ else None

    def emit(
        self, data: Any, text: str | Callable[[], str] | None, queued_what: str = ""
    ) -> dict[str, Any] | None:
        """Print ``data`` as JSON with --json, else ``text`` (nothing when it is empty); return
        what this command left queued (``queued``).

        When the server did not take this command's writes (they wait in the journal), the
        JSON object gets a ``queued`` field and the text is one line saying so instead (naming
        ``queued_what``, see ``queued_line``): the answer was made by the client, and its empty
        lists and counts are not the server's."""
        queued = self.queued()
        if self.as_json:
            if queued is not None and isinstance(data, dict):
                data = {**data, "queued": queued}
            echo(json.dumps(data, indent=2, ensure_ascii=False))
            return queued
        if queued is not None:
            shown: str | None = queued_line(queued, queued_what)
        else:
            shown = text() if callable(text) else text
        if shown:
            echo(shown)
        return queued


def clean(text: str | None) -> str | None:
    """Make argv text storable: undecodable bytes become U+FFFD instead of failing later."""
    if text is None:
        return None
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


# -- the command bodies (the click commands call them too) ---------------------------------------
def session_start(
    rt: Runtime,
    session_id: str | None,
    channel: str,
    project: str | None,
    keywords: str,
    workdir: str | None,
    explain: bool,
) -> None:
    """``cortex session start``: open a session and print the continuity preamble."""
    ctx = rt.sessions.on_session_start(
        session_id,
        channel,
        project=clean(project),
        keywords=[given] if (given := clean(keywords)) else [],
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
    offline = (  # client mode, the server down: the start waits in the journal
        f"the start of session {ctx.session_id}, which exists there once delivered (no "
        "preamble could be restored offline); "
    )
    if rt.emit(data, "\n\n".join(lines), offline) is None and not rt.as_json:
        echo(f"session {ctx.session_id} started", err=True)


def memory_search(rt: Runtime, query: str, limit: int, no_expand: bool, **scope: Any) -> None:
    """``cortex memory search``: full text (BM25), fallback LIKE, plus linked memories."""
    scope = {**scope, "project": rt.project(scope.get("project"))}
    hits = rt.services.memory.search(clean(query) or "", limit=limit, expand=not no_expand, **scope)
    rt.emit([h.to_dict() for h in hits], lambda: format_scored(hits) or "no match")


def format_memory(m: Memory) -> str:
    where = m.project if m.project else "global"
    tags = f" [{', '.join(m.tags)}]" if m.tags else ""
    key = f" key={m.upsert_key}" if m.upsert_key else ""
    state = " (superseded)" if m.superseded_at else (" (forgotten)" if m.deleted_at else "")
    first = " ".join(m.content.split())
    shown = first if len(first) <= 100 else first[:99] + "…"
    return f"{m.id}  {m.layer:<9} {m.type:<10} {where}{key}{tags}{state}\n    {shown}"


def format_scored(items: Sequence[ScoredMemory]) -> str:
    return "\n".join(f"{format_memory(s.memory)}\n    score {s.score:.3f}: {s.why}" for s in items)


# -- serving them without click ------------------------------------------------------------------
COMMANDS: dict[tuple[str, str], tuple[Callable[..., None], dict[str, str], dict[str, Any]]] = {
    # (words): (body, {option: parameter}, defaults); a parameter ending in "[]" repeats, one
    # ending in "?" is a flag, "#" a count (digits only), "<" the one positional argument.
    ("session", "start"): (
        session_start,
        {
            "--session-id": "session_id",
            "--channel": "channel",
            "--project": "project",
            "--keywords": "keywords",
            "--workdir": "workdir",
            "--explain": "explain?",
        },
        {"session_id": None, "channel": "cli", "project": None, "keywords": "", "workdir": None},
    ),
    ("memory", "search"): (
        memory_search,
        {
            "": "query<",
            "--layer": "layer",
            "--project": "project",
            "--user": "user_id",
            "--session-id": "session_id",
            "--type": "types[]",
            "--tags": "tags",
            "--limit": "limit#",
            "--no-expand": "no_expand?",
        },
        {
            "layer": None,
            "project": None,
            "user_id": None,
            "session_id": None,
            "tags": None,
            "limit": 10,
        },
    ),
}


def _value(arg: str, args: list[str], at: int) -> tuple[str, int] | None:
    """The value of the option at ``args[at]`` (``--name=value`` or ``--name value``) and the
    index after it; None when it is missing, blank or starts with ``-`` (left to click, which
    refuses a blank ``--project``)."""
    name, eq, inline = arg.partition("=")
    if eq:
        value, after = inline, at + 1
    elif at + 1 < len(args):
        value, after = args[at + 1], at + 2
    else:
        return None
    return (value, after) if value.strip() and not value.startswith("-") else None


def parse(
    argv: Sequence[str], env: Mapping[str, str]
) -> tuple[Runtime, Callable[..., None], dict[str, Any]] | None:
    """(runtime, command body, its arguments) for a plain ``session start`` or ``memory search``
    command line, else None. Plain: global options ``--home``, ``--now`` and ``--json`` (this
    anywhere, as on the click command line), then the command's own options, each at most once
    (``--type`` repeats; a search's words may come as several arguments), values not starting
    with ``-``, a ``--limit`` of digits, a home that is a readable directory or does not exist
    yet."""
    args = [a for a in argv if a != "--json"]
    as_json = len(args) != len(argv)
    if "--" in args:
        return None
    found: dict[str, str] = {}
    at = 0
    while at < len(args) and args[at].partition("=")[0] in ("--home", "--now"):
        name = args[at].partition("=")[0]
        taken = _value(args[at], args, at)
        if taken is None or name in found:
            return None
        found[name], at = taken
    spec = COMMANDS.get((args[at], args[at + 1])) if at + 1 < len(args) else None
    if spec is None:
        return None
    body, options, defaults = spec
    values: dict[str, Any] = dict(defaults)
    seen: set[str] = set()
    at += 2
    while at < len(args):
        arg = args[at]
        name = "" if not arg.startswith("-") else arg.partition("=")[0]
        parameter = options.get(name)
        if parameter is None:
            return None
        key = parameter.rstrip("?#<[]")
        if parameter.endswith("[]"):
            taken = _value(arg, args, at)
            if taken is None:
                return None
            values[key] = (*values.get(key, ()), taken[0])
            at = taken[1]
            continue
        if key in seen and parameter.endswith("<"):  # the query's next word: click joins them
            values[key], at = f"{values[key]} {arg}", at + 1
            continue
        if key in seen:
            return None
        seen.add(key)
        if parameter.endswith("?"):
            if "=" in arg:
                return None
            values[key], at = True, at + 1
        elif parameter.endswith("<"):
            values[key], at = arg, at + 1
        else:
            taken = _value(arg, args, at)
            if taken is None or (parameter.endswith("#") and not taken[0].isdigit()):
                return None
            values[key] = int(taken[0]) if parameter.endswith("#") else taken[0]
            at = taken[1]
    for parameter in options.values():
        key = parameter.rstrip("?#<[]")
        if parameter.endswith("<") and key not in values:
            return None  # the argument is missing: click says so
        if parameter.endswith("?"):
            values.setdefault(key, False)
        elif parameter.endswith("[]"):
            values.setdefault(key, ())
    home = found.get("--home") or env.get("CORTEX_HOME") or None
    if home is not None and not home.strip():
        return None  # click's error message (a blank CORTEX_HOME is no home)
    if home is not None and os.path.exists(home):
        if not os.path.isdir(home) or not os.access(home, os.R_OK):
            return None  # click's error message
    now = found.get("--now") or env.get("CORTEX_NOW") or None
    rt = Runtime(Path(home) if home is not None else None, now, as_json, {}, dict(env))
    return rt, body, values


def run(argv: Sequence[str]) -> int | None:
    """The exit code of a plain ``session start`` or ``memory search``, run without click as
    ``cortex.adapters.cli.main.run`` runs it with click; None for any other command line."""
    env = dict(os.environ)  # as ``main.run`` reads it for the click command line
    if env.get("_CORTEX_COMPLETE") or not _plain_streams():
        return None  # shell completion and unusual streams are click's
    parsed = parse(argv, env)
    if parsed is None:
        return None
    rt, body, values = parsed
    # Set up at the first record: these two commands log only through Cortex's own loggers
    # (``cortex.logs``), and most runs log nothing, so they need not import logging.
    configure(setup_logging)
    try:
        try:
            body(rt, **values)
        finally:
            if "services" in rt.__dict__:
                rt.services.close()
    except (EOFError, KeyboardInterrupt):
        echo("", err=True)  # click closes the terminal's ^C echo with a blank line
        echo("aborted", err=True)
        return 1
    except OSError as exc:
        import errno

        if exc.errno != errno.EPIPE:
            return unexpected(exc, rt.env)
        # The reader went away (``cortex ... | head``): exit 1 without a traceback, as click
        # does; nothing more can reach the pipe, and the interpreter's last flush must not fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        for stream in (sys.stdout, sys.stderr):
            try:
                os.dup2(devnull, stream.fileno())
            except (OSError, ValueError):
                pass
        sys.exit(1)
    except CortexError as exc:
        echo(error_line(exc), err=True)
        return 1
    except Exception as exc:  # noqa: BLE001 - reported as the click command line reports it
        return unexpected(exc, rt.env)
    return 0


def unexpected(exc: Exception, env: Mapping[str, str]) -> int:
    """An unexpected error: one line naming it (raised again under tests or when asked)."""
    if env.get("CORTEX_RAISE_ERRORS") == "1" or "pytest" in sys.modules:
        raise exc
    echo(
        f"error: unexpected {type(exc).__name__}: {exc}; rerun with "
        "CORTEX_RAISE_ERRORS=1 for a traceback and report it",
        err=True,
    )
    return 1
