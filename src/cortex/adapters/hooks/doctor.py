"""``cortex doctor``: is capture working? Hooks installed, events arriving, database healthy.

Every check reads; nothing is created, migrated or repaired (a missing database stays
missing). Each problem is one line that names its fix; ``ok`` is False when there is one:
no host has Cortex's hooks installed, an installed host never sent an event or its last event
failed, a hook command's program is gone, or the database is damaged or not migrated (in
client mode: the team server cannot be reached or refuses the key). Open sessions (live or
with a lapsed lease), the hook server and the working-memory file are reported too.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from cortex.adapters import HOSTS
from cortex.adapters.hooks.install import is_our_hook, target
from cortex.adapters.hooks.server import server_pid
from cortex.adapters.hooks.state import read_status
from cortex.clock import Clock, parse_time
from cortex.config import Config, load_config
from cortex.errors import CortexError, ValidationError
from cortex.services.app import Services
from cortex.services.sessions.manager import SessionPersistenceManager
from cortex.services.working_memory import parse_working_memory


@dataclass
class Report:
    """What doctor found; ``problems`` are the lines that make it exit 1."""

    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)
    database: dict[str, Any] = field(default_factory=dict)
    sessions: list[dict[str, Any]] = field(default_factory=list)
    server: dict[str, Any] = field(default_factory=dict)
    working_memory: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    home: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "problems": self.problems,
            "home": self.home,
            "hosts": self.hosts,
            "database": self.database,
            "sessions": self.sessions,
            "server": self.server,
            "working_memory": self.working_memory,
        }


def diagnose(
    config: Config, clock: Clock, user_home: Path, project: Path, *, follow_hooks: bool = False
) -> Report:
    """Run every check, hooks looked up for the user and ``project``.

    The home checked is the one the installed hooks use (the ``--home`` written into their
    command) when ``follow_hooks`` (no home was named), else ``config.home``; installed hooks
    that use another home than the one named are a problem.
    """
    report = Report()
    installed = {host: installed_hooks(host, user_home, project) for host in HOSTS}
    homes = {h: hook_home(i[0]["command"]) for h, i in installed.items() if i}
    named = next((Path(h) for h in homes.values() if h), None)
    if follow_hooks and named is not None and named != config.home:
        config = load_config(named, {}, {})
    report.home = str(config.home)
    for host, home in homes.items():
        if home and Path(home) != config.home:
            report.problems.append(
                f"{host}: the hooks write to {home}, not {config.home}; "
                f"check that home with `cortex --home {home} doctor`"
            )
    _check_hooks(report, installed, config.home, clock.now())
    if config.server_url:
        _check_server(report, config)
    else:
        _check_database(report, config, clock)
    pid = server_pid(config.home)
    report.server = {"running": pid is not None, "pid": pid}
    _check_working_memory(report, config.working_memory_path)
    return report


def installed_hooks(host: str, user_home: Path, project: Path) -> list[dict[str, str]]:
    """The settings files holding Cortex's hooks for ``host``, with the command each runs."""
    found: list[dict[str, str]] = []
    scopes: list[Path | None] = [None, project]
    for scope in scopes:
        place = target(
            host, project=scope, user_home=user_home, cortex_bin="cortex", cortex_home=None
        )
        paths = [place.hooks_path]
        if host == "claude-code" and scope is not None:
            paths.append(scope / ".claude" / "settings.json")
        for path in paths:
            command = _our_command(path, host)
            if command is not None and all(f["path"] != str(path) for f in found):
                found.append({"path": str(path), "command": command})
    return found


def _our_command(path: Path, host: str) -> str | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    events = data.get("hooks") if isinstance(data, dict) else None
    for entries in events.values() if isinstance(events, dict) else ():
        for entry in entries if isinstance(entries, list) else ():
            handlers = entry.get("hooks", [entry]) if isinstance(entry, dict) else []
            for handler in handlers if isinstance(handlers, list) else ():
                command = handler.get("command") if isinstance(handler, dict) else None
                if is_our_hook(command, host):
                    return str(command)
    return None


def hook_home(command: str) -> str | None:
    """The ``--home DIR`` an installed hook command passes, if any."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for option, value in zip(words, words[1:], strict=False):
        if option == "hook":
            return None
        if option == "--home":
            return value
    return None


def _check_hooks(
    report: Report, hooks: dict[str, list[dict[str, str]]], home: Path, now: datetime
) -> None:
    for host in HOSTS:
        installed = hooks[host]
        status = read_status(home, host)
        report.hosts[host] = {"installed": installed, "last_event": status or None}
        if not installed:
            continue
        for program in _programs(installed[0]["command"]):
            if not Path(program).exists():
                report.problems.append(
                    f"{host}: the hook command's program {program} is gone; "
                    f"rerun `cortex install {host}`"
                )
        if not status:
            report.problems.append(
                f"{host}: hooks are installed ({installed[0]['path']}) but no event has reached "
                f"Cortex yet; start a {host} session (and trust the folder), then rerun "
                "`cortex doctor`"
            )
        elif not status.get("ok"):
            report.problems.append(
                f"{host}: the last event ({status.get('event')}, {_age(status.get('at'), now)}) "
                f"failed: {status.get('error')}; see {home / 'logs' / 'hooks.log'}"
            )
    if not any(h["installed"] for h in report.hosts.values()):
        report.problems.append(
            "no hooks are installed for any host, so nothing is captured; run "
            "`cortex install claude-code` (or codex, gemini, cursor)"
        )


def _programs(command: str) -> list[str]:
    """The absolute paths a hook command runs: the ``cortex`` script, or the interpreter and
    the hook client it is given (the words before the command's own options)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return []
    programs = []
    for word in words:
        if word == "hook" or word.startswith("--"):
            break
        if word.startswith("/"):
            programs.append(word)
    return programs


def _age(at: object, now: datetime) -> str:
    try:
        seconds = (now - parse_time(str(at))).total_seconds()
    except ValidationError:
        return "at an unknown time"
    if seconds < 120:
        return f"{max(0, int(seconds))}s ago"
    return f"{int(seconds // 60)}m ago" if seconds < 7200 else f"{int(seconds // 3600)}h ago"


def _check_database(report: Report, config: Config, clock: Clock) -> None:
    path = config.db_path
    report.database = {"path": str(path), "exists": path.exists()}
    if not path.exists():
        report.problems.append(
            f"no database at {path} yet; the first hook event (or `cortex session start`) "
            "creates it"
        )
        return
    try:
        app = Services.open(config, clock, migrate=False)  # doctor changes nothing
    except CortexError as exc:
        report.problems.append(f"database: {exc}")
        return
    found = len(report.problems)
    try:
        if _database_health(report, app):  # (sessions are read from a current schema only)
            _open_sessions(report, app.sessions)
    except CortexError as exc:
        report.problems.append(f"database: {exc}")
    finally:
        app.close()
    if len(report.problems) > found:  # (a damaged file: that is the problem to fix)
        return
    refused = _write_refused(path)
    report.database["writable"] = refused is None
    if refused is not None:
        report.problems.append(
            f"database {path} cannot be written ({refused}); every capture fails until the "
            f"file and {path.parent} are writable by this user"
        )


def _check_server(report: Report, config: Config) -> None:
    """Client mode: the team server holds the sessions, so it is asked for the open ones (a
    read that delivers nothing: doctor changes nothing), and the writes the local journal
    keeps for it are counted. No local database is needed, so a missing one is no problem."""
    from cortex.services.remote.journal import Journal
    from cortex.services.remote.transport import Transport

    try:
        transport = Transport(config.server_url, config.api_key, config.server_timeout_seconds)
    except CortexError as exc:
        report.problems.append(str(exc))
        return
    journal = Journal(config.home, transport.target())
    report.database = {
        "server": transport.url,
        "waiting": journal.count(),
        "held": len(journal.held()),
    }
    try:
        found = transport.request("GET", "/v1/sessions?open=true")
    except CortexError as exc:
        report.database["reachable"] = False
        report.problems.append(str(exc))
        return
    finally:
        transport.close()
    report.database["reachable"] = True
    for state in found.get("sessions", []):
        keys = ("session_id", "channel", "project", "last_activity")
        report.sessions.append({k: state.get(k) for k in keys} | {"lease": "server's"})


def _write_refused(path: Path) -> str | None:
    """Why a write to the database would fail, or None: a table made in a transaction that
    is rolled back (nothing is written). Another process writing at the moment counts as
    writable."""
    import contextlib
    import sqlite3

    from cortex.files import file_uri

    uri = f"{file_uri(path)}?mode=rw"  # (never makes the file: a missing one is refused)
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=1)) as db:
            db.execute("BEGIN IMMEDIATE")
            db.execute("CREATE TABLE _cortex_write_probe (x)")
            db.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            return None
        return str(exc)
    except sqlite3.Error as exc:
        return str(exc)
    return None


def _database_health(report: Report, app: Services) -> bool:
    """The database's checks into ``report``; True when no migration is pending."""
    health = app.health()
    result = "; ".join(health.damage[:3]) or "ok"
    report.database["quick_check"] = result
    if health.damage:
        report.problems.append(
            f"database {health.url} is damaged ({result}); restore a backup or move it aside"
        )
    pending = list(health.pending)
    report.database.update(
        migrations=len(health.applied),
        pending_migrations=pending,
        free_bytes=health.free_bytes,
        search_index_segments=health.index_segments,
    )
    if not pending:
        return True
    from cortex.adapters.hooks.upgrade import running

    migrating = running(app.config.home)
    report.database["migrating"] = migrating
    report.problems.append(
        f"database has {len(pending)} pending migration(s) ({pending[0]}, ...); "
        + (
            "a background migration started by a hook is applying them (logs/hooks.log says "
            "when it is done)"
            if migrating
            else "run `cortex db migrate`"
        )
    )
    return False


def _open_sessions(report: Report, sessions: SessionPersistenceManager) -> None:
    for state in sessions.open_sessions():
        report.sessions.append(
            {
                "session_id": state.session_id,
                "channel": state.channel,
                "project": state.project,
                "last_activity": state.last_activity,
                "lease": "lapsed" if sessions.is_lapsed(state) else "live",
            }
        )


def _check_working_memory(report: Report, path: Path) -> None:
    report.working_memory = {"path": str(path), "exists": path.exists()}
    if not path.exists():
        return
    try:
        parse_working_memory(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        report.problems.append(
            f"working memory file {path} is unreadable ({exc}); move it aside (the pins stored "
            "in the database are kept)"
        )
