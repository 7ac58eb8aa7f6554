"""The dashboard's read-only service: session filters, chains, the next start (which writes
nothing), memory history, health and the live change marker."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from cortex.clock import FixedClock
from cortex.config import Config
from cortex.errors import NotFoundError, ValidationError
from cortex.services.app import Services
from cortex.services.dashboard import hook_latency


def _two_chained(services: Services, clock: FixedClock, event: str | None = None) -> None:
    sessions = services.sessions
    sessions.on_session_start("a1", project="api", keywords=["deploy region"])
    sessions.add_pin("region", "eu-west-1", "a1")
    sessions.record("a1", text="deploy to eu-west")
    if event is not None:
        services.events.append("a1", event)  # before its end: an ended session takes none
    sessions.on_session_end("a1")
    clock.advance(hours=2)
    sessions.on_session_start("a2", project="api")
    sessions.on_session_start("b1", project="web")


def test_sessions_filter_by_project_status_and_date(services: Services, clock: FixedClock) -> None:
    _two_chained(services, clock)
    board = services.dashboard
    assert [s.session_id for s in board.sessions()] == ["b1", "a2", "a1"]
    assert [s.session_id for s in board.sessions(project="api")] == ["a2", "a1"]
    assert [s.session_id for s in board.sessions(status="COMPLETE")] == ["a1"]
    assert board.sessions(since="2026-02-17") == []
    assert len(board.sessions(until="2026-02-17", limit=2)) == 2
    crashed = replace(services.store.get_session("a2"), crash_recovered=True)  # type: ignore[arg-type]
    services.store.save_session(crashed)
    assert [s.session_id for s in board.sessions(status="crashed")] == ["a2"]
    with pytest.raises(ValidationError, match="unknown status"):
        board.sessions(status="lost")
    with pytest.raises(ValidationError, match="not a date"):
        board.sessions(since="yesterday")


def test_a_session_with_its_chain_events_and_metrics(services: Services, clock: FixedClock) -> None:
    _two_chained(services, clock, event="hello <b>")
    detail = services.dashboard.session("a2")
    assert [s.session_id for s in detail.chain] == ["a1", "a2"]
    assert [m.event for m in detail.metrics] == ["session_restored", "confidence_decay_applied"]
    first = services.dashboard.session("a1")
    assert [s.session_id for s in first.chain] == ["a1", "a2"]  # continued_by, forwards
    assert [e.content for e in first.events] == ["hello <b>"]
    with pytest.raises(NotFoundError):
        services.dashboard.session("nope")
    with pytest.raises(ValidationError):
        services.dashboard.session("../etc")


def test_the_next_start_is_planned_without_writing(services: Services, clock: FixedClock) -> None:
    _two_chained(services, clock)
    services.sessions.on_session_end("a2")
    metrics_before = len(services.metrics.list(limit=1000))
    sessions_before = services.store.count_sessions()
    preview = services.dashboard.next_start("api", ["deploy"])
    assert [c.session.session_id for c in preview.candidates] == ["a2", "a1"]
    assert all(c.included for c in preview.candidates)
    top = preview.candidates[0].scored.breakdown
    assert top.total == pytest.approx(top.recency + top.topic_overlap + top.pending_tasks)
    assert preview.plan is not None and preview.plan.preamble
    assert preview.preamble_tokens > 0 and preview.budget_tokens == 2000
    assert len(services.metrics.list(limit=1000)) == metrics_before
    assert services.store.count_sessions() == sessions_before
    cold = services.dashboard.next_start("nothing-here")
    assert cold.candidates == () and cold.plan is not None and cold.plan.preamble is None


def test_a_session_out_of_the_window_is_left_out_with_the_reason(
    make_config: Callable[..., Config], clock: FixedClock
) -> None:
    with Services.open(make_config(lookback_days=3), clock) as services:
        services.sessions.on_session_start("old", project="api")
        services.sessions.on_session_end("old")
        clock.advance(hours=4 * 24)
        preview = services.dashboard.next_start("api")
    assert [(c.included, c.reason) for c in preview.candidates] == [
        (False, "left out: ended before the lookback window")
    ]


def test_memory_history_follows_supersession_and_the_audit(services: Services) -> None:
    old = services.memory.add("db is pg 15", upsert_key="db", project="api").memory
    new = services.memory.add("db is pg 16", upsert_key="db", project="api").memory
    services.memory.edit(new.id, content="db is pg 17", actor="ui")
    history = services.dashboard.memory_history(new.id)
    assert [v.id for v in history.versions] == [old.id, new.id]
    assert [a.action for a in history.audit] == ["memory.edit", "memory.supersede"]
    assert [v.id for v in services.dashboard.memory_history(old.id).versions] == [old.id, new.id]


def test_health_counts_captures_and_checks_on_request(
    services: Services, clock: FixedClock
) -> None:
    _two_chained(services, clock)
    services.events.append("a2", "one")
    services.events.append("a2", "two")
    services.memory.add("a fact")
    quick = services.dashboard.health()
    assert (quick.sessions, quick.memories, quick.checked) == (3, None, False)
    assert len(quick.captures_per_day) == 31 and quick.captures_per_day[-1] == ("2026-02-16", 3, 2)
    assert quick.size_bytes and quick.size_bytes > 0
    assert quick.pending_migrations == ()
    full = services.dashboard.health(check=True)
    assert full.checked and full.metrics_ok and full.metrics_checked > 0 and full.damage == ()
    assert full.memories == 1


def test_the_change_marker_moves_on_a_turn_and_a_new_session(
    services: Services, clock: FixedClock
) -> None:
    services.sessions.on_session_start("m1", project="api")
    first = services.dashboard.change_marker()
    assert services.dashboard.change_marker() == first
    clock.advance(seconds=5)
    services.sessions.record("m1", text="a turn")
    second = services.dashboard.change_marker()
    assert second != first
    services.sessions.on_session_start("m2", project="api")
    assert services.dashboard.change_marker() != second


def test_hook_latency_percentiles_per_event_skip_bad_lines(tmp_path: Path) -> None:
    lines = [
        json.dumps({"at": "t", "host": "claude-code", "event": "Stop", "ms": float(ms)})
        for ms in range(1, 101)
    ]
    (tmp_path / "latency.jsonl.1").write_text(
        json.dumps({"host": "codex", "event": "Stop", "ms": 7}) + "\n{torn\n"
    )
    (tmp_path / "latency.jsonl").write_text("\n".join(lines) + '\n{"host": "x"}\n')
    rows = hook_latency(tmp_path)
    assert [(r.host, r.event, r.count) for r in rows] == [
        ("claude-code", "Stop", 100),
        ("codex", "Stop", 1),
    ]
    assert (rows[0].p50_ms, rows[0].p95_ms, rows[0].p99_ms, rows[0].max_ms) == (50, 95, 99, 100)
    assert hook_latency(tmp_path / "none") == []
