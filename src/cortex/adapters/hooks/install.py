"""``cortex install/uninstall HOST``: merge Cortex's hooks and MCP server into a host's config.

Each host keeps hooks and MCP servers in its own files (research notes, sections 1, 4):

| host | scope | hooks | MCP server |
| --- | --- | --- | --- |
| claude-code | user | ``~/.claude/settings.json`` | ``~/.claude.json`` |
| claude-code | project | ``DIR/.claude/settings.local.json`` | ``DIR/.mcp.json`` |
| codex | user / project | ``~/.codex/hooks.json`` | ``~/.codex/config.toml`` |
| gemini | user / project | ``~/.gemini/settings.json`` | the same file |
| cursor | user / project | ``~/.cursor/hooks.json`` | ``~/.cursor/mcp.json`` |

(project scope: the same names under ``DIR`` instead of ``~``). Claude Code's project hooks
go to ``settings.local.json``, the personal, git-ignored file, because the command is an
absolute path on this machine.

Merging is idempotent: a second install changes nothing, other entries are kept, and an entry
is ours when its command runs ``cortex ... hook HOST`` (hooks) or ``cortex ... mcp`` under the
name ``cortex`` (MCP), so uninstall removes exactly those. A group, event list, ``hooks`` or
``mcpServers`` object left empty by uninstall is removed; a file left empty is deleted. A file
that does not parse is never rewritten. Hooks call the virtualenv's ``cortex`` script by
absolute path (a shim on PATH costs ~120 ms per event).
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
import shutil
import sys
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cortex.adapters import HOSTS
from cortex.errors import ValidationError
from cortex.files import atomic_write_text, file_lock

MCP_NAME = "cortex"
TOML_BEGIN = "# >>> cortex: managed by `cortex install codex`; `cortex uninstall codex` removes it"
TOML_END = "# <<< cortex"


@dataclass(frozen=True)
class HookSpec:
    """One event's hook: its matcher, timeout (in the host's unit) and whether it is async."""

    event: str
    matcher: str | None = None
    timeout: int | None = None
    is_async: bool = False


CLAUDE_HOOKS = (
    HookSpec("SessionStart", "startup|resume|clear|compact", 15),
    HookSpec("UserPromptSubmit", None, 15),
    HookSpec("PostToolUse", "*", 30, True),
    HookSpec("PostToolUseFailure", "*", 30, True),
    HookSpec("CwdChanged", None, 30, True),
    HookSpec("PreCompact", "manual|auto", 30),
    HookSpec("PostCompact", "manual|auto", 30, True),
    HookSpec("Stop", None, 30, True),
    HookSpec("SessionEnd", None, 2),
)
CODEX_HOOKS = (
    HookSpec("SessionStart", "startup|resume|clear", 15),
    HookSpec("UserPromptSubmit", None, 15),
    HookSpec("PostToolUse", "*", 30),
    HookSpec("PreCompact", None, 30),
    HookSpec("PostCompact", None, 30),
    HookSpec("Stop", None, 30),
    HookSpec("SessionEnd", None, 5),
)
GEMINI_HOOKS = (  # timeouts in milliseconds
    HookSpec("SessionStart", None, 15000),
    HookSpec("BeforeAgent", None, 15000),
    HookSpec("AfterTool", "*", 30000),
    HookSpec("AfterAgent", None, 30000),
    HookSpec("PreCompress", None, 30000),
    HookSpec("SessionEnd", None, 5000),
)
CURSOR_EVENTS = (
    "sessionStart",
    "beforeSubmitPrompt",
    "postToolUse",
    "postToolUseFailure",
    "preCompact",
    "stop",
    "sessionEnd",
)


@dataclass
class FileChange:
    """What install or uninstall does to one file (``after`` None: the file is deleted)."""

    path: Path
    before: str | None
    after: str | None
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def action(self) -> str:
        if self.before == self.after:
            return "unchanged"
        if self.before is None:
            return "created"
        return "deleted" if self.after is None else "updated"

    def diff(self) -> str:
        lines = difflib.unified_diff(
            (self.before or "").splitlines(keepends=True),
            (self.after or "").splitlines(keepends=True),
            fromfile=str(self.path) if self.before is not None else "/dev/null",
            tofile=str(self.path) if self.after is not None else "/dev/null",
        )
        return "".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "action": self.action,
            "added": self.added,
            "removed": self.removed,
            "notes": self.notes,
        }


@dataclass(frozen=True)
class Target:
    """The files of one host at one scope, and what goes in them."""

    host: str
    hooks_path: Path
    mcp_path: Path
    command: str
    mcp_entry: dict[str, Any]


# -- locating ------------------------------------------------------------------------------------
def cortex_command(env: Mapping[str, str]) -> str:
    """The absolute path of this install's ``cortex`` script (what hooks run).

    ``CORTEX_BIN`` in ``env`` (the caller's environment) names it explicitly.
    """
    if env.get("CORTEX_BIN"):
        return env["CORTEX_BIN"]
    argv0 = Path(sys.argv[0])
    if argv0.name == "cortex" and argv0.exists():
        return str(argv0.absolute())
    sibling = Path(sys.executable).parent / "cortex"
    if sibling.exists():
        return str(sibling)
    found = shutil.which("cortex")
    return str(Path(found).absolute()) if found else f"{sys.executable} -m cortex.entry"


def target(
    host: str,
    *,
    project: Path | None,
    user_home: Path,
    cortex_bin: str,
    cortex_home: Path | None,
) -> Target:
    """Where ``host``'s hooks and MCP entry go, and the command they run."""
    if host not in HOSTS:
        raise ValidationError(f"unknown host {host!r}; use one of {', '.join(HOSTS)}")
    base = project if project is not None else user_home
    program = shlex.quote(cortex_bin) if " -m " not in cortex_bin else cortex_bin
    home_args = ["--home", str(cortex_home)] if cortex_home is not None else []
    command = " ".join([program, *map(shlex.quote, home_args), "hook", host])
    mcp_args = [*home_args, "mcp"]
    if project is not None:
        mcp_args += ["--project-dir", str(project)]
    mcp_entry: dict[str, Any] = {"command": cortex_bin, "args": mcp_args}
    paths = {
        "claude-code": (
            base / ".claude" / ("settings.local.json" if project else "settings.json"),
            base / ".mcp.json" if project else user_home / ".claude.json",
        ),
        "codex": (base / ".codex" / "hooks.json", base / ".codex" / "config.toml"),
        "gemini": (base / ".gemini" / "settings.json", base / ".gemini" / "settings.json"),
        "cursor": (base / ".cursor" / "hooks.json", base / ".cursor" / "mcp.json"),
    }[host]
    if host == "claude-code":
        mcp_entry = {"type": "stdio", **mcp_entry}
    return Target(host, paths[0], paths[1], command, mcp_entry)


# -- recognizing ours ----------------------------------------------------------------------------
def is_our_hook(command: object, host: str) -> bool:
    """True for a command that runs ``cortex [options] hook HOST``."""
    if not isinstance(command, str):
        return False
    return re.search(rf"cortex\b.*\shook\s+{re.escape(host)}(\s|$)", command) is not None


def is_our_mcp(entry: object) -> bool:
    if not isinstance(entry, dict):
        return False
    command, args = entry.get("command"), entry.get("args")
    return (
        isinstance(command, str)
        and Path(command.split(" ")[0]).name.startswith("cortex")
        and isinstance(args, list)
        and "mcp" in args
    )


# -- planning ------------------------------------------------------------------------------------
def plan(target: Target, *, remove: bool, with_mcp: bool = True) -> list[FileChange]:
    """The changes install (or uninstall) makes, computed without writing anything."""

    def edit_hooks(data: dict[str, Any], change: FileChange) -> None:
        _hooks_edit(target, data, change, remove)
        if with_mcp and target.mcp_path == target.hooks_path:  # Gemini: one file holds both
            _mcp_edit(target.mcp_entry, data, change, remove)

    def edit_mcp(data: dict[str, Any], change: FileChange) -> None:
        _mcp_edit(target.mcp_entry, data, change, remove)

    changes = [_edit_json(target.hooks_path, edit_hooks)]
    if with_mcp and target.host == "codex":
        changes.append(_edit_toml(target.mcp_path, target.mcp_entry, remove))
    elif with_mcp and target.mcp_path != target.hooks_path:
        changes.append(_edit_json(target.mcp_path, edit_mcp))
    return changes


def apply(changes: list[FileChange]) -> None:
    """Write (or delete) every changed file, atomically and under its lock."""
    for change in changes:
        if change.action == "unchanged":
            continue
        with file_lock(change.path):
            if change.after is None:
                change.path.unlink(missing_ok=True)
            else:
                atomic_write_text(change.path, change.after)
        _unlink_quietly(change.path.with_name(change.path.name + ".lock"))


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValidationError(
            f"cannot read {path} ({exc.strerror}); check its permissions"
        ) from exc


def _edit_json(path: Path, edit: Callable[[dict[str, Any], FileChange], None]) -> FileChange:
    before = _read(path)
    try:
        data = json.loads(before) if before and before.strip() else {}
    except ValueError as exc:
        raise ValidationError(
            f"{path} is not valid JSON ({exc}); fix it or move it aside, then rerun"
        ) from exc
    if not isinstance(data, dict):
        raise ValidationError(f"{path} does not hold a JSON object; fix it, then rerun")
    change = FileChange(path, before, before)
    edit(data, change)
    if change.added or change.removed:
        empty = not data or data == {"version": 1}
        change.after = None if empty and change.removed else json.dumps(data, indent=2) + "\n"
    return change


# -- hooks ---------------------------------------------------------------------------------------
def _hooks_edit(target: Target, data: dict[str, Any], change: FileChange, remove: bool) -> None:
    if remove:
        _remove_hooks(target.host, data, change)
    else:
        _add_hooks(target, data, change)


def _handler(target: Target, spec: HookSpec) -> dict[str, Any]:
    handler: dict[str, Any] = {"type": "command", "command": target.command}
    if target.host == "gemini":
        handler = {"name": "cortex", **handler}
    if spec.timeout is not None:
        handler["timeout"] = spec.timeout
    if spec.is_async:
        handler["async"] = True
    return handler


def _wanted(target: Target) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(event, our handler, the entry that adds it) for each event of ``target.host``.

    Cursor lists handlers directly under each event; the other hosts list groups (an optional
    matcher and their ``hooks``).
    """
    if target.host == "cursor":
        return [
            (e, {"command": target.command}, {"command": target.command}) for e in CURSOR_EVENTS
        ]
    specs = {"claude-code": CLAUDE_HOOKS, "codex": CODEX_HOOKS, "gemini": GEMINI_HOOKS}
    wanted = []
    for spec in specs[target.host]:
        handler = _handler(target, spec)
        group: dict[str, Any] = {"matcher": spec.matcher} if spec.matcher else {}
        wanted.append((spec.event, handler, {**group, "hooks": [handler]}))
    return wanted


def _add_hooks(target: Target, data: dict[str, Any], change: FileChange) -> None:
    if target.host == "cursor":
        data.setdefault("version", 1)
    events = _object(data, "hooks", change.path)
    for event, handler, entry in _wanted(target):
        entries = events.setdefault(event, [])
        if not isinstance(entries, list):
            raise ValidationError(f"{change.path}: hooks.{event} is not a list; fix it")
        found = _find_ours(entries, target.host)
        if found is None:
            entries.append(entry)
            change.added.append(event)
        elif found != handler:
            found.clear()
            found.update(handler)
            change.added.append(event)


def _find_ours(entries: list[Any], host: str) -> dict[str, Any] | None:
    """Our handler among an event's entries (Cursor's handlers, or the groups' handlers)."""
    for entry in entries:
        if host == "cursor":
            handlers: object = [entry]
        else:
            handlers = entry.get("hooks") if isinstance(entry, dict) else None
        for handler in handlers if isinstance(handlers, list) else ():
            if isinstance(handler, dict) and is_our_hook(handler.get("command"), host):
                return handler
    return None


def _remove_hooks(host: str, data: dict[str, Any], change: FileChange) -> None:
    events = data.get("hooks")
    if not isinstance(events, dict):
        return
    for event in list(events):
        entries = events[event]
        if not isinstance(entries, list):
            continue
        kept = [e for e in (_without_ours(e, host) for e in entries) if e is not None]
        if len(kept) != len(entries) or kept != entries:
            change.removed.append(event)
            if kept:
                events[event] = kept
            else:
                del events[event]
    if not events and change.removed:
        del data["hooks"]


def _without_ours(entry: Any, host: str) -> Any:
    """``entry`` without our handlers; None when nothing else was in it."""
    if not isinstance(entry, dict):
        return entry
    if is_our_hook(entry.get("command"), host):
        return None
    handlers = entry.get("hooks")
    if not isinstance(handlers, list):
        return entry
    kept = [
        h for h in handlers if not (isinstance(h, dict) and is_our_hook(h.get("command"), host))
    ]
    if len(kept) == len(handlers):
        return entry
    return {**entry, "hooks": kept} if kept else None


def _object(data: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = data.setdefault(key, {})
    if not isinstance(value, dict):
        raise ValidationError(f"{path}: {key!r} is not a JSON object; fix it, then rerun")
    return value


# -- MCP -----------------------------------------------------------------------------------------
def _mcp_edit(
    entry: dict[str, Any], data: dict[str, Any], change: FileChange, remove: bool
) -> None:
    servers = data.get("mcpServers")
    current = servers.get(MCP_NAME) if isinstance(servers, dict) else None
    if remove:
        if isinstance(servers, dict) and is_our_mcp(current):
            del servers[MCP_NAME]
            change.removed.append(f"mcpServers.{MCP_NAME}")
            if not servers:
                del data["mcpServers"]
        return
    servers = _object(data, "mcpServers", change.path)
    if current is not None and not is_our_mcp(current):
        change.notes.append(
            f"an MCP server named {MCP_NAME!r} that is not Cortex's is already in {change.path}; "
            "left as it is"
        )
        return
    if current != entry:
        servers[MCP_NAME] = entry
        change.added.append(f"mcpServers.{MCP_NAME}")


def _edit_toml(path: Path, entry: dict[str, Any], remove: bool) -> FileChange:
    """Codex's ``[mcp_servers.cortex]`` table, as a marked block at the end of config.toml."""
    before = _read(path)
    text = before or ""
    try:
        parsed = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValidationError(f"{path} is not valid TOML ({exc}); fix it, then rerun") from exc
    kept, had_block = _strip_block(text)
    change = FileChange(path, before, before)
    if remove:
        if had_block:
            change.after = kept if kept.strip() else None
            change.removed.append(f"mcp_servers.{MCP_NAME}")
        return change
    if not had_block and MCP_NAME in parsed.get("mcp_servers", {}):
        change.notes.append(f"{path} already has [mcp_servers.{MCP_NAME}]; left as it is")
        return change
    block = "\n".join(
        [
            TOML_BEGIN,
            f"[mcp_servers.{MCP_NAME}]",
            f"command = {json.dumps(entry['command'])}",
            f"args = {json.dumps(entry['args'])}",
            TOML_END,
            "",
        ]
    )
    after = (kept.rstrip("\n") + "\n\n" if kept.strip() else "") + block
    if after != before:
        change.after = after
        change.added.append(f"mcp_servers.{MCP_NAME}")
    return change


def _strip_block(text: str) -> tuple[str, bool]:
    """``text`` without our marked block (and the blank line put before it)."""
    start = text.find(TOML_BEGIN)
    end = text.find(TOML_END, start)
    if start < 0 or end < 0:
        return text, False
    tail = text[end + len(TOML_END) :].removeprefix("\n")
    head = text[:start].removesuffix("\n\n").removesuffix("\n")
    head = head + "\n" if head else ""
    return head + tail, True
