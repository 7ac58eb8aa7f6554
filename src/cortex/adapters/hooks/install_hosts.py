"""Where each host keeps its hooks and MCP servers, and what Cortex's entries look like there.

| host | scope | hooks | MCP server |
| --- | --- | --- | --- |
| claude-code | user | ``~/.claude/settings.json`` | ``~/.claude.json`` |
| claude-code | project | ``DIR/.claude/settings.local.json`` | ``DIR/.mcp.json`` |
| codex | user / project | ``~/.codex/hooks.json`` | ``~/.codex/config.toml`` |
| gemini | user / project | ``~/.gemini/settings.json`` | the same file |
| cursor | user / project | ``~/.cursor/hooks.json`` | ``~/.cursor/mcp.json`` |

(research notes, sections 1, 4; project scope: the same names under ``DIR`` instead of ``~``).
Claude Code's project hooks go to ``settings.local.json``, the personal, git-ignored file,
because the command is an absolute path on this machine. Hooks run the hook client
(``hook_program``: this interpreter with ``-S -I -X frozen_modules=on`` and ``client.py`` by
absolute path, the cheapest process Python starts); MCP runs the ``cortex`` script. An entry is
ours when its command runs ``cortex ... hook HOST`` (the script) or ``.../cortex/.../client.py
... hook HOST`` (the client), or ``cortex ... mcp`` (MCP), so installs of either form are
recognized.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cortex.adapters import HOSTS
from cortex.errors import ValidationError

MCP_NAME = "cortex"


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
# Codex runs an ``async`` handler synchronously (with a warning), so none is written; its
# SessionStart also fires after a compaction (``compact``: pins come back, as in Claude Code)
# and for a forked thread (``fork``: a new session). Gemini has no async flag at all.
CODEX_HOOKS = (
    HookSpec("SessionStart", "startup|resume|clear|compact|fork", 15),
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


CLIENT_FLAGS = ("-S", "-I", "-X", "frozen_modules=on")
"""No ``site``, isolated from the user's environment, standard modules from the interpreter."""


def hook_program(env: Mapping[str, str], cortex_bin: str) -> str:
    """What an installed hook runs before ``[--home DIR] hook HOST``.

    This interpreter running ``client.py`` by absolute path with ``CLIENT_FLAGS``: no ``site``, no
    package import, so each event costs less than a bare ``python -c "import sqlite3"``. The
    ``cortex`` script (``cortex_bin``) instead when ``CORTEX_BIN`` in ``env`` names one, and on
    Windows, which has no Unix socket for the hook server.
    """
    if env.get("CORTEX_BIN") or os.name == "nt" or not sys.executable:
        return shlex.quote(cortex_bin) if " -m " not in cortex_bin else cortex_bin
    client = os.path.join(os.path.dirname(os.path.abspath(__file__)), "client.py")
    return shlex.join([os.path.abspath(sys.executable), *CLIENT_FLAGS, client])


def target(
    host: str,
    *,
    project: Path | None,
    user_home: Path,
    cortex_bin: str,
    cortex_home: Path | None,
    program: str | None = None,
) -> Target:
    """Where ``host``'s hooks and MCP entry go, and the command they run: ``program`` (see
    ``hook_program``; the quoted ``cortex_bin`` when None) for hooks, ``cortex_bin`` for MCP."""
    if host not in HOSTS:
        raise ValidationError(f"unknown host {host!r}; use one of {', '.join(HOSTS)}")
    base = project if project is not None else user_home
    if program is None:
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
    """True for a command that runs ``cortex [options] hook HOST`` (the console script) or
    ``python -S -I .../cortex/adapters/hooks/client.py [options] hook HOST`` (the client)."""
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


# -- Cortex's entries ---------------------------------------------------------------------------
def hook_handler(target: Target, spec: HookSpec) -> dict[str, Any]:
    """Our handler for ``spec``'s event in ``target.host``'s format (Gemini names its own)."""
    handler: dict[str, Any] = {"type": "command", "command": target.command}
    if target.host == "gemini":
        handler = {"name": "cortex", **handler}
    if spec.timeout is not None:
        handler["timeout"] = spec.timeout
    if spec.is_async:
        handler["async"] = True
    return handler


def wanted_hooks(target: Target) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
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
        handler = hook_handler(target, spec)
        group: dict[str, Any] = {"matcher": spec.matcher} if spec.matcher else {}
        wanted.append((spec.event, handler, {**group, "hooks": [handler]}))
    return wanted


def find_ours(entries: list[Any], host: str) -> dict[str, Any] | None:
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


def without_ours(entry: Any, host: str) -> Any:
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
