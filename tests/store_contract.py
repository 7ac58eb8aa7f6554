"""The contract every ``Store`` implementation keeps (``cortex.store.protocol``).

A backend's test module subclasses ``StoreContract`` and provides a ``store`` fixture; the
same tests then run against SQLite and, later, PostgreSQL.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from cortex.core.memory_models import (
    Checkpoint,
    CompactionEvent,
    EventTotals,
    Memory,
    MemoryFilter,
    MemoryLink,
    SessionEvent,
    SessionSnapshot,
)
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
from cortex.store.protocol import Store


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

    def test_save_replaces_the_whole_row(self, store: Store) -> None:
        store.save_session(full_session("s1"))
        newer = session("s1", t(11), t(11, 2), project="other", hot_topics=("x",))
        store.save_session(newer)
        assert store.get_session("s1") == newer
        assert store.count_sessions() == 1

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

    def test_latest_session_open_or_not(self, store: Store) -> None:
        assert store.latest_session("a") is None
        store.save_session(session("s1", t(1), t(2), project="a"))
        store.save_session(session("s2", t(3), None, project="a"))
        store.save_session(session("s3", t(4), t(5), project="b"))
        assert _sid(store.latest_session("a")) == "s2"
        assert _sid(store.latest_session("b")) == "s3"
        assert store.latest_session(None) is None

    def test_list_and_count_sessions(self, store: Store) -> None:
        for day, project in ((1, "a"), (2, "b"), (3, "a"), (4, None)):
            store.save_session(session(f"s{day}", t(day), project=project))
        assert store.count_sessions() == 4
        assert [s.session_id for s in store.list_sessions()] == ["s4", "s3", "s2", "s1"]
        assert [s.session_id for s in store.list_sessions(limit=2, offset=1)] == ["s3", "s2"]
        only_a = store.list_sessions(project="a", any_project=False)
        assert [s.session_id for s in only_a] == ["s3", "s1"]
        only_none = store.list_sessions(project=None, any_project=False)
        assert [s.session_id for s in only_none] == ["s4"]

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
        assert store.count_sessions() == 2
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
        second = store.list_metrics()[1]
        assert (second.payload, second.created_at) == ({"n": 2, "x": [1, 2]}, t(2))

    def test_iter_metrics_streams_all_in_order(self, store: Store) -> None:
        with store.transaction():
            for i in range(1, 1203):
                store.append_metric("e", None, {"i": i}, t(1), f"h{i - 1}", f"h{i}")
        events = list(store.iter_metrics())
        assert [m.seq for m in events] == list(range(1, 1203))
        assert events[-1].payload == {"i": 1202}

    # -- audit -------------------------------------------------------------------------------
    def test_audit_append_and_list_newest_first(self, store: Store) -> None:
        first = store.append_audit("session.delete", "cli", "s1", {"why": "archive"}, t(1))
        second = store.append_audit("pin.add", "mcp", None, {}, t(2))
        assert second > first
        entries = store.list_audit()
        assert [e.id for e in entries] == [second, first]
        assert (entries[1].action, entries[1].actor, entries[1].target) == (
            "session.delete",
            "cli",
            "s1",
        )
        assert entries[1].detail == {"why": "archive"}
        assert entries[0].target is None and entries[0].created_at == t(2)
        assert [e.id for e in store.list_audit(limit=1)] == [second]

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
        assert store.count_sessions() == 0
        assert store.last_metric() is None
        assert store.list_audit() == []

    def test_nested_transaction_joins_the_outer(self, store: Store) -> None:
        with pytest.raises(RuntimeError), store.transaction():
            store.save_session(session("outer", t(1)))
            with store.transaction():
                store.save_session(session("inner", t(1)))
            raise RuntimeError("outer fails after the inner block finished")
        assert store.count_sessions() == 0
        with store.transaction():
            with store.transaction():
                store.save_session(session("inner", t(1)))
            store.save_session(session("outer", t(1)))
        assert store.count_sessions() == 2

    def test_store_usable_after_rollback(self, store: Store) -> None:
        with pytest.raises(ValueError), store.transaction():
            with store.transaction():
                raise ValueError("inner fails")
        store.save_session(session("s1", t(1)))
        with store.transaction():
            store.save_session(session("s2", t(1)))
        assert store.count_sessions() == 2

    def test_session_round_trip_keeps_replace_semantics(self, store: Store) -> None:
        state = full_session("s1")
        store.save_session(state)
        ended = replace(state, end_time=t(12), state=COMPLETE, working_memory=())
        store.save_session(ended)
        assert store.get_session("s1") == ended


def _sid(state: SessionState | None) -> str | None:
    return None if state is None else state.session_id


# -- memory lifecycle (RFC phases 1-3) ---------------------------------------------------------
NOW = t(16, 9)


def memory(mid: str, content: str, **fields: Any) -> Memory:
    """A memory created at ``t(16)``; ``fields`` override any other field."""
    return Memory(
        id=mid,
        content=content,
        created_at=fields.pop("created_at", t(16)),
        updated_at=t(16),
        **fields,
    )


class MemoryStoreContract:
    """Memory, link, event, snapshot, checkpoint and compaction methods of the ``Store``."""

    def test_memory_round_trip(self, store: Store) -> None:
        m = memory(
            "m1",
            "uses sqlite",
            layer="working",
            type="fact",
            scope="project",
            project="api",
            user_id="ana",
            tags=("db", "local"),
            upsert_key="db",
            source_session_id="s1",
            remember_intent="explicit",
            confidence=0.7,
            expires_at=t(20),
            last_confirmed_at=t(16),
        )
        assert store.add_memories([m]) == [None]
        assert store.get_memory("m1") == m
        assert store.get_memory("missing") is None

    def test_upsert_supersedes_the_live_memory(self, store: Store) -> None:
        store.add_memories([memory("a", "v1", upsert_key="k")])
        assert store.add_memories([memory("b", "v2", upsert_key="k", created_at=t(17))]) == ["a"]
        old = store.get_memory("a")
        assert old is not None and (old.superseded_by, old.superseded_at) == ("b", t(17))
        assert [(lk.from_id, lk.to_id, lk.kind) for lk in store.memory_links("a")] == [
            ("b", "a", "supersedes")
        ]
        assert [m.id for m in store.list_memories(MemoryFilter(), NOW)] == ["b"]
        history = store.list_memories(MemoryFilter(include_history=True), NOW)
        assert [m.id for m in history] == ["b", "a"]

    def test_filters_scope_layer_user_type_tags_and_expiry(self, store: Store) -> None:
        store.add_memories(
            [
                memory("g", "global fact"),
                memory("p", "api fact", scope="project", project="api", tags=("x",)),
                memory("o", "web fact", scope="project", project="web"),
                memory("u", "bo's fact", user_id="bo", type="preference"),
                memory("w", "old work", layer="working", expires_at=t(16, 8)),
                memory("r", "a rule", layer="rule", type="rule"),
            ]
        )

        def ids(**kw: Any) -> list[str]:
            return sorted(m.id for m in store.list_memories(MemoryFilter(**kw), NOW))

        assert ids() == ["g", "r", "u"]
        assert ids(project="api") == ["g", "p", "r", "u"]
        assert ids(all_projects=True) == ["g", "o", "p", "r", "u"]
        assert ids(user_id="ana") == ["g", "r"]
        assert ids(layers=("rule",)) == ["r"]
        assert ids(types=("preference",)) == ["u"]
        assert ids(project="api", tags=("x",)) == ["p"]
        assert ids(layers=("working",), include_history=True) == ["w"]
        assert store.count_memories(MemoryFilter(all_projects=True), NOW) == 5

    def test_update_and_soft_delete(self, store: Store) -> None:
        store.add_memories([memory("m", "uses postgres")])
        changed = replace(memory("m", "uses sqlite"), confidence=0.4, updated_at=t(17))
        store.update_memory(changed)
        assert store.get_memory("m") == changed
        if store.has_fts():  # the index follows the edit
            assert [
                m.id for m, _ in store.search_memories('"sqlite"', MemoryFilter(), NOW, limit=5)
            ] == ["m"]
            assert store.search_memories('"postgres"', MemoryFilter(), NOW, limit=5) == []
        assert store.delete_memory("m", t(18)) is True
        assert store.delete_memory("m", t(18)) is False
        assert store.list_memories(MemoryFilter(), NOW) == []
        gone = store.get_memory("m")
        assert gone is not None and gone.deleted_at == t(18)

    def test_full_text_search_ranks_and_filters(self, store: Store) -> None:
        store.add_memories(
            [
                memory("a", "redis broke starlette under load"),
                memory("b", "redis cache warmed"),
                memory("c", "redis in web", scope="project", project="web"),
            ]
        )
        if not store.has_fts():
            pytest.skip("no full-text index on this backend")
        found = store.search_memories('"redis" OR "starlette"', MemoryFilter(), NOW, limit=5)
        assert [m.id for m, _ in found] == ["a", "b"]
        assert found[0][1] < found[1][1]  # bm25: lower is better
        assert store.search_memories('"nothing"', MemoryFilter(), NOW, limit=5) == []

    def test_like_fallback(self, store: Store) -> None:
        store.add_memories(
            [memory("a", "kubernetes 50% done"), memory("b", "other", tags=("k8s",))]
        )
        assert [m.id for m in store.like_memories(["%bernet%"], MemoryFilter(), NOW, limit=5)] == [
            "a"
        ]
        assert [m.id for m in store.like_memories(["%k8s%"], MemoryFilter(), NOW, limit=5)] == ["b"]
        assert store.like_memories([], MemoryFilter(), NOW, limit=5) == []

    def test_links_one_hop_either_direction_live_only(self, store: Store) -> None:
        store.add_memories([memory(i, i) for i in ("a", "b", "c", "d")])
        store.add_memory_link(MemoryLink("a", "b", "relates", t(16)))
        store.add_memory_link(MemoryLink("c", "a", "conflicts", t(16)))
        store.add_memory_link(MemoryLink("a", "d", "relates", t(16)))
        store.delete_memory("d", t(16))
        found = sorted(
            (seed, kind, m.id)
            for seed, kind, m in store.linked_memories(["a"], MemoryFilter(), NOW)
        )
        assert found == [("a", "conflicts", "c"), ("a", "relates", "b")]
        assert store.linked_memories([], MemoryFilter(), NOW) == []

    def test_embeddings_round_trip(self, store: Store) -> None:
        store.add_memories([memory("a", "x"), memory("b", "y")])
        store.save_embeddings("m", [("a", 2, b"\x00\x00\x80?\x00\x00\x00\x00")])
        assert [(m.id, blob) for m, blob in store.load_embeddings("m", MemoryFilter(), NOW)] == [
            ("a", b"\x00\x00\x80?\x00\x00\x00\x00")
        ]
        assert [m.id for m in store.memories_without_embedding("m", limit=5)] == ["b"]

    def test_session_events_and_totals(self, store: Store) -> None:
        events = [
            SessionEvent("e1", "s1", "user", "message", "hi", 3, 0, True, t(16, 9)),
            SessionEvent("e2", "s1", "assistant", "message", "yo", 5, 0, False, t(16, 10)),
            SessionEvent("e3", "s1", "user", "message", "next", 7, 1, True, t(16, 11)),
            SessionEvent("x", "s2", "user", "message", "other", 100, 0, True, t(16, 11)),
        ]
        for event in events:
            store.append_session_event(event)
        assert store.list_session_events("s1") == events[:3]
        assert store.list_session_events("s1", meaningful_only=True) == [events[0], events[2]]
        assert store.list_session_events("s1", limit=1) == [events[2]]
        assert store.list_session_events("s1", since=t(16, 9)) == events[1:3]
        assert store.session_event_totals("s1") == EventTotals(15, 2, 3, t(16, 11), 1)
        assert store.session_event_totals("s1", t(16, 10)) == EventTotals(7, 1, 1, t(16, 11), 1)
        assert store.session_event_totals("none") == EventTotals(0, 0, 0, None, None)

    def test_snapshots(self, store: Store) -> None:
        a = SessionSnapshot("a", "s1", "fix-bug", "manual", "# t\n", 1, t(16, 9))
        b = SessionSnapshot("b", "s1", "fix-bug", "reset", "# u\n", 2, t(16, 10))
        store.save_snapshot(a)
        store.save_snapshot(b)
        assert store.list_snapshots("s1") == [b, a]
        assert store.get_snapshot("a") == a and store.get_snapshot("z") is None

    def test_checkpoints_and_count(self, store: Store) -> None:
        store.save_session(session("s1", t(16)))
        first = Checkpoint("c1", "s1", t(16, 9), "manual", "one", {"pins": [{"label": "x"}]})
        second = Checkpoint("c2", "s1", t(16, 10), "pre_compaction", "two", {}, ("next",))
        store.save_checkpoint(first)
        store.save_checkpoint(second)
        assert store.list_checkpoints("s1") == [second, first]
        assert store.get_checkpoint("c1") == first
        assert store.bump_checkpoint_count("s1", t(16, 10)) == 1
        assert store.bump_checkpoint_count("s1", t(16, 11)) == 2
        assert store.bump_checkpoint_count("missing", t(16)) == 0

    def test_compaction_events(self, store: Store) -> None:
        event = CompactionEvent("k1", "s1", "count", "budget", 900, 12, None, "c1", t(16, 9))
        store.append_compaction_event(event)
        store.complete_compaction_event("k1", 40, t(16, 10))
        assert store.list_compaction_events("s1") == [
            replace(event, summary_tokens=40, completed_at=t(16, 10))
        ]

    def test_history_survives_deleting_the_session_row(self, store: Store) -> None:
        store.save_session(session("s1", t(1), t(2)))
        store.append_session_event(
            SessionEvent("e", "s1", "user", "message", "hi", 1, 0, True, t(1))
        )
        store.delete_sessions(["s1"])
        assert len(store.list_session_events("s1")) == 1

    def test_term_counts_recency_order_and_bounded_like(self, store: Store) -> None:
        store.add_memories([memory(f"m{i}", f"redis note {i}") for i in range(5)])
        store.add_memories([memory("x", "kafka only")])
        assert store.memory_count_estimate() >= 6
        if store.has_fts():
            assert store.term_doc_counts(["redis", "kafka", "none"], 3) == {
                "redis": 4,
                "kafka": 1,
                "none": 0,
            }
            newest = store.search_memories('"redis"', MemoryFilter(), NOW, limit=2, by_recency=True)
            assert [(m.id, score) for m, score in newest] == [("m4", 0.0), ("m3", 0.0)]
        old = store.like_memories(["%redis%"], MemoryFilter(), NOW, limit=9, newest=3)
        assert [m.id for m in old] == ["m4", "m3"]
