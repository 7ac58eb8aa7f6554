"""Hook input from each host, normalized to one ``HookEvent``, and each host's output shape.

Hosts send one JSON object per event, with different field names (research notes 1, 4, 5):

- claude-code, codex and gemini: ``session_id`` and ``cwd``; context goes out as
  ``{"hookSpecificOutput": {"hookEventName": <event>, "additionalContext": <text>}}``.
- cursor: ``session_id`` or ``conversation_id``, ``cwd`` or ``workspace_roots[0]``; context
  goes out as ``{"additional_context": <text>}`` (sessionStart only), and beforeSubmitPrompt
  always answers ``{"continue": true}``.

Parsing is tolerant: unknown fields are ignored, a field of the wrong type reads as missing,
and long strings are cut before anything else sees them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import cortex.codecache  # noqa: F401 - the engine's first dataclass on the hook path
from cortex.core.redaction import clip

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

START = "start"
PROMPT = "prompt"
TOOL = "tool"
TOOL_FAILURE = "tool_failure"
CWD = "cwd"
PRE_COMPACT = "pre_compact"
POST_COMPACT = "post_compact"
STOP = "stop"
END = "end"

_CLAUDE = {
    "SessionStart": START,
    "UserPromptSubmit": PROMPT,
    "PostToolUse": TOOL,
    "PostToolUseFailure": TOOL_FAILURE,
    "CwdChanged": CWD,
    "PreCompact": PRE_COMPACT,
    "PostCompact": POST_COMPACT,
    "Stop": STOP,
    "SessionEnd": END,
}
KINDS: dict[str, dict[str, str]] = {
    "claude-code": _CLAUDE,
    "codex": _CLAUDE,
    "gemini": {
        "SessionStart": START,
        "BeforeAgent": PROMPT,
        "AfterTool": TOOL,
        "AfterAgent": STOP,
        "PreCompress": PRE_COMPACT,
        "SessionEnd": END,
    },
    "cursor": {
        "sessionStart": START,
        "beforeSubmitPrompt": PROMPT,
        "postToolUse": TOOL,
        "postToolUseFailure": TOOL_FAILURE,
        "afterFileEdit": TOOL,
        "afterShellExecution": TOOL,
        "preCompact": PRE_COMPACT,
        "stop": STOP,
        "sessionEnd": END,
    },
}
KNOWN_NAMES = frozenset(name for names in KINDS.values() for name in names)
"""Every event name some host's table knows."""


def shown_name(name: str) -> str:
    """How an event's name appears in ``hooks.log`` and the host's status: quoted when some
    host's table knows it, else only the known name it begins with (if any) and how many
    characters follow: ``<'PreCompact' and 20 more characters>``. A name no table knows was
    never checked, and whatever a host or a hostile input glued onto it (a token) is not
    written anywhere; redaction would miss a credential that follows a letter."""
    if name in KNOWN_NAMES:
        return repr(name)
    known = max((k for k in KNOWN_NAMES if name.startswith(k)), key=len, default="")
    if not known:
        return f"<a name of {len(name)} characters>"
    return f"<{known!r} and {len(name) - len(known)} more characters>"


PROMPT_CONTEXT_HOSTS = frozenset({"claude-code", "codex", "gemini"})
"""Hosts that accept context from the prompt event (Cursor's beforeSubmitPrompt does not)."""

MAX_FIELD_CHARS = 20_000
"""Longest prompt, message or summary kept from one event (topics read the first 4,000)."""
MAX_SIGNAL_CHARS = 4_000
# Tool-input keys that carry signals (topics.record_tool_call reads the left-hand names).
_SIGNAL_KEYS = {
    "file_path": "file_path",
    "absolute_path": "file_path",
    "path": "path",
    "notebook_path": "notebook_path",
    "command": "command",
    "cwd": "cwd",
    "workdir": "workdir",
    "dir_path": "workdir",
    "directory": "workdir",
}
# The text an event carries, by kind: the first of these fields that is a string.
_TEXT_FIELDS = {
    PROMPT: ("prompt",),
    STOP: ("last_assistant_message", "prompt_response"),
    POST_COMPACT: ("compact_summary", "summary"),
    PRE_COMPACT: ("custom_instructions",),
}


@dataclass(frozen=True)
class HookEvent:
    """One host event. ``kind`` is one of the constants above, or "" for an unknown event."""

    host: str
    name: str
    kind: str
    session_id: str | None = None
    cwd: str | None = None
    source: str | None = None
    reason: str | None = None
    trigger: str | None = None
    text: str | None = None
    tool_name: str | None = None
    tool_input: Mapping[str, str] = field(default_factory=dict)


def _utf8(text: str) -> str:
    """``text`` with lone surrogates (valid in JSON, not in UTF-8) replaced by U+FFFD, as the
    services replace them in free text (``core/plaintext``)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


def _str(data: Mapping[str, Any], key: str, limit: int = MAX_FIELD_CHARS) -> str | None:
    value = data.get(key)
    return _utf8(clip(value, limit)) if isinstance(value, str) and value else None


def normalize(host: str, data: Mapping[str, Any]) -> HookEvent:
    """The ``HookEvent`` in one host's input object."""
    name = _str(data, "hook_event_name", 80) or ""
    kind = KINDS.get(host, {}).get(name, "")
    text = next((t for key in _TEXT_FIELDS.get(kind, ()) if (t := _str(data, key))), None)
    tool_name, tool_input = _tool(host, name, data)
    return HookEvent(
        host=host,
        name=name,
        kind=kind,
        session_id=_session_id(host, data),
        cwd=_cwd(host, kind, data),
        source=_str(data, "source", 40),
        reason=_str(data, "reason", 80),
        trigger=_str(data, "trigger", 40),
        text=text,
        tool_name=tool_name,
        tool_input=tool_input,
    )


def _session_id(host: str, data: Mapping[str, Any]) -> str | None:
    value = data.get("session_id")
    if value is None and host == "cursor":
        value = data.get("conversation_id")
    # Kept whole (not cut): a long or odd id must fail validation, not pass as another id.
    return value if isinstance(value, str) else None


def _cwd(host: str, kind: str, data: Mapping[str, Any]) -> str | None:
    if kind == CWD and (new := _str(data, "new_cwd", MAX_SIGNAL_CHARS)):
        return new
    cwd = _str(data, "cwd", MAX_SIGNAL_CHARS)
    roots = data.get("workspace_roots")
    if cwd is None and host == "cursor" and isinstance(roots, list) and roots:
        first = roots[0]
        return _utf8(clip(first, MAX_SIGNAL_CHARS)) if isinstance(first, str) and first else None
    return cwd


def _tool(host: str, name: str, data: Mapping[str, Any]) -> tuple[str | None, dict[str, str]]:
    """The tool's name and the signal-bearing part of its input (never file contents)."""
    if host == "cursor" and name == "afterFileEdit":
        return "Edit", _signals({"file_path": data.get("file_path")})
    if host == "cursor" and name == "afterShellExecution":
        return "Shell", _signals({"command": data.get("command"), "cwd": data.get("cwd")})
    raw = data.get("tool_input")
    if isinstance(raw, str) and raw.startswith("{") and len(raw) <= MAX_FIELD_CHARS:
        try:
            raw = json.loads(raw)  # Cursor sends some tool inputs as a JSON string
        except ValueError:
            raw = None
    return _str(data, "tool_name", 200), _signals(raw if isinstance(raw, Mapping) else {})


def _signals(raw: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, target in _SIGNAL_KEYS.items():
        value = raw.get(key)
        if isinstance(value, str) and value.strip() and target not in out:
            out[target] = _utf8(clip(value, MAX_SIGNAL_CHARS))
    return out


def render(event: HookEvent, context: str | None) -> str:
    """What to print on stdout for ``event``: the host's context shape, or nothing."""
    if event.host == "cursor":
        if event.kind == PROMPT:
            return json.dumps({"continue": True})
        if event.kind == START and context:
            return json.dumps({"additional_context": context}, ensure_ascii=False)
        return ""
    if not context or event.kind not in (START, PROMPT):
        return ""
    output = {"hookEventName": event.name, "additionalContext": context}
    return json.dumps({"hookSpecificOutput": output}, ensure_ascii=False)
