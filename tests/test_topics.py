"""Hot topic extraction."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cortex.core.topics import (
    MAX_KEYWORDS,
    MAX_LEARNING_IDS,
    MAX_PROJECTS,
    PRUNE_AT,
    HotTopicExtractor,
    extract_project_name,
    keywords_from_text,
)

NOISE_PROMPTS = [
    "Please read the logs and check why the serial port times out after a minute",
    "Run the unit tests again and summarise the failures for me",
    "Look at the baud rate setting in the config and the USB cable notes",
    "What does the manual say about menu 031 and the CAT rate?",
    "Write a short changelog entry for this release",
]


def test_fr005_acceptance_workdir_label_and_text():
    ex = HotTopicExtractor()
    ex.record_exec_workdir("/home/user/Projects/lbf-ham-radio")
    ex.record_working_memory_label("ham radio")
    ex.record_text("ham radio CAT control for the FT991A", 0.5)
    ex.record_working_memory_label("ft991a control")
    for prompt in NOISE_PROMPTS:
        ex.record_text(prompt, 0.5)
    topics = ex.get_current_topics()
    assert {"ft991a", "ham radio", "lbf-ham-radio"} <= set(topics[:8])
    assert topics.index("ft991a") < topics.index("serial")  # a noise word
    assert ex.get_active_projects() == ["lbf-ham-radio"]


def test_fr005_acceptance_recurring_text_pair_becomes_a_phrase():
    ex = HotTopicExtractor()
    ex.record_tool_call("exec", {"workdir": "/home/user/Projects/lbf-ham-radio/src"})
    for _ in range(3):
        ex.record_text("ham radio CAT control for the FT991A", 0.5)
    ex.record_working_memory_label("ft991a control")
    for prompt in NOISE_PROMPTS * 2:
        ex.record_text(prompt, 0.5)
    topics = ex.get_current_topics(20)
    assert {"ft991a", "ham radio", "lbf-ham-radio"} <= set(topics)
    # Each noise word was seen twice (weight 1.0); the pair, seen three times, ranks above.
    freq = ex.get_frequency_map()
    assert freq["ham radio"] > freq["baud"] == 1.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Working on lbf-ham-radio today", ["working", "lbf-ham-radio"]),
        ("session_states table in brain.db", ["session_states", "table", "brain.db"]),
        ("FT991A rig", ["ft991a", "rig"]),
        ("use v2 of s3 and an IO bus", ["v2", "s3", "bus"]),  # 2-char kept only when mixed
        ("moved the dev server, 5s timeout, 10ms and 2nd pass raised", ["server", "timeout"]),
        ("port 8080 and 3.14 and 2026-02-18", ["port"]),  # pure numbers dropped
        ("commit 3f2a9c1e8b7d6a5f and uuid 123e4567-e89b-12d3", ["commit", "uuid"]),
        ("the and of exec read write edit tool file path bash grep glob", []),
        ("Cortex CORTEX cortex", ["cortex"]),
    ],
)
def test_tokenizer_rules(text: str, expected: list[str]):
    ex = HotTopicExtractor()
    ex.record_text(text)
    unigrams = [k for k in ex.get_frequency_map() if " " not in k]
    assert unigrams == expected


def test_filler_and_common_verbs_never_become_topics():
    ex = HotTopicExtractor()
    for _ in range(5):
        ex.record_text("Wow, great! I moved it and used the dev box; tests pass in 5s. Raised it.")
        ex.record_text("Thanks, really awesome, use it anyway")
    ex.record_text("the ft991a rig")
    assert ex.get_current_topics() == ["box", "tests", "ft991a", "rig"]


def test_a_label_phrase_said_once_stays_a_topic_when_its_words_recur():
    ex = HotTopicExtractor()
    ex.record_working_memory_label("ham radio")
    for i in range(30):
        ex.record_text(f"radio check {i}a. the ham license. radio again")
    ex = HotTopicExtractor.from_dict(json.loads(json.dumps(ex.to_dict())))
    assert "ham radio" in ex.get_current_topics()


def test_start_keywords_count_as_topics_and_phrases():
    ex = HotTopicExtractor()
    ex.record_keywords(
        ["ham radio, ft991a", "Please look at why the serial port drops after a minute"]
    )
    topics = ex.get_current_topics()
    assert topics[:3] == ["ham radio", "ham", "radio"] and "ft991a" in topics
    assert "serial port" not in topics and "serial" in topics  # a long keyword counts as text
    for _ in range(20):
        ex.record_text("radio radio ham")
    assert "ham radio" in ex.get_current_topics()


def test_ranking_is_weighted_frequency_with_first_seen_tie_break():
    ex = HotTopicExtractor()
    ex.record_text("zeta. alpha. beta. alpha.")
    ex.record_text("beta.", weight=3.0)
    assert ex.get_current_topics() == ["beta", "alpha", "zeta"]
    assert ex.get_frequency_map() == {"zeta": 1.0, "alpha": 2.0, "beta": 4.0}


def test_adjacent_pairs_count_half_then_full_and_punctuation_breaks_them():
    ex = HotTopicExtractor()
    ex.record_text("ham radio, rig control")
    freq = ex.get_frequency_map()
    assert freq["rig control"] == 0.5
    assert "radio rig" not in freq
    assert ex.get_current_topics(4) == ["ham", "radio", "rig", "control"]
    ex.record_text("rig control")
    assert ex.get_frequency_map()["rig control"] == 1.5


def test_stopwords_split_pairs():
    ex = HotTopicExtractor()
    ex.record_text("control for the FT991A")
    assert "control ft991a" not in ex.get_frequency_map()


def test_generic_words_are_down_weighted():
    ex = HotTopicExtractor()
    ex.record_text("code. cortex.")
    assert ex.get_frequency_map() == {"code": 0.5, "cortex": 1.0}


def test_labels_weigh_more_and_short_labels_become_phrases():
    ex = HotTopicExtractor()
    ex.record_working_memory_label("Pipeline state [inherited from abc123 @ 2026-02-17]")
    assert ex.get_frequency_map() == {"pipeline": 2.0, "state": 2.0, "pipeline state": 3.0}


def test_long_labels_fall_back_to_pairs():
    ex = HotTopicExtractor()
    ex.record_working_memory_label("alpha beta gamma delta epsilon")
    freq = ex.get_frequency_map()
    assert "alpha beta gamma delta epsilon" not in freq
    assert freq["alpha beta"] == 1.0


def test_memory_categories():
    ex = HotTopicExtractor()
    ex.record_memory_access(["coding", "meta", "coding"])
    ex.record_memory_access("radio")
    assert ex.get_frequency_map() == {"coding": 2.0, "meta": 1.0, "radio": 1.0}


def test_file_paths_give_project_and_stem():
    ex = HotTopicExtractor()
    ex.record_file_path("/home/u/Projects/cortex/src/cortex/hot_topic_extractor.py")
    ex.record_file_path("/etc/hosts")
    assert ex.get_active_projects() == ["cortex"]
    assert set(ex.get_frequency_map()) == {"cortex", "hot_topic_extractor", "hosts"}


def test_tool_calls_extract_workdir_paths_and_command():
    ex = HotTopicExtractor()
    ex.record_tool_call("Bash", {"command": "cd /home/u/repos/augur && pytest", "timeout": 5})
    ex.record_tool_call("Read", {"file_path": "/home/u/code/helios/README.md"})
    ex.record_tool_call("exec", {"cwd": "/home/u/Projects/lbf-ham-radio"})
    ex.record_tool_call("x", "not a mapping")  # type: ignore[arg-type]
    assert ex.get_active_projects() == ["augur", "helios", "lbf-ham-radio"]
    assert "pytest" in ex.get_frequency_map()
    assert "bash" not in ex.get_frequency_map()


def test_synapse_signals():
    ex = HotTopicExtractor()
    ex.record_project("augur")
    ex.record_synapse_signal("AUGUR weekly report", "all")
    ex.record_synapse_signal("status", "helios-agent")
    freq = ex.get_frequency_map()
    assert freq["weekly"] == 1.5
    assert "all" not in freq
    assert freq["helios-agent"] == 1.5
    assert ex.get_active_projects() == ["augur"]
    ex.record_project("cortex")
    ex.record_project("Cortex")
    assert ex.get_active_projects() == ["augur", "cortex"]  # 2 each (augur: 1 + a mention)
    ex.record_project("CORTEX")
    assert ex.get_active_projects() == ["cortex", "augur"]  # first spelling kept


def test_learning_ids_are_deduplicated_in_order_and_capped():
    ex = HotTopicExtractor()
    for memory_id in ["m1", "m2", "m1", " m3 ", ""]:
        ex.record_learning_id(memory_id)
    assert ex.get_recent_learning_ids() == ["m1", "m2", "m3"]
    for i in range(MAX_LEARNING_IDS + 100):
        ex.record_learning_id(f"mem-{i}")
    ids = ex.get_recent_learning_ids()
    assert len(ids) == MAX_LEARNING_IDS
    assert ids[-1] == f"mem-{MAX_LEARNING_IDS + 99}"
    assert "m1" not in ids


def test_keyword_state_is_bounded_and_keeps_heavy_topics():
    ex = HotTopicExtractor()
    ex.record_working_memory_label("cortex")
    for i in range(5000):
        ex.record_text(f"word{i}x")
        assert len(ex.get_frequency_map()) <= PRUNE_AT
    assert ex.get_current_topics(1) == ["cortex"]
    assert len(ex.get_frequency_map()) >= MAX_KEYWORDS


def test_project_state_is_bounded():
    ex = HotTopicExtractor()
    ex.record_project("main-project")
    ex.record_project("main-project")
    for i in range(MAX_PROJECTS * 3):
        ex.record_project(f"project-{i}")
    projects = ex.get_active_projects()
    assert len(projects) == MAX_PROJECTS
    assert projects[0] == "main-project"


def test_outputs_are_copies():
    ex = HotTopicExtractor()
    ex.record_text("cortex")
    ex.get_frequency_map()["cortex"] = 99.0
    ex.get_recent_learning_ids().append("x")
    assert ex.get_frequency_map() == {"cortex": 1.0}
    assert ex.get_recent_learning_ids() == []


def test_top_n():
    ex = HotTopicExtractor()
    ex.record_text("alpha beta gamma")
    assert ex.get_top_n(2) == ex.get_current_topics(2) == ["alpha", "beta"]
    assert ex.get_current_topics(0) == []


def test_custom_stopwords_replace_the_defaults():
    ex = HotTopicExtractor(stopwords=["Radio"])
    ex.record_text("the exec radio")
    assert list(ex.get_frequency_map()) == ["the", "exec", "the exec"]


def test_bad_weights_and_inputs_are_ignored():
    ex = HotTopicExtractor()
    for weight in (0.0, -1.0, float("nan"), float("inf"), 10**400):  # (no float that large)
        ex.record_text("cortex", weight)
    ex.record_text(None)  # type: ignore[arg-type]
    ex.record_working_memory_label(42)  # type: ignore[arg-type]
    ex.record_exec_workdir("")
    ex.record_project("   ")
    assert ex.to_dict() == HotTopicExtractor().to_dict()


def _populated() -> HotTopicExtractor:
    ex = HotTopicExtractor()
    ex.record_exec_workdir("/home/user/Projects/lbf-ham-radio")
    ex.record_working_memory_label("ham radio")
    ex.record_text("ham radio CAT control for the FT991A")
    ex.record_learning_id("mem-1")
    ex.record_synapse_signal("weekly sync", "helios")
    return ex


def _outputs(ex: HotTopicExtractor) -> tuple[Any, ...]:
    return (
        ex.get_current_topics(50),
        ex.get_active_projects(),
        ex.get_recent_learning_ids(),
        ex.get_frequency_map(),
    )


def test_to_dict_is_json_safe_and_round_trips():
    ex = _populated()
    data = json.loads(json.dumps(ex.to_dict()))
    assert data["version"] == 1
    assert _outputs(HotTopicExtractor.from_dict(data)) == _outputs(ex)


def test_round_trip_survives_a_key_reordering_store():
    # PostgreSQL JSONB reorders object keys; pairs in lists keep the first-seen order.
    ex = HotTopicExtractor()
    ex.record_text("zulu. alpha. mike.")
    data = json.loads(json.dumps(ex.to_dict(), sort_keys=True))
    assert HotTopicExtractor.from_dict(data).get_current_topics() == ["zulu", "alpha", "mike"]


@pytest.mark.parametrize(
    "data",
    [
        {},
        None,
        [],
        "garbage",
        {"keywords": "nope", "projects": 5, "learning_ids": {"a": 1}},
        {"keywords": [["ok", 1.0], ["bad"], [1, 2], ["neg", -1], ["nan", float("nan")], None]},
        {"keywords": [["ok", 1.0], ["huge", 10**400], ["inf", float("inf")]]},
        {"keywords": {"dict-form": 2.0}, "projects": [["p", True]], "learning_ids": [1, "m"]},
    ],
)
def test_from_dict_tolerates_malformed_input(data: Any):
    ex = HotTopicExtractor.from_dict(data)
    assert set(ex.get_frequency_map()) <= {"ok", "dict-form"}
    assert ex.get_active_projects() == []
    assert ex.get_recent_learning_ids() in ([], ["m"])


def test_from_dict_enforces_the_caps():
    data = {
        "keywords": [[f"k{i}", float(i + 1)] for i in range(PRUNE_AT + 50)],
        "projects": [[f"p{i}", 1.0] for i in range(MAX_PROJECTS + 5)],
        "learning_ids": [f"m{i}" for i in range(MAX_LEARNING_IDS + 5)],
    }
    ex = HotTopicExtractor.from_dict(data)
    assert len(ex.get_frequency_map()) == MAX_KEYWORDS
    assert ex.get_current_topics(1) == [f"k{PRUNE_AT + 49}"]
    assert len(ex.get_active_projects()) == MAX_PROJECTS
    assert len(ex.get_recent_learning_ids()) == MAX_LEARNING_IDS


_words = st.sampled_from(
    ["ham", "radio", "ft991a", "cortex", "the", "lbf-ham-radio", "brain.db", "x1", "42", "Hooks"]
)
_signals = st.one_of(
    st.tuples(st.just("text"), st.lists(_words, max_size=8).map(" ".join)),
    st.tuples(st.just("label"), st.lists(_words, max_size=4).map(" ".join)),
    st.tuples(st.just("workdir"), _words.map(lambda w: f"/home/u/Projects/{w}")),
    st.tuples(st.just("learning"), _words),
    st.tuples(st.just("category"), _words),
    st.tuples(st.just("any"), st.text(max_size=30)),
)


@given(st.lists(_signals, max_size=40))
def test_round_trip_preserves_outputs(signals: list[tuple[str, str]]):
    ex = HotTopicExtractor()
    for kind, value in signals:
        if kind in ("text", "any"):
            ex.record_text(value)
        elif kind == "label":
            ex.record_working_memory_label(value)
        elif kind == "workdir":
            ex.record_exec_workdir(value)
        elif kind == "learning":
            ex.record_learning_id(value)
        else:
            ex.record_memory_access([value])
    restored = HotTopicExtractor.from_dict(json.loads(json.dumps(ex.to_dict())))
    assert _outputs(restored) == _outputs(ex)
    assert restored.to_dict() == ex.to_dict()


@pytest.mark.parametrize(
    ("workdir", "expected"),
    [
        ("/home/user/Projects/lbf-ham-radio", "lbf-ham-radio"),
        ("/home/user/Projects/lbf-ham-radio/src", "lbf-ham-radio"),
        ("/home/user/projects/helios/extensions/cortex", "helios"),
        ("/home/user/work/Projects/foo", "foo"),  # a container right under a container
        ("~/code/myproj/src/main.py", "myproj"),
        ("/srv/git/cortex/", "cortex"),
        ("C:\\Users\\bob\\repos\\thing", "thing"),
        ("/opt/app/src", "app"),  # no container above: the last non-container directory
        ("/var/lib/service", "service"),
        ("lbf-ham-radio", "lbf-ham-radio"),
        ("/home/user", None),
        ("/Users/bob/", None),
        ("/root", None),
        ("/", None),
        ("/tmp", None),
        ("/var/tmp", None),
        ("~", None),
        ("", None),
        ("   ", None),
    ],
)
def test_extract_project_name(workdir: str, expected: str | None):
    assert extract_project_name(workdir) == expected


def test_keywords_from_text_uses_the_same_rules():
    words = keywords_from_text("Continue the ham radio work: ham radio CAT control on the FT991A")
    assert words[:3] == ["ham", "radio", "ham radio"]  # the recurring pair: 0.5 + 1.0
    assert "ft991a" in words
    assert "the" not in words
    assert keywords_from_text("alpha beta gamma delta", limit=2) == ["alpha", "beta"]
    assert keywords_from_text("") == []


def test_a_word_pair_seen_once_is_not_a_topic_but_a_recurring_one_is() -> None:
    extractor = HotTopicExtractor()
    extractor.record_text("debugging serial timeouts on the port")
    assert "debugging serial" not in extractor.get_current_topics()
    assert "serial" in extractor.get_current_topics()
    extractor.record_text("still debugging serial timeouts")
    assert "debugging serial" in extractor.get_current_topics()


def test_a_phrase_said_once_that_names_the_project_is_a_topic() -> None:
    # The session works on lbf-ham-radio: "ham radio" said once is a topic, as are its words;
    # a pair of other words said once ("tuning ft991a") is not.
    extractor = HotTopicExtractor()
    extractor.record_project("lbf-ham-radio")
    extractor.record_text("Working on the ham radio project today, tuning ft991a antenna")
    topics = extractor.get_current_topics(20)
    assert {"lbf-ham-radio", "ft991a", "ham radio"} <= set(topics)
    assert "tuning ft991a" not in topics


def test_redactions_marker_is_no_topic_and_joins_no_pair() -> None:
    extractor = HotTopicExtractor()
    extractor.record_text("deploy [REDACTED] staging deploy [REDACTED] staging")
    extractor.record_project("vault-[REDACTED]")
    extractor.record_project("[REDACTED]")
    weights = extractor.get_frequency_map()
    assert not [k for k in weights if "redacted" in k]
    assert "deploy staging" not in weights  # the secret stood between them
    assert extractor.get_active_projects() == ["vault-[REDACTED]"]
    named = HotTopicExtractor()  # the name a secret was given is no topic either
    named.record_text('export OPENAI_API_KEY=[REDACTED] then token: [REDACTED] "pw": "[REDACTED]"')
    assert named.get_current_topics() == ["export"]
