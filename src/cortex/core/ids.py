"""Memory ids: uuid4s in their usual form whose first byte a batch shares.

An index on random ids takes a batch's inserts at random places: over a million memories, a
batch of 1,000 dirtied about one leaf page of the id index per memory, and the page writes
were most of the batch's time. Ids made together (``batch_ids``) share their first byte,
drawn at random for every ``RUN`` ids, so a batch's entries fall in one 256th of the index
(tens of pages). Every other bit stays random: the leading characters of ids made at
different times still differ as a uuid4's do, so a short prefix of an id (``cortex memory
show``) stays as unique as it was; what changes is only that the ids of one batch begin with
the same two hex digits. Made with ``os.urandom``, without importing ``uuid``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

RUN = 1000
"""Ids in a row that share their first byte."""


def batch_ids() -> Iterator[str]:
    """Endless uuid4s (version 4, RFC 4122 variant), each ``RUN`` in a row sharing their
    first byte."""
    while True:
        lead = os.urandom(1)[0]
        for _ in range(RUN):
            raw = bytearray(os.urandom(16))
            raw[0] = lead
            raw[6] = (raw[6] & 0x0F) | 0x40
            raw[8] = (raw[8] & 0x3F) | 0x80
            h = raw.hex()
            yield f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
