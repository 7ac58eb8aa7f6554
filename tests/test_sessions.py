"""SessionPersistenceManager against real SQLite files."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from cortex.clock import FixedClock
from cortex.config import Config
from cortex.core.sizing import MAX_RECORD_BYTES, record_size
from cortex.errors import ConflictError, NotFoundError, UnsafeIdError, ValidationError
from cortex.services.metrics import load_or_create_key
from cortex.services.metrics_verify import verify
from cortex.services.pipeline import set_stage, upsert_task
from cortex.services.sessions.manager import SessionPersistenceManager
from cortex.store import open_store

START = "2026-02-16T09:00:00Z"

Factory = Callable[..., Config]


def finished_session(
    m: SessionPersistenceManager,
    pins: int = 3,
    *,
    project: str = "radio",
    critical: bool = False,
    sid: str | None = None,
) -> str:
    ctx = m.on_session_start(sid, project=project, workdir="/home/u/Projects/radio")
    for i in range(pins):
        m.add_pin(f"pin {i}", f"content {i}", ctx.session_id, critical=critical)
    m.record(ctx.session_id, text="ft991a cat control for the ham radio")
    m.on_session_end(ctx.session_id)
    return ctx.session_id


def test_round_trip_pins_restored_with_provenance(
    manager: SessionPersistenceManager, clock: FixedClock
) -> None:
    a = finished_session(manager)
    clock.advance(hours=24)
    ctx = manager.on_session_start(project="radio")
    assert ctx.session_ids == (a,)
    labels = [p.label for p in ctx.inherited_pins]
    assert len(labels) == 3
    assert all(
        label.endswith("]") and f"[inherited from {a} @ 2026-02-16T09:00Z]" in label
        for label in labels
    )
    assert ctx.preamble is not None
    assert ctx.preamble.startswith("[SESSION CONTINUITY — inherited from 1 prior session(s)]")
    assert "WORKING MEMORY RESTORED: 3 pins inherited" in ctx.preamble
    restored = manager.store.get_session(ctx.session_id)
    assert restored is not None and len(restored.working_memory) == 3
    prior = manager.store.get_session(a)
    assert prior is not None and prior.continued_by == ctx.session_id


def test_decay_at_48h_and_original_unchanged(
    manager: SessionPersistenceManager, clock: FixedClock
) -> None:
    a = finished_session(manager, pins=1)
    clock.advance(hours=48)
    ctx = manager.on_session_start(project="radio", keywords=["ft991a radio"])
    assert [round(p.confidence, 3) for p in ctx.inherited_pins] == [0.886]
    original = manager.store.get_session(a)
    assert original is not None and original.working_memory[0].confidence == 1.0


def test_at_most_five_pins_inherited(manager: SessionPersistenceManager, clock: FixedClock) -> None:
    finished_session(manager, pins=10)
    clock.advance(hours=1)
    ctx = manager.on_session_start(project="radio")
    assert len(ctx.inherited_pins) == 5


def test_forced_inheritance_respects_the_ten_pin_cap(
    manager: SessionPersistenceManager, clock: FixedClock
) -> None:
    a = finished_session(manager, pins=5, project="other")
    clock.advance(hours=1)
    manager.on_session_start(project="radio")
    for i in range(7):
        manager.add_pin(f"mine {i}", "current work")
    ctx = manager.force_inherit_session(a)
    assert len(ctx.inherited_pins) == 3
    assert len(manager.list_pins()) == 10


def test_current_pin_wins_on_label_collision(
    manager: SessionPersistenceManager, clock: FixedClock
) -> None:
    a = finished_session(manager, pins=2, project="other")
    clock.advance(hours=1)
    manager.on_session_start(project="radio")
    manager.add_pin("pin 0", "the current truth")
    ctx = manager.force_inherit_session(a)
    assert [p.label.split(" [")[0] for p in ctx.inherited_pins] == ["pin 1"]
    assert [p.content for p in manager.list_pins() if p.label == "pin 0"] == ["the current truth"]


def test_critical_pin_from_six_day_old_session_is_inherited(
    manager: SessionPersistenceManager, clock: FixedClock
) -> None:
    finished_session(manager, pins=1, critical=True)
    finished_session(manager, pins=1, critical=True, project="far")
    clock.advance(hours=6 * 24)
    ctx = manager.on_session_start(project="radio", keywords=["unrelated words"])
    assert ctx.session_ids != ()
    assert len(ctx.inherited_pins) == 1
    assert ctx.inherited_pins[0].is_critical
    assert ctx.inherited_pins[0].confidence == pytest.approx(0.657, abs=0.001)
    clock.advance(hours=2 * 24)
    # 8 days: past the CRITICAL window, but "far"'s last session still hands its CRITICAL pin
    # over (decayed): a break longer than the windows loses nothing critical.
    later = manager.on_session_start(project="far", keywords=["unrelated words"])
    assert [p.is_critical for p in later.inherited_pins] == [True]
    assert later.inherited_pins[0].confidence == pytest.approx(0.543, abs=0.001)


def test_after_a_long_break_the_last_session_gives_its_tasks_and_critical_pins_only(
    manager: SessionPersistenceManager, clock: FixedClock
) -> None:
    first = manager.on_session_start(project="radio", workdir="/home/u/Projects/radio")
    manager.add_pin("prod db", "read-only until the migration", critical=True)
    manager.add_pin("branch", "feature/cat")
    manager.add_pin("todo", "TODO: task-042 wire the CAT port")
    manager.on_session_end(first.session_id)
    finished_session(manager, pins=1, project="elsewhere")
    clock.advance(hours=21 * 24)
    ctx = manager.on_session_start(project="radio", keywords=["unrelated"])
    assert ctx.session_ids == (first.session_id,)
    assert [p.label.split(" [")[0] for p in ctx.inherited_pins] == ["prod db"]
    assert ctx.pending_task_count == 1
    assert ctx.preamble is not None and "PENDING TASKS:\n- [task-042]" in ctx.preamble
    cold = manager.on_session_start(project="never-seen")
    assert cold.preamble is None and cold.inherited_pins == ()


def test_a_session_whose_critical_pin_did_not_fit_is_not_counted_as_inherited(
    manager: SessionPersistenceManager, clock: FixedClock
) -> None:
    # Six old sessions each hold one CRITICAL pin; five are inherited (the cap), so the
    # preamble names the five sessions that gave one, not six.
    # They ran side by side (six terminals), so none inherited another's pin.
    sources = [manager.on_session_start(project="radio").session_id for _ in range(6)]
    for n, sid in enumerate(sources):
        manager.add_pin(f"crit {n}", f"keep {n}", sid, critical=True)
        manager.on_session_end(sid)
        clock.advance(hours=1)
    clock.advance(hours=5 * 24)
    ctx = manager.on_session_start(project="radio", keywords=["unrelated words"])
    givers = {p.source_session_id for p in ctx.inherited_pins}
    assert len(ctx.inherited_pins) == 5 and len(givers) == 5
    assert set(ctx.session_ids) == givers
    assert ctx.preamble is not None
    assert ctx.preamble.startswith("[SESSION CONTINUITY — inherited from 5 prior session(s)]")


def test_cold_start_is_silent_and_emits_no_metrics(manager: SessionPersistenceManager) -> None:
    ctx = manager.on_session_start(project="radio")
    assert ctx.preamble is None
    assert ctx.inherited_pins == ()
    assert manager.store.list_metrics() == []


def test_other_projects_never_leak(manager: SessionPersistenceManager, clock: FixedClock) -> None:
    finished_session(manager, project="secret-project")
    clock.advance(hours=1)
    ctx = manager.on_session_start(project="radio")
    assert ctx.preamble is None


def test_credentials_redacted_before_storage(
    manager: SessionPersistenceManager, home: Path
) -> None:
    ctx = manager.on_session_start(project="radio")
    manager.add_pin("qrz", "api_key=sk-" + "a1B2" * 10)
    manager.on_session_end(ctx.session_id)
    stored = manager.store.get_session(ctx.session_id)
    assert stored is not None and stored.working_memory[0].content == "api_key=[REDACTED]"
    mirror = (home / "sessions" / f"{ctx.session_id}.json").read_text()
    assert "a1B2" not in mirror and "[REDACTED]" in mirror
    assert "a1B2" not in (home / "brain.db").read_bytes().decode("latin-1")


def test_crash_recovery_of_lapsed_session_but_not_live_neighbour(
    manager: SessionPersistenceManager, clock: FixedClock
) -> None:
    crashed = manager.on_session_start(project="radio")
    manager.add_pin("wip", "half-done refactor", crashed.session_id)
    manager.record(crashed.session_id, text="refactor the serial layer")
    clock.advance(seconds=600)
    live = manager.on_session_start(project="radio")
    clock.advance(seconds=60)
    third = manager.on_session_start(project="radio")
    recovered = manager.store.get_session(crashed.session_id)
    neighbour = manager.store.get_session(live.session_id)
    assert recovered is not None and recovered.crash_recovered
    assert recovered.end_time == "2026-02-16T09:00:00.000000Z"
    assert neighbour is not None and neighbour.is_open and not neighbour.crash_recovered
    assert crashed.session_id in live.session_ids
    assert third.session_id != live.session_id


def test_restart_with_same_id_is_idempotent(
    manager: SessionPersistenceManager, clock: FixedClock
) -> None:
    finished_session(manager)
    clock.advance(hours=2)
    first = manager.on_session_start("b-session", project="radio")
    second = manager.on_session_start("b-session", project="radio")
    third = manager.on_session_start("b-session", project="radio", explain=True)
    assert len(first.inherited_pins) == 3 and first.preamble is not None
    assert len(manager.list_pins("b-session")) == 3
    # Restoring the same id again emits nothing: no second preamble, no second metric.
    assert second.preamble is None and second.inherited_pins == ()
    assert third.preamble is None and third.explain  # the explanation is still there
    restored = manager.store.list_metrics(event="session_restored")
    assert [e.payload["new_session_id"] for e in restored] == ["b-session"]


def test_a_restore_that_brings_something_new_is_not_a_repeat(
    manager: SessionPersistenceManager, clock: FixedClock
) -> None:
    finished_session(manager, 2)
    clock.advance(hours=1)
    manager.on_session_start("b-session", project="radio")
    finished_session(manager, 1, sid="c-session", project="radio")  # a newer source
    clock.advance(hours=1)
    again = manager.on_session_start("b-session", project="radio")
    assert again.preamble is not None and "c-session" in again.session_ids
    restored = manager.store.list_metrics(event="session_restored")
    assert [e.payload["new_session_id"] for e in restored].count("b-session") == 2


def test_pending_task_surfaced_then_dropped_when_done(
    manager: SessionPersistenceManager, clock: FixedClock, make_config: Factory
) -> None:
    path = make_config().pipeline_state_path
    upsert_task(
        path, "task-004-session-persistence", "Session persistence", "build", manager.now_iso()
    )
    finished_session(manager, pins=0)
    clock.advance(hours=48)
    ctx = manager.on_session_start(project="radio")
    assert ctx.preamble is not None
    assert (
        "- [task-004-session-persistence] Session persistence (last stage: build, 2d ago)"
        in ctx.preamble
    )
    assert ctx.pending_task_count == 1
    set_stage(path, "task-004-session-persistence", "done", manager.now_iso())
    manager.on_session_end()
    clock.advance(hours=1)
    again = manager.on_session_start(project="radio")
    assert again.preamble is None or "task-004" not in again.preamble


def test_malformed_pipeline_file_keeps_tasks_and_warns(
    manager: SessionPersistenceManager, make_config: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    path = make_config().pipeline_state_path
    upsert_task(path, "task-1", "One", "verify", manager.now_iso())
    finished_session(manager, pins=0)
    path.write_text("{not json")
    ctx = manager.on_session_start(project="radio")
    assert ctx.preamble is not None and "[task-1] One" in ctx.preamble
    assert "not valid JSON" in caplog.text
    assert path.read_text() == "{not json"


def test_chain_is_chronological_and_metric_emitted(
    manager: SessionPersistenceManager, clock: FixedClock
) -> None:
    ids = []
    for _ in range(4):
        ids.append(finished_session(manager, pins=0))
        clock.advance(hours=1)
    chain = manager.get_session_chain(ids[-1], 3)
    assert [s.session_id for s in chain] == ids[1:]
    events = manager.store.list_metrics(event="session_chain_traversal")
    assert events[-1].payload["sessions_found"] == 3


def test_force_inherit_old_session_is_audited(
    manager: SessionPersistenceManager, clock: FixedClock
) -> None:
    old = finished_session(manager, pins=4)
    clock.advance(hours=14 * 24)
    ctx = manager.on_session_start(project="radio")
    assert ctx.preamble is None
    forced = manager.force_inherit_session(old)
    assert len(forced.inherited_pins) == 4
    audit = manager.store.list_audit()
    assert audit[0].action == "session_continue" and audit[0].target == old


def test_all_five_metrics_events_and_chain_verifies(
    manager: SessionPersistenceManager, clock: FixedClock, home: Path, make_config: Factory
) -> None:
    upsert_task(make_config().pipeline_state_path, "task-9", "Nine", "build", manager.now_iso())
    a = finished_session(manager, pins=2)
    clock.advance(hours=30)
    ctx = manager.on_session_start(project="radio")
    manager.get_session_chain(ctx.session_id, 5)
    names = {m.event for m in manager.store.list_metrics()}
    assert names == {
        "session_captured",
        "session_restored",
        "confidence_decay_applied",
        "pending_task_surfaced",
        "session_chain_traversal",
    }
    restored = manager.store.list_metrics(event="session_restored")[0].payload
    assert restored["from_session_ids"] == [a] and restored["pins_inherited"] == 2
    captured = manager.store.list_metrics(event="session_captured")[0].payload
    assert captured["pin_count"] == 2 and captured["task_count"] == 1
    report = verify(manager.store, load_or_create_key(home / "metrics.key"), home / "metrics.head")
    assert report.ok and report.checked == len(manager.store.list_metrics())


def test_working_memory_file_mirrors_and_is_read_back(
    manager: SessionPersistenceManager, make_config: Factory
) -> None:
    ctx = manager.on_session_start(project="radio")
    manager.add_pin("a", "first")
    path = make_config().working_memory_path
    data = json.loads(path.read_text())
    assert data["sessionId"] == ctx.session_id
    assert [i["label"] for i in data["items"]] == ["a"] and "pinnedAt" in data["items"][0]
    data["items"].append({"label": "b", "content": "added by openclaw", "pinnedAt": "x"})
    path.write_text(json.dumps(data))
    ended = manager.on_session_end()
    assert [p.label for p in ended.working_memory] == ["a", "b"]


def test_a_deferring_transaction_copies_the_pins_after_its_commit_and_never_on_rollback(
    manager: SessionPersistenceManager, make_config: Factory
) -> None:
    from cortex.files import file_lock

    ctx = manager.on_session_start(project="radio")
    path = make_config().working_memory_path
    later: list[Callable[[], object]] = []
    with pytest.raises(RuntimeError), manager.transaction(later.append):
        manager.add_pin("a", "first")
        manager.add_pin("b", "second")
        raise RuntimeError("rolled back")
    assert later == [] and manager.list_pins(ctx.session_id) == ()
    with file_lock(path, wait=False):
        pass  # the lock taken for the copy was released with the rollback
    with manager.transaction(later.append):
        manager.add_pin("a", "first")
        manager.add_pin("b", "second")  # the same lock, one copy: the newest
    assert json.loads(path.read_text())["items"] == []
    with pytest.raises(BlockingIOError), file_lock(path, wait=False):
        pass  # held until the copy is written
    for step in later:
        step()
    assert [i["label"] for i in json.loads(path.read_text())["items"]] == ["a", "b"]
    with file_lock(path, wait=False):
        pass


def test_a_stale_working_memory_file_never_reverts_stored_pins(
    manager: SessionPersistenceManager, make_config: Factory
) -> None:
    ctx = manager.on_session_start(project="radio")
    manager.add_pin("a", "first")
    path = make_config().working_memory_path
    stale = path.read_text()  # the copy as it was before another process changed the pins
    manager.add_pin("a", "second")
    manager.add_pin("b", "new")
    path.write_text(stale)
    ended = manager.on_session_end(ctx.session_id)
    assert {p.label: p.content for p in ended.working_memory} == {"a": "second", "b": "new"}


def test_edits_to_the_working_memory_file_apply_onto_the_stored_pins(
    manager: SessionPersistenceManager, make_config: Factory
) -> None:
    ctx = manager.on_session_start(project="radio")
    for label in ("a", "b", "c"):
        manager.add_pin(label, f"{label} as pinned")
    path = make_config().working_memory_path
    data = json.loads(path.read_text())
    manager.add_pin("d", "pinned after the file was read")
    data["items"] = [i for i in data["items"] if i["label"] != "b"]  # removed in the file
    data["items"][0]["content"] = "a edited in the file"
    path.write_text(json.dumps(data))
    ended = manager.on_session_end(ctx.session_id)
    assert {p.label: p.content for p in ended.working_memory} == {
        "a": "a edited in the file",
        "c": "c as pinned",
        "d": "pinned after the file was read",
    }


def test_a_working_memory_file_without_baseline_only_adds_and_changes(
    manager: SessionPersistenceManager, make_config: Factory
) -> None:
    ctx = manager.on_session_start(project="radio")
    manager.add_pin("a", "kept")
    path = make_config().working_memory_path
    item = {"label": "z", "content": "from a tool"}
    path.write_text(json.dumps({"sessionId": ctx.session_id, "items": [item]}))
    ended = manager.on_session_end(ctx.session_id)
    assert {p.label: p.content for p in ended.working_memory} == {"a": "kept", "z": "from a tool"}


def test_corrupt_working_memory_file_is_quarantined_not_lost(
    manager: SessionPersistenceManager, make_config: Factory
) -> None:
    manager.on_session_start(project="radio")
    manager.add_pin("a", "first")
    path = make_config().working_memory_path
    path.write_text("{{{ garbage")
    ended = manager.on_session_end()
    assert [p.label for p in ended.working_memory] == ["a"]
    moved = list(path.parent.glob("working_memory.json.corrupt-*"))
    assert len(moved) == 1 and moved[0].read_text() == "{{{ garbage"


def test_record_stays_under_50kb(manager: SessionPersistenceManager) -> None:
    ctx = manager.on_session_start(project="radio")
    for i in range(10):
        manager.add_pin(f"p{i}", "x" * 3999)
    for i in range(300):
        manager.record(ctx.session_id, learning_id=f"mem-{i:05d}-" + "y" * 60)
    state = manager.on_session_end()
    assert record_size(state) <= MAX_RECORD_BYTES


def test_pins_survive_every_turn_with_300_pending_tasks(
    manager: SessionPersistenceManager, make_config: Factory, clock: FixedClock
) -> None:
    tasks = [
        {
            "task_id": f"task-{i:03d}",
            "title": f"Pipeline task number {i}",
            "current_stage": "build",
            "updated_at": f"2026-02-{1 + i % 14:02d}T09:00:00Z",
        }
        for i in range(300)
    ]
    path = make_config().pipeline_state_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"active_tasks": tasks}))
    ctx = manager.on_session_start(project="radio")
    pinned = {f"p{i}": f"note {i} " + "x" * 3000 for i in range(10)}
    for label, content in pinned.items():
        manager.add_pin(label, content)
    for turn in range(5):
        clock.advance(seconds=60)
        state = manager.record(ctx.session_id, text=f"turn {turn} on the ft991a")
        assert {p.label: p.content for p in state.working_memory} == pinned
        assert 0 < len(state.pending_tasks) < 300
        assert record_size(state) <= MAX_RECORD_BYTES
    assert {p.label: p.content for p in manager.list_pins(ctx.session_id)} == pinned


def test_hot_topics_of_a_session_on_lbf_ham_radio(manager: SessionPersistenceManager) -> None:
    ctx = manager.on_session_start(
        project="lbf-ham-radio",
        workdir="/home/u/Projects/lbf-ham-radio",
        keywords=["ham radio"],
    )
    started = manager.store.get_session(ctx.session_id)
    assert started is not None and "ham radio" in started.hot_topics
    manager.add_pin("ft991a", "CAT control over USB at 38400 baud")
    for text in (
        "Wow, great, I moved the dev config and use 5s timeouts; the tests pass now",
        "The radio answers on the serial port; the radio keys up when asked",
        "radio firmware notes for the radio menu",
    ):
        manager.record(ctx.session_id, text=text)
    ended = manager.on_session_end(ctx.session_id)
    assert {"ft991a", "ham radio", "lbf-ham-radio"} <= set(ended.hot_topics)
    assert not {"wow", "great", "moved", "dev", "use", "5s", "pass"} & set(ended.hot_topics)


def test_a_clock_set_before_a_sessions_last_activity_does_not_crash_it(
    manager: SessionPersistenceManager, clock: FixedClock
) -> None:
    import subprocess
    import sys

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead_pid = int(gone.stdout)
    clock.advance(hours=1)
    manager.on_session_start("later", project="radio", owner_pid=dead_pid)
    clock.advance(hours=-2)  # a replay with an earlier --now
    manager.on_session_start("earlier", project="radio")
    later = manager.store.get_session("later")
    assert later is not None and later.is_open and not later.crash_recovered
    assert not manager.is_lapsed(later)


def test_archive_moves_old_sessions_without_loss(
    manager: SessionPersistenceManager, clock: FixedClock, home: Path
) -> None:
    old = finished_session(manager)
    before = manager.store.get_session(old)
    clock.advance(hours=31 * 24)
    recent = finished_session(manager)
    report = manager.archive(30)
    assert report.archived == 1
    path = home / "sessions" / "archive" / "2026-02" / f"{old}.json"
    assert before is not None and json.loads(path.read_text()) == before.to_dict()
    assert manager.store.get_session(old) is None
    assert manager.store.get_session(recent) is not None
    live = sorted(p.name for p in (home / "sessions").iterdir() if p.is_file())
    assert live == [f"{recent}.json", f"{recent}.json.lock"]  # the archived one's mirror went
    assert sorted(p.name for p in path.parent.iterdir()) == [f"{old}.json"]


def test_each_turn_in_a_new_process_keeps_topics(make_config: Factory, clock: FixedClock) -> None:
    config = make_config()
    first = SessionPersistenceManager.open(config, clock)
    ctx = first.on_session_start(project="radio")
    first.record(ctx.session_id, text="hamlib ft991a")
    first.store.close()
    second = SessionPersistenceManager(open_store(config.db_path), config, clock)
    state = second.record(ctx.session_id, text="hamlib rigctl timeouts")
    extractor_weights = state.topic_state
    assert "hamlib" in state.hot_topics[:3] and "ft991a" in state.hot_topics
    assert extractor_weights != {}


@pytest.mark.parametrize("bad", ["../etc/passwd", "a/b", "..", "", "x" * 200])
def test_hostile_session_ids_are_refused(manager: SessionPersistenceManager, bad: str) -> None:
    with pytest.raises(UnsafeIdError):
        manager.on_session_start(bad)


def test_an_empty_session_id_is_refused_not_taken_as_the_current_one(
    manager: SessionPersistenceManager,
) -> None:
    ctx = manager.on_session_start(project="radio")
    for call in (
        lambda: manager.resolve(""),
        lambda: manager.on_session_end(""),
        lambda: manager.add_pin("a", "b", ""),
    ):
        with pytest.raises(UnsafeIdError, match="invalid session id ''"):
            call()
    current = manager.resolve(None)
    assert (current.session_id, current.is_open, current.working_memory) == (
        ctx.session_id,
        True,
        (),
    )


def test_unknown_session_and_ended_session(manager: SessionPersistenceManager) -> None:
    with pytest.raises(NotFoundError, match="no session 'nope'"):
        manager.get_session_chain("nope")
    ctx = manager.on_session_start()
    manager.on_session_end(ctx.session_id)
    with pytest.raises(ConflictError, match="ended"):
        manager.add_pin("x", "y", ctx.session_id)
    assert manager.on_session_end(ctx.session_id).end_time is not None


def test_pin_limits(manager: SessionPersistenceManager) -> None:
    manager.on_session_start()
    with pytest.raises(ValidationError, match="pins hold at most"):
        manager.add_pin("big", "x" * 10_000_000)
    for i in range(10):
        manager.add_pin(f"p{i}", "v")
    with pytest.raises(ConflictError, match="working memory is full"):
        manager.add_pin("eleventh", "v")
    assert len(manager.list_pins()) == 10


def test_disabled_restores_nothing(make_config: Factory, clock: FixedClock) -> None:
    m = SessionPersistenceManager.open(make_config(enabled="false"), clock)
    finished_session(m)
    clock.advance(hours=1)
    assert m.on_session_start(project="radio").preamble is None


def test_killed_mid_capture_leaves_a_readable_db_and_is_recovered(
    home: Path, make_config: Factory
) -> None:
    import signal
    import subprocess
    import sys
    import time

    script = (
        "import itertools\n"
        "from cortex.clock import FixedClock\n"
        "from cortex.config import load_config\n"
        "from cortex.services.sessions.manager import SessionPersistenceManager\n"
        f"m = SessionPersistenceManager.open(load_config(), FixedClock('{START}'))\n"
        "m.on_session_start('victim', project='radio')\n"
        "m.add_pin('wip', 'the refactor')\n"
        "print('ready', flush=True)\n"
        "for i in itertools.count():\n"
        "    m.record('victim', text=f'turn {i} serial timeouts ft991a')\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    later = FixedClock("2026-02-17T09:00:00Z")
    m = SessionPersistenceManager.open(make_config(), later)
    conn = m.store.connection  # type: ignore[attr-defined]
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    ctx = m.on_session_start(project="radio")
    victim = m.store.get_session("victim")
    assert victim is not None and victim.crash_recovered
    assert "victim" in ctx.session_ids
    assert [p.content for p in ctx.inherited_pins] == ["the refactor"]


def test_the_crash_line_names_a_session_recovered_now_even_when_it_does_not_contribute(
    manager: SessionPersistenceManager, clock: FixedClock
) -> None:
    for i in range(4):
        finished_session(manager, 1, sid=f"good-{i}")
        clock.advance(hours=1)
    manager.on_session_start("crashed-now", project="radio")
    manager.record("crashed-now", text="lunch")
    clock.advance(hours=3)  # past the lease: recovered by the next start
    ctx = manager.on_session_start(project="radio", keywords=["ft991a cat control"])
    assert "crashed-now" not in ctx.session_ids  # the three best contribute, not it
    assert ctx.preamble is not None
    assert ctx.preamble.splitlines()[1] == "RECOVERED AFTER CRASH: crashed-"


def test_debug_mode_prints_the_breakdown(
    make_config: Factory, clock: FixedClock, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    m = SessionPersistenceManager.open(make_config(debug="true"), clock)
    finished_session(m)
    clock.advance(hours=48)
    with caplog.at_level(logging.INFO, logger="cortex.debug"):
        m.on_session_start(project="radio")
    text = caplog.text
    assert "[session:debug] Fetched 1 sessions from last 7 days" in text
    assert "recency: 0.714 × 0.4 = 0.286" in text
    assert "[session:debug] Restoration complete in" in text


def test_created_directories_are_private(tmp_path: Path) -> None:
    from cortex.files import ensure_dir

    target = ensure_dir(tmp_path / "a" / "b" / "c")
    for directory in (target, target.parent, target.parent.parent):
        assert directory.stat().st_mode & 0o777 == 0o700
