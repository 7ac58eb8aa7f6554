"""Manual continue obeys the inheritance caps (5 inherited, 10 in all, the current session's
pin wins a collision), however many times and from however many sessions it runs."""

from __future__ import annotations

import itertools

from cortex.clock import FixedClock
from cortex.core.pins import base_label
from cortex.services.sessions.manager import SessionPersistenceManager

MATRIX = list(itertools.product([0, 2, 5, 7, 10], [1, 2, 3], [3, 8]))
"""(own pins, source sessions, pins per source): every combination."""


def _sources(m: SessionPersistenceManager, tag: str, sources: int, per_source: int) -> list[str]:
    """Ended sessions, each with a label the current session also pins and CRITICAL pins."""
    ids = []
    for s in range(sources):
        sid = m.on_session_start(f"src-{tag}-{s}", project=f"old-{tag}-{s}").session_id
        labels = ["shared", *(f"s{s}-pin{k}" for k in range(per_source - 1))]
        for k, label in enumerate(labels):
            m.add_pin(label, f"from source {s}", sid, critical=k % 3 == 0)
        m.on_session_end(sid)
        ids.append(sid)
    return ids


def test_continue_caps_hold_for_every_combination_however_often_it_runs(
    manager: SessionPersistenceManager, clock: FixedClock
) -> None:
    m = manager
    for own, sources, per_source in MATRIX:
        tag = f"{own}-{sources}-{per_source}"
        source_ids = _sources(m, tag, sources, per_source)
        clock.advance(hours=30 * 24)  # far too old to be restored on their own
        current = m.on_session_start(f"cur-{tag}", project=f"new-{tag}").session_id
        mine = {f"own{k}": f"mine {k}" for k in range(own - 1)} | (
            {"shared": "mine"} if own else {}
        )
        for label, content in mine.items():
            m.add_pin(label, content, current)
        offered: set[str] = set()
        for sid in itertools.chain(source_ids, source_ids, reversed(source_ids)):
            m.force_inherit_session(sid, current)
            source = m.get_session(sid)
            assert source is not None
            offered |= {base_label(p.label) for p in source.working_memory}
            pins = m.list_pins(current)
            inherited = [p for p in pins if p.source_session_id is not None]
            own_now = {p.label: p.content for p in pins if p.source_session_id is None}
            assert own_now == mine, tag  # the current session's pins win every collision
            assert len(pins) <= 10 and len(inherited) <= 5, tag
            expected = min(5, 10 - len(mine), len(offered - set(mine)))
            assert len(inherited) == expected, tag
            assert len({base_label(p.label).casefold() for p in pins}) == len(pins), tag
