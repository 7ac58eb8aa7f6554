"""Consolidation: the pure rules (duplicates, overwrite, conflicts, extraction) and the service
over real stores (the gate: duplicate preference updates collapse to one current truth with an
audit trail), shadow mode, the pluggable extractor and PostgreSQL's row locks."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cortex.clock import FixedClock
from cortex.config import Config
from cortex.core.consolidation import (
    CONFLICT,
    DUPLICATE_CANDIDATE,
    MERGE,
    PROMOTE,
    SUPERSEDE,
    Fingerprint,
    is_duplicate,
    is_related,
    normalized,
    plan_consolidation,
)
from cortex.core.extraction import RuleExtractor, SourceText
from cortex.core.memory_models import Memory, MemoryFilter
from cortex.errors import ConfigError
from cortex.services.app import Services
from cortex.store.protocol import Store

T0 = "2026-02-16T09:00:00Z"
IN_X: dict[str, object] = {"project": "x", "scope": "project"}


def mem(mid: str, content: str, at: str = T0, **fields: object) -> Memory:
    return Memory(id=mid, content=content, created_at=at, updated_at=at, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("a", "b", "duplicate", "related"),
    [
        ("User prefers dark mode.", "user prefers DARK   mode", True, True),
        (
            "The user prefers dark mode in every editor they use",
            "User prefers dark mode in every editor",
            True,
            True,
        ),
        ("User prefers dark mode", "User prefers light mode", False, True),
        ("User prefers dark mode", "User does not prefer dark mode", False, True),
        ("Postgres listens on port 5432", "Postgres listens on port 5433", False, True),
        ("Deploy staging with make deploy", "Run the tests with pytest -q", False, False),
        ("Always run tests before pushing", "Never run tests before pushing", False, True),
    ],
)
def test_duplicate_and_related_table(a: str, b: str, duplicate: bool, related: bool) -> None:
    fa, fb = Fingerprint.of(a), Fingerprint.of(b)
    assert is_duplicate(fa, fb) is duplicate
    assert is_related(fa, fb) is related


@given(st.text(max_size=200), st.text(max_size=200))
def test_similarity_is_symmetric_and_bounded(a: str, b: str) -> None:
    fa, fb = Fingerprint.of(a), Fingerprint.of(b)
    assert is_duplicate(fa, fb) == is_duplicate(fb, fa)
    assert is_duplicate(fa, fa) and normalized(a) == normalized(normalized(a))


def test_duplicates_merge_into_the_explicit_then_newest() -> None:
    plan = plan_consolidation(
        [
            mem("old", "User prefers tabs", "2026-02-10T00:00:00Z", remember_intent="explicit"),
            mem("mid", "user prefers tabs.", "2026-02-11T00:00:00Z"),
            mem("new", "The user prefers tabs", "2026-02-12T00:00:00Z"),
        ]
    )
    merges = {(a.keep_id, a.other_id) for a in plan.of_kind(MERGE)}
    assert merges == {("old", "mid"), ("old", "new")}  # explicit wins over newer implicit
    assert plan.counts()["merged_count"] == 2


def test_newer_explicit_supersedes_and_implicit_only_conflicts() -> None:
    live = [
        mem("a", "User prefers tabs for indentation", "2026-02-10T00:00:00Z"),
        mem("b", "User prefers spaces for indentation", "2026-02-11T00:00:00Z",
            remember_intent="explicit"),
        mem("c", "The editor color theme is dark", "2026-02-11T00:00:00Z", **IN_X),
        mem("d", "The editor color theme is light", "2026-02-12T00:00:00Z", **IN_X),
    ]  # fmt: skip
    plan = plan_consolidation(live)
    assert [(a.kind, a.keep_id, a.other_id) for a in plan.actions] == [
        (SUPERSEDE, "b", "a"),
        (CONFLICT, "d", "c"),
    ]
    # A conflict already linked is not reported again.
    again = plan_consolidation(live, linked=[frozenset(("c", "d"))])
    assert [a.kind for a in again.actions] == [SUPERSEDE]


def test_groups_never_mix_projects_users_or_layers() -> None:
    plan = plan_consolidation(
        [
            mem("p1", "uses postgres 16", scope="project", project="api"),
            mem("p2", "uses postgres 16", scope="project", project="web"),
            mem("u1", "uses postgres 16", user_id="ana"),
            mem("r1", "uses postgres 16", layer="rule"),
        ]
    )
    assert plan.actions == []


def test_candidates_are_promoted_unless_known() -> None:
    live = [mem("m", "We deploy to eu-west-1")]
    candidates = [
        mem("c1", "we deploy to EU-west-1!", "2026-02-17T00:00:00Z"),
        mem("c2", "Staging uses a smaller database", "2026-02-17T00:00:00Z"),
    ]
    plan = plan_consolidation(live, candidates)
    assert [(a.kind, a.keep_id) for a in plan.actions] == [
        (DUPLICATE_CANDIDATE, "c1"),
        (PROMOTE, "c2"),
    ]


def test_rule_extractor_keeps_stated_facts_only() -> None:
    found = RuleExtractor()(
        [
            SourceText("Remember that the API runs on port 8080. How are you?", "s1", "api"),
            SourceText("I prefer pytest over unittest. ok", "s1", "api"),
            SourceText("Should we prefer tabs?", "s1", "api"),
            SourceText("We decided to use PostgreSQL 16", "s1", "api", kind="decision"),
            SourceText("Never push to main directly", "s1", "api"),
        ]
    )
    assert [(c.type, c.content) for c in found] == [
        ("note", "the API runs on port 8080."),
        ("preference", "I prefer pytest over unittest."),
        ("decision", "We decided to use PostgreSQL 16"),
        ("convention", "Never push to main directly"),
    ]


# -- the service -------------------------------------------------------------------------------
def _live(app: Services) -> list[Memory]:
    return app.store.list_memories(MemoryFilter(all_projects=True), app.now_iso(), limit=100)


def test_gate_duplicate_preference_updates_collapse_to_one_truth(
    services: Services, clock: FixedClock
) -> None:
    mem_ = services.memory
    mem_.add("User prefers tabs for indentation", type="preference")
    clock.advance(hours=1)
    mem_.add("The user prefers tabs for indentation.", type="preference")
    clock.advance(hours=1)
    mem_.add("user prefers TABS for indentation", type="preference")
    clock.advance(hours=1)
    spaces = mem_.add("User prefers spaces for indentation", type="preference",
                      remember_intent="explicit").memory  # fmt: skip
    clock.advance(hours=1)

    shadow = services.consolidation.run(dry_run=True, extract=False)
    assert (shadow.run.mode, shadow.run.merged_count, shadow.run.superseded_count) == (
        "shadow", 2, 1,
    )  # fmt: skip
    assert len(_live(services)) == 4  # shadow mode changed nothing

    report = services.consolidation.run(extract=False, actor="test")
    live = _live(services)
    assert [m.id for m in live] == [spaces.id]  # one current truth
    run = report.run
    assert (run.mode, run.input_count, run.merged_count, run.superseded_count) == (
        "apply", 4, 2, 1,
    )  # fmt: skip
    # The audit trail: run rows, supersession links back to the truth, audit entries.
    assert [r.mode for r in services.consolidation.runs()] == ["apply", "shadow"]
    history = services.store.list_memories(MemoryFilter(include_history=True), services.now_iso())
    older = [m for m in history if m.id != spaces.id]
    assert len(older) == 3 and all(m.superseded_at is not None for m in older)
    kinds = {lk.kind for lk in services.memory.links(spaces.id)}
    assert kinds == {"supersedes"}
    audit = services.store.list_audit(limit=20)  # type: ignore[attr-defined]
    assert sum(e.action.startswith("memory.consolidate.") for e in audit) == 3
    # Running again finds nothing more to do.
    assert services.consolidation.run(extract=False).actions == ()
    events = services.metrics.list(event="consolidation_run")
    assert [e.payload["mode"] for e in events] == ["shadow", "apply", "apply"]


def test_conflicting_implicit_truths_are_linked_not_dropped(services: Services,
                                                            clock: FixedClock) -> None:  # fmt: skip
    a = services.memory.add("Production database is postgres 15").memory
    clock.advance(hours=1)
    b = services.memory.add("Production database is postgres 16").memory
    report = services.consolidation.run(extract=False)
    assert report.run.conflicted_count == 1 and {m.id for m in _live(services)} == {a.id, b.id}
    pairs = services.store.memory_conflicts(MemoryFilter(), services.now_iso(), limit=10)
    assert [(x.id, y.id) for x, y in pairs] == [(b.id, a.id)]
    assert services.consolidation.run(extract=False).run.conflicted_count == 0


def test_candidates_from_sessions_are_promoted_once(services: Services, clock: FixedClock) -> None:
    sid = services.sessions.on_session_start(project="api").session_id
    services.events.append(sid, "Remember that staging deploys from the release branch")
    services.compaction.checkpoint(sid, decisions=["We decided to use uv for installs"])
    clock.advance(hours=1)
    report = services.consolidation.run(project="api")
    contents = sorted(m.content for m in _live(services))
    assert contents == ["We decided to use uv for installs",
                        "staging deploys from the release branch"]  # fmt: skip
    assert report.run.promoted_count == 2 and report.run.model == "rules"
    assert all(m.source_session_id == sid for m in _live(services))
    clock.advance(hours=1)
    assert services.consolidation.run(project="api").run.promoted_count == 0


def test_disabled_consolidation_refuses(
    make_config: Callable[..., Config], clock: FixedClock
) -> None:
    with Services.open(make_config(memory_consolidation_enabled=False), clock) as app:
        with pytest.raises(ConfigError, match="memory_consolidation_enabled"):
            app.consolidation.run()


def test_pluggable_extractor(make_config: Callable[..., Config], clock: FixedClock,
                             tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    (tmp_path / "my_extractor.py").write_text(
        textwrap.dedent(
            """
            def extract(sources):
                return [{"content": "facts: " + s.text.upper(), "type": "fact",
                         "session_id": s.session_id} for s in sources]
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with Services.open(make_config(consolidation_extractor="my_extractor:extract"), clock) as app:
        sid = app.sessions.on_session_start(project="api").session_id
        app.events.append(sid, "hello there token sk-ant-api03-" + "a" * 90)
        report = app.consolidation.run()
        (added,) = _live(app)
    assert report.run.model == "my_extractor:extract" and added.type == "fact"
    assert "sk-ant" not in added.content  # candidates are redacted like any memory
    sys.modules.pop("my_extractor", None)


@pytest.mark.parametrize("spec", ["nocolon", "missing_module_xyz:run", "json:nope", ":x"])
def test_bad_extractor_settings_are_one_line_errors(
    make_config: Callable[..., Config], clock: FixedClock, spec: str
) -> None:
    with Services.open(make_config(consolidation_extractor=spec), clock) as app:
        with pytest.raises(ConfigError, match="consolidation_extractor"):
            app.consolidation.run()


def test_postgres_consolidation_skips_rows_another_server_holds(pg_store: Store) -> None:
    from cortex.store.postgres import PostgresStore

    assert isinstance(pg_store, PostgresStore)
    pg_store.add_memories([mem("a", "one"), mem("b", "two", "2026-02-16T10:00:00Z")])
    other = pg_store.for_tenant(pg_store.tenant)
    now = "2026-02-17T00:00:00Z"
    with pg_store.transaction():
        held = pg_store.consolidation_candidates(MemoryFilter(), now, limit=1)
        assert [m.id for m in held] == ["b"]
        with other.transaction():
            seen = other.consolidation_candidates(MemoryFilter(), now, limit=10)
        assert [m.id for m in seen] == ["a"]  # b is locked by the first server: skipped


WORDS = st.sampled_from(
    "user prefers tabs spaces dark light mode port 5432 5433 not deploy".split()
)


@given(
    st.lists(
        st.tuples(
            st.lists(WORDS, min_size=1, max_size=6).map(" ".join),
            st.booleans(),
            st.integers(min_value=0, max_value=5),
        ),
        max_size=12,
    )
)
def test_a_plan_removes_each_memory_once_and_always_leads_to_a_live_one(
    rows: list[tuple[str, bool, int]],
) -> None:
    memories = [
        mem(f"m{i}", text, f"2026-02-1{day}T00:00:00Z",
            remember_intent="explicit" if explicit else "implicit")
        for i, (text, explicit, day) in enumerate(rows)
    ]  # fmt: skip
    plan = plan_consolidation(memories)
    removed = [a.other_id for a in plan.actions if a.kind in (MERGE, SUPERSEDE)]
    assert len(removed) == len(set(removed))
    # Every removed memory leads, through what replaced it, to a live one: no cycle, no loss.
    by = {a.other_id: a.keep_id for a in plan.actions if a.kind in (MERGE, SUPERSEDE)}
    for start in by:
        seen, at = set(), start
        while at in by:
            assert at not in seen
            seen.add(at)
            at = by[at]
    if memories:
        assert len(set(by)) < len(memories)
    counts = plan.counts()
    assert counts["merged_count"] + counts["superseded_count"] == len(removed) <= len(memories)


def test_an_upsert_key_follows_its_fact_and_two_keys_are_two_facts(
    store: Store, make_config: Callable[..., Config], clock: FixedClock
) -> None:
    # A keyed memory merged into an unkeyed duplicate left its key on a superseded row, so the
    # next upsert with the key found no live memory and made a second live truth beside the
    # survivor; and a newer explicit memory superseded one under another key (another fact).
    app = Services(store, make_config(), clock)
    keyed = app.memory.add("Deploys go to eu-west-1", project="api", upsert_key="region").memory
    dev = app.memory.add("api port is 5432", upsert_key="dev-port").memory
    clock.advance(hours=1)
    said = app.memory.add("deploys go to EU-west-1.", project="api",
                          remember_intent="explicit").memory  # fmt: skip
    prod = app.memory.add("api port is 6543", upsert_key="prod-port",
                          remember_intent="explicit").memory  # fmt: skip
    report = app.consolidation.run(extract=False)
    assert sorted((a.kind, a.keep_id, a.other_id) for a in report.actions) == [
        (CONFLICT, prod.id, dev.id), (MERGE, said.id, keyed.id),
    ]  # fmt: skip
    assert app.memory.get(said.id).upsert_key == "region"
    moved = app.memory.add("Deploys go to us-east-2", project="api", upsert_key="region")
    assert moved.superseded_id == said.id
    live = {m.content for m in app.memory.list(project="api")}
    assert live == {"Deploys go to us-east-2", "api port is 5432", "api port is 6543"}
    assert app.consolidation.run(extract=False).actions == ()
    # A person's verdict hands the key on the same way.
    clock.advance(hours=1)
    plain = app.memory.add("api port is 7000").memory
    app.review.prefer(plain.id, prod.id)
    assert app.memory.get(plain.id).upsert_key == "prod-port"
    again = app.memory.add("api port is 7001", upsert_key="prod-port")
    assert again.superseded_id == plain.id
