"""Ids a person types back: the whole id, or a unique prefix of it (as git takes commits).

Cortex prints short ids (the first 8 characters of a session id in the preamble, in
``--explain`` and in the demo's hint). Every command, MCP tool and HTTP endpoint that takes an
id goes through ``resolve_id``: an id that is stored is itself; otherwise a prefix of at least
``MIN_PREFIX`` characters that begins exactly one stored id names that id, and one that begins
several is an error listing them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

from cortex.errors import ValidationError
from cortex.store.protocol import Store

T = TypeVar("T")

MIN_PREFIX = 4
"""The shortest prefix taken for a whole id (shorter ones only match an id exactly)."""
SHOWN = 10
"""Candidates listed when a prefix is ambiguous."""


def resolve_id(store: Store, kind: str, given: str) -> str | None:
    """The stored ``kind`` id that ``given`` names (itself, or the one id it begins), or None.

    Raises:
        ValidationError: ``given`` begins several ids; the message lists them.
    """
    if not given:
        return None
    found = store.ids_with_prefix(kind, given, limit=SHOWN + 1)
    if found and found[0] == given:
        return given
    if len(given) < MIN_PREFIX or not found:
        return None
    if len(found) == 1:
        return found[0]
    shown = ", ".join(found[:SHOWN]) + (", ..." if len(found) > SHOWN else "")
    raise ValidationError(
        f"{kind} id {given!r} is ambiguous: it begins {shown}; type more of the id"
    )


def lookup(store: Store, kind: str, given: str, get: Callable[[str], T | None]) -> T | None:
    """``get(given)``, else ``get`` of the one ``kind`` id that ``given`` begins, else None.

    The exact read comes first, so a whole id costs one query as before.
    """
    found = get(given)
    if found is None and (full := resolve_id(store, kind, given)) is not None:
        found = get(full)
    return found


def new_uuid() -> str:
    """A random (version 4) UUID, written as ``str(uuid.uuid4())`` writes it, without
    importing ``uuid`` (it imports ``platform`` and more: ~2 ms of a hook that checkpoints)."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # the RFC 4122 variant
    digits = raw.hex()
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"
