"""Time, injected: the only place Cortex reads the wall clock.

Timestamps are UTC ISO 8601 strings with a ``Z`` suffix and microseconds, so that they sort
as text in SQLite and compare equal across backends.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache

from cortex.errors import ValidationError

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Protocol
else:
    Protocol = object  # a protocol is for mypy only; nothing checks one at run time


class Clock(Protocol):
    """Something that tells the current UTC time."""

    def now(self) -> datetime: ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)


FIXED_YEARS = (1970, 9000)
"""The years a fixed clock may stand in: far enough either way for replays and tests, and far
enough from datetime's limits (years 1 and 9999) that no window, lease or expiry reckoned from
it (at most a century) leaves them."""


class FixedClock:
    """A clock stopped at one instant (``--now`` / ``CORTEX_NOW``), for replays and tests."""

    def __init__(self, at: datetime | str) -> None:
        moment = parse_time(at) if isinstance(at, str) else at.astimezone(UTC)
        first, last = FIXED_YEARS
        if not first <= moment.year <= last:
            given = at if isinstance(at, str) else to_iso(moment)
            raise ValidationError(
                f"--now/CORTEX_NOW {given!r} is out of range; give a time in the years "
                f"{first} to {last}, e.g. 2026-02-18T09:00:00Z"
            )
        self.at = moment

    def now(self) -> datetime:
        return self.at

    def advance(self, hours: float = 0.0, seconds: float = 0.0) -> None:
        """Move the stopped clock forward (tests and the demo tell multi-day stories)."""
        from datetime import timedelta

        self.at = self.at + timedelta(hours=hours, seconds=seconds)


def to_iso(moment: datetime) -> str:
    """Format an aware datetime as canonical UTC ISO 8601 (``2026-02-18T09:00:00.000000Z``)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    """Parse ISO 8601 (``Z`` or offset; naive means UTC) into an aware UTC datetime."""
    return _parse_cached(text) if isinstance(text, str) else _parse(text)


@lru_cache(maxsize=4096)
def _parse_cached(text: str) -> datetime:
    # Datetimes are immutable, so one parse serves every caller: a restore reads the same
    # session times about 200 times per start.
    return _parse(text)


def _parse(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except (ValueError, AttributeError) as exc:
        raise ValidationError(
            f"not an ISO 8601 time: {text!r}; use a form like 2026-02-18T09:00:00Z"
        ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def hours_between(earlier: str, later: datetime) -> float:
    """Hours from the ISO time ``earlier`` to ``later``, never negative."""
    return _hours_cached(earlier, later) if isinstance(earlier, str) else _hours(earlier, later)


@lru_cache(maxsize=256)
def _hours_cached(earlier: str, later: datetime) -> float:
    # A restore ages each of its ~50 candidates three times against the same ``now``; small,
    # since ``now`` moves at every start (a long-lived hook server keeps this cache).
    return _hours(earlier, later)


def _hours(earlier: str, later: datetime) -> float:
    return max(0.0, (later - parse_time(earlier)).total_seconds() / 3600.0)
