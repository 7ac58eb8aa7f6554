"""Manual continue obeys the inheritance caps (5 inherited, 10 in all, the current session's
pin wins a collision), however many times and from however many sessions it runs."""

from __future__ import annotations

import itertools

import pytest

from cortex.clock import FixedClock
from cortex.core.pins import base_label
from cortex.services.sessions.manager import SessionPersistenceManager


@pytest.mark.parametrize("own", [0, 2, 5, 7, 10])
@pytest.mark.parametrize("sources", [1, 2, 3])
@pytest.mark.parametrize("per_source", [3, 8])
def test_continue_caps_hold_across_repeats_and_sources(
    manager: SessionPersistenceManager, clock: FixedClock, own: int, sources: int, per_source: int
) -> None:
    m, tag = manager, f"{own}-{sources}-{per_source}"
    source_ids = []
    for s in range(sources):
        sid = m.on_session_start(f"src-{tag}-{s}", project=f"old-{tag}-{s}").session_id
        labels = ["shared", *(f"s{s}-pin{k}" for k in range(per_source - 1))]
        for k, label in enumerate(labels):
            m.add_pin(label, f"from source {s}", sid, critical=k % 3 == 0)
        m.on_session_end(sid)
        source_ids.append(sid)
    clock.advance(hours=30 * 24)  # far too old to be restored on their own
    current = m.on_session_start(f"cur-{tag}", project=f"new-{tag}").session_id
    mine = {f"own{k}": f"mine {k}" for k in range(own - 1)} | ({"shared": "mine"} if own else {})
    for label, content in mine.items():
        m.add_pin(label, content, current)
    offered: set[str] = set()
    for sid in itertools.chain(source_ids, source_ids, reversed(source_ids)):
        m.force_inherit_session(sid, current)
        offered |= {base_label(p.label) for p in m.get_session(sid).working_memory}  # type: ignore[union-attr]
        pins = m.list_pins(current)
        inherited = [p for p in pins if p.source_session_id is not None]
        assert {p.label: p.content for p in pins if p.source_session_id is None} == mine
        assert len(pins) <= 10 and len(inherited) <= 5
        available = offered - set(mine)
        assert len(inherited) == min(5, 10 - len(mine), len(available))
        assert len({base_label(p.label).casefold() for p in pins}) == len(pins)
