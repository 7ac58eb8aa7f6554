"""Text every store holds alike: what becomes of a NUL or a lone surrogate.

SQLite stores a NUL; PostgreSQL refuses one. Neither can encode a lone surrogate (JSON's
``"\\ud83d"``, a string cut inside an emoji) as UTF-8. So the services decide before a store
sees the text, the same on every backend:

- free text (a turn's text and signals, a pin's content, an event, a checkpoint's lines, a
  task's title, a memory) is made storable: ``storable`` turns a NUL or a lone surrogate into
  U+FFFD, a surrogate pair into its character, and nothing of the item is lost;
- a name something is found by (an id, a project, an agent, a channel, a label, a filter) is
  refused whole by ``plain``, naming the parameter: replaced, two different names could
  become one, or a filter quietly ask for a name nobody gave.
"""

from __future__ import annotations

from cortex.errors import ValidationError, param

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any, TypeVar

    T = TypeVar("T", bound="str | None")


def storable(text: str) -> str:
    """``text`` as every store can hold it: a surrogate pair (``"\\ud83d\\ude00"``, as a JSON
    escape gives it) joined into its character, and a lone surrogate (which UTF-8 cannot
    encode) or a NUL (which PostgreSQL refuses) made U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    return utf8(text)


def utf8(text: str) -> str:
    """``text`` as UTF-8 can encode it: a surrogate pair joined into its character, a lone
    surrogate made U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def storable_value(value: Any) -> Any:
    """``value`` (a JSON-like value) with every string in it, keys too, made ``storable``."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {storable_value(k): storable_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(storable_value(v) for v in value)
    return value


def is_plain(text: str) -> bool:
    """Whether every store holds ``text`` as it is (no NUL, no lone surrogate)."""
    return storable(text) == text


def plain(value: T, name: str) -> T:
    """``value`` as given when every store holds it as it is (None passes), else a one-line
    ``ValidationError`` naming the parameter ``name`` (its Python keyword)."""
    if value is not None and not is_plain(value):
        raise ValidationError(
            f"{param(name)} holds a NUL or a lone surrogate, which Cortex does not keep in a "
            "name; send it as plain text"
        )
    return value


def unstorable() -> ValidationError:
    """The error for text a store could not encode: a lone surrogate that reached it in a value
    no service checked with ``plain`` (which names the parameter). One line, for every store."""
    return ValidationError(
        "a value holds a lone surrogate (bytes that are not UTF-8, or half of an emoji), which "
        "Cortex does not keep; send it as plain text"
    )
