"""MemoryService on a real SQLite file: layers, TTL, upsert, scope, search, context."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from cortex.clock import FixedClock, parse_time
from cortex.config import Config
from cortex.core.memory_models import MemoryFilter, MemoryLink
from cortex.core.retrieval import NEIGHBOUR_SHARE
from cortex.core.transcripts import format_checkpoint
from cortex.errors import ConflictError, NotFoundError, ValidationError
from cortex.services.compaction import CompactionService
from cortex.services.memory import MAX_CONTENT_BYTES, MemoryService, NewMemory
from cortex.services.sessions.manager import SessionPersistenceManager
from cortex.store import SQLiteStore
from cortex.store.protocol import Store


@pytest.fixture
def svc(make_config: Callable[..., Config], clock: FixedClock, tmp_path: Path) -> MemoryService:
    return MemoryService(SQLiteStore(tmp_path / "brain.db"), make_config(), clock)


def contents(items: list) -> list[str]:  # type: ignore[type-arg]
    return [getattr(i, "memory", i).content for i in items]


# -- add: layers, defaults, TTL ----------------------------------------------------------------
def test_defaults_and_rule_backfill(svc: MemoryService) -> None:
    plain = svc.add("prefers tabs").memory
    assert (plain.layer, plain.type, plain.scope, plain.project, plain.expires_at) == (
        "long_term",
        "note",
        "global",
        None,
        None,
    )
    rule = svc.add("always run make check", type="rule").memory
    assert (rule.layer, rule.type) == ("rule", "rule")
    assert svc.add("no force pushes", layer="rule").memory.type == "rule"


def test_working_memory_gets_the_configured_ttl(
    make_config: Callable[..., Config], clock: FixedClock, tmp_path: Path
) -> None:
    svc = MemoryService(SQLiteStore(tmp_path / "b.db"), make_config(), clock)
    assert svc.add("a", layer="working").memory.expires_at == "2026-02-17T09:00:00.000000Z"
    short = MemoryService(svc.store, make_config(working_memory_ttl_hours=2), clock)
    assert short.add("b", layer="working").memory.expires_at == "2026-02-16T11:00:00.000000Z"


def test_expired_working_memory_is_never_returned(svc: MemoryService, clock: FixedClock) -> None:
    svc.add("debugging the flaky auth test", layer="working")
    assert contents(svc.list(layer="working")) == ["debugging the flaky auth test"]
    clock.advance(hours=25)
    assert svc.list(layer="working") == []
    with pytest.raises(ValidationError):
        svc.search("")
    assert svc.search("flaky auth") == []
    assert svc.get_context("auth", mode="working").memories == ()
    assert len(svc.list(layer="working", include_history=True)) == 1


def test_explicit_intent_is_long_term_and_confirmed(svc: MemoryService) -> None:
    m = svc.add("my name is Ana", remember_intent="explicit").memory
    assert (m.layer, m.remember_intent, m.last_confirmed_at) == (
        "long_term",
        "explicit",
        "2026-02-16T09:00:00.000000Z",
    )


def test_memory_in_a_session_belongs_to_its_project(
    svc: MemoryService, make_config: Callable[..., Config], clock: FixedClock
) -> None:
    manager = SessionPersistenceManager(svc.store, make_config(), clock)
    manager.on_session_start("s1", project="api")
    m = svc.add("the api uses JWT", session_id="s1").memory
    assert (m.scope, m.project, m.source_session_id) == ("project", "api", "s1")
    assert contents(svc.list(session_id="s1", project="api")) == ["the api uses JWT"]
    assert contents(svc.list(session_id="s1")) == ["the api uses JWT"]  # the session's project


def test_a_memory_from_an_unknown_session_is_refused_not_stored_as_global(
    svc: MemoryService,
) -> None:
    with pytest.raises(NotFoundError) as err:
        svc.add("the api uses JWT", session_id="nope")
    assert str(err.value) == "no session 'nope'; see `cortex session list`"
    assert svc.list(all_projects=True) == []


# -- bad input -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"content": ""}, "memory content is empty; give the text to store"),
        ({"content": "   \n"}, "memory content is empty; give the text to store"),
        ({"content": "x", "layer": "short"}, "unknown layer 'short'; use one of rule, working"),
        ({"content": "x", "scope": "team"}, "unknown scope 'team'; use global or project"),
        ({"content": "x", "scope": "project"}, "scope project needs a project"),
        ({"content": "x", "confidence": 1.5}, "confidence 1.5 is out of range; use 0-1"),
        ({"content": "x", "remember_intent": "maybe"}, "unknown remember_intent 'maybe'"),
        ({"content": "x", "type": "a b"}, "invalid memory type 'a b'"),
        ({"content": "x", "session_id": "../etc"}, "invalid session id"),
        ({"content": "x", "expires_at": "tomorrow"}, "not an ISO 8601 time"),
        (
            {"content": "x", "layer": "working", "expires_at": "2020-01-01T00:00:00Z"},
            "expires_at '2020-01-01T00:00:00Z' is not in the future; give a later time, or "
            "leave it out",
        ),
        ({"content": "x", "expires_at": "2026-02-16T09:00:00Z"}, "expires_at '2026-02-16T09:00"),
        ({"content": "x", "type": "ghp_" + "a1B2" * 9}, "that memory type looks like a credential"),
        ({"content": "x", "user_id": "u\x00"}, "user id '.+' holds a NUL or a lone surrogate"),
    ],
)
def test_bad_input_is_one_clear_error(svc: MemoryService, kwargs: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValidationError, match="^" + message.replace("(", r"\(")):
        svc.add(**kwargs)
    assert svc.list(all_projects=True) == []


def test_content_over_the_limit_is_kept_truncated_with_a_marker(svc: MemoryService) -> None:
    stored = svc.add("word " * 200_000).memory.content
    assert len(stored.encode()) <= MAX_CONTENT_BYTES
    assert stored.startswith("word word")
    head, marker = stored.rsplit("\n", 1)
    assert marker == f"[truncated: 999,999 bytes, the first {len(head):,} kept]"
    exact = svc.add("b" * MAX_CONTENT_BYTES).memory
    assert svc.get(exact.id).content == "b" * MAX_CONTENT_BYTES


def test_truncation_never_splits_a_character_or_leaves_half_a_secret(svc: MemoryService) -> None:
    secret = "sk-" + "a1B2" * 10
    text = "é" * (MAX_CONTENT_BYTES // 2 - 10) + f" api_key={secret} " + "z" * 1000
    stored = svc.add(text).memory.content
    assert len(stored.encode()) <= MAX_CONTENT_BYTES
    assert "a1B2" not in stored
    assert "[truncated: " in stored


def test_secrets_are_redacted_before_storage(svc: MemoryService, tmp_path: Path) -> None:
    svc.add("prod key: api_key=sk-abcdefghijklmnopqrstuvwxyz123456 ok", tags="x")
    raw = sqlite3.connect(tmp_path / "brain.db").execute("SELECT content FROM memories").fetchall()
    assert raw == [("prod key: api_key=[REDACTED] ok",)]
    assert svc.search("sk-abcdefghijklmnopqrstuvwxyz123456") == []


def test_a_batch_stores_every_valid_item_and_reports_the_others(svc: MemoryService) -> None:
    big = "turn " * 16_000  # 80 KB: stored truncated, not refused
    batch = svc.add_many(
        [NewMemory("fine"), NewMemory("", layer="rule"), NewMemory(big), NewMemory("x", type="a b")]
    )
    assert [r.memory.content for r in batch][0] == "fine"
    assert "[truncated: 79,999 bytes" in batch[1].memory.content
    assert [e.to_dict() for e in batch.errors] == [
        {"index": 1, "error": "memory content is empty; give the text to store"},
        {"index": 3, "error": "invalid memory type 'a b'; use 1-64 letters, digits, - or _"},
    ]
    assert len(svc.list()) == 2
    assert svc.add_many([NewMemory(" ")]).added == ()


def test_nul_and_lone_surrogates_are_stored_as_replacement_characters(
    store: Store, make_config: Callable[..., Config], clock: FixedClock
) -> None:
    # A lone surrogate (JSON's "\ud83d", a string cut inside an emoji) failed the whole batch
    # on every backend, since UTF-8 cannot encode it, and a NUL failed it on PostgreSQL.
    svc = MemoryService(store, make_config(), clock)
    cut = NewMemory("cut \ud83d emoji", tags=["t\ud800", "n\x00l"], upsert_key="k\udfff",
                    project="p\x00")  # fmt: skip
    batch = svc.add_many([
        NewMemory("good"), cut, NewMemory("a\x00b and \ud83d\ude00"),
        NewMemory("someone's", user_id="u\ud800"), NewMemory("also good"),
    ])  # fmt: skip
    assert [r.memory.content for r in batch] == [
        "good", "cut \ufffd emoji", "a\ufffdb and \U0001f600", "also good",
    ]  # fmt: skip
    stored = svc.get(batch[1].memory.id)
    assert (stored.tags, stored.upsert_key, stored.project) == (
        ("t\ufffd", "n\ufffdl"), "k\ufffd", "p\ufffd",
    )  # fmt: skip
    assert [e.index for e in batch.errors] == [3]
    assert [m.memory.content for m in svc.search("emoji", project="p\ufffd")] == [
        "cut \ufffd emoji"
    ]
    edited = svc.edit(stored.id, content="fixed \udc00 again")
    assert svc.get(edited.id).content == "fixed \ufffd again"


# -- upsert ----------------------------------------------------------------------------------
def test_upsert_keeps_one_current_truth_with_history(svc: MemoryService) -> None:
    first = svc.add("deploys go to eu-west-1", project="api", upsert_key="region").memory
    second = svc.add("deploys go to us-east-2", project="api", upsert_key="region")
    assert second.superseded_id == first.id
    assert contents(svc.list(project="api")) == ["deploys go to us-east-2"]
    old = svc.get(first.id)
    assert (old.superseded_by, old.superseded_at) == (second.memory.id, second.memory.created_at)
    links = svc.store.memory_links(second.memory.id)
    assert [(lk.from_id, lk.to_id, lk.kind) for lk in links] == [
        (second.memory.id, first.id, "supersedes")
    ]
    audit = svc.store.list_audit()[0]
    assert (audit.action, audit.target, audit.detail["superseded"]) == (
        "memory.supersede",
        second.memory.id,
        first.id,
    )
    assert contents(svc.search("deploys region")) == []  # global scope sees no api memory
    assert contents(svc.search("deploys", project="api")) == ["deploys go to us-east-2"]


def test_upsert_is_per_scope_project_user_and_type(svc: MemoryService) -> None:
    svc.add("global truth", upsert_key="k")
    svc.add("api truth", project="api", upsert_key="k")
    svc.add("web truth", project="web", upsert_key="k")
    svc.add("ana's truth", upsert_key="k", user_id="ana")
    svc.add("a preference", upsert_key="k", type="preference")
    assert len(svc.list(all_projects=True)) == 5
    svc.add("global truth 2", upsert_key="k")
    assert sorted(contents(svc.list(all_projects=True))) == [
        "a preference",
        "ana's truth",
        "api truth",
        "global truth 2",
        "web truth",
    ]


def test_upserts_in_one_batch_apply_in_order(svc: MemoryService) -> None:
    results = svc.add_many([NewMemory(f"v{i}", upsert_key="k") for i in range(5)])
    assert [r.superseded_id for r in results] == [None] + [r.memory.id for r in results[:-1]]
    assert contents(svc.list()) == ["v4"]


def test_a_large_batch_with_repeated_keys_keeps_the_chain(svc: MemoryService) -> None:
    """Over a thousand rows (several INSERT statements): a stored truth replaced, then
    replaced again within the batch; each replaced row says by whom, with one link each."""
    stored = svc.add("v-stored", project="api", upsert_key="k").memory
    items = [NewMemory(f"plain {i}", project="api") for i in range(1200)]
    items[10:10] = [NewMemory(f"v{i}", project="api", upsert_key="k") for i in range(3)]
    results = svc.add_many(items)
    chain = [r.memory for r in results if r.memory.upsert_key == "k"]
    assert [r.superseded_id for r in results if r.memory.upsert_key == "k"] == [
        stored.id,
        chain[0].id,
        chain[1].id,
    ]
    assert svc.store.count_memories(MemoryFilter(project="api"), svc.now_iso()) == 1201
    assert [svc.get(m.id).superseded_by for m in (stored, *chain)] == [
        chain[0].id,
        chain[1].id,
        chain[2].id,
        None,
    ]
    links = [(lk.from_id, lk.to_id) for m in chain for lk in svc.store.memory_links(m.id)]
    assert sorted(set(links)) == sorted(
        [(chain[0].id, stored.id), (chain[1].id, chain[0].id), (chain[2].id, chain[1].id)]
    )
    assert contents(svc.search("v2", project="api")) == ["v2"]
    assert len(svc.search("plain", project="api", limit=50)) == 50


def test_one_live_truth_is_a_database_invariant(svc: MemoryService, tmp_path: Path) -> None:
    svc.add("one", upsert_key="k")
    conn = sqlite3.connect(tmp_path / "brain.db")
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(
            "INSERT INTO memories (id, content, scope, upsert_key, type, created_at, updated_at) "
            "VALUES ('x', 'two', 'global', 'k', 'note', 't', 't')"
        )


def test_edit_into_a_taken_key_is_a_conflict(svc: MemoryService) -> None:
    svc.add("one", upsert_key="k")
    other = svc.add("two").memory
    # The message named the store's index ("idx_memories_upsert_live"), not the key.
    with pytest.raises(ConflictError, match=r"^upsert key 'k' is held by another live note memo"):
        svc.edit(other.id, upsert_key="k")
    assert svc.get(other.id).upsert_key is None


def test_an_expired_memory_cannot_be_edited_back_to_life(
    svc: MemoryService, clock: FixedClock
) -> None:
    m = svc.add("debugging the flaky auth test", layer="working").memory
    clock.advance(hours=25)
    # Moving it to long_term cleared its expiry: an expired working memory came back.
    with pytest.raises(NotFoundError, match=rf"^memory {m.id} expired at 2026-02-17T09:00:00"):
        svc.edit(m.id, layer="long_term")
    assert svc.list() == []


# -- edit and forget -------------------------------------------------------------------------
def test_edit_changes_in_place_and_reindexes(svc: MemoryService, clock: FixedClock) -> None:
    m = svc.add("uses postgres", tags="db").memory
    clock.advance(hours=1)
    edited = svc.edit(m.id, content="uses sqlite", confidence=0.5, tags="db,local", actor="cli")
    assert (edited.content, edited.confidence, edited.tags) == ("uses sqlite", 0.5, ("db", "local"))
    assert edited.updated_at == "2026-02-16T10:00:00.000000Z"
    assert contents(svc.search("sqlite")) == ["uses sqlite"]
    assert svc.search("postgres") == []
    assert svc.store.list_audit()[0].detail == {
        "changed": ["confidence", "content", "tags", "updated_at"]
    }


def test_edit_to_working_sets_an_expiry(svc: MemoryService) -> None:
    m = svc.add("scratch note").memory
    assert svc.edit(m.id, layer="working").expires_at == "2026-02-17T09:00:00.000000Z"


def test_a_layer_edit_keeps_an_explicit_expiry_and_drops_the_working_ttl(
    svc: MemoryService,
) -> None:
    # Moving long_term -> rule reset an expiry given at add time to the rule layer's none.
    later = "2026-03-01T00:00:00.000000Z"
    m = svc.add("freeze merges until the release", expires_at=later).memory
    assert svc.edit(m.id, layer="rule").expires_at == later
    assert svc.edit(m.id, layer="working").expires_at == later
    # A working memory's expiry is its layer's TTL: moving it out makes the note permanent.
    note = svc.add("the flaky test is a race", layer="working").memory
    assert note.expires_at == "2026-02-17T09:00:00.000000Z"
    assert svc.edit(note.id, layer="long_term").expires_at is None


@pytest.mark.parametrize("call", ["list", "search"])
@pytest.mark.parametrize("name", ["session_id", "user_id"])
def test_an_empty_session_or_user_id_is_refused_not_taken_for_every_one(
    svc: MemoryService, call: str, name: str
) -> None:
    # An empty id (an unset variable) dropped the filter: every session's or user's memories.
    svc.add("deploy notes")
    args = ("deploy",) if call == "search" else ()
    with pytest.raises(ValidationError, match=rf"^`{name}` is empty; omit it for the memories"):
        getattr(svc, call)(*args, **{name: ""})


@pytest.mark.parametrize("offset", [-1, 10**9 + 1, 2**63])
def test_an_offset_out_of_range_is_one_clear_error(svc: MemoryService, offset: int) -> None:
    # 2**63 reached SQLite, which answered "Python int too large to convert to SQLite INTEGER".
    with pytest.raises(ValidationError, match=rf"^offset {offset} is out of range; use 0-1,000,"):
        svc.list(offset=offset)
    assert svc.list(offset=10**9) == []


def test_forget_is_soft_and_final(svc: MemoryService, tmp_path: Path) -> None:
    m = svc.add("temporary fact").memory
    gone = svc.forget(m.id)
    assert gone.deleted_at == "2026-02-16T09:00:00.000000Z"
    assert svc.list() == [] and svc.search("temporary") == []
    assert svc.get(m.id).deleted_at is not None  # the row is kept
    with pytest.raises(NotFoundError, match="already forgotten"):
        svc.forget(m.id)
    with pytest.raises(NotFoundError, match="was forgotten"):
        svc.edit(m.id, content="again")
    with pytest.raises(NotFoundError, match="no memory 'nope'"):
        svc.forget("nope")


# -- scope -----------------------------------------------------------------------------------
def test_a_project_sees_its_own_and_global_never_another(svc: MemoryService) -> None:
    svc.add("global: use UTC everywhere")
    svc.add("api: tokens expire in 1h", project="api")
    svc.add("web: tokens live in cookies", project="web")
    assert sorted(contents(svc.search("tokens UTC", project="api"))) == [
        "api: tokens expire in 1h",
        "global: use UTC everywhere",
    ]
    assert contents(svc.search("tokens", project="web")) == ["web: tokens live in cookies"]
    assert contents(svc.search("tokens UTC")) == ["global: use UTC everywhere"]
    assert len(svc.list(all_projects=True)) == 3


def test_user_scope(svc: MemoryService) -> None:
    svc.add("shared fact about builds")
    svc.add("ana likes dark mode builds", user_id="ana")
    svc.add("bo likes light mode builds", user_id="bo")
    assert sorted(contents(svc.search("builds", user_id="ana"))) == [
        "ana likes dark mode builds",
        "shared fact about builds",
    ]


# -- search ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "query",
    ['"', "*", "NEAR", "-", "a AND OR NOT b", 'foo" OR "bar', "col:umn", "(", "^x", "lumen-11"],
)
def test_fts_syntax_characters_are_literal(svc: MemoryService, query: str) -> None:
    svc.add("lumen-11 crashed under load NEAR the gateway, a AND b")
    svc.search(query)  # never raises a syntax error


def test_hyphenated_and_natural_language_queries_find_memories(svc: MemoryService) -> None:
    svc.add("Fixed a bug in lumen-11 where redis broke starlette under load")
    svc.add("Decided to use trio for beacon-7")
    assert contents(svc.search("any problems with redis in lumen-11 recently?")) == [
        "Fixed a bug in lumen-11 where redis broke starlette under load"
    ]
    assert contents(svc.search("what did we decide for beacon-7?"))[0].startswith("Decided")


def test_search_ranks_by_relevance_and_honours_layer(svc: MemoryService) -> None:
    svc.add("auth uses JWT tokens signed with RS256")
    svc.add("auth middleware")
    svc.add("working on JWT rotation", layer="working")
    assert contents(svc.search("JWT RS256 auth"))[0] == "auth uses JWT tokens signed with RS256"
    assert contents(svc.search("JWT", layer="working")) == ["working on JWT rotation"]
    assert "working on JWT rotation" not in contents(svc.search("JWT", layer="long_term"))


def test_stemming_matches_word_forms(svc: MemoryService) -> None:
    svc.add("we are deploying the service nightly")
    assert contents(svc.search("deployment deploys")) == ["we are deploying the service nightly"]


def test_like_fallback_when_full_text_finds_nothing(svc: MemoryService) -> None:
    svc.add("kubernetes cluster config")
    hits = svc.search("bernete")  # a fragment: no FTS token matches it
    assert contents(hits) == ["kubernetes cluster config"]
    assert hits[0].why == "text contains 'bernete'"


def test_fallback_applies_the_same_filters(svc: MemoryService) -> None:
    svc.add("kubernetes in api", project="api")
    svc.add("kubernetes working", layer="working")
    assert contents(svc.search("bernete", layer="working")) == ["kubernetes working"]
    assert contents(svc.search("bernete", project="web", layer="long_term")) == []


def test_graph_expansion_adds_linked_memories_one_hop(svc: MemoryService) -> None:
    a = svc.add("the payment service calls stripe").memory
    b = svc.add("retries are capped at three").memory
    c = svc.add("ledger reconciliation runs hourly").memory
    svc.store.add_memory_link(MemoryLink(a.id, b.id, "relates", a.created_at))
    svc.store.add_memory_link(MemoryLink(b.id, c.id, "relates", a.created_at))
    hits = svc.search("stripe payment")
    assert contents(hits) == [a.content, b.content]  # one hop only: c is two away
    assert hits[1].why == f"relates link from {a.id}"
    assert hits[1].score == pytest.approx(hits[0].score / 2)
    assert contents(svc.search("stripe payment", expand=False)) == [a.content]
    svc.forget(b.id)
    assert contents(svc.search("stripe payment")) == [a.content]


# -- context ---------------------------------------------------------------------------------
@pytest.fixture
def layered(svc: MemoryService) -> MemoryService:
    svc.add("rule: run make check before commit", type="rule")
    svc.add("working: rotating the JWT signing keys", layer="working")
    svc.add("long term: JWT keys live in vault")
    return svc


@pytest.mark.parametrize(
    ("mode", "memories"),
    [
        ("rules_only", []),
        ("working", ["working: rotating the JWT signing keys"]),
        ("long_term", ["long term: JWT keys live in vault"]),
        ("all", ["working: rotating the JWT signing keys", "long term: JWT keys live in vault"]),
    ],
)
@pytest.mark.parametrize("query", [None, "JWT keys"])
def test_context_modes_follow_the_parity_matrix(
    layered: MemoryService, mode: str, memories: list[str], query: str | None
) -> None:
    result = layered.get_context(query, mode=mode)
    assert contents(list(result.rules)) == ["rule: run make check before commit"]
    assert contents(list(result.memories)) == memories


def test_context_budget_fills_rules_first_then_by_rank(layered: MemoryService) -> None:
    full = layered.get_context("JWT keys")
    rule_cost = full.rules[0].tokens
    first_cost = full.memories[0].tokens
    tight = layered.get_context("JWT keys", budget_tokens=rule_cost + first_cost)
    assert (len(tight.rules), len(tight.memories), tight.dropped) == (1, 1, 1)
    assert tight.used_tokens == rule_cost + first_cost
    assert layered.get_context("JWT keys", budget_tokens=0).rules == ()
    with pytest.raises(ValidationError, match="^`budget_tokens=-1` is negative"):
        layered.get_context("JWT", budget_tokens=-1)
    with pytest.raises(ValidationError, match="unknown mode 'everything'"):
        layered.get_context("JWT", mode="everything")


def test_a_query_of_no_word_finds_the_memories_holding_its_pieces(
    store: Store, make_config: Callable[..., Config], clock: FixedClock
) -> None:
    # "🚀" found nothing: the index holds no emoji, and its substring fallback never ran.
    svc = MemoryService(store, make_config(), clock)
    svc.add("launch day 🚀 went well")
    svc.add("-> next: ship it", layer="working")
    svc.add("nothing to see here")
    assert contents(svc.search("🚀")) == ["launch day 🚀 went well"]
    assert contents(svc.search(" -> ")) == ["-> next: ship it"]
    assert contents(svc.search("->", layer="working")) == ["-> next: ship it"]
    assert svc.search("🎉") == [] and svc.search("🎉 🚀", project="api")[0].why.startswith(
        "text contains '🚀'"
    )
    context = svc.get_context("🚀", mode="long_term")
    assert contents(list(context.memories)) == ["launch day 🚀 went well"]


def test_project_rules_are_not_crowded_out_and_every_rule_left_out_counts(
    store: Store, make_config: Callable[..., Config], clock: FixedClock
) -> None:
    # With 100 global rules, a context took the 100 newest rules in scope: all 30 of the
    # project were left out, and dropped said 0.
    svc = MemoryService(store, make_config(), clock)
    svc.add_many([NewMemory(f"global rule {i}", layer="rule") for i in range(100)])
    clock.advance(seconds=60)
    svc.add_many([NewMemory(f"api rule {i}", layer="rule", project="api") for i in range(30)])
    svc.add_many([NewMemory(f"web rule {i}", layer="rule", project="web") for i in range(5)])
    clock.advance(seconds=60)
    svc.add("a newer global rule", layer="rule")
    context = svc.get_context(mode="rules_only", project="api")
    rules = contents(list(context.rules))
    assert len(rules) == 100 and context.dropped == 31
    assert sorted(rules[:30]) == sorted(f"api rule {i}" for i in range(30))
    assert rules[30:32] == ["a newer global rule", "global rule 99"]  # newest first
    assert "global rule 31" in rules and "global rule 30" not in rules
    everywhere = svc.get_context(mode="rules_only")  # no project: the global ones alone
    assert (len(everywhere.rules), everywhere.dropped) == (100, 1)
    tight = svc.get_context("api", mode="rules_only", project="web", budget_tokens=0)
    assert (tight.rules, tight.dropped) == ((), 106)  # the budget's and the limit's alike
    assert svc.get_context(mode="rules_only", project="web", limit=1).dropped == 6
    assert svc.get_context(mode="rules_only", project="mobile").dropped == 1


def test_a_checkpoint_carries_the_project_rules_first_and_says_how_many_it_left_out(
    store: Store, make_config: Callable[..., Config], clock: FixedClock
) -> None:
    svc = MemoryService(store, make_config(), clock)
    compaction = CompactionService(store, make_config(), clock)
    SessionPersistenceManager(store, make_config(), clock).on_session_start("s1", project="api")
    svc.add_many([NewMemory(f"api rule {i}", layer="rule", project="api") for i in range(3)])
    assert "rules_left_out" not in compaction.checkpoint("s1").state
    clock.advance(seconds=60)
    svc.add_many([NewMemory(f"global rule {i}", layer="rule") for i in range(60)])
    checkpoint = compaction.checkpoint("s1")
    rules = [r["content"] for r in checkpoint.state["rules"]]
    assert len(rules) == 50 and sorted(rules[:3]) == ["api rule 0", "api rule 1", "api rule 2"]
    assert rules[3] == "global rule 59" and checkpoint.state["rules_left_out"] == 13
    text = format_checkpoint(checkpoint)
    assert "- (13 more rules left out; cortex memory list --layer rule)" in text


def test_context_never_returns_superseded_or_expired(svc: MemoryService, clock: FixedClock) -> None:
    svc.add("old rule", type="rule", upsert_key="r")
    svc.add("new rule", type="rule", upsert_key="r")
    svc.add("short lived", layer="working")
    clock.advance(hours=48)
    result = svc.get_context(mode="all")
    assert contents(list(result.rules)) == ["new rule"]
    assert result.memories == ()


def test_context_session_block(
    svc: MemoryService, make_config: Callable[..., Config], clock: FixedClock
) -> None:
    SessionPersistenceManager(svc.store, make_config(), clock).on_session_start("s1", project="api")
    svc.add("api rule", type="rule", project="api")
    result = svc.get_context(session_id="s1", mode="rules_only")
    assert contents(list(result.rules)) == ["api rule"]  # the session's project
    assert result.to_dict()["session"] == {
        "sessionId": "s1",
        "compactionRequired": False,
        "triggerHint": None,
        "latestCheckpointId": None,
        "status": "active",
    }
    with pytest.raises(NotFoundError):
        svc.get_context(session_id="missing")


def test_large_store_planning_keeps_rare_terms_and_bounds_common_ones(
    svc: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cortex.core.retrieval as retrieval

    # Pretend the store is large and "deploy" is common, so planning kicks in on 30 rows.
    # (The SQLite search reads both from ``core.retrieval`` at each call.)
    monkeypatch.setattr(retrieval, "LARGE_STORE", 0)
    monkeypatch.setattr(retrieval, "FREQUENT_DOCS", 5)
    svc.add_many([NewMemory(f"deploy step {i} done") for i in range(20)])
    svc.add("deploy of the zebra service failed")
    hits = svc.search("why did the zebra deploy fail?")
    assert hits[0].memory.content == "deploy of the zebra service failed"
    common = svc.search("deploy done", limit=3)
    assert [h.memory.content for h in common] == [f"deploy step {i} done" for i in (19, 18, 17)]


@pytest.mark.parametrize(
    ("env", "hours"),
    [
        ({}, 24.0),
        ({"MCP_WORKING_MEMORY_TTL_HOURS": "6"}, 6.0),
        ({"MCP_WORKING_MEMORY_TTL_HOURS": "6", "MEMORIES_WORKING_MEMORY_TTL_HOURS": "5"}, 5.0),
        ({"MEMORIES_WORKING_MEMORY_TTL_HOURS": "5", "CORTEX_WORKING_MEMORY_TTL_HOURS": "2"}, 2.0),
    ],
)
def test_working_ttl_env_precedence(home: Path, env: dict[str, str], hours: float) -> None:
    from cortex.config import load_config

    assert load_config(home, env).working_memory_ttl_hours == hours


def test_working_ttl_out_of_range_is_a_config_error(home: Path) -> None:
    from cortex.config import load_config
    from cortex.errors import ConfigError

    with pytest.raises(ConfigError, match="out of range; use a value in 0.01-8760"):
        load_config(home, {"MCP_WORKING_MEMORY_TTL_HOURS": "-1"})


def test_turns_of_one_session_vote_for_each_other(
    svc: MemoryService, make_config: Callable[..., Config], clock: FixedClock
) -> None:
    manager = SessionPersistenceManager(svc.store, make_config(), clock)
    for sid in ("s1", "s2", "s3"):
        manager.on_session_start(sid, project="api")
    svc.add("the deploy window is friday noon", session_id="s1")
    svc.add("we moved the deploy window to friday", session_id="s1")
    svc.add("the deploy window is friday", session_id="s2")
    svc.add("lunch is at noon", session_id="s3")
    ranked = contents(svc.search("deploy window friday", project="api"))
    # alone, the shorter s2 memory matches best; s1's two turns about the window outvote it
    # (each is the other's session fellow and neighbour)
    assert ranked == [
        "the deploy window is friday noon",
        "we moved the deploy window to friday",
        "the deploy window is friday",
    ]
    unvoted = [m.content for m in svc.list(project="api") if m.source_session_id == "s2"]
    assert unvoted == ["the deploy window is friday"]


def test_a_short_turn_brings_the_turns_captured_next_to_it(
    svc: MemoryService, make_config: Callable[..., Config], clock: FixedClock
) -> None:
    manager = SessionPersistenceManager(svc.store, make_config(), clock)
    for sid in ("s1", "s2"):
        manager.on_session_start(sid, project="api")
    question = "Ana: where did the staging cluster move to?"
    answer = "Ben: eu-west-1, last week, with the new load balancer in front"
    turns = ("Ana: morning!", question, answer, "Ben: bye")
    added = svc.add_many([NewMemory(text, session_id="s1") for text in turns])
    note = svc.add("the staging cluster runs kubernetes 1.29", session_id="s2").memory.content
    hits = svc.search("staging cluster", project="api")
    assert contents(hits[:2]) == [note, question]
    # the answer holds no query term: it comes as the short question's neighbour, as does
    # the turn before; "Ben: bye" is two turns away
    why = f"captured next to {added[1].memory.id}"
    assert {h.memory.content: h.why for h in hits[2:]} == {"Ana: morning!": why, answer: why}
    assert [h.score for h in hits[2:]] == pytest.approx([NEIGHBOUR_SHARE * hits[1].score] * 2)
    svc.forget(added[2].memory.id)
    assert contents(svc.search("staging cluster", project="api")) == [
        note,
        question,
        "Ana: morning!",
    ]


def test_a_neighbour_of_another_kind_is_no_context(
    svc: MemoryService, make_config: Callable[..., Config], clock: FixedClock
) -> None:
    SessionPersistenceManager(svc.store, make_config(), clock).on_session_start("s1")
    items = [
        NewMemory("answer in English", type="rule", session_id="s1"),
        NewMemory("the staging db moved to port 6543", session_id="s1"),
        NewMemory("scratch: port check pending", layer="working", session_id="s1"),
        NewMemory("the replica follows it", session_id="s1"),
    ]
    svc.add_many(items)
    # the rule and the working note are captured next to the hit, but are not its kind; the
    # next long-term note is two captures away
    assert contents(svc.search("staging db")) == ["the staging db moved to port 6543"]


def test_a_memory_answering_the_whole_question_outranks_one_rare_word(svc: MemoryService) -> None:
    for text in ["billing", "notes on billing: the staging migration follows the review",
                 "staging is down", "staging again", "staging cache", "the migration script",
                 "a migration guide", "migration notes", "lunch at noon", "the parser refactor",
                 "the parser tests", "the release notes", "the weekly sync",
                 "a review checklist"]:  # fmt: skip
        svc.add(text)
    # by BM25 alone the one-word "billing" (the rarest term, in the shortest memory) comes
    # first, at 0.83 of its relevance; holding one term of three, it keeps 0.6 of its own
    assert contents(svc.search("billing staging migration", limit=2)) == [
        "notes on billing: the staging migration follows the review",
        "billing",
    ]


def test_a_when_question_prefers_the_memory_that_says_when(svc: MemoryService) -> None:
    svc.add("we shipped the parser refactor")
    svc.add("we shipped the parser refactor yesterday")
    assert contents(svc.search("When did we ship the parser refactor?", limit=2)) == [
        "we shipped the parser refactor yesterday",
        "we shipped the parser refactor",
    ]
    # not a question about time: the shorter, equally matching memory stays first
    assert contents(svc.search("ship the parser refactor", limit=2))[0] == (
        "we shipped the parser refactor"
    )


def test_a_memory_about_the_questions_subject_outranks_one_that_names_it(
    svc: MemoryService,
) -> None:
    svc.add("Melanie: Thanks, Caroline! Any career plans after the course?")
    svc.add("Caroline: I want a career in counseling after my course.")
    for text in ["Melanie: the course was fun", "Melanie: lunch at noon", "Melanie: pottery"]:
        svc.add(text)
    # by BM25 both hold "caroline", "career" and "course"; the shorter addressed one leads
    assert contents(svc.search("What career will Caroline choose after the course?", limit=2)) == [
        "Caroline: I want a career in counseling after my course.",
        "Melanie: Thanks, Caroline! Any career plans after the course?",
    ]


def test_a_question_naming_a_date_prefers_what_was_said_that_day(
    svc: MemoryService, clock: FixedClock
) -> None:
    clock.at = parse_time("2026-01-05T10:00:00Z")
    svc.add("we picked a venue for the offsite")
    clock.at = parse_time("2026-01-20T10:00:00Z")
    svc.add("we went to the venue yesterday")
    clock.at = parse_time("2026-02-16T09:00:00Z")
    question = "What happened at the venue on January 5, 2026?"
    assert contents(svc.search(question, limit=2)) == [
        "we picked a venue for the offsite",
        "we went to the venue yesterday",
    ]
    # without the date the newer, equally matching memory leads
    assert contents(svc.search("What happened at the venue?", limit=2))[0] == (
        "we went to the venue yesterday"
    )


def test_a_question_about_last_friday_prefers_what_was_said_that_day(
    svc: MemoryService, clock: FixedClock
) -> None:
    clock.at = parse_time("2026-02-13T18:00:00Z")  # a Friday
    svc.add("started listening to a jazz album")
    clock.at = parse_time("2026-02-15T18:00:00Z")
    svc.add("started listening to a folk album")
    clock.at = parse_time("2026-02-16T09:00:00Z")  # the Monday after
    assert contents(svc.search("Which album did I start listening to last Friday?", limit=1)) == [
        "started listening to a jazz album"
    ]
    assert contents(svc.search("Which album did I start listening to?", limit=1)) == [
        "started listening to a folk album"
    ]


@pytest.mark.parametrize("hybrid", [False, True])
def test_a_longer_search_starts_with_the_ten_a_search_of_ten_gives(
    svc: MemoryService, make_config: Callable[..., Config], clock: FixedClock, hybrid: bool
) -> None:
    from cortex.services.embeddings import HashingEmbedder, embed_and_store

    manager = SessionPersistenceManager(svc.store, make_config(), clock)
    manager.on_session_start("long", project="api")
    # twelve short notes holding the term (no session: no votes), and a session that keeps
    # coming back to it in long turns: the more of its turns a ranking's pool holds, the more
    # they vote for each other
    items = [NewMemory(f"the cache key {i} expires hourly", project="api") for i in range(12)]
    filler = "we also talked about the release notes and the weekend plans of the team at length"
    items += [NewMemory(f"cache {filler} {i}", session_id="long") for i in range(20)]
    svc.add_many(items)
    embedder = HashingEmbedder()
    if hybrid:
        embed_and_store(svc.store, embedder, svc.list(project="api", limit=100))
        svc = MemoryService(svc.store, make_config(), clock, embedder=embedder)
    ten = svc.search("cache", limit=10, project="api")
    forty = svc.search("cache", limit=40, project="api")
    assert [(h.memory.id, h.score, h.why) for h in forty[:10]] == [
        (h.memory.id, h.score, h.why) for h in ten
    ]
    assert len(forty) == 32 == len({h.memory.id for h in forty})  # every match, once
    # what the larger pool alone ranks first (and a search of 40 used to): the session's turns
    flt = svc.scope_filter(project="api")
    meaning = svc._meaning("cache", flt) if hybrid else None
    pooled = svc._ranked("cache", flt, 40, True, meaning)
    assert [h.memory.id for h in pooled[:10]] != [h.memory.id for h in ten]
    assert {h.memory.id for h in forty[10:]} == {h.memory.id for h in pooled} - {
        h.memory.id for h in ten
    }
