"""The memory part of the ``Store`` contract: memories, search, links, embeddings, history.

Through the protocol only, like ``store_contract.py`` (whose helpers it shares);
``test_store_contract.py`` runs it against every backend of the ``store`` fixture.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from typing import Any

import pytest

from cortex.core.history_models import (
    Checkpoint,
    CompactionEvent,
    EventTotals,
    SessionEvent,
    SessionSnapshot,
)
from cortex.core.hygiene import ConsolidationRun, Procedure
from cortex.core.memory_models import Memory, MemoryFilter, MemoryLink
from cortex.errors import ValidationError
from cortex.store import SQLiteStore
from cortex.store.protocol import Store
from store_contract import session, t

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


OWNERS: list[dict[str, Any]] = [
    {"scope": "global"},
    {"scope": "project", "project": "api"},
    {"scope": "project", "project": "web"},
    {"scope": "global", "user_id": "ana"},
    {"scope": "project", "project": "api", "user_id": "ana"},
]


def check_batch_upserts(store: Store) -> None:
    """Two batches of keyed memories over several owners: the second replaces some live ones,
    adds new keys and repeats keys within itself; each supersedes what one-by-one upserts
    would (checked against a model of the live keys)."""
    live: dict[tuple[Any, ...], str] = {}

    def add(batch: list[Memory]) -> list[str | None]:
        expected = []
        for m in batch:
            key = (m.scope, m.project, m.user_id, m.type, m.upsert_key)
            expected.append(live.get(key))
            live[key] = m.id
        assert store.add_memories(batch) == expected
        for m, old_id in zip(batch, expected, strict=True):
            old = store.get_memory(old_id) if old_id else None
            if old is not None:  # whichever order the old rows are stored in
                assert (old.superseded_by, old.superseded_at) == (m.id, m.created_at)
                assert old.updated_at == m.created_at
        return expected

    first = [
        memory(f"a{i}", f"first {i}", upsert_key=f"k{i % 7}", **OWNERS[i % 5]) for i in range(35)
    ]
    add(first)
    second = [
        memory(f"b{i}", f"second {i}", upsert_key=f"k{i % 9}", created_at=t(17), **OWNERS[i % 4])
        for i in reversed(range(60))  # the stored memories it replaces, newest first
    ] + [memory("plain", "no key", created_at=t(17))]
    replaced = add(second)
    assert 0 < replaced.count(None) < len(replaced)
    visible = MemoryFilter(all_projects=True, layers=("long_term",))
    assert {m.id for m in store.list_memories(visible, NOW, limit=200)} == {*live.values(), "plain"}


class MemoryStoreContract:
    """Memory, link, event, snapshot, checkpoint and compaction methods of the ``Store``."""

    def test_batch_upserts_supersede_as_one_by_one(self, store: Store) -> None:
        check_batch_upserts(store)

    def test_an_offset_past_the_integers_is_a_validation_error(self, store: Store) -> None:
        with pytest.raises(ValidationError, match="cannot store this value"):
            store.list_memories(MemoryFilter(all_projects=True), NOW, offset=10**20)

    def test_a_project_is_known_by_its_sessions_or_its_memories(self, store: Store) -> None:
        store.save_session(session("s1", t(10), project="radio"))
        store.add_memories([memory("m1", "uses tabs", scope="project", project="api")])
        store.add_memories([memory("m2", "a global fact")])
        assert store.project_known("radio") and store.project_known("api")
        assert not store.project_known("Radio") and not store.project_known("web")

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

    def test_supersedes_links_held_by_the_rows_and_by_link_rows_read_alike(
        self, store: Store
    ) -> None:
        store.add_memories([memory("a", "v1", upsert_key="k"), memory("x", "x"), memory("c", "c")])
        store.add_memories([memory("b", "v2", upsert_key="k", created_at=t(17))])
        assert store.supersede_memory("x", "b", t(18))  # "b" supersedes "a" already
        store.add_memory_link(MemoryLink("b", "c", "relates", t(19)))
        assert store.memory_links("b") == [
            MemoryLink("b", "a", "supersedes", t(17)),
            MemoryLink("b", "c", "relates", t(19)),
            MemoryLink("b", "x", "supersedes", t(18)),
        ]
        assert store.memory_links("a") == [MemoryLink("b", "a", "supersedes", t(17))]
        assert store.memory_links("x") == [MemoryLink("b", "x", "supersedes", t(18))]
        history = MemoryFilter(include_history=True)
        hops = {(s, kind, m.id) for s, kind, m in store.linked_memories(["b"], history, NOW)}
        assert hops == {("b", "supersedes", "a"), ("b", "relates", "c"), ("b", "supersedes", "x")}
        hops = {(s, kind, m.id) for s, kind, m in store.linked_memories(["a", "x"], history, NOW)}
        assert hops == {("a", "supersedes", "b"), ("x", "supersedes", "b")}

    def test_an_export_holds_supersedes_links_as_link_rows_and_an_older_one_imports(
        self, store: Store
    ) -> None:
        store.add_memories([memory("a", "v1", upsert_key="k")])
        store.add_memories([memory("b", "v2", upsert_key="k", created_at=t(17))])
        assert list(store.export_rows("memory_links")) == [
            {"from_id": "b", "to_id": "a", "kind": "supersedes", "created_at": t(17)}
        ]
        rows = [r for r in store.export_rows("memories") if r["id"] in ("a", "b")]
        assert len(rows) == 2 and all("supersedes" not in r for r in rows)
        # The same two under other ids and key, as an export made before the rows held links.
        renamed = {"a": "c", "b": "d"}
        copies = [
            {k: renamed.get(v, v) if k in ("id", "superseded_by") else v for k, v in r.items()}
            | {"upsert_key": "k2"}
            for r in rows
        ]
        for r in copies:
            r.pop("seq", None)  # SQLite's rowid: the target numbers its own rows
        with store.transaction():
            assert store.import_rows("memories", copies) == 2
        link = {"from_id": "d", "to_id": "c", "kind": "supersedes", "created_at": t(17)}
        with store.transaction():
            assert store.import_rows("memory_links", [link]) == 1
        with store.transaction():
            assert store.import_rows("memory_links", [link]) == 0
        assert store.memory_links("c") == [MemoryLink("d", "c", "supersedes", t(17))]
        assert store.memory_links("d") == [MemoryLink("d", "c", "supersedes", t(17))]

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

    def test_update_and_soft_delete(self, store: Store) -> None:
        store.add_memories([memory("m", "uses postgres")])
        changed = replace(memory("m", "uses sqlite"), confidence=0.4, updated_at=t(17))
        store.update_memory(changed)
        assert store.get_memory("m") == changed
        # Search follows the edit.
        assert [
            m.id for m, _ in store.search_memories(["sqlite"], MemoryFilter(), NOW, limit=5)
        ] == ["m"]
        assert store.search_memories(["postgres"], MemoryFilter(), NOW, limit=5) == []
        assert store.delete_memory("m", t(18)) is True
        assert store.delete_memory("m", t(18)) is False
        assert store.list_memories(MemoryFilter(), NOW) == []
        gone = store.get_memory("m")
        assert gone is not None and gone.deleted_at == t(18)

    def test_search_ranks_by_relevance_and_filters(self, store: Store) -> None:
        store.add_memories(
            [
                memory("a", "redis broke starlette under load"),
                memory("b", "redis cache warmed"),
                memory("c", "redis in web", scope="project", project="web"),
            ]
        )
        found = store.search_memories(["redis", "starlette"], MemoryFilter(), NOW, limit=5)
        assert [m.id for m, _ in found] == ["a", "b"]
        assert 0 < found[1][1] < found[0][1] <= 1  # relevance: higher is better
        web = store.search_memories(["redis"], MemoryFilter(project="web"), NOW, limit=5)
        assert sorted(m.id for m, _ in web) == ["a", "b", "c"]
        assert store.search_memories(["nothing"], MemoryFilter(), NOW, limit=5) == []
        assert store.search_memories([], MemoryFilter(), NOW, limit=5) == []

    def test_search_finds_fragments_unranked(self, store: Store) -> None:
        store.add_memories(
            [
                memory("a", "kubernetes 50% done"),
                memory("b", "other", tags=("k8s",)),
                memory("c", "snake_case names", scope="project", project="api"),
            ]
        )

        def found(term: str, project: str | None = None) -> list[tuple[str, float]]:
            flt = MemoryFilter(project=project)
            return [(m.id, r) for m, r in store.search_memories([term], flt, NOW, limit=5)]

        assert found("bernet") == [("a", 0.0)]  # no word holds it: a substring match
        assert found("8s") == [("b", 0.0)]  # in a tag
        assert found("0_") == []  # "_" is a literal, not a one-character wildcard
        assert found("e_c") == []  # another project's memory
        assert found("e_c", project="api") == [("c", 0.0)]

    def test_a_substring_search_reads_the_newest_memories_only(
        self, store: Store, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # PostgreSQL's ILIKE read every memory of the tenant when no memory held the term.
        import cortex.store.postgres.memories as pg_memories
        import cortex.store.sqlite.search as sqlite_search

        for module in (pg_memories, sqlite_search):
            monkeypatch.setattr(module, "LIKE_SCAN_ROWS", 2)
        store.add_memories([memory("a", "kubernetes rollout"), memory("b", "x"), memory("c", "y")])

        def found(term: str) -> list[str]:
            return [m.id for m, _ in store.search_memories([term], MemoryFilter(), NOW, limit=5)]

        assert found("bernet") == []  # the one that holds it is older than the newest two
        store.add_memories([memory("d", "kubernetes again")])
        assert found("bernet") == ["d"]

    def test_links_one_hop_either_direction_visible_only(self, store: Store) -> None:
        store.add_memories([memory("a", "v1", upsert_key="k"), memory("x", "unrelated")])
        store.add_memories([memory("b", "v2", upsert_key="k", created_at=t(17))])
        history = MemoryFilter(include_history=True)

        def hops(seed: str, flt: MemoryFilter) -> list[tuple[str, str, str]]:
            return [(s, kind, m.id) for s, kind, m in store.linked_memories([seed], flt, NOW)]

        assert hops("b", history) == [("b", "supersedes", "a")]
        assert hops("a", history) == [("a", "supersedes", "b")]
        assert hops("b", MemoryFilter()) == []  # "a" is superseded: not live
        store.delete_memory("b", t(18))
        assert hops("a", history) == []
        assert store.linked_memories([], history, NOW) == []

    def test_adjacent_memories_are_the_sessions_nearest_visible_ones(self, store: Store) -> None:
        turns = [memory(f"t{i}", f"turn {i}", source_session_id="s1") for i in range(4)]
        # the second session's turn and a note of no session are captured in between
        store.add_memories([*turns[:2], memory("o", "other", source_session_id="s2")])
        store.add_memories([memory("n", "note"), *turns[2:]])

        def adjacent(ids: list[str], flt: MemoryFilter | None = None) -> set[tuple[str, str]]:
            found = store.adjacent_memories(ids, flt or MemoryFilter(), NOW)
            return {(seed, m.id) for seed, m in found}

        assert adjacent(["t0"]) == {("t0", "t1")}
        assert adjacent(["t1", "t3"]) == {("t1", "t0"), ("t1", "t2"), ("t3", "t2")}
        assert adjacent(["o", "n", "missing"]) == set()  # alone in its session; no session
        assert store.adjacent_memories([], MemoryFilter(), NOW) == []
        # a neighbour the filter does not see is left out, not skipped over
        store.delete_memory("t2", t(17))
        assert adjacent(["t1", "t3"]) == {("t1", "t0")}
        assert adjacent(["t0"], MemoryFilter(layers=("working",))) == set()
        assert [m.content for _, m in store.adjacent_memories(["t0"], MemoryFilter(), NOW)] == [
            "turn 1"
        ]

    def test_embeddings_round_trip(self, store: Store) -> None:
        store.add_memories([memory("a", "x"), memory("b", "y")])
        store.save_embeddings("m", [("a", 2, b"\x00\x00\x80?\x00\x00\x00\x00")])
        assert store.embedding_vectors("m", MemoryFilter(), NOW) == [
            ("a", b"\x00\x00\x80?\x00\x00\x00\x00")
        ]
        assert store.embedding_vectors("other", MemoryFilter(), NOW) == []
        store.save_embeddings("m", [("a", 1, b"\x00\x00\x00@")])  # a new vector replaces
        assert store.embedding_vectors("m", MemoryFilter(), NOW) == [("a", b"\x00\x00\x00@")]
        # what an embedder set later backfills: the memories without a vector of its model
        assert [m.id for m in store.memories_without_embedding("m", limit=10)] == ["b"]
        assert [m.id for m in store.memories_without_embedding("other", limit=1)] == ["a"]

    def test_embedding_vectors_in_scope_in_insertion_order(self, store: Store) -> None:
        store.add_memories(
            [
                memory("z", "global, first"),
                memory("api", "api's", scope="project", project="api"),
                memory("web", "web's", scope="project", project="web"),
                memory("work", "working", layer="working"),
                memory("gone", "deleted"),
                memory("a", "global"),
            ]
        )
        store.add_memories([memory("old", "v1", upsert_key="k")])
        store.add_memories([memory("new", "v2", upsert_key="k", created_at=t(17))])  # supersedes
        store.delete_memory("gone", t(17))
        ids = ["a", "api", "gone", "new", "old", "web", "work", "z"]
        store.save_embeddings("m", [(mid, 1, mid.encode()[:4].ljust(4, b"\0")) for mid in ids])

        def vectors(**scope: Any) -> list[str]:
            found = store.embedding_vectors("m", MemoryFilter(**scope), NOW)
            assert all(blob == mid.encode()[:4].ljust(4, b"\0") for mid, blob in found)
            return [mid for mid, _ in found]

        assert vectors() == ["z", "work", "a", "new"]
        assert vectors(project="api") == ["z", "api", "work", "a", "new"]
        assert vectors(layers=("long_term",)) == ["z", "a", "new"]
        assert vectors(include_history=True) == ["z", "work", "a", "old", "new"]

    def test_memories_by_id_in_scope_in_insertion_order(self, store: Store) -> None:
        store.add_memories(
            [
                memory("z", "global"),
                memory("api", "api's", scope="project", project="api"),
                memory("work", "working", layer="working"),
                memory("gone", "deleted"),
                memory("a", "global too", tags=("t",)),
            ]
        )
        store.delete_memory("gone", t(17))
        everything = ["a", "gone", "missing", "api", "work", "z"]

        def by_id(ids: list[str], **scope: Any) -> list[str]:
            return [m.id for m in store.memories_by_id(ids, MemoryFilter(**scope), NOW)]

        assert by_id(everything) == ["z", "work", "a"]
        assert by_id(everything, project="api") == ["z", "api", "work", "a"]
        assert by_id(everything, layers=("working",)) == ["work"]
        assert by_id(["a", "z"], tags=("t",)) == ["a"]
        assert by_id([]) == []
        found = store.memories_by_id(["a"], MemoryFilter(), NOW)
        assert found == [store.get_memory("a")]  # whole memories, as stored

    def test_memories_by_id_of_more_ids_than_a_statement_takes(self, store: Store) -> None:
        # SQLite builds before 3.32 take 999 parameters a statement (this one is set so): the
        # lookup goes in chunks and still gives each memory once, by seq, whatever the order
        # and repeats of the ids.
        if isinstance(store, SQLiteStore):
            store.connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
        store.add_memories([memory(f"m{i:04}", f"memory {i}") for i in range(1200)])
        ids = [f"m{i:04}" for i in reversed(range(1200))] + ["m0007", "none"]
        found = store.memories_by_id(ids, MemoryFilter(), NOW)
        assert [m.id for m in found] == [f"m{i:04}" for i in range(1200)]

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

    def test_captures_per_day_count_sessions_and_events_from_a_day_on(self, store: Store) -> None:
        for i, at in enumerate([t(15, 23), t(16, 9), t(16, 10), t(18, 1)]):
            store.append_session_event(
                SessionEvent(f"e{i}", f"s{i % 2}", "user", "message", "hi", 1, i, True, at)
            )
        store.save_session(session("s0", t(17, 8)))
        assert store.captures_per_day("2026-02-16") == [
            ("2026-02-16", 0, 2),
            ("2026-02-17", 1, 0),
            ("2026-02-18", 0, 1),
        ]
        assert store.captures_per_day("2026-02-19") == []

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
        assert store.list_checkpoints("s1", limit=1) == [second]
        assert store.bump_checkpoint_count("s1", t(16, 10)) == 1
        assert store.bump_checkpoint_count("s1", t(16, 11)) == 2
        assert store.bump_checkpoint_count("missing", t(16)) == 0

    def test_a_checkpoint_belongs_to_the_task_of_its_session_when_written(
        self, store: Store
    ) -> None:
        store.save_session(session("s1", t(16, 9), task_slug="feat-a"))
        store.save_session(session("s2", t(16, 8), task_slug="feat-a"))
        store.save_session(session("s3", t(16, 7), task_slug="feat-b"))
        store.save_session(session("s4", t(16, 6)))
        made = [
            Checkpoint(f"c{i}", sid, t(16, 10 + i), "manual", f"n{i}")
            for i, sid in enumerate(("s1", "s3", "s2", "s4"))
        ]
        for checkpoint in made:
            store.save_checkpoint(checkpoint)
        assert store.task_checkpoints("feat-a") == [made[0], made[2]]
        assert store.task_checkpoints("feat-a", limit=1) == [made[0]]
        assert store.task_checkpoints("feat-b") == [made[1]]
        assert store.task_checkpoints("nothing") == []
        assert store.get_checkpoint("c2") == made[2] and store.get_checkpoint("zz") is None
        assert [s.session_id for s in store.task_sessions("feat-a")] == ["s2", "s1"]
        assert store.task_sessions("feat-a", limit=1)[0].session_id == "s2"
        assert store.task_sessions("nothing") == []

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


class HygieneStoreContract:
    """Consolidation, stale/review listings, procedures and job leases of the ``Store``."""

    def test_consolidation_candidates_are_live_newest_first(self, store: Store) -> None:
        store.add_memories(
            [
                memory("old", "a", created_at=t(10)),
                memory("new", "b", created_at=t(12)),
                memory("gone", "c", created_at=t(11), deleted_at=t(13)),
            ]
        )
        with store.transaction():
            found = store.consolidation_candidates(MemoryFilter(), NOW, limit=10)
        assert [m.id for m in found] == ["new", "old"]
        assert [m.id for m in store.consolidation_candidates(MemoryFilter(), NOW, limit=1)] == [
            "new"
        ]

    def test_supersede_only_a_live_memory_and_link_it(self, store: Store) -> None:
        store.add_memories([memory("a", "tabs"), memory("b", "spaces")])
        assert store.supersede_memory("a", "b", t(17)) is True
        old = store.get_memory("a")
        assert old is not None and (old.superseded_by, old.superseded_at) == ("b", t(17))
        assert [(lk.from_id, lk.to_id, lk.kind) for lk in store.memory_links("a")] == [
            ("b", "a", "supersedes")
        ]
        assert store.supersede_memory("a", "b", t(18)) is False  # a lost race changes nothing
        assert store.get_memory("a") == old

    def test_memory_conflicts_lists_pairs_both_visible(self, store: Store) -> None:
        store.add_memories(
            [memory("x", "dark mode"), memory("y", "light mode"), memory("z", "contrast")]
        )
        store.add_memory_link(MemoryLink("y", "x", "conflicts", t(16, 1)))
        store.add_memory_link(MemoryLink("y", "x", "conflicts", t(16, 2)))  # stored once
        store.add_memory_link(MemoryLink("z", "x", "relates", t(16, 1)))
        pairs = store.memory_conflicts(MemoryFilter(), NOW, limit=10)
        assert [(a.id, b.id) for a, b in pairs] == [("y", "x")]
        store.delete_memory("x", t(16, 3))
        assert store.memory_conflicts(MemoryFilter(), NOW, limit=10) == []

    def test_stale_memories_by_last_confirmation(self, store: Store) -> None:
        store.add_memories(
            [
                memory("never", "a"),  # updated t(16), never confirmed
                memory("confirmed", "b", last_confirmed_at=t(16, 8)),
                memory("older", "c", last_confirmed_at=t(14)),
            ]
        )
        assert [m.id for m in store.stale_memories(MemoryFilter(), NOW, t(16, 1), limit=10)] == [
            "older",
            "never",
        ]
        assert store.stale_memories(MemoryFilter(), NOW, t(13), limit=10) == []

    def test_consolidation_runs_round_trip_newest_first(self, store: Store) -> None:
        runs = [
            ConsolidationRun(
                id=f"run{i}",
                scope="project",
                project="api",
                user_id=None,
                mode=mode,
                input_count=5,
                candidate_count=1,
                promoted_count=1,
                merged_count=2,
                superseded_count=1,
                conflicted_count=0,
                model="rules",
                created_at=t(16, i),
                metadata={"actions": [{"kind": "merge"}]},
            )  # fmt: skip
            for i, mode in enumerate(("shadow", "apply"))
        ]
        for run in runs:
            store.save_consolidation_run(run)
        assert store.list_consolidation_runs(limit=10) == runs[::-1]
        assert store.list_consolidation_runs(limit=1) == [runs[1]]

    def test_procedures_upsert_by_key_and_rank_by_use(self, store: Store) -> None:
        first = Procedure(
            "p1", "release", "Release", ("bump", "tag"), scope="project", project="api",
            created_at=t(16), updated_at=t(16),
        )  # fmt: skip
        other = Procedure("p2", "deploy", "Deploy", ("make deploy",), created_at=t(16),
                          updated_at=t(16))  # fmt: skip
        assert store.save_procedure(first) == first
        store.save_procedure(other)
        assert store.record_procedure_use("p1", t(17)) is True
        again = replace(first, id="p9", steps=("bump", "tag", "push"), updated_at=t(18))
        stored = store.save_procedure(again)
        assert (stored.id, stored.steps, stored.usage_count) == ("p1", again.steps, 1)
        assert store.get_procedure("p1") == stored
        assert [p.id for p in store.list_procedures("api", None)] == ["p1", "p2"]
        assert [p.id for p in store.list_procedures("web", None)] == ["p2"]
        assert store.delete_procedure("p1", t(19)) is True
        assert store.record_procedure_use("p1", t(19)) is False
        assert [p.id for p in store.list_procedures("api", None)] == ["p2"]

    def test_job_lease_is_held_by_one_owner_until_it_expires(self, store: Store) -> None:
        assert store.claim_job("archive", "w1", t(16), t(16, 0, 5)) is True
        assert store.claim_job("archive", "w2", t(16, 0, 1), t(16, 0, 6)) is False
        assert store.finish_job("archive", "w2", t(16, 0, 2), "ok", {}) is False
        assert store.finish_job("archive", "w1", t(16, 0, 2), "ok", {"archived": 3}) is True
        assert store.claim_job("archive", "w2", t(16, 0, 3), t(16, 0, 8)) is True
        # w2 crashed holding the lease: it expires, then anyone may take it.
        assert store.claim_job("archive", "w3", t(16, 0, 9), t(16, 0, 14)) is True
        (job,) = store.list_jobs()
        assert (job.name, job.owner, job.last_status) == ("archive", "w3", "ok")
        assert job.last_detail == {"archived": 3}
