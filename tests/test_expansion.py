"""Query expansion by meaning: which words widen a question (pure), the process's cache of
word vectors, and the search that lets what they find join (a real SQLite store, an embedder
that knows a few words' meanings)."""

from __future__ import annotations

import sqlite3
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from cortex.clock import FixedClock
from cortex.config import Config
from cortex.core import expansion
from cortex.core.expansion import (
    EXPANSION_MIN_COSINE,
    EXPANSION_PER_TERM,
    expansion_words,
    vocabulary,
    widenable_terms,
)
from cortex.services import embeddings
from cortex.services.embeddings import HashingEmbedder, widening_words, word_vectors
from cortex.services.memory import MemoryService, NewMemory
from cortex.store import SQLiteStore
from cortex.store.vector_file import VectorFile


def test_widenable_terms_leave_out_names_common_words_and_numbers() -> None:
    question = "How many weddings did Caroline attend in 2023 with Mel? Ann went too."
    # "Caroline" and "Mel" are capitalized inside the question; "Ann" opens a sentence
    assert widenable_terms(question) == ["weddings", "attend", "ann", "went"]
    assert widenable_terms("Weddings?") == ["weddings"]  # the first word is no name


def test_vocabulary_takes_each_texts_terms_as_a_questions() -> None:
    texts = ["The bride looked stunning, the bride!", "so we are", "x 42 ok-ish"]
    assert vocabulary(texts) == ["bride", "ish", "looked", "stunning"]  # no stop words
    long = " ".join(f"word{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(40))
    assert len(vocabulary([long.replace("word", "w")])) == 32  # a query's first 32 terms


def _cosines(
    table: dict[tuple[str, str], float], vocab: Sequence[str]
) -> Callable[[str], list[float]]:
    return lambda term: [table.get((term, word), 0.0) for word in vocab]


def test_expansion_words_keep_close_new_words_a_few_per_term() -> None:
    vocab = ["bride", "ceremony", "vows", "wedding", "planting", "attendance", "cake"]
    close = {
        ("weddings", "wedding"): 0.95,  # shares the term's first four letters: the stemmer's
        ("weddings", "bride"): 0.8,
        ("weddings", "ceremony"): 0.7,
        ("weddings", "vows"): 0.65,
        ("weddings", "cake"): EXPANSION_MIN_COSINE - 0.01,  # not close enough
        ("attend", "attendance"): 0.9,  # a variant again
        ("attend", "ceremony"): 0.7,  # added for weddings already
    }
    words = expansion_words("Which weddings did I attend?", vocab, _cosines(close, vocab))
    assert words == ["bride", "ceremony", "vows"][:EXPANSION_PER_TERM]
    # the question's own words are never added, and no vocabulary gives nothing
    assert "bride" not in expansion_words("the bride at weddings", vocab, _cosines(close, vocab))
    assert expansion_words("Which weddings?", [], _cosines(close, [])) == []
    # a term with no vector (its cosines do not cover the vocabulary) adds nothing
    assert expansion_words("Which weddings?", vocab, lambda term: []) == []


class MeaningEmbedder:
    """Single words it knows get one of a few meanings (axes); other texts are hashed."""

    model, dim = "meaning-8", 8
    query_prefix = document_prefix = ""
    MEANINGS = {"weddings": 0, "bride": 0, "ceremony": 0}

    def __init__(self) -> None:
        self.hashed = HashingEmbedder(self.dim)
        self.asked: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.asked += texts
        out = []
        for text in texts:
            axis = self.MEANINGS.get(text)
            out.append(
                [float(i == axis) for i in range(self.dim)]
                if axis is not None
                else self.hashed.embed([text])[0]
            )
        return out


def test_word_vectors_embed_each_word_once_a_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embeddings, "_words", {})
    monkeypatch.setattr(embeddings, "WORD_CACHE", 3)
    embedder = MeaningEmbedder()
    first = word_vectors(embedder, ["bride", "vows", "bride"])
    assert embedder.asked == ["bride", "vows"] and set(first) == {"bride", "vows"}
    word_vectors(embedder, ["bride", "cake", "ring"])  # the cache holds 3: "bride" goes
    assert embedder.asked == ["bride", "vows", "cake", "ring"]
    assert list(embeddings._words) == [("meaning-8", w) for w in ("vows", "cake", "ring")]
    assert widening_words(embedder, "Which weddings?", ["the bride smiled", "cake"]) == ["bride"]


def test_word_vectors_outlive_the_process_in_a_private_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embeddings, "_words", {})
    path = tmp_path / "cache" / "words.db"
    first = MeaningEmbedder()
    vectors = word_vectors(first, ["bride", "vows"], VectorFile(path))
    assert first.asked == ["bride", "vows"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    monkeypatch.setattr(embeddings, "_words", {})  # a later process: an empty memory
    later = MeaningEmbedder()
    again = word_vectors(later, ["vows", "bride", "cake"], VectorFile(path))
    assert later.asked == ["cake"]  # the others from the file
    assert again["bride"] == vectors["bride"] and again["vows"] == vectors["vows"]


def test_a_word_file_that_cannot_be_used_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embeddings, "_words", {})
    garbage = tmp_path / "words.db"
    garbage.write_bytes(b"not a database at all" * 100)
    embedder = MeaningEmbedder()
    file = VectorFile(garbage)
    assert set(word_vectors(embedder, ["bride"], file)) == {"bride"}  # embedded all the same
    assert garbage.read_bytes() == b"not a database at all" * 100  # untouched
    monkeypatch.setattr(embeddings, "_words", {})
    word_vectors(embedder, ["bride"], file)  # not tried again: embedded again
    assert embedder.asked == ["bride", "bride"]


def test_a_word_file_locked_by_another_process_is_skipped_that_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embeddings, "_words", {})
    path = tmp_path / "words.db"
    file = VectorFile(path)
    word_vectors(MeaningEmbedder(), ["bride"], file)  # creates the file
    other = sqlite3.connect(path)
    other.execute("BEGIN EXCLUSIVE")  # another process writing
    monkeypatch.setattr(embeddings, "_words", {})
    embedder = MeaningEmbedder()
    assert set(word_vectors(embedder, ["bride", "vows"], file)) == {"bride", "vows"}
    assert embedder.asked == ["bride", "vows"]  # the file could not be read: embedded
    other.rollback()
    other.close()
    monkeypatch.setattr(embeddings, "_words", {})
    later = MeaningEmbedder()
    word_vectors(later, ["bride"], file)
    assert later.asked == []  # the file is used again once the lock is gone


def test_search_lets_what_the_widening_finds_join_when_it_shares_a_question_term(
    make_config: Callable[..., Config],
    clock: FixedClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(embeddings, "_words", {})
    store = SQLiteStore(tmp_path / "brain.db")
    svc = MemoryService(store, make_config(), clock, embedder=MeaningEmbedder())
    # "ann" is in every memory (worth little); the notes, shorter than the one about the
    # bride, fill the question's pool of 20 candidates after the best match
    svc.add("Ann talked about weddings all day")
    svc.add_many(NewMemory(f"Ann: note {i}") for i in range(30))
    found = svc.add("Ann: the bride wore a long blue dress at the party").memory
    stranger = svc.add("Bo: the ceremony ran late").memory
    question = "Which weddings did Ann go to?"
    hits = svc.search(question, limit=10)
    joined = [h for h in hits if h.memory.id == found.id]
    assert joined and "close in meaning to the question: bride, ceremony" in joined[0].why
    assert stranger.id not in {h.memory.id for h in hits}  # shares no term of the question
    unwidened = MemoryService(store, make_config(search_widening=False), clock, MeaningEmbedder())
    assert found.id not in {h.memory.id for h in unwidened.search(question, limit=10)}
    monkeypatch.setattr(expansion, "EXPANSION_MEMORIES", 0)  # none of the closest: no words
    assert found.id not in {h.memory.id for h in svc.search(question, limit=10)}
