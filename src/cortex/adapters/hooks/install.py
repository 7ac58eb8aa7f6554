"""``cortex install/uninstall HOST``: merge Cortex's hooks and MCP server into a host's config.

Where each host keeps them and what the entries look like is ``install_hosts``; here they are
merged in or out, planned first (``plan``, nothing written) and then written (``apply``).

Merging is idempotent: a second install changes nothing, other entries are kept, and an entry
is ours when its command runs ``cortex ... hook HOST`` (hooks) or ``cortex ... mcp`` under the
name ``cortex`` (MCP), so uninstall removes exactly those. A group, event list, ``hooks`` or
``mcpServers`` object left empty by uninstall is removed; a file left empty is deleted. A file
that does not parse is never rewritten. Hooks call this virtualenv's interpreter and the hook
client (``client.py``) by absolute path (a shim on PATH costs ~120 ms per event, the console
script's ``site`` and imports a few ms more).
"""

from __future__ import annotations

import difflib
import json
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cortex.adapters.hooks.install_hosts import (
    CLAUDE_HOOKS,
    CODEX_HOOKS,
    CURSOR_EVENTS,
    GEMINI_HOOKS,
    MCP_NAME,
    HookSpec,
    Target,
    cortex_command,
    find_ours,
    hook_program,
    is_our_hook,
    is_our_mcp,
    target,
    wanted_hooks,
    without_ours,
)
from cortex.adapters.hooks.server import stop_server as stop_server  # for uninstall
from cortex.errors import ValidationError
from cortex.files import atomic_write_text, file_lock

__all__ = [
    "CLAUDE_HOOKS",
    "CODEX_HOOKS",
    "CURSOR_EVENTS",
    "GEMINI_HOOKS",
    "MCP_NAME",
    "FileChange",
    "HookSpec",
    "Target",
    "apply",
    "cortex_command",
    "hook_program",
    "is_our_hook",
    "is_our_mcp",
    "plan",
    "target",
]

TOML_BEGIN = "# >>> cortex: managed by `cortex install codex`; `cortex uninstall codex` removes it"
TOML_END = "# <<< cortex"


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


def remove_empty_folders(changes: list[FileChange], base: Path) -> list[Path]:
    """Remove the settings folders (``.claude``, ``.codex``...) under ``base`` that the
    removal left empty; return them. ``base`` itself (home, project) is never removed."""
    removed = []
    for folder in dict.fromkeys(c.path.parent for c in changes if c.action != "unchanged"):
        if folder == base or base not in folder.parents:
            continue
        try:
            folder.rmdir()  # only succeeds when empty
        except OSError:
            continue
        removed.append(folder)
    return removed


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


def _add_hooks(target: Target, data: dict[str, Any], change: FileChange) -> None:
    if target.host == "cursor":
        data.setdefault("version", 1)
    events = _object(data, "hooks", change.path)
    for event, handler, entry in wanted_hooks(target):
        entries = events.setdefault(event, [])
        if not isinstance(entries, list):
            raise ValidationError(f"{change.path}: hooks.{event} is not a list; fix it")
        found = find_ours(entries, target.host)
        if found is None:
            entries.append(entry)
            change.added.append(event)
        elif found != handler:
            found.clear()
            found.update(handler)
            change.added.append(event)


def _remove_hooks(host: str, data: dict[str, Any], change: FileChange) -> None:
    events = data.get("hooks")
    if not isinstance(events, dict):
        return
    for event in list(events):
        entries = events[event]
        if not isinstance(entries, list):
            continue
        kept = [e for e in (without_ours(e, host) for e in entries) if e is not None]
        if len(kept) != len(entries) or kept != entries:
            change.removed.append(event)
            if kept:
                events[event] = kept
            else:
                del events[event]
    if not events and change.removed:
        del data["hooks"]


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
