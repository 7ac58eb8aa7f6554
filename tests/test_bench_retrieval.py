"""The retrieval benchmark's metric code, on tiny synthetic data with known answers."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "retrieval"))

from metrics import (  # noqa: E402
    clean_evidence,
    locomo_corpora,
    longmemeval_corpora,
    ndcg,
    recall_all,
    recall_any,
    recall_fraction,
)
from run import (  # noqa: E402
    CachedEmbedder,
    ceilings,
    cortex_search,
    evaluate,
    lme_score,
    locomo_score,
    overall,
    plain_bm25,
)


@pytest.mark.parametrize(
    ("ranked", "gold", "k", "fraction", "any_", "all_"),
    [
        (["a", "b", "c"], {"a", "c"}, 2, 0.5, 1.0, 0.0),
        (["a", "b", "c"], {"a", "c"}, 3, 1.0, 1.0, 1.0),
        (["x", "y"], {"a"}, 2, 0.0, 0.0, 0.0),
        ([], {"a"}, 5, 0.0, 0.0, 0.0),
    ],
)
def test_recalls(
    ranked: list[str], gold: set[str], k: int, fraction: float, any_: float, all_: float
) -> None:
    assert recall_fraction(ranked, gold, k) == fraction
    assert recall_any(ranked, gold, k) == any_
    assert recall_all(ranked, gold, k) == all_


def test_ndcg() -> None:
    assert ndcg(["a", "b"], {"a"}, 10) == 1.0
    assert ndcg(["b", "a"], {"a"}, 10) == pytest.approx(1 / math.log2(3))
    assert ndcg(["b", "a", "c"], {"a", "c"}, 10) == pytest.approx(
        (1 / math.log2(3) + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    )
    assert ndcg(["x"], set(), 10) == 0.0


def test_malformed_evidence_is_repaired_or_dropped() -> None:
    known = {"D8:6", "D9:17", "D11:26", "D30:5"}
    assert clean_evidence(["D8:6; D9:17", "D:11:26", "D30:05", "D", "D99:1"], known) == {
        "D8:6",
        "D9:17",
        "D11:26",
        "D30:5",
    }


LOCOMO = [
    {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_2_date_time": "10:04 am on 25  May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a greyhound named Pixel"},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Lovely! I started pottery classes"},
            ],
            "session_2": [
                {"speaker": "Ann", "dia_id": "D2:1", "text": "Pixel loves the beach",
                 "blip_caption": "a dog on sand"},
                {"speaker": "Bo", "dia_id": "D2:2", "text": "My pottery kiln broke"},
            ],
        },
        "qa": [
            {"question": "What is the name of Ann's greyhound?", "evidence": ["D1:1"],
             "category": 4},
            {"question": "What broke in Bo's pottery studio?", "evidence": ["D2:2"],
             "category": 1},
            {"question": "unanswerable", "evidence": [], "category": 3},
        ],
    }
]  # fmt: skip


def test_locomo_units_and_questions() -> None:
    (corpus,) = locomo_corpora(LOCOMO)
    assert [u.id for u in corpus.units] == ["D1:1", "D1:2", "D2:1", "D2:2"]
    assert corpus.units[2].text == "Ann: Pixel loves the beach [shares a dog on sand]"
    assert [u.at for u in corpus.units] == ["2023-05-08T13:56:00Z"] * 2 + [
        "2023-05-25T10:04:00Z"
    ] * 2
    assert [(q.category, set(q.gold)) for q in corpus.questions] == [
        ("single-hop", {"D1:1"}),
        ("multi-hop", {"D2:2"}),
    ]


@pytest.mark.parametrize("build", [plain_bm25("porter unicode61"), cortex_search()])
def test_end_to_end_evaluation_on_a_tiny_conversation(build: object) -> None:
    table, latencies = evaluate(locomo_corpora(LOCOMO), build, 10, locomo_score)  # type: ignore[arg-type]
    assert table["single-hop"]["R@5"] == 100.0 and table["multi-hop"]["R@5"] == 100.0
    assert table["single-hop"]["nDCG@10"] == 100.0
    assert overall(table)["n"] == 2 and len(latencies) == 2


def test_answers_keep_gold_ranks_and_ceilings_count_questions_that_cannot_score() -> None:
    answers: list[dict[str, object]] = []
    evaluate(locomo_corpora(LOCOMO), plain_bm25("unicode61"), 10, locomo_score, answers=answers)
    assert [a["category"] for a in answers] == ["single-hop", "multi-hop"]
    assert answers[0]["gold_ranks"] == {"D1:1": 1}
    score = lme_score("session")
    many = {
        "gold_ranks": dict.fromkeys("abcdef", 1),
        "scores": score(list("abcdef"), _gold("abcdef")),
    }
    few = {"gold_ranks": {"a": 1}, "scores": score(["a"], _gold("a"))}
    assert many["scores"]["R_all@5"] == 0.0  # six gold sessions never fit in five
    assert ceilings([many, few, few, few]) == {"R_all@5": 75.0}


def _gold(ids: str) -> object:
    return type("Q", (), {"gold": frozenset(ids)})()


LME_ITEM = {
        "question_id": "q1",
        "question_type": "single-session-user",
        "question": "What degree did I get?",
        "question_date": "2023/05/30 (Tue) 12:46",
        "haystack_session_ids": ["answer_1", "answer_2", "other"],
        "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/21 (Sun) 09:00",
                           "2023/05/22 (Mon) 10:30"],
        "haystack_sessions": [
            [{"role": "user", "content": "I got a Business degree", "has_answer": True},
             {"role": "assistant", "content": "Congrats"}],
            [{"role": "user", "content": "hello"},
             {"role": "assistant", "content": "degree talk", "has_answer": True}],
            [{"role": "user", "content": "weather"}],
        ],
    }  # fmt: skip


def test_longmemeval_official_protocol() -> None:
    item = LME_ITEM
    abstention = dict(item, question_id="q2_abs")
    (sessions,) = longmemeval_corpora([item, abstention], "session")
    assert [u.text for u in sessions.units] == ["I got a Business degree", "hello", "weather"]
    assert sessions.questions[0].gold == {"answer_1"}  # answer_2 has no user-side evidence
    assert sessions.units[0].at == "2023-05-20T02:21:00Z"
    assert sessions.now == "2023-05-30T12:46:00Z"
    (turns,) = longmemeval_corpora([item], "turn")
    assert turns.questions[0].gold == {"answer_1#0"}


class CountingEmbedder:
    """The hashing embedder, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        from cortex.services.embeddings import HashingEmbedder

        self.inner = HashingEmbedder(dim=16)
        self.model, self.dim = "counting-16", 16
        self.query_prefix = self.document_prefix = ""
        self.asked: list[str] = []

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.asked += texts
        return self.inner.embed(texts)


def test_cached_embedder_embeds_each_text_once_across_runs(tmp_path: Path) -> None:
    first = CountingEmbedder()
    texts = [f"text {i}" for i in range(700)] + ["text 3"]  # past one lookup's 500, a repeat
    vectors = CachedEmbedder(first, tmp_path).embed(texts)
    assert first.asked == texts[:700]  # each text once
    assert vectors[3] == pytest.approx(first.inner.embed(["text 3"])[0], abs=1e-7)
    second = CountingEmbedder()  # a later run: a new process, the same file
    again = CachedEmbedder(second, tmp_path).embed(["text 5", "new", "text 3"])
    assert second.asked == ["new"]
    assert again[0] == vectors[5] and again[2] == vectors[3]
    assert (tmp_path / "embeddings-counting-16.db").exists()


def _fusion_sets() -> dict[str, list[Any]]:
    return {
        "locomo": locomo_corpora(LOCOMO),
        "lme_session": longmemeval_corpora([LME_ITEM], "session"),
        "lme_turn": longmemeval_corpora([LME_ITEM], "turn"),
    }


def test_fusion_recording_gives_the_service_ranking_and_its_figures() -> None:
    import fusion

    sets = _fusion_sets()
    recording = fusion.Recording.from_json(fusion.record(sets, "hashing", None).to_json())
    fusion.check_service(recording, sets)  # the shipped formula on the inputs: the answers
    asked = recording.pools["locomo"]["conv-x"]["What is the name of Ann's greyhound?"]
    assert asked.lexical and len(asked.similar) == 4  # every unit of the haystack, by cosine
    report = fusion.score_variant(recording, sets, fusion.service)
    table, _ = evaluate(sets["locomo"], cortex_search("hashing"), 50, locomo_score)
    assert report["locomo"]["table"] == table  # what run.py measures for cortex+hashing
    asked.ranked.reverse()
    with pytest.raises(SystemExit, match="record again"):
        fusion.check_service(recording, sets)


def test_fusion_variants_parse_and_rank() -> None:
    import fusion

    pools = fusion.Pools([("a", 3.0), ("b", 2.0)], [("c", 0.9), ("b", 0.8), ("a", 0.1)], [])
    words = {"a": 10, "b": 10, "c": 10}
    assert fusion.parse_variant("lexical")(pools, words) == ["a", "b"]
    # rrf, k=1: a 1/2; b 1/3 + 1/3; c 1/2 (the cosine ranking at weight 1)
    assert fusion.parse_variant("rrf:k=1,weight=1,depth=2")(pools, words) == ["b", "a", "c"]
    assert fusion.parse_variant("rrf:k=1,weight=1,depth=1")(pools, words) == ["a", "c", "b"]
    for bad, message in [("nope", "unknown family"), ("rrf:k", "not key=value")]:
        with pytest.raises(ValueError, match=message):
            fusion.parse_variant(bad)
    with pytest.raises(TypeError):
        fusion.parse_variant("bonus:colour=1")
    base = {"R@10": 70.0, "conv-1": 60.0}
    assert fusion.keeps_every_split({"R@10": 71.0, "conv-1": 60.0}, base)
    assert not fusion.keeps_every_split({"R@10": 72.0, "conv-1": 59.9}, base)
    assert len(fusion.sweep()) == 2 + 48 + 32 + 18


def test_expansion_bench_sets_the_constants_for_a_run_and_puts_them_back() -> None:
    import expansion

    import cortex.core.expansion as shipped
    import cortex.services.embeddings as meaning

    before = (shipped.EXPANSION_MEMORIES, shipped.EXPANSION_WEIGHT, meaning.widening_words)
    with expansion.settings({"memories": 7, "weight": 0.5}):
        assert (shipped.EXPANSION_MEMORIES, shipped.EXPANSION_WEIGHT) == (7, 0.5)
        with expansion.from_haystack({"q?": ["bride"]}):
            assert meaning.widening_words(None, "q?", []) == ["bride"]  # type: ignore[arg-type]
            assert meaning.widening_words(None, "other?", ["x"]) == []  # type: ignore[arg-type]
            # as the search calls it, with the word file
            assert meaning.widening_words(None, "q?", [], None) == ["bride"]  # type: ignore[arg-type]
    assert (shipped.EXPANSION_MEMORIES, shipped.EXPANSION_WEIGHT, meaning.widening_words) == before


# -- diff.py: two reports compared question by question ------------------------------------------
DIFF = Path(__file__).resolve().parents[1] / "bench" / "retrieval" / "diff.py"


def _report() -> dict[str, Any]:
    """A real ``run.py`` report of two systems over the tiny sets, as JSON would hold it."""
    import json

    from run import run_suites

    systems = {"bm25": plain_bm25("unicode61"), "cortex": cortex_search()}
    return json.loads(json.dumps(run_suites(_fusion_sets(), systems)))  # type: ignore[arg-type]


def _lose_the_first_question(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` with cortex's first LoCoMo question missed at every k, as a change to the
    ranking that pushes its gold turn out would leave it."""
    import copy

    after = copy.deepcopy(report)
    part = after["locomo"]["cortex"]
    answer = part["answers"][0]
    answer["gold_ranks"] = dict.fromkeys(answer["gold_ranks"])
    answer["scores"] = dict.fromkeys(answer["scores"], 0.0)
    part["per_corpus"]["conv-x"]["R@10"] -= 50.0
    part["overall"]["R@10"] -= 50.0
    return after


def test_diff_of_a_report_with_itself_changes_nothing_and_keeps_every_split() -> None:
    import diff

    report = _report()
    cortex = diff.system_report(report, "cortex", Path("r.json"))
    result = diff.compare(cortex, cortex, questions=5)
    assert result["keeps_every_split"]
    assert {row["figure"] for row in result["figures"]} >= {"R@10", "LME turn all@10", "conv-x"}
    assert not any(row["falls"] or row["change"] for row in result["figures"])
    assert {name: part["changed"] for name, part in result["sets"].items()} == {
        "locomo": 0, "lme_session": 0, "lme_turn": 0,
    }  # fmt: skip


def test_diff_counts_and_lists_a_question_lost_and_says_the_split_falls() -> None:
    import diff

    before = _report()
    after = _lose_the_first_question(before)
    result = diff.compare(
        diff.system_report(before, "cortex", Path("r.json")),
        diff.system_report(after, "cortex", Path("r.json")),
        questions=5,
    )
    locomo = result["sets"]["locomo"]
    assert locomo["changed"] == 1 and locomo["counts"]["R@10"] == {"gained": 0, "lost": 1}
    (question,) = locomo["questions"]
    assert question["question"] == "What is the name of Ann's greyhound?"
    assert set(question["gold_ranks_after"].values()) == {None}
    falls = {row["figure"] for row in result["figures"] if row["falls"]}
    assert falls == {"R@10", "conv-x"} and not result["keeps_every_split"]
    text = diff.markdown("cortex -> cortex", result)
    assert "D1:1@-" in text and "keeps every split: no (falls: R@10, conv-x)" in text
    old, new = (diff.system_report(r, "cortex", Path("r.json")) for r in (before, after))
    assert diff.compare(old, new, questions=0)["sets"]["locomo"]["questions"] == []


def test_diff_command_compares_two_systems_of_one_report_and_refuses_bad_input(
    tmp_path: Path,
) -> None:
    import json
    import subprocess

    report = _report()
    path = tmp_path / "retrieval.json"
    path.write_text(json.dumps(report))
    run = [sys.executable, str(DIFF), str(path), str(path)]
    done = subprocess.run(
        [*run, "--system", "bm25", "--against", "cortex", "--json"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    import diff

    expected = diff.compare(
        diff.system_report(report, "bm25", Path("r.json")),
        diff.system_report(report, "cortex", Path("r.json")),
        questions=20,
    )
    assert json.loads(done.stdout) == {"bm25 -> cortex": json.loads(json.dumps(expected))}
    text = subprocess.run(run, capture_output=True, text=True)
    assert text.returncode == 0 and "## bm25 -> bm25" in text.stdout
    assert "## cortex -> cortex" in text.stdout and "keeps every split: yes" in text.stdout
    other = json.loads(json.dumps(report))
    other["lme_turn"]["cortex"]["answers"][0]["question"] = "Another question?"
    moved = tmp_path / "other.json"
    moved.write_text(json.dumps(other))
    (tmp_path / "broken.json").write_text("{not json")
    for args, message in [
        ([str(path), str(moved), "--system", "cortex"], "ask other questions of lme_turn"),
        ([str(path), str(tmp_path / "none.json")], "no report at"),
        ([str(path), str(tmp_path / "broken.json")], "is not a run.py report"),
        ([str(path), str(path), "--system", "nope"], "has no system 'nope'; it has bm25, cortex"),
        ([str(path), str(path), "--against", "cortex"], "--against needs --system"),
    ]:
        failed = subprocess.run([sys.executable, str(DIFF), *args], capture_output=True, text=True)
        assert failed.returncode == 2 and failed.stdout == ""
        assert failed.stderr.startswith("error: ") and message in failed.stderr
        assert failed.stderr.count("\n") == 1
