"""Ids a person types back: the whole id, or a unique prefix of it (as git takes commits).

Cortex prints short ids (the first 8 characters of a session id in the preamble, in
``--explain`` and in the demo's hint). Every command, MCP tool and HTTP endpoint that takes an
id goes through ``resolve_id``: an id that is stored is itself; otherwise a prefix of at least
``MIN_PREFIX`` characters that begins exactly one stored id names that id, and one that begins
several is an error listing them.

Memory ids are made here too (``batch_ids``): uuid4s in their usual form whose first byte the
memories of one batch share. An index on random ids takes a batch's inserts at random places:
over a million memories, a batch of 1,000 dirtied about one leaf page of the id index per
memory, and the page writes were most of the batch's time. Ids made together share their first
byte, drawn at random for every ``RUN`` ids, so a batch's entries fall in one 256th of the index
(tens of pages). Every other bit stays random: ids made at different times begin as randomly as
a uuid4's do; only the ids of one batch begin with the same two hex digits (a prefix needs about
six characters to tell them apart). Made with ``os.urandom``, without importing ``uuid``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from cortex.core.plaintext import is_plain
from cortex.errors import ValidationError

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import TypeVar

    from cortex.store.protocol import Store

    T = TypeVar("T")


MIN_PREFIX = 4
"""The shortest prefix taken for a whole id (shorter ones only match an id exactly)."""
SHOWN = 10
"""Candidates listed when a prefix is ambiguous."""
RUN = 1000
"""Memory ids in a row (``batch_ids``) that share their first byte."""


def batch_ids() -> Iterator[str]:
    """Endless uuid4s (version 4, RFC 4122 variant), each ``RUN`` in a row sharing their
    first byte."""
    while True:
        lead = os.urandom(1)[0]
        for _ in range(RUN):
            raw = bytearray(os.urandom(16))
            raw[0] = lead
            yield _uuid4(raw)


def resolve_id(store: Store, kind: str, given: str) -> str | None:
    """The stored ``kind`` id that ``given`` names (itself, or the one id it begins), or None.

    Raises:
        ValidationError: ``given`` begins several ids (the message lists them), or it begins
            some but is shorter than ``MIN_PREFIX``.
    """
    if not given or not is_plain(given):  # (no stored id holds a NUL or a lone surrogate)
        return None
    found = store.ids_with_prefix(kind, given, limit=SHOWN + 1)
    if found and found[0] == given:
        return given
    if not found:
        return None
    if len(given) < MIN_PREFIX:
        raise ValidationError(
            f"{kind} id prefix {given!r} is too short; type at least {MIN_PREFIX} characters"
        )
    if len(found) == 1:
        return found[0]
    shown = ", ".join(found[:SHOWN]) + (", ..." if len(found) > SHOWN else "")
    raise ValidationError(
        f"{kind} id {given!r} is ambiguous: it begins {shown}; type more of the id"
    )


def lookup(store: Store, kind: str, given: str, get: Callable[[str], T | None]) -> T | None:
    """``get(given)``, else ``get`` of the one ``kind`` id that ``given`` begins, else None.

    The exact read comes first, so a whole id costs one query as before. An id no store could
    hold (a lone surrogate: undecodable bytes typed) names nothing.
    """
    if not is_plain(given):
        return None
    found = get(given)
    if found is None and (full := resolve_id(store, kind, given)) is not None:
        found = get(full)
    return found


def new_uuid() -> str:
    """A random (version 4) UUID, written as ``str(uuid.uuid4())`` writes it, without
    importing ``uuid`` (it imports ``platform`` and more: ~2 ms of a hook that checkpoints)."""
    return _uuid4(bytearray(os.urandom(16)))


def _uuid4(raw: bytearray) -> str:
    """The 16 random bytes ``raw`` as a version-4 UUID's text (``str(uuid.UUID(...))``)."""
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # the RFC 4122 variant
    digits = raw.hex()
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"
