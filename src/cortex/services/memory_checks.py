"""What a memory may hold and how it may be asked for: the limits and their checks.

Each check returns the value to use (normalized where it says so) or raises a one-line
``ValidationError`` that names an accepted value.
"""

from __future__ import annotations

from collections.abc import Sequence

from cortex.core.memory_models import INTENTS, LAYERS, MODES
from cortex.core.plaintext import storable
from cortex.core.retrieval import normalize_tags
from cortex.errors import ValidationError, param

MAX_CONTENT_BYTES = 65_536
"""Largest memory (UTF-8 bytes, after redaction): a memory is a fact, not a document; a longer
text is kept truncated with a visible marker (``truncate_content``)."""
MAX_KEY_CHARS = 200
MAX_TYPE_CHARS = 64
MAX_LIMIT = 1000
MAX_OFFSET = 1_000_000_000
"""Largest offset of a listing: past any store's memories, within every backend's integers."""
MAX_FILTER_TAGS = 100
"""Most tags a filter asks for (all must match; each is a clause of the query, and SQLite
refuses a query of about 1000)."""


def check_layer(layer: str) -> str:
    if layer not in LAYERS:
        raise ValidationError(f"unknown layer {layer!r}; use one of {', '.join(LAYERS)}")
    return layer


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValidationError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    return mode


def check_limit(limit: int, what: str = "limit") -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise ValidationError(f"{what} {limit} is out of range; use 1-{MAX_LIMIT}")
    return limit


def check_content(content: object, what: str = "memory content") -> str:
    """Non-empty text, redacted, then cut to ``MAX_CONTENT_BYTES`` with a visible marker.

    Redaction runs on the whole text first, so a cut never leaves half a credential behind.
    """
    if not isinstance(content, str) or not content.strip():
        raise ValidationError(f"{what} is empty; give the text to store")
    from cortex.core.redaction import redact  # (what writes needs: a search imports none)

    return truncate_content(redact(storable(content.strip())))


def truncate_content(text: str, limit: int = MAX_CONTENT_BYTES) -> str:
    """``text`` unchanged when it fits ``limit`` UTF-8 bytes, else its head and a marker
    naming the original size (the whole result fits ``limit``)."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    marker = f"\n[truncated: {len(data):,} bytes, the first {{kept:,}} kept]"
    room = limit - len(marker.format(kept=limit).encode("utf-8"))
    head = data[:room].decode("utf-8", "ignore").rstrip()
    kept = len(head.encode("utf-8", "surrogatepass"))
    return head + marker.format(kept=kept)


def check_tags(tags: str | Sequence[str] | None) -> tuple[str, ...]:
    """Tags redacted, then normalized (lower case would hide a credential's shape)."""
    from cortex.core.redaction import redact_value

    if tags is not None:
        tags = storable(tags) if isinstance(tags, str) else [storable(str(t)) for t in tags]
    return normalize_tags(redact_value(tags))


def check_filter_tags(tags: str | Sequence[str] | None) -> tuple[str, ...]:
    """The tags a filter asks for, normalized; more than ``MAX_FILTER_TAGS`` is refused."""
    found = normalize_tags(tags)
    if len(found) > MAX_FILTER_TAGS:
        raise ValidationError(
            f"{param('tags')} names {len(found)} tags; name at most {MAX_FILTER_TAGS}"
        )
    return found


def check_key(key: str | None) -> str | None:
    """An upsert key: stripped, redacted, at most ``MAX_KEY_CHARS``; None when empty."""
    from cortex.core.redaction import redact

    cleaned = redact(storable((key or "").strip())) or None
    if cleaned is not None and len(cleaned) > MAX_KEY_CHARS:
        raise ValidationError(
            f"{param('upsert_key')} is longer than {MAX_KEY_CHARS} characters; shorten it"
        )
    return cleaned


def check_user(user_id: str | None) -> str | None:
    """A user id as given, or None when empty; one holding a credential, a NUL or a lone
    surrogate is refused (made storable, two different ids could become one)."""
    from cortex.core.redaction import refuse_secret

    if user_id and storable(user_id) != user_id:
        raise ValidationError(
            f"user id {user_id!r} holds a NUL or a lone surrogate; give plain text"
        )
    return refuse_secret(user_id, "user id") or None


def check_layers(layer: str | Sequence[str] | None) -> tuple[str, ...]:
    """One layer or several, each checked; none (or an empty list) means every layer."""
    if layer is None:
        return LAYERS
    items = (layer,) if isinstance(layer, str) else tuple(layer)
    return tuple(check_layer(item) for item in items) or LAYERS


def check_confidence(confidence: float) -> float:
    if not 0.0 <= confidence <= 1.0:
        raise ValidationError(f"confidence {confidence} is out of range; use 0-1")
    return float(confidence)


def check_intent(intent: str) -> str:
    if intent not in INTENTS:
        raise ValidationError(f"unknown remember_intent {intent!r}; use explicit or implicit")
    return intent


def check_type(value: str) -> str:
    text = value.strip().lower()
    if not text or len(text) > MAX_TYPE_CHARS or not all(c.isalnum() or c in "_-" for c in text):
        raise ValidationError(
            f"invalid memory type {value!r}; use 1-{MAX_TYPE_CHARS} letters, digits, - or _"
        )
    return text


def check_new_type(value: str) -> str:
    """``check_type`` for a type to store: one that looks like a credential is refused (a
    name is never redacted). A search's type filter needs neither the check nor redaction."""
    from cortex.core.redaction import refuse_secret

    text = check_type(value)
    return refuse_secret(text, "memory type") or text
