"""The bridge's request parameters, checked at the edge, and the text of OpenClaw messages.

A parameter of the wrong type is a ``ValidationError`` naming it; strings and lists are cut to
a bound (a client cannot make the bridge hold more than that).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cortex.errors import ValidationError

MAX_LINE_BYTES = 8 * 1024 * 1024
"""A request line longer than this is refused (and skipped to its newline)."""
MAX_SIGNAL_TEXT = 20_000
"""Characters of a turn's messages mined for topics."""


def opt_str(params: Mapping[str, Any], name: str, limit: int = 4096) -> str | None:
    value = params.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a string, not {type(value).__name__}")
    return value[:limit]


def req_str(params: Mapping[str, Any], name: str, limit: int = 4096) -> str:
    value = opt_str(params, name, limit)
    if value is None:
        raise ValidationError(f"{name} is required")
    return value


def flag(params: Mapping[str, Any], name: str, default: bool) -> bool:
    value = params.get(name, default)
    if not isinstance(value, bool):
        raise ValidationError(f"{name} must be true or false")
    return value


def number(params: Mapping[str, Any], name: str, default: float) -> float:
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(f"{name} must be a number")
    return float(value)


def str_list(params: Mapping[str, Any], name: str, limit: int = 200) -> list[str]:
    value = params.get(name) or []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise ValidationError(f"{name} must be a list of strings")
    return [str(item)[:4096] for item in value[:limit] if isinstance(item, str | int | float)]


def obj(params: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = params.get(name) or {}
    if not isinstance(value, dict):
        raise ValidationError(f"{name} must be an object")
    return value


def content_text(message: Any) -> str:
    """The text of one message, as OpenClaw or an LLM API shapes it (a string or blocks)."""
    content = message.get("content") if isinstance(message, dict) else message
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            block["text"]
            for block in content
            if isinstance(block, dict) and isinstance(block.get("text"), str)
        )
    return ""


def message_text(messages: Any, limit: int = MAX_SIGNAL_TEXT) -> str:
    """The text of a turn's messages (newest last), at most ``limit`` characters."""
    if not isinstance(messages, list):
        return ""
    return "\n".join(t for t in map(content_text, messages[-20:]) if t)[-limit:]


def last_reply(messages: Any, limit: int = MAX_SIGNAL_TEXT) -> str:
    """The text of the last assistant message, or "" when there is none."""
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "assistant":
            text = content_text(message).strip()
            if text:
                return text[:limit]
    return ""
