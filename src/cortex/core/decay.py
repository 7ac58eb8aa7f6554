"""Confidence decay of inherited memories: pure functions of the hours elapsed.

Decay softens what a new session inherits; it is applied at restore time only and never
written back to the stored confidence.
"""

from __future__ import annotations

DECAY_WINDOW_HOURS = 168.0
"""One week: the span over which the factor loses ``DECAY_PER_WINDOW``."""

DECAY_PER_WINDOW = 0.4
DEFAULT_FLOOR = 0.3


def decay_factor(hours_elapsed: float, floor: float = DEFAULT_FLOOR) -> float:
    """The multiplier applied to an inherited confidence after ``hours_elapsed`` hours.

    Formula::

        decay_factor(h) = max(floor, 1.0 - (h / 168) * 0.4)

    Args:
        hours_elapsed: hours since the source session ended; negative or NaN counts as 0.
        floor: the lowest factor returned (0.3 by default); it bounds the factor, not the product.

    Returns:
        A factor in ``[floor, 1.0]`` (1.0 at 0 h, 0.6 at 168 h, ``floor`` from 294 h on).
    """
    hours = hours_elapsed if hours_elapsed > 0 else 0.0
    return max(floor, 1.0 - (hours / DECAY_WINDOW_HOURS) * DECAY_PER_WINDOW)


def apply_decay(
    original_confidence: float, hours_elapsed: float, floor: float = DEFAULT_FLOOR
) -> float:
    """The inherited confidence: ``original_confidence * decay_factor(hours_elapsed, floor)``.

    The product may fall below ``floor``; ``should_inherit`` then excludes the memory.
    """
    return original_confidence * decay_factor(hours_elapsed, floor)


def should_inherit(
    original_confidence: float, hours_elapsed: float, floor: float = DEFAULT_FLOOR
) -> bool:
    """True when the decayed confidence is still at or above ``floor`` (the drop rule)."""
    return apply_decay(original_confidence, hours_elapsed, floor) >= floor
