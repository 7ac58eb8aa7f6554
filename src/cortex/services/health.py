"""What a database health check finds (``Services.health``, which ``cortex doctor`` reports).

A module of its own so that the processes that never check (a hook, a session start) do not
make the class: ``services/app.py`` is on every path, and each dataclass made at import costs
a hook process its share of ``dataclasses``' work.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DatabaseHealth:
    """What ``Services.health`` found: damage (empty when healthy), migrations, and the bytes of
    free pages that ``vacuum`` would hand back to the disk."""

    url: str
    damage: tuple[str, ...]
    applied: tuple[str, ...]
    pending: tuple[str, ...]
    free_bytes: int = 0
