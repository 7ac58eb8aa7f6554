"""The bridge's request parameters, checked at the edge, and the text of OpenClaw messages.

Each parameter takes the JSON type its method documents and no other, nothing converted: a
string where an array of strings is asked, an item of another type in that array, ``"true"``
or ``0`` for a boolean and ``"5"`` for a number are each a ``ValidationError`` of one line
naming the parameter, the type it takes, the type given and an example to send. Null is the
same as leaving a parameter out, and an integer is a number (``depth`` takes ``5.0`` and
refuses ``5.5``). Strings and lists are cut to a bound (a client cannot make the
bridge hold more than that).
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


def json_type(value: Any) -> str:
    """The JSON type of a parsed value, as an error names what was given."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list | tuple) else "an object"


def wrong_type(name: str, expected: str, value: Any, example: str) -> ValidationError:
    """The refusal of a value of another JSON type: one line naming the parameter (or the
    item of one, ``messages[0].role``), the type it takes, the type given and an example of
    the parameter to send (``example``, its JSON value)."""
    top = name.split("[")[0]
    return ValidationError(
        f'{name} must be {expected}, not {json_type(value)}; send e.g. "{top}": {example}'
    )


def _string(value: Any, name: str, example: str) -> str | None:
    """``value`` when it is a string or null; any other JSON type is refused."""
    if value is None or isinstance(value, str):
        return value
    raise wrong_type(name, "a string", value, example)


def opt_str(params: Mapping[str, Any], name: str, limit: int = 4096) -> str | None:
    """A string parameter cut to ``limit`` characters; None when it is omitted or null."""
    value = _string(params.get(name), name, '"text"')
    return None if value is None else value[:limit]


def given_str(
    params: Mapping[str, Any], name: str, limit: int, omitted: str, instead: str
) -> str | None:
    """``opt_str``, where only an omitted value means its default (``omitted``): an empty one
    (a template's unset variable) is refused, never taken for another session or project."""
    return refuse_empty(opt_str(params, name, limit), name, omitted, instead)


def choice(params: Mapping[str, Any], name: str, choices: tuple[str, ...], default: str) -> str:
    """A string parameter with a fixed set of values; ``default`` when it is omitted or null.
    Any other string, the empty one too (a client's unset variable, never a value of its
    own), is refused naming the values it takes."""
    value = _string(params.get(name), name, json.dumps(default))
    if value is None:
        return default
    if value not in choices:
        shown = json.dumps(value[:40]) + ("..." if len(value) > 40 else "")
        raise ValidationError(
            f"{name} must be one of {', '.join(choices)}, not {shown}; "
            f'send e.g. "{name}": {json.dumps(default)}'
        )
    return value


def req_str(params: Mapping[str, Any], name: str, limit: int = 4096) -> str:
    value = opt_str(params, name, limit)
    if value is None:
        raise ValidationError(f'{name} is required; send e.g. "{name}": "text"')
    return value


def flag(params: Mapping[str, Any], name: str, default: bool) -> bool:
    """A boolean parameter: JSON's true or false, never ``"false"`` or ``0``."""
    value = params.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise wrong_type(name, "true or false", value, json.dumps(default))
    return value


def number(params: Mapping[str, Any], name: str, default: float) -> float:
    """A number parameter: a JSON number (an integer too), never a string or a boolean."""
    value = params.get(name)
    if value is None:
        return float(default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise wrong_type(name, "a number", value, json.dumps(default))
    try:  # an integer past a float's range (1 and 400 zeros) has no finite value either
        finite = math.isfinite(value)
    except OverflowError:
        finite = False
    if not finite:
        raise ValidationError(f'{name} must be a finite number; send e.g. "{name}": {default}')
    return float(value)


def str_list(params: Mapping[str, Any], name: str, limit: int = 200) -> list[str]:
    """An array of strings, its first ``limit`` items cut to 4096 characters each; ``[]``
    when it is omitted or null. A string is no array of one; an item of another type is
    refused, never dropped or written as text."""
    value = params.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise wrong_type(name, "an array of strings", value, '["text"]')
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise wrong_type(f"{name}[{index}]", "a string", item, '["text"]')
    return [item[:4096] for item in value[:limit]]


def obj(params: Mapping[str, Any], name: str) -> dict[str, Any]:
    """An object parameter; ``{}`` when it is omitted or null."""
    value = params.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise wrong_type(name, "an object", value, '{"key": "value"}')
    return value


MESSAGES_EXAMPLE = '[{"role": "user", "content": "text"}]'


def message_list(params: Mapping[str, Any], name: str = "messages") -> list[dict[str, Any]]:
    """A turn's messages, as OpenClaw or an LLM API shapes them: an array of objects, each
    with an optional ``role`` (a string) and ``content``, a string or an array of blocks
    (objects; a block's ``text``, when it has one, is a string, and a block without one, an
    image or a tool call, holds no text); ``[]`` when it is omitted or null."""
    value = params.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise wrong_type(name, "an array of messages", value, MESSAGES_EXAMPLE)
    for index, message in enumerate(value):
        _check_message(message, f"{name}[{index}]")
    return value


def _check_message(message: Any, at: str) -> None:
    if not isinstance(message, dict):
        raise wrong_type(at, "an object", message, MESSAGES_EXAMPLE)
    _string(message.get("role"), f"{at}.role", MESSAGES_EXAMPLE)
    content = message.get("content")
    if isinstance(content, list):
        for index, block in enumerate(content):
            if not isinstance(block, dict):
                raise wrong_type(f"{at}.content[{index}]", "an object", block, MESSAGES_EXAMPLE)
            _string(block.get("text"), f"{at}.content[{index}].text", MESSAGES_EXAMPLE)
    elif content is not None and not isinstance(content, str):
        raise wrong_type(f"{at}.content", "a string or an array", content, MESSAGES_EXAMPLE)


def content_text(message: Mapping[str, Any]) -> str:
    """The text of one message (``message_list`` checked its shape)."""
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(block["text"] for block in content if block.get("text") is not None)
    return content if isinstance(content, str) else ""


def message_text(messages: list[dict[str, Any]], limit: int = MAX_SIGNAL_TEXT) -> str:
    """The text of a turn's messages (newest last), at most ``limit`` characters."""
    return "\n".join(t for t in map(content_text, messages[-20:]) if t)[-limit:]


def last_reply(messages: list[dict[str, Any]], limit: int = MAX_SIGNAL_TEXT) -> str:
    """The text of the last assistant message, or "" when there is none."""
    for message in reversed(messages):
        if message.get("role") == "assistant":
            text = content_text(message).strip()
            if text:
                return text[:limit]
    return ""
