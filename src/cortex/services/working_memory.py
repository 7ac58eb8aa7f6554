"""The OpenClaw-compatible ``working_memory.json``: a mirror of the current session's pins.

The session row in the store is the source of truth. This file mirrors the pins of the
workspace's current session, in OpenClaw's shape (``{"items": [{label, content, pinnedAt}]}``
plus ``sessionId``), so OpenClaw's own working-memory tool sees them; edits made to the file
by that tool are read back through ``load_working_memory`` when the session is captured.

The file is only a copy, and it may be stale (another process changed the pins since it was
written). So it also records ``baseline``: each pin's digest as Cortex wrote it. Reading it
back applies only what was edited since (``core.pins.apply_copy_edits``); the database's pins
win everywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cortex.core.models import Pin
from cortex.core.pins import apply_copy_edits, label_key, pin_digest
from cortex.files import BRIEF_LOCK_SECONDS, quarantine, read_json, write_json
from cortex.logs import getLogger

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

log = getLogger("cortex")


@dataclass(frozen=True)
class WorkingMemoryFile:
    """The parsed file: whose pins they are (None if the file does not say), the pins, and the
    digest of each pin as Cortex wrote it (None when the file carries none)."""

    session_id: str | None
    pins: tuple[Pin, ...]
    baseline: dict[str, str] | None = None

    def edits_onto(self, pins: tuple[Pin, ...]) -> tuple[Pin, ...]:
        """``pins`` (the stored truth) with the edits made to this file since Cortex wrote it."""
        return apply_copy_edits(pins, self.pins, self.baseline)


def parse_working_memory(data: Any) -> WorkingMemoryFile:
    """Parse the file's JSON (``{"items": [...]}`` or a bare list). Raises ValueError."""
    baseline = None
    if isinstance(data, list):
        items, session_id = data, None
    elif isinstance(data, dict) and isinstance(data.get("items", []), list):
        items, session_id = data.get("items", []), data.get("sessionId")
        written = data.get("baseline")
        if isinstance(written, dict):
            baseline = {str(k): str(v) for k, v in written.items()}
    else:
        raise ValueError('expected {"items": [...]}')
    pins = []
    for item in items:
        if not isinstance(item, dict) or "content" not in item:
            raise ValueError("every item needs a content field")
        pins.append(Pin.from_dict(item))
    return WorkingMemoryFile(str(session_id) if session_id else None, tuple(pins), baseline)


def load_working_memory(path: Path, stamp: str) -> WorkingMemoryFile | None:
    """Read the file; None if missing. A corrupt file is moved aside and logged, not lost."""
    try:
        data = read_json(path)
        return None if data is None else parse_working_memory(data)
    except (ValueError, UnicodeDecodeError) as exc:
        moved = quarantine(path, stamp)
        log.warning(
            "working memory file %s is unreadable (%s); moved it to %s and kept the "
            "pins stored in the database",
            path,
            exc,
            moved,
        )
        return None


def save_working_memory(
    path: Path, session_id: str, pins: tuple[Pin, ...], at: str, *, locked: bool = False
) -> None:
    """Atomically write the mirror of ``session_id``'s pins, with their baseline digests
    (under the file's lock, which ``locked`` says the caller holds already).

    Not fsynced: it is a mirror of the database, rewritten at the next change, and the rename
    alone keeps readers from ever seeing half a file.
    """
    write_json(
        path,
        {
            "version": 1,
            "sessionId": session_id,
            "updatedAt": at,
            "items": [p.to_dict() for p in pins],
            "baseline": {label_key(p.label): pin_digest(p) for p in pins},
        },
        durable=False,
        lock=not locked,
        wait=BRIEF_LOCK_SECONDS,
    )
