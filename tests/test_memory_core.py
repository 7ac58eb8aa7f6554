"""The pure core of the memory lifecycle: query building, ranking, budgets, transcripts."""

from __future__ import annotations

import math
import sqlite3
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cortex.core.budgets import compaction_due, fill_budget
from cortex.core.history_models import Checkpoint, SessionEvent
from cortex.core.memory_models import Memory
from cortex.core.retrieval import (
    CONTEXT_WORDS,
    COVERAGE_FULL_WORDS,
    COVERAGE_WEIGHT,
    DATE_BOOST,
    DATED_MEANING_SHARE,
    DENSE_FULL_WORDS,
    DENSE_POOL,
    DENSE_WEIGHT,
    NEIGHBOUR_SEEDS,
    NEIGHBOUR_SHARE,
    STOPWORDS,
    SUBJECT_BOOST,
    TIME_CUE_BOOST,
    asks_when,
    bm25,
    bm25_idf,
    common_sets,
    context_neighbours,
    date_fit,
    dense_bonus,
    dense_closeness,
    dense_pool,
    dense_scores,
    fts_query,
    like_patterns,
    meaning_share,
    mentions_time,
    neighbour_votes,
    normalize_tags,
    query_dates,
    query_fit,
    query_terms,
    rank_score,
    rare_terms,
    recency_factor,
    relevances,
    session_votes,
    term_overlap,
    text_terms,
)
from cortex.core.transcripts import (
    extract_decisions,
    format_checkpoint,
    slugify,
    transcript_markdown,
)

NOW = datetime(2026, 2, 16, 9, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        (
            "When did Caroline go to the LGBTQ support group?",
            ["caroline", "go", "lgbtq", "support", "group"],
        ),
        (
            "any problems with ratelimits in onyx-56 recently?",
            ["problems", "ratelimits", "onyx", "56"],
        ),
        (
            '"quoted" AND OR NEAR(x y) -minus *star',
            ["quoted", "near", "x", "y", "minus", "star"],
        ),
        ("what is it", ["what", "is", "it"]),  # stop words only: kept, so something matches
        ("Ünïcode café", ["ünïcode", "café"]),
        ("deploy deploy DEPLOY", ["deploy"]),
        ("?!", []),
        # the question's frame and the time it is asked about are no words its answer shares
        ("How many weddings have I attended this year?", ["weddings", "attended"]),
        ("How many times did Mel go to the beach?", ["mel", "go", "beach"]),
        ("jewelry I got in the past few months", ["jewelry"]),
        ("what I cooked a couple of days ago", ["cooked"]),
        ("When did Gina mention her shop?", ["gina", "shop"]),
        # "many" elsewhere is a subject, "how long" is no frame (docs/benchmarks-history.md
        # measures it), and a past point in time is how memories say it
        ("so many dogs, a long walk", ["many", "dogs", "long", "walk"]),
        ("How long have I been in my current role?", ["long", "current", "role"]),
        ("where did John volunteer last weekend?", ["john", "volunteer", "last", "weekend"]),
        ("how many", ["how", "many"]),  # nothing else: kept, so something matches
    ],
)
def test_query_terms(text: str, terms: list[str]) -> None:
    assert query_terms(text) == terms


def test_text_terms_keep_what_only_a_question_leaves_out() -> None:
    # a memory's words are its own: "this year" tells when it was, not when it is asked
    said = "So many weddings this year, I went to two of them"
    assert text_terms(said) == ["many", "weddings", "year", "went", "two"]
    assert query_terms(said) == ["many", "weddings", "went", "two"]
    assert text_terms("what is it") == ["what", "is", "it"]  # stop words only: kept


def test_query_terms_are_capped() -> None:
    assert len(query_terms(" ".join(f"w{i}" for i in range(100)))) == 32


@given(st.text(max_size=200))
def test_fts_query_is_always_valid_fts5(text: str) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE f USING fts5(content)")
    conn.execute("INSERT INTO f VALUES ('some content here')")
    match = fts_query(query_terms(text))
    if match:
        conn.execute("SELECT rowid FROM f WHERE f MATCH ?", (match,)).fetchall()


def test_fts_query_quotes_every_term() -> None:
    assert fts_query(["near", 'a"b']) == '"near" OR "a""b"'


def test_like_patterns_escape_wildcards() -> None:
    assert like_patterns(["50%", "a_b", "c\\d"]) == ["%50\\%%", "%a\\_b%", "%c\\\\d%"]


@pytest.mark.parametrize(
    ("raw", "tags"),
    [
        ("infra, Deploy ,infra", ("infra", "deploy")),
        (["A  B", "", "c,d"], ("a b", "c d")),
        (None, ()),
        ("", ()),
    ],
)
def test_normalize_tags(raw: object, tags: tuple[str, ...]) -> None:
    assert normalize_tags(raw) == tags  # type: ignore[arg-type]


def test_relevances_relative_to_best() -> None:
    assert relevances([-4.0, -2.0, -1.0]) == [1.0, 0.5, 0.25]
    assert relevances([0.0, 0.0]) == [1.0, 1.0]
    assert relevances([]) == []


@pytest.mark.parametrize(("days", "factor"), [(0, 1.0), (30, 0.95), (3650, 0.9)])
def test_recency_factor(days: int, factor: float) -> None:
    created = datetime.fromtimestamp(NOW.timestamp() - days * 86400, UTC).isoformat()
    assert recency_factor(created, NOW) == pytest.approx(factor, abs=1e-4)


def test_rank_score_orders_by_confidence_layer_and_intent() -> None:
    base = Memory("m", "x", created_at="2026-02-16T09:00:00Z")
    low = Memory("m", "x", confidence=0.0, created_at="2026-02-16T09:00:00Z")
    rule = Memory("m", "x", layer="rule", created_at="2026-02-16T09:00:00Z")
    explicit = Memory("m", "x", remember_intent="explicit", created_at="2026-02-16T09:00:00Z")
    assert rank_score(1.0, base, NOW) == pytest.approx(1.0)
    assert rank_score(1.0, low, NOW) == pytest.approx(0.8)
    assert rank_score(1.0, rule, NOW) == pytest.approx(1.1)
    assert rank_score(1.0, explicit, NOW) == pytest.approx(1.05)


def test_dense_closeness_measures_from_the_scope_median_and_the_bonus_grows_with_length() -> None:
    # 60 memories, best first, and DENSE_POOL zeros counted besides: the median is the
    # 41st cosine, 0.3
    cosines = [0.7, 0.5, *([0.4] * 38), 0.3, *([0.2] * 19)]
    closeness = dense_closeness(cosines)
    assert closeness[:3] == pytest.approx([1.0, 0.5, 0.25])
    assert len(closeness) == DENSE_POOL  # only the closest
    # a scope of a few memories: the median is an unrelated memory's (0), so one close stands out
    assert dense_closeness([0.5, 0.25]) == pytest.approx([1.0, 0.5])
    # negative cosines sit below the zeros counted besides
    assert dense_closeness([0.5, *([-0.1] * 30)])[0] == pytest.approx(1.0)
    assert dense_closeness([0.4] * 50) == [0.0] * DENSE_POOL  # all alike: none closer
    assert dense_closeness([]) == []
    assert dense_bonus(1.0, DENSE_FULL_WORDS) == pytest.approx(DENSE_WEIGHT)
    assert dense_bonus(0.5, 2 * DENSE_FULL_WORDS) == pytest.approx(DENSE_WEIGHT / 4)
    assert dense_bonus(1.0, DENSE_FULL_WORDS // 10) == pytest.approx(DENSE_WEIGHT / 10)


def test_dense_pool_and_scores_add_meaning_to_the_hits_and_let_close_ones_join() -> None:
    # closeness against the scope of two memories and DENSE_POOL zeros: a 1.0, b 0.5 (a hit),
    # c 0.25 (neither a hit nor DENSE_JOIN close), d below the background
    similar = [("a", 0.8), ("b", 0.4), ("c", 0.2), ("d", -0.1)]
    pool = dense_pool(similar, {"b", "x"})
    assert [(m, closer) for m, _, closer in pool] == [("a", 1.0), ("b", 0.5)]
    assert [m for m, _, _ in dense_pool(similar, set(), join=0.2)] == ["a", "b", "c"]
    assert [m for m, _, _ in dense_pool(similar, set(), pool=1)] == ["a"]
    lexical = [("x", 4.0), ("b", 2.0)]
    words = {"a": DENSE_FULL_WORDS, "b": DENSE_FULL_WORDS // 2}
    scores = dense_scores(lexical, pool, words)
    assert list(scores) == ["x", "b", "a"]  # the hits in their order, then the joiners
    assert scores == pytest.approx(
        {"x": 1.0, "b": 0.5 + DENSE_WEIGHT / 2 * 0.25, "a": DENSE_WEIGHT}
    )
    # a pool member whose words are unknown (gone from the store) adds nothing and joins not
    assert dense_scores(lexical, pool, {"b": 0}) == {"x": 1.0, "b": 0.5}
    assert dense_bonus(0.5, 100, weight=1.0, full_words=100, power=1.0) == 0.5
    # a share below 1 (a memory made outside a relative date's days) takes part of the bonus
    halved = dense_scores(lexical, pool, words, shares={"a": 0.5})
    assert halved == pytest.approx({**scores, "a": DENSE_WEIGHT / 2})


def test_meaning_is_shared_out_by_the_days_a_relative_date_names() -> None:
    span = ("2023-05-02", "2023-05-04")
    assert meaning_share(span, "2023-05-03T10:00:00.000000Z") == 1.0
    assert meaning_share(span, "2023-05-04T23:59:00.000000Z") == 1.0
    assert meaning_share(span, "2023-05-05T00:00:00.000000Z") == DATED_MEANING_SHARE
    assert meaning_share(None, "2020-01-01T00:00:00.000000Z") == 1.0


def test_stopwords_keep_content_words() -> None:
    assert {"deploy", "auth", "bug"}.isdisjoint(STOPWORDS)


# -- budgets ---------------------------------------------------------------------------------
BUDGETS = {"token_budget": 1000, "turn_budget": 10, "inactivity_minutes": 30.0}


@pytest.mark.parametrize(
    ("tokens", "turns", "idle", "hint", "due", "trigger"),
    [
        (0, 0, None, False, False, None),
        (1000, 1, 0.0, False, True, "count"),
        (10, 10, 0.0, False, True, "count"),
        (10, 2, 30.0, False, True, "time"),
        (0, 0, 300.0, False, False, None),  # idle but nothing new: nothing to compact
        (10, 2, 5.0, True, True, "semantic"),
        (0, 0, 5.0, True, False, None),
        (999, 9, 29.9, False, False, None),
    ],
)
def test_compaction_due(
    tokens: int, turns: int, idle: float | None, hint: bool, due: bool, trigger: str | None
) -> None:
    decision = compaction_due(tokens, turns, idle, semantic_hint=hint, **BUDGETS)  # type: ignore[arg-type]
    assert (decision.due, decision.trigger_type) == (due, trigger)


def test_compaction_soft_hint_from_80_percent() -> None:
    decision = compaction_due(800, 1, 0.0, **BUDGETS)  # type: ignore[arg-type]
    assert not decision.due
    assert decision.hint == "800 of 1,000 tokens used: checkpoint soon"
    assert compaction_due(100, 1, 0.0, **BUDGETS).hint is None  # type: ignore[arg-type]


def test_fill_budget_takes_rank_order_and_skips_what_does_not_fit() -> None:
    assert fill_budget(["a", "b", "c", "d"], [5, 10, 3, 1], 9) == (["a", "c", "d"], 9, 1)
    assert fill_budget(["a", "b"], [5, 10], None) == (["a", "b"], 15, 0)
    assert fill_budget(["a"], [5], 0) == ([], 0, 1)


@given(st.lists(st.integers(0, 100), max_size=30), st.integers(0, 500))
def test_fill_budget_never_exceeds(costs: list[int], budget: int) -> None:
    chosen, used, skipped = fill_budget(list(range(len(costs))), costs, budget)
    assert used <= budget
    assert used == sum(costs[i] for i in chosen)
    assert len(chosen) + skipped == len(costs)


# -- transcripts -----------------------------------------------------------------------------
def _event(
    content: str, role: str = "user", meaningful: bool = True, turn: int = 0
) -> SessionEvent:
    return SessionEvent(
        "e", "s", role, "message", content, 1, turn, meaningful, "2026-02-16T09:00:00.000000Z"
    )


def test_transcript_keeps_meaningful_events_only() -> None:
    md = transcript_markdown(
        "Session s", [_event("hello"), _event("noise", meaningful=False), _event("hi", "assistant")]
    )
    assert md == (
        "# Session s\n\n## user (turn 0) - 2026-02-16T09:00:00Z\n\nhello\n\n"
        "## assistant (turn 0) - 2026-02-16T09:00:00Z\n\nhi\n"
    )


def test_extract_decisions_latest_in_order() -> None:
    events = [
        _event("We decided to use JWT.\nunrelated"),
        _event("ok", "assistant"),
        _event("Going with RS256 keys", "assistant"),
        _event("we decided nothing here", meaningful=False),
    ]
    assert extract_decisions(events) == ["We decided to use JWT.", "Going with RS256 keys"]
    assert extract_decisions(events, limit=1) == ["Going with RS256 keys"]


@pytest.mark.parametrize(
    ("text", "slug"),
    [("Fix the Auth bug!", "fix-the-auth-bug"), ("", "session"), ("///", "session")],
)
def test_slugify(text: str, slug: str) -> None:
    assert slugify(text) == slug


def test_format_checkpoint_lists_what_survives() -> None:
    checkpoint = Checkpoint(
        "ckpt-1",
        "s",
        "2026-02-16T09:00:00.000000Z",
        "pre_compaction",
        "auth done",
        {
            "rules": [{"content": "run make check"}],
            "pins": [{"label": "region", "content": "eu-west-1", "importance": "CRITICAL"}],
            "pending_tasks": [{"task_id": "t1", "title": "Rate limits", "stage": "build"}],
            "decisions": [{"decision": "use JWT"}],
        },
        ("add rate limits",),
    )
    assert format_checkpoint(checkpoint) == (
        "[CORTEX CHECKPOINT ckpt-1 - pre_compaction, 2026-02-16 09:00 UTC]\n\n"
        "SUMMARY: auth done\n\nRULES:\n- run make check\n\n"
        "PINS:\n- region [CRITICAL]: eu-west-1\n\n"
        "PENDING TASKS:\n- [t1] Rate limits (build)\n\nDECISIONS:\n- use JWT\n\n"
        "NEXT STEPS:\n- add rate limits\n"
    )
    assert Checkpoint.from_dict(checkpoint.to_dict()) == checkpoint


# -- large-store query planning ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("counts", "terms"),
    [
        ({"rare": 5, "common": 50_000}, ["rare"]),
        ({"a": 10, "b": 900, "c": 800}, ["a", "c"]),  # b would pass the 1,500 budget
        ({"a": 5_000, "b": 2_000}, []),  # all common
        ({"a": 0, "b": 0}, []),  # nothing matches
        ({"a": 0, "b": 3}, ["b"]),
        ({"a": 1_000, "b": 1_000}, ["a"]),  # the rarest always goes, the budget stops b
    ],
)
def test_rare_terms(counts: dict[str, int], terms: list[str]) -> None:
    assert rare_terms(list(counts), counts) == terms


def test_bm25_is_fts5s_formula() -> None:
    assert bm25_idf(100, 10) == pytest.approx(math.log(90.5 / 10.5))
    assert bm25_idf(100, 60) == 1e-6  # more than half the rows: still counts a little
    # one term once in a document of average length: idf * (k1 + 1) / (1 + k1)
    assert bm25([(2.0, 1.0)], 10, 10.0) == pytest.approx(-2.0)
    longer, shorter = bm25([(2.0, 1.0)], 20, 10.0), bm25([(2.0, 1.0)], 5, 10.0)
    assert shorter < -2.0 < longer  # lower is better: the shorter document scores better
    assert bm25([(2.0, 1.0), (1.0, 0.0)], 10, 10.0) == pytest.approx(-2.0)  # absent: nothing
    assert bm25([(2.0, 2.0)], 10, 10.0) < bm25([(2.0, 1.0)], 10, 10.0)


def test_common_sets_heaviest_first() -> None:
    idf = {"a": 3.0, "b": 2.0, "c": 1.5, "d": 1.0, "e": 0.5}
    sets = common_sets(list(idf), idf)
    assert sets[:4] == [("a", "b", "c", "d"), ("a", "b", "c"), ("a", "b", "d"), ("a", "c", "d")]
    assert len(sets) == 15 + 1  # every set of the four heaviest, then e alone
    assert sets[-2:] == [("d",), ("e",)]
    assert common_sets(["x"], {"x": 1.0}) == [("x",)]


def test_term_overlap_uses_stem_like_prefixes() -> None:
    assert term_overlap(["deploys", "redis"], "Deploying Redis nightly") == 1.0
    assert term_overlap(["kafka", "redis"], "redis only") == 0.5
    assert term_overlap([], "x") == 0.0


@pytest.mark.parametrize(
    ("sessions", "scores", "voted"),
    [
        (["a", "a", None, "b"], [1.0, 0.5, 0.8, 0.9], [1.05, 0.6, 0.8, 0.9]),
        ([None, None], [0.3, 0.2], [0.3, 0.2]),
        (["a", "a", "a"], [1.0, 1.0, 1.0], [1.2, 1.2, 1.2]),
        ([], [], []),
    ],
)
def test_a_sessions_other_candidates_vote_for_each_one(
    sessions: list[str | None], scores: list[float], voted: list[float]
) -> None:
    assert session_votes(sessions, scores, 0.1) == pytest.approx(voted)


def test_a_candidates_neighbours_that_are_candidates_vote_for_it() -> None:
    scores = {"a": 1.0, "b": 0.5, "c": 0.4}
    # b sits between a and c; d is a neighbour of c that is not a candidate
    adjacent = [("a", "b"), ("b", "a"), ("b", "c"), ("c", "b"), ("c", "d")]
    assert neighbour_votes(scores, adjacent, 0.1) == pytest.approx(
        {"a": 1.05, "b": 0.64, "c": 0.45}
    )
    assert neighbour_votes(scores, [], 0.1) == scores
    assert neighbour_votes({}, adjacent, 0.1) == {}


def test_a_short_best_candidate_brings_its_neighbours_along() -> None:
    short, long = "Where did you go?", " ".join(["word"] * (CONTEXT_WORDS + 1))
    best = [("q", 1.0, short), ("l", 0.9, long), ("r", 0.8, short)]
    adjacent = [("q", "a"), ("q", "r"), ("l", "x"), ("r", "a"), ("z", "y")]
    # r is a candidate already; l is too long to need its context; a is q's (the better seed)
    assert context_neighbours(best, adjacent) == {"a": ("q", NEIGHBOUR_SHARE * 1.0)}
    assert context_neighbours([], adjacent) == {}
    # only the first NEIGHBOUR_SEEDS candidates bring theirs
    many = [(f"m{i}", 1.0 - i / 100, short) for i in range(NEIGHBOUR_SEEDS + 1)]
    late = [(f"m{NEIGHBOUR_SEEDS}", "n")]
    assert context_neighbours(many, late) == {}
    assert context_neighbours(many, [("m0", "n")]) == {"n": ("m0", NEIGHBOUR_SHARE)}


@pytest.mark.parametrize(
    ("query", "when"),
    [
        ("When did Caroline go to the support group?", True),
        ("when is the release", True),
        ("How long has she had the dog?", True),
        ("What year did they move?", True),
        ("how many weeks did the migration take", True),
        ("What did Caroline say when they met?", False),
        ("Where is the config file?", False),
        ("how many dogs does James have", False),
    ],
)
def test_asks_when(query: str, when: bool) -> None:
    assert asks_when(query) is when


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("I went to the group yesterday", True),
        ("we met last week", True),
        ("two years ago", True),
        ("on 3rd March", True),
        ("the deadline is 2023-05-03", True),
        ("released 5/3", True),
        ("see you on Friday", True),
        ("the deploy uses redis", False),
        ("version 3 of the api", False),
    ],
)
def test_mentions_time(text: str, named: bool) -> None:
    assert mentions_time(text) is named


def test_query_fit_weighs_term_coverage_and_time_cues() -> None:
    terms = ["billing", "staging", "migration"]
    assert query_fit(terms, False, "ran billing staging migration") == 1.0
    assert query_fit(terms, False, "ran billing") == pytest.approx(1 - COVERAGE_WEIGHT * 2 / 3)
    assert query_fit([], False, "anything") == 1.0
    # one term: the index found it in every candidate, stemmed or not
    assert query_fit(["studies"], False, "a study") == 1.0
    # a long memory holds most words of any question: its share counts less
    long_text = "ran billing " + "word " * (2 * COVERAGE_FULL_WORDS - 2)
    assert query_fit(terms, False, long_text) == pytest.approx(1 - COVERAGE_WEIGHT / 3)
    # a when-question lifts a memory that names a time, and only then
    assert query_fit(terms, True, "ran billing staging migration yesterday") == 1 + TIME_CUE_BOOST
    assert query_fit(terms, False, "ran billing staging migration yesterday") == 1.0
    assert query_fit(terms, True, "ran billing staging migration") == 1.0


def test_query_fit_lifts_a_memory_whose_subject_the_question_names() -> None:
    terms = query_terms("What career has Caroline chosen?")
    said = "Caroline: I want to work in counseling, it's my career now."
    mentioned = "Melanie: Thanks, Caroline! What career would you like?"
    assert query_fit(terms, False, said) == pytest.approx(
        query_fit(terms, False, "So " + said) * (1 + SUBJECT_BOOST)
    )
    assert query_fit(terms, False, said) > query_fit(terms, False, mentioned)
    # only a whole first word counts: not a longer word that starts like a term
    assert query_fit(["post"], False, "Postgres is up") == 1.0
    assert query_fit(["postgres"], False, "Postgres is up") == 1 + SUBJECT_BOOST


@pytest.mark.parametrize(
    ("question", "span"),
    [
        ("What did Ann paint on October 13, 2023?", ("2023-10-13", "2023-10-13")),
        ("what broke on the 3rd of june 2024", ("2024-06-03", "2024-06-03")),
        ("the deploy on 7 May 2023", ("2023-05-07", "2023-05-07")),
        ("the 2023-05-07 deploy", ("2023-05-07", "2023-05-07")),
        ("Sept. 4, 2023", ("2023-09-04", "2023-09-04")),
        ("What setback did Bo face in October 2023?", ("2023-10-01", "2023-10-31")),
        ("the freeze of December 2023", ("2023-12-01", "2023-12-31")),  # the year turns
        ("in February 2024", ("2024-02-01", "2024-02-29")),
        ("in May", None),  # no year: too vague to place
        ("in 2023", None),  # a year alone
        ("on February 30, 2023", None),
        ("2023-13-01", None),
        ("what did we decide", None),
    ],
)
def test_query_dates(question: str, span: tuple[str, str] | None) -> None:
    assert query_dates(question) == span


@pytest.mark.parametrize(
    ("question", "span"),
    [  # asked on Thursday 30 November 2023
        ("what did I plant two weeks ago?", ("2023-11-13", "2023-11-19")),
        ("the band I heard last Friday", ("2023-11-24", "2023-11-24")),
        ("the one this past thursday", ("2023-11-23", "2023-11-23")),
        ("what I cooked a couple of days ago", ("2023-11-27", "2023-11-29")),
        ("3 days ago", ("2023-11-26", "2023-11-28")),
        ("a month ago", ("2023-10-16", "2023-11-15")),
        ("what did we fix yesterday", ("2023-11-29", "2023-11-29")),
        ("How many days ago did I buy a smoker?", None),  # asks how long, names no day
        ("on May 7, 2023, two weeks ago", ("2023-05-07", "2023-05-07")),  # a date wins
    ],
)
def test_query_dates_relative_to_now(question: str, span: tuple[str, str] | None) -> None:
    assert query_dates(question, datetime(2023, 11, 30, 12, tzinfo=UTC)) == span
    if span != ("2023-05-07", "2023-05-07"):
        assert query_dates(question) is None  # without a now, nothing relative is placed


def test_date_fit_lifts_memories_made_within_the_span() -> None:
    span = ("2023-10-01", "2023-10-31")
    assert date_fit(span, "2023-10-01T00:00:00.000000Z") == 1 + DATE_BOOST
    assert date_fit(span, "2023-10-31T23:59:59.000000Z") == 1 + DATE_BOOST
    assert date_fit(span, "2023-11-01T00:00:00.000000Z") == 1.0
    assert date_fit(span, "2023-09-30T23:59:59.000000Z") == 1.0
    assert date_fit(None, "2023-10-05T00:00:00.000000Z") == 1.0


def test_a_quick_memory_is_the_record_init_makes() -> None:
    fields = {
        "id": "m1", "content": "use uv", "layer": "working", "scope": "project",
        "project": "p", "tags": ("a",), "upsert_key": "k", "confidence": 0.5,
        "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
    }  # fmt: skip
    quick, made = Memory.quick(**fields), Memory(**fields)
    assert quick == made and hash(quick) == hash(made) and repr(quick) == repr(made)
    assert quick.to_dict() == made.to_dict()
    with pytest.raises(AttributeError):
        quick.content = "changed"  # type: ignore[misc]  # frozen like any Memory
    with pytest.raises(TypeError):
        Memory.quick(id="m1")  # no content
    with pytest.raises(TypeError):
        Memory.quick(id="m1", bogus=1)  # an unknown field does not stand in for a missing one
