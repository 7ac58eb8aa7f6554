"""The bridge's request parameters, checked at the edge, and the text of OpenClaw messages.

A parameter of the wrong type is a ``ValidationError`` naming it; strings and lists are cut to
a bound (a client cannot make the bridge hold more than that).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from cortex.errors import ValidationError, refuse_empty

MAX_LINE_BYTES = 8 * 1024 * 1024
"""A request line longer than this is refused (and skipped to its newline)."""
MAX_SIGNAL_TEXT = 20_000
"""Characters of a turn's messages mined for topics."""


def parse_request(line: bytes) -> Any:
    """One request line's JSON value: no NaN or Infinity (not JSON: the plugin could not read
    one echoed back), its strings without lone surrogates (``"\\ud83d"``: what
    JavaScript sends for a string cut inside an emoji; they cannot be stored or written as
    UTF-8), replaced by ``?`` as a hook's input is; ValidationError when it is not JSON."""
    text = line.decode("utf-8", "replace")
    try:
        value = json.loads(text, parse_constant=_not_a_number, parse_float=_finite)
        # Only a \u escape makes a lone surrogate (bytes that would are decoded as U+FFFD).
        return _utf8(value) if "\\ud" in text or "\\uD" in text else value
    except ValueError as exc:
        raise ValidationError(f"not JSON: {exc}") from exc
    except RecursionError as exc:
        raise ValidationError("not JSON: nested too deeply") from exc


def _not_a_number(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number; send a finite number or null")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of range; send a finite number")
    return value


def _utf8(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, list):
        return [_utf8(item) for item in value]
    if isinstance(value, dict):
        return {_utf8(key): _utf8(item) for key, item in value.items()}
    return value


def opt_str(params: Mapping[str, Any], name: str, limit: int = 4096) -> str | None:
    value = params.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a string, not {type(value).__name__}")
    return value[:limit]


def given_str(
    params: Mapping[str, Any], name: str, limit: int, omitted: str, instead: str
) -> str | None:
    """``opt_str``, where only an omitted value means its default (``omitted``): an empty one
    (a template's unset variable) is refused, never taken for another session or project."""
    return refuse_empty(opt_str(params, name, limit), name, omitted, instead)


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
    if not math.isfinite(value):
        raise ValidationError(f"{name} must be a finite number")
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
