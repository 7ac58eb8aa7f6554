"""The contract every ``Store`` implementation keeps (``cortex.store.protocol``).

Through the protocol only: no connection, no backend class, no SQL. ``test_store_contract.py``
runs it (sessions, leases, metrics, audit, transactions here; memories and session history in
``store_contract_memory.py``) against every backend of the ``store`` fixture
(``conftest.STORE_URLS``); what only one backend has is tested in its own module
(``test_store_sqlite*.py``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from cortex.core.models import (
    COMPLETE,
    CRITICAL,
    SUSPENDED,
    ConfidenceUpdate,
    PendingTask,
    Pin,
    SessionState,
    SOPInteraction,
)
from cortex.core.tasks import TaskRecord
from cortex.store.protocol import Store
from cortex.store.records import EndReads, StartReads


def t(day: int, hour: int = 0, minute: int = 0) -> str:
    """A canonical UTC timestamp on a February 2026 day."""
    return f"2026-02-{day:02d}T{hour:02d}:{minute:02d}:00.000000Z"


def session(sid: str, start: str, end: str | None = None, **fields: Any) -> SessionState:
    """A minimal session; ``fields`` override any other field."""
    return SessionState(session_id=sid, start_time=start, end_time=end, created_at=start, **fields)


def full_session(sid: str = "sess-full") -> SessionState:
    """A session with every field set to a non-default value."""
    return SessionState(
        session_id=sid,
        start_time=t(10, 9),
        end_time=t(10, 11, 30),
        channel="cli",
        working_memory=(
            Pin("deploy target", "prod is eu-west-1", t(10, 9, 5), CRITICAL, 0.95),
            Pin("style", "use ruff", t(10, 9, 6), "NORMAL", 0.5, "sess-older", t(10, 9, 0)),
        ),
        hot_topics=("sqlite", "migrations", "wal"),
        active_projects=("cortex", "bridge"),
        pending_tasks=(
            PendingTask("task-1", "Write the store", "build", True, t(10, 10), "pipeline_state"),
            PendingTask("task-2", "Review", "review", False, None, "working_memory_scan"),
        ),
        recent_learnings=("mem-1", "mem-2"),
        confidence_updates=(ConfidenceUpdate("mem-1", 0.9, 0.7, "decay", t(10, 10)),),
        sop_interactions=(SOPInteraction("sops/deploy.md", t(10, 10), True, "bash"),),
        previous_session_id="sess-older",
        continued_by="sess-newer",
        crash_recovered=True,
        schema_version=1,
        created_at=t(10, 9),
        updated_at=t(10, 11, 30),
        state=SUSPENDED,
        scope="user",
        project="cortex",
        user_id="ana",
        agent_id="claude",
        task_slug="store-layer",
        last_activity=t(10, 11, 29),
        topic_state={"counts": {"sqlite": 3.5, "wal": 1}, "order": ["sqlite", "wal"]},
        checkpoint_count=4,
        parent_session="sess-parent",
        owner_pid=4242,
        owner_host="devbox",
    )


class StoreContract:
    """Tests any ``Store`` must pass; subclasses provide the ``store`` fixture."""

    # -- lifecycle ---------------------------------------------------------------------------
    def test_migrations_applied_once(self, store: Store) -> None:
        applied = store.applied_migrations()
        assert [name for name, _ in applied]
        assert all(at for _, at in applied)
        assert store.migrate() == []
        assert store.applied_migrations() == applied

    # -- sessions ----------------------------------------------------------------------------
    def test_round_trip_of_every_field(self, store: Store) -> None:
        state = full_session()
        store.save_session(state)
        assert store.get_session(state.session_id) == state

    def test_round_trip_of_minimal_session(self, store: Store) -> None:
        state = session("sess-min", t(1))
        store.save_session(state)
        assert store.get_session("sess-min") == state

    def test_get_missing_session_is_none(self, store: Store) -> None:
        assert store.get_session("nope") is None

    def test_reads_ahead_of_a_start_answer_as_the_reads_would(self, store: Store) -> None:
        """A start's reads sent ahead give the rows the calls would read, and a write made
        after them is seen by the calls that follow it (they read again)."""
        store.save_session(session("old", t(1), t(2)))
        store.save_session(session("open", t(3)))
        reads = StartReads(
            session_id="new",
            resumed=False,
            project=None,
            idle_before=t(5),
            since=t(0),
            limit=50,
            tasks=True,
        )
        with store.transaction():
            store.read_ahead_start(reads)
            assert store.list_tasks() == []
            assert [
                s.session_id for s in store.open_sessions(exclude_id="new", idle_before=t(5))
            ] == ["open"]
            assert store.latest_session_id(None) == "open"
            store.save_session(session("open", t(3), t(4)))  # recovered: it ended
            found = store.completed_sessions_since(
                t(0), None, limit=50, exclude_id="new", all_pins=False
            )
            assert [s.session_id for s in found] == ["open", "old"]
        with store.transaction():
            store.read_ahead_start(reads)
            store.save_session(session("late", t(6), t(7)))
            assert store.latest_session_id(None) == "late"
        with store.transaction():  # a cold start's last session, however old
            store.read_ahead_start(replace(reads, since=t(20), before=t(0)))
            assert (
                store.completed_sessions_since(
                    t(20), None, limit=50, exclude_id="new", all_pins=False
                )
                == []
            )
            [last] = store.completed_sessions_since(
                t(0), None, limit=1, exclude_id="new", all_pins=False
            )
            assert last.session_id == "late"
        store.read_ahead_start(reads)  # outside a transaction: nothing is kept
        store.save_session(session("later", t(8), t(9)))
        assert [s.session_id for s in store.completed_sessions_since(
            t(0), None, limit=50, exclude_id="new", all_pins=False)][:1] == ["later"]  # fmt: skip

    def test_reads_ahead_of_an_end_answer_as_the_reads_would(self, store: Store) -> None:
        """An end's reads sent ahead (its session, its learnings, the pending tasks) give
        what the calls would read; a write made after them is seen by the calls after it."""
        from cortex.core.memory_models import Memory, MemoryFilter
        from cortex.core.tasks import PENDING_STAGES

        store.save_session(session("ending", t(1)))
        store.add_memories([Memory(id="m1", content="learned", created_at=t(2),
                                   updated_at=t(2), source_session_id="ending")])  # fmt: skip
        learned = MemoryFilter(session_id="ending", all_projects=True)
        reads = EndReads("ending", learned, t(3), 500, pending_tasks=True)
        with store.transaction():
            store.read_ahead_end(reads)
            assert store.list_tasks(stages=PENDING_STAGES) == []
            assert store.get_session("ending") == session("ending", t(1))
            assert [m.id for m in store.list_memories(learned, t(3), limit=500)] == ["m1"]
        with store.transaction():
            store.read_ahead_end(reads)
            store.save_session(session("ending", t(1), t(4)))
            found = store.get_session("ending")
            assert found is not None and found.end_time == t(4)

    def test_get_sessions_in_the_order_asked_missing_left_out(self, store: Store) -> None:
        for sid in ("g1", "g2", "g3"):
            store.save_session(session(sid, t(1)))
        got = store.get_sessions(["g3", "nope", "g1"])
        assert [s.session_id for s in got] == ["g3", "g1"]
        assert got[0] == store.get_session("g3")
        assert store.get_sessions([]) == []

    def test_ids_with_prefix_is_a_range_of_ids_in_order(self, store: Store) -> None:
        for sid in ("abcd", "abcd1234", "abcd5678", "abce0000", "abc", "zzzz"):
            store.save_session(session(sid, t(10)))
        assert store.ids_with_prefix("session", "abcd") == ["abcd", "abcd1234", "abcd5678"]
        assert store.ids_with_prefix("session", "abcd5") == ["abcd5678"]
        assert store.ids_with_prefix("session", "abc", limit=2) == ["abc", "abcd"]
        assert store.ids_with_prefix("session", "abcf") == []
        assert store.ids_with_prefix("memory", "abcd") == []
        assert store.ids_with_prefix("snapshot", "abcd") == []

    def test_session_projects_latest_first_without_none(self, store: Store) -> None:
        store.save_session(session("s1", t(10), project="a"))
        store.save_session(session("s2", t(12), project="b"))
        store.save_session(session("s3", t(11), project="a"))
        store.save_session(session("s4", t(13)))
        assert store.session_projects() == ["b", "a"]
        assert store.session_projects(limit=1) == ["b"]

    def test_save_replaces_the_whole_row(self, store: Store) -> None:
        store.save_session(full_session("s1"))
        newer = session("s1", t(11), t(11, 2), project="other", hot_topics=("x",))
        store.save_session(newer)
        assert store.get_session("s1") == newer
        assert store.list_sessions() == [newer]

    def test_completed_sessions_filter_by_project(self, store: Store) -> None:
        for sid, project in (("a", "alpha"), ("b", "beta"), ("n", None)):
            store.save_session(session(sid, t(5), t(5, 1), project=project))
        assert [s.session_id for s in store.completed_sessions_since(t(1), "alpha", limit=9)] == [
            "a"
        ]
        assert [s.session_id for s in store.completed_sessions_since(t(1), None, limit=9)] == ["n"]
        assert store.completed_sessions_since(t(1), "gamma", limit=9) == []

    def test_completed_sessions_filter_by_since_open_and_excluded(self, store: Store) -> None:
        store.save_session(session("old", t(1), t(1, 1), project="p"))
        store.save_session(session("edge", t(3), t(4), project="p"))
        store.save_session(session("new", t(5), t(5, 1), project="p"))
        store.save_session(session("open", t(6), None, project="p"))
        found = store.completed_sessions_since(t(4), "p", limit=9)
        assert [s.session_id for s in found] == ["new", "edge"]
        found = store.completed_sessions_since(t(4), "p", limit=9, exclude_id="new")
        assert [s.session_id for s in found] == ["edge"]

    def test_completed_sessions_newest_end_first_with_limit(self, store: Store) -> None:
        # Start order differs from end order: the ordering must be by end_time.
        store.save_session(session("long", t(1), t(9), project="p"))
        store.save_session(session("short", t(7), t(7, 1), project="p"))
        store.save_session(session("mid", t(5), t(8), project="p"))
        found = store.completed_sessions_since(t(1), "p", limit=9)
        assert [s.session_id for s in found] == ["long", "mid", "short"]
        found = store.completed_sessions_since(t(1), "p", limit=2)
        assert [s.session_id for s in found] == ["long", "mid"]

    def test_open_sessions_oldest_first(self, store: Store) -> None:
        store.save_session(session("o2", t(3), project="b"))
        store.save_session(session("o1", t(2), project="a"))
        store.save_session(session("done", t(1), t(1, 1), project="a"))
        assert [s.session_id for s in store.open_sessions()] == ["o1", "o2"]
        assert [s.session_id for s in store.open_sessions(exclude_id="o1")] == ["o2"]

    def test_latest_open_session_by_last_activity(self, store: Store) -> None:
        store.save_session(session("a1", t(1), project="a", last_activity=t(4)))
        store.save_session(session("a2", t(2), project="a", last_activity=t(3)))
        store.save_session(session("b1", t(2), project="b", last_activity=t(5)))
        store.save_session(session("n1", t(2), project=None, last_activity=t(2)))
        store.save_session(session("a3", t(3), t(6), project="a", last_activity=t(6)))
        assert _sid(store.latest_open_session("a")) == "a1"
        assert _sid(store.latest_open_session(None)) == "n1"
        assert _sid(store.latest_open_session(any_project=True)) == "b1"
        assert store.latest_open_session("zzz") is None

    def test_latest_session_id_open_or_not(self, store: Store) -> None:
        assert store.latest_session_id("a") is None
        store.save_session(session("s1", t(1), t(2), project="a"))
        store.save_session(session("s2", t(3), None, project="a"))
        store.save_session(session("s3", t(4), t(5), project="b"))
        assert store.latest_session_id("a") == "s2"
        assert store.latest_session_id("b") == "s3"
        assert store.latest_session_id(None) is None

    def test_list_sessions(self, store: Store) -> None:
        for day, project in ((1, "a"), (2, "b"), (3, "a"), (4, None)):
            store.save_session(session(f"s{day}", t(day), project=project))
        assert [s.session_id for s in store.list_sessions()] == ["s4", "s3", "s2", "s1"]
        assert [s.session_id for s in store.list_sessions(limit=2, offset=1)] == ["s3", "s2"]
        only_a = store.list_sessions(project="a", any_project=False)
        assert [s.session_id for s in only_a] == ["s3", "s1"]
        only_none = store.list_sessions(project=None, any_project=False)
        assert [s.session_id for s in only_none] == ["s4"]

    def test_list_sessions_narrowed_by_state_crash_and_start(self, store: Store) -> None:
        store.save_session(session("s1", t(1), t(2), project="a", state=COMPLETE))
        store.save_session(session("s2", t(3), project="a", crash_recovered=True))
        store.save_session(session("s3", t(5), project="b"))
        ids = lambda **narrow: [s.session_id for s in store.list_sessions(**narrow)]  # noqa: E731
        assert ids(state=COMPLETE) == ["s1"]
        assert ids(crashed=True) == ["s2"] and ids(crashed=False) == ["s3", "s1"]
        assert ids(since=t(3)) == ["s3", "s2"] and ids(until=t(3)) == ["s1"]
        assert ids(project="a", any_project=False, since=t(2)) == ["s2"]
        assert store.session_projects(limit=10) == ["b", "a"]
        assert store.session_projects(limit=1) == ["b"]

    def test_mark_continued(self, store: Store) -> None:
        store.save_session(session("s1", t(1), t(2)))
        store.save_session(session("s2", t(2), t(3)))
        store.save_session(session("s3", t(3), t(4)))
        store.mark_continued(["s1", "s2", "missing"], "s9", t(9))
        for sid in ("s1", "s2"):
            got = store.get_session(sid)
            assert got is not None and (got.continued_by, got.updated_at) == ("s9", t(9))
        untouched = store.get_session("s3")
        assert untouched is not None and untouched.continued_by is None

    def test_sessions_ended_before_and_delete(self, store: Store) -> None:
        store.save_session(session("e2", t(1), t(3)))
        store.save_session(session("e1", t(1), t(2)))
        store.save_session(session("e3", t(5), t(6)))
        store.save_session(session("open", t(1)))
        old = store.sessions_ended_before(t(5), limit=9)
        assert [s.session_id for s in old] == ["e1", "e2"]
        assert [s.session_id for s in store.sessions_ended_before(t(5), limit=1)] == ["e1"]
        assert store.delete_sessions(["e1", "e2", "missing"]) == 2
        assert store.get_session("e1") is None
        assert [s.session_id for s in store.list_sessions()] == ["e3", "open"]
        assert store.delete_sessions([]) == 0

    def test_states_are_kept(self, store: Store) -> None:
        store.save_session(session("s1", t(1), t(2), state=COMPLETE))
        got = store.get_session("s1")
        assert got is not None and got.state == COMPLETE

    # -- metrics -----------------------------------------------------------------------------
    def test_metrics_append_last_list(self, store: Store) -> None:
        assert store.last_metric() is None
        seqs = [
            store.append_metric("a", "s1", {"n": 1}, t(1), "0" * 64, "h1"),
            store.append_metric("b", None, {"n": 2, "x": [1, 2]}, t(2), "h1", "h2"),
            store.append_metric("a", "s2", {}, t(3), "h2", "h3"),
        ]
        assert seqs == [1, 2, 3]
        last = store.last_metric()
        assert last is not None
        assert (last.seq, last.event, last.session_id, last.prev_hash, last.hash) == (
            3,
            "a",
            "s2",
            "h2",
            "h3",
        )
        assert [m.seq for m in store.list_metrics()] == [1, 2, 3]
        assert [m.seq for m in store.list_metrics(event="a")] == [1, 3]
        assert [m.seq for m in store.list_metrics(limit=2)] == [1, 2]
        assert [m.seq for m in store.list_metrics(after_seq=1)] == [2, 3]
        assert [m.seq for m in store.list_metrics(session_id="s2")] == [3]
        assert [m.seq for m in store.list_metrics(event="a", session_id="s1")] == [1]
        assert store.list_metrics(event="b", session_id="s1") == []
        second = store.list_metrics()[1]
        assert (second.payload, second.created_at) == ({"n": 2, "x": [1, 2]}, t(2))

    def test_a_batch_of_metrics_takes_the_next_numbers_in_order(self, store: Store) -> None:
        assert store.append_metrics([]) == []
        store.append_metric("first", None, {}, t(1), "0" * 64, "h0")
        with store.transaction():
            store.last_metric()  # as the chain's writer does: read the head, then append
            seqs = store.append_metrics(
                [
                    (
                        f"e{i}",
                        f"s{i}" if i % 2 else None,
                        {"i": i, "k": [i]},
                        t(2),
                        f"h{i - 1}",
                        f"h{i}",
                    )
                    for i in range(1, 16)
                ]  # fmt: skip
            )
        assert seqs == list(range(2, 17))
        events = store.list_metrics()
        assert [(m.seq, m.event) for m in events] == [(1, "first")] + [
            (i + 1, f"e{i}") for i in range(1, 16)
        ]
        assert [(m.session_id, m.payload, m.prev_hash, m.hash) for m in events[1:3]] == [
            ("s1", {"i": 1, "k": [1]}, "h0", "h1"),
            (None, {"i": 2, "k": [2]}, "h1", "h2"),
        ]
        assert store.append_metric("after", None, {}, t(3), "h15", "h16") == 17

    def test_iter_metrics_streams_all_in_order(self, store: Store) -> None:
        with store.transaction():
            for i in range(1, 1203):
                store.append_metric("e", None, {"i": i}, t(1), f"h{i - 1}", f"h{i}")
        events = list(store.iter_metrics())
        assert [m.seq for m in events] == list(range(1, 1203))
        assert events[-1].payload == {"i": 1202}

    # -- audit -------------------------------------------------------------------------------
    def test_audit_ids_increase(self, store: Store) -> None:
        first = store.append_audit("session.delete", "cli", "s1", {"why": "archive"}, t(1))
        second = store.append_audit("pin.add", "mcp", None, {}, t(2))
        assert second > first

    def test_audit_rows_of_a_batch_in_order(self, store: Store) -> None:
        before = store.append_audit("pin.add", "mcp", None, {}, t(1))
        store.append_audits(
            [
                ("memory.supersede", "api", "m2", {"superseded": "m1", "upsert_key": "k"}),
                ("memory.supersede", "api", "m4", {"superseded": "m3", "upsert_key": "j"}),
            ],
            t(2),
        )
        store.append_audits([], t(3))
        newest = store.list_audit(limit=3)
        assert [(a.action, a.target, a.created_at) for a in newest] == [
            ("memory.supersede", "m4", t(2)),
            ("memory.supersede", "m2", t(2)),
            ("pin.add", None, t(1)),
        ]
        assert newest[1].detail == {"superseded": "m1", "upsert_key": "k"}
        assert before < newest[1].id < newest[0].id

    def test_audit_of_one_target_newest_first(self, store: Store) -> None:
        store.append_audit("memory.edit", "cli", "m1", {"changed": ["content"]}, t(1))
        store.append_audit("memory.edit", "ui", "m2", {}, t(2))
        store.append_audit("memory.forget", "ui", "m1", {}, t(3))
        assert [(a.action, a.actor) for a in store.list_audit(target="m1")] == [
            ("memory.forget", "ui"),
            ("memory.edit", "cli"),
        ]
        assert [a.target for a in store.list_audit(limit=1)] == ["m1"]

    # -- tasks -------------------------------------------------------------------------------
    def test_tasks_round_trip_in_the_order_first_added(self, store: Store) -> None:
        first = TaskRecord("t-2", "Wire CAT", "build", t(1), t(1), "git:abc", {"owner": "ana"})
        store.save_task(first)
        store.save_task(TaskRecord("t-1", "Rotate keys", "design", t(2)))
        assert store.get_task("t-2") == first
        assert store.get_task("t-3") is None
        changed = replace(first, title="Wire CAT control", stage="done", updated_at=t(3))
        store.save_task(replace(changed, created_at=t(9)))  # an update keeps created_at
        assert store.get_task("t-2") == changed
        assert [task.task_id for task in store.list_tasks()] == ["t-2", "t-1"]

    def test_tasks_narrowed_by_stage_and_project(self, store: Store) -> None:
        store.save_task(TaskRecord("a", "A", "build", t(1), project="p1"))
        store.save_task(TaskRecord("b", "B", "verify", t(1)))
        store.save_task(TaskRecord("c", "C", "done", t(1), project="p1"))
        store.save_task(TaskRecord("d", "D", "build", t(1), project="p2"))
        ids = [x.task_id for x in store.list_tasks(stages=("build", "verify"), project="p1")]
        assert ids == ["a", "b"]
        assert [x.task_id for x in store.list_tasks(project="p2")] == ["b", "d"]
        assert [x.task_id for x in store.list_tasks(stages=("done",))] == ["c"]
        assert store.list_tasks(stages=()) == []
        assert [x.task_id for x in store.list_tasks(limit=2)] == ["a", "b"]

    def test_add_tasks_keeps_what_is_stored(self, store: Store) -> None:
        store.save_task(TaskRecord("a", "Kept", "verify", t(1)))
        added = store.add_tasks(
            [TaskRecord("a", "Other", "build", t(2)), TaskRecord("b", "B", "build", t(2))]
        )
        assert added == 1
        assert store.get_task("a") == TaskRecord("a", "Kept", "verify", t(1))
        assert store.add_tasks([TaskRecord("b", "B", "build", t(2))]) == 0

    def test_a_task_rolls_back_with_its_transaction(self, store: Store) -> None:
        with pytest.raises(RuntimeError), store.transaction():
            store.save_task(TaskRecord("a", "A", "build", t(1)))
            raise RuntimeError("boom")
        assert store.list_tasks() == []

    # -- transactions ------------------------------------------------------------------------
    def test_transaction_commits(self, store: Store) -> None:
        with store.transaction():
            store.save_session(session("s1", t(1)))
            store.append_metric("e", None, {}, t(1), "0" * 64, "h1")
        assert store.get_session("s1") is not None
        assert store.last_metric() is not None

    def test_transaction_rolls_back_on_exception(self, store: Store) -> None:
        with pytest.raises(RuntimeError), store.transaction():
            store.save_session(session("s1", t(1)))
            store.append_metric("e", None, {}, t(1), "0" * 64, "h1")
            store.append_audit("a", "b", None, {}, t(1))
            store.mark_continued(["s1"], "s2", t(2))
            raise RuntimeError("boom")
        assert store.get_session("s1") is None
        assert store.list_sessions() == []
        assert store.last_metric() is None

    def test_nested_transaction_joins_the_outer(self, store: Store) -> None:
        with pytest.raises(RuntimeError), store.transaction():
            store.save_session(session("outer", t(1)))
            with store.transaction():
                store.save_session(session("inner", t(1)))
            raise RuntimeError("outer fails after the inner block finished")
        assert store.list_sessions() == []
        with store.transaction():
            with store.transaction():
                store.save_session(session("inner", t(1)))
            store.save_session(session("outer", t(1)))
        assert len(store.list_sessions()) == 2

    def test_after_commit_runs_once_the_outermost_transaction_committed(self, store: Store) -> None:
        seen: list[str] = []
        with store.transaction():
            with store.transaction():
                store.save_session(session("s1", t(1)))
                store.after_commit(
                    lambda: seen.append(f"s1 stored: {bool(store.get_session('s1'))}")
                )
            assert seen == []  # the inner block's end is no commit
        assert seen == ["s1 stored: True"]
        with pytest.raises(RuntimeError), store.transaction():
            store.after_commit(lambda: seen.append("rolled back"))
            raise RuntimeError("boom")
        store.after_commit(lambda: seen.append("no transaction: at once"))
        assert seen == ["s1 stored: True", "no transaction: at once"]

    def test_store_usable_after_rollback(self, store: Store) -> None:
        with pytest.raises(ValueError), store.transaction():
            with store.transaction():
                raise ValueError("inner fails")
        store.save_session(session("s1", t(1)))
        with store.transaction():
            store.save_session(session("s2", t(1)))
        assert len(store.list_sessions()) == 2

    def test_session_round_trip_keeps_replace_semantics(self, store: Store) -> None:
        state = full_session("s1")
        store.save_session(state)
        ended = replace(state, end_time=t(12), state=COMPLETE, working_memory=())
        store.save_session(ended)
        assert store.get_session("s1") == ended

    def test_a_new_store_is_healthy(self, store: Store) -> None:
        store.save_session(full_session("s1"))
        assert store.check_integrity() == []


def _sid(state: SessionState | None) -> str | None:
    return None if state is None else state.session_id
