"""Session events, snapshots, checkpoints and compaction."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cortex.clock import FixedClock
from cortex.config import Config
from cortex.errors import NotFoundError, ValidationError
from cortex.services.compaction import CompactionService
from cortex.services.events import MAX_EVENT_CHARS, EventLog
from cortex.services.memory import MemoryService
from cortex.services.sessions.manager import SessionPersistenceManager


@pytest.fixture
def service(
    manager: SessionPersistenceManager, make_config: Callable[..., Config], clock: FixedClock
) -> CompactionService:
    manager.on_session_start("s1", project="api")
    return CompactionService(
        manager.store, make_config(compaction_turn_budget=3, compaction_token_budget=1000), clock
    )


@pytest.fixture
def log(service: CompactionService) -> EventLog:
    return service.events


# -- events ----------------------------------------------------------------------------------
def test_events_get_turns_tokens_and_redaction(log: EventLog) -> None:
    first = log.append("s1", "hello there, password=hunter2secret")
    reply = log.append("s1", "hi", role="assistant")
    tool = log.append("s1", "ran ls", role="tool", kind="event", meaningful=False)
    second = log.append("s1", "next question")
    assert [e.turn_index for e in (first, reply, tool, second)] == [0, 0, 0, 1]
    assert first.content == "hello there, password=[REDACTED]"
    assert first.token_count == 9
    assert [e.id for e in log.events("s1")] == [first.id, reply.id, tool.id, second.id]
    assert [e.id for e in log.events("s1", meaningful_only=True, limit=2)] == [reply.id, second.id]


def test_huge_event_is_capped_but_counted(log: EventLog) -> None:
    event = log.append("s1", "x" * 1_000_000)
    assert len(event.content) < MAX_EVENT_CHARS + 50
    assert event.content.endswith("…[truncated 934,464 characters]")
    assert event.token_count == 250_000


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"content": ""}, "event content is empty"),
        ({"content": "x", "role": "system"}, "unknown role 'system'; use one of user, assistant"),
        ({"content": "x", "kind": "blob"}, "unknown kind 'blob'"),
        ({"content": "x", "token_count": -1}, "token_count -1 is negative"),
        ({"content": "x", "turn_index": -2}, "turn_index -2 is negative"),
    ],
)
def test_bad_events_are_refused(log: EventLog, kwargs: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValidationError, match=message):
        log.append("s1", **kwargs)
    assert log.events("s1") == []


def test_events_need_a_known_session(log: EventLog) -> None:
    with pytest.raises(NotFoundError, match="no session 'ghost'"):
        log.append("ghost", "hi")


def test_snapshot_is_a_markdown_transcript_of_meaningful_events(log: EventLog) -> None:
    log.append("s1", "Fix the login bug")
    log.append("s1", "tool noise", role="tool", kind="event", meaningful=False)
    log.append("s1", "Found it in the middleware", role="assistant")
    snap = log.snapshot("s1", "reset")
    assert (snap.slug, snap.source_trigger, snap.message_count) == ("fix-the-login-bug", "reset", 2)
    assert snap.transcript_md.startswith(
        "# Session s1 - fix-the-login-bug (reset, 2026-02-16 09:00"
    )
    assert "tool noise" not in snap.transcript_md
    assert "## assistant (turn 0)" in snap.transcript_md
    assert log.snapshots("s1") == [snap]
    assert log.get_snapshot(snap.id) == snap
    with pytest.raises(ValidationError, match="unknown trigger 'boom'"):
        log.snapshot("s1", "boom")


# -- checkpoints -----------------------------------------------------------------------------
def test_checkpoint_carries_what_must_survive(
    service: CompactionService, manager: SessionPersistenceManager, clock: FixedClock
) -> None:
    manager.add_pin("region", "eu-west-1", "s1", critical=True)
    memories = MemoryService(service.store, service.config, clock)
    memories.add("run make check", type="rule")
    memories.add("web-only rule", type="rule", project="web")
    memories.add("mid-refactor of auth", layer="working", project="api")
    memories.add("use JWT", type="decision", project="api")
    service.events.append("s1", "We decided to keep SQLite for local mode")
    checkpoint = service.checkpoint(
        "s1", summary="auth half done", next_steps=["finish refresh tokens"], files_changed=["a.py"]
    )
    state = checkpoint.state
    assert [p["label"] for p in state["pins"]] == ["region"]
    assert [r["content"] for r in state["rules"]] == ["run make check"]
    assert [w["content"] for w in state["working_memories"]] == ["mid-refactor of auth"]
    assert [d["decision"] for d in state["decisions"]] == [
        "use JWT",
        "We decided to keep SQLite for local mode",
    ]
    assert state["files_changed"] == [{"path": "a.py", "action": "modified"}]
    assert checkpoint.checkpoint_id.startswith("ckpt-2026-02-16-")
    assert service.latest_checkpoint("s1") == checkpoint
    assert service.store.get_session("s1").checkpoint_count == 1  # type: ignore[union-attr]
    text = service.format_checkpoint(checkpoint)
    assert "region [CRITICAL]: eu-west-1" in text and "- finish refresh tokens" in text
    with pytest.raises(ValidationError, match="unknown checkpoint type"):
        service.checkpoint("s1", type="whenever")


# -- trigger engine and compaction -----------------------------------------------------------
def test_status_counts_since_the_last_compaction(
    service: CompactionService, clock: FixedClock
) -> None:
    assert service.status("s1").decision.due is False
    for i in range(3):
        service.events.append("s1", f"question {i}")
    status = service.status("s1")
    assert (status.status, status.decision.due, status.decision.trigger_type) == (
        "active",
        True,
        "count",
    )
    assert status.decision.reason == "3 turns since the last compaction >= budget 3"
    clock.advance(seconds=1)
    run = service.run("s1")
    assert run.event is not None and run.event.turn_count_before == 3
    clock.advance(seconds=1)
    after = service.status("s1")
    assert (after.status, after.decision.turns, after.compactions) == ("compacted", 0, 1)


def test_inactivity_makes_compaction_due(service: CompactionService, clock: FixedClock) -> None:
    service.events.append("s1", "one question")
    clock.advance(hours=1)
    decision = service.status("s1").decision
    assert (decision.due, decision.trigger_type) == (True, "time")


def test_run_if_due_does_nothing_when_not_due(service: CompactionService) -> None:
    run = service.run("s1")
    assert run.event is None and run.checkpoint is None
    assert service.compactions("s1") == []


def test_pre_compact_writes_ahead_and_post_compact_completes(
    service: CompactionService, manager: SessionPersistenceManager, clock: FixedClock
) -> None:
    manager.add_pin("deploy", "make deploy ENV=staging", "s1", critical=True)
    service.events.append("s1", "Going with blue-green deploys")
    checkpoint = service.pre_compact("s1", trigger="auto")
    assert checkpoint.type == "pre_compaction"
    event = service.compactions("s1")[0]
    assert (event.trigger_type, event.checkpoint_id, event.completed_at) == (
        "manual",
        checkpoint.checkpoint_id,
        None,
    )
    snaps = service.events.snapshots("s1")
    assert [s.source_trigger for s in snaps] == ["auto_compaction"]
    clock.advance(seconds=5)
    done = service.post_compact("s1", "Summary: deploys are blue-green.")
    assert done.id == event.id and done.summary_tokens == 8
    assert service.compactions("s1")[0].completed_at == "2026-02-16T09:00:05.000000Z"
    kinds = [e.kind for e in service.events.events("s1")]
    assert kinds == ["message", "checkpoint", "summary"]
    reinjected = service.format_checkpoint(service.latest_checkpoint("s1"))  # type: ignore[arg-type]
    assert "deploy [CRITICAL]: make deploy ENV=staging" in reinjected
    assert "Going with blue-green deploys" in reinjected


def test_post_compact_without_pre_compact_still_logs(service: CompactionService) -> None:
    event = service.post_compact("s1", "a summary", trigger="manual")
    assert event.checkpoint_id is not None and event.summary_tokens == 3
    assert len(service.compactions("s1")) == 1
    with pytest.raises(ValidationError, match="unknown trigger 'later'"):
        service.pre_compact("s1", trigger="later")


def test_context_reports_compaction_required(service: CompactionService, clock: FixedClock) -> None:
    for i in range(3):
        service.events.append("s1", f"q{i}")
    service.checkpoint("s1")
    block = MemoryService(service.store, service.config, clock).get_context(session_id="s1").session
    assert block is not None
    assert block.compaction_required is True
    assert block.trigger_hint == "3 turns since the last compaction >= budget 3"
    assert block.latest_checkpoint_id == service.latest_checkpoint("s1").checkpoint_id  # type: ignore[union-attr]


def test_ended_session_is_closed(
    service: CompactionService, manager: SessionPersistenceManager
) -> None:
    manager.on_session_end("s1")
    status = service.status("s1")
    assert status.status == "closed"
