"""Jinja2 filters of the dashboard: times, sizes, ids in URLs. Plain functions of values."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any
from urllib.parse import quote

from cortex.adapters.server.ui.charts import session_kind
from cortex.clock import parse_time
from cortex.errors import ValidationError


def url_part(value: object) -> str:
    """``value`` quoted for one path segment (a slash in an id stays inside the segment)."""
    return quote(str(value), safe="")


def stamp(value: str | None) -> str:
    """``2026-02-18 09:00:12`` from an ISO timestamp; ``—`` when there is none."""
    if not value:
        return "—"
    return value[:19].replace("T", " ")


def duration(seconds: float) -> str:
    """``3d 4h``, ``2h 5m``, ``40s``: the two largest units."""
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {secs}s" if minutes else f"{secs}s"


def time_left(expires_at: str | None, now: datetime) -> str:
    """How long a working memory has left: ``3h 12m left``, ``expired``, or ``no expiry``."""
    if not expires_at:
        return "no expiry"
    try:
        left = (parse_time(expires_at) - now).total_seconds()
    except ValidationError:
        return "unknown expiry"
    return "expired" if left <= 0 else f"{duration(left)} left"


def size(value: int | None) -> str:
    """Bytes as ``1.2 MB``; ``—`` when unknown."""
    if value is None:
        return "—"
    amount = float(value)
    for unit in ("B", "KB", "MB", "GB"):
        if amount < 1024 or unit == "GB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount:.1f} GB"


FILTERS: dict[str, Callable[..., Any]] = {
    "q": url_part,
    "stamp": stamp,
    "duration": duration,
    "time_left": time_left,
    "size": size,
    "kind": session_kind,
}
