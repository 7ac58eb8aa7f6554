"""The document-side expansion benchmark's related words and index column
(``bench/retrieval/related.py``), on a real in-memory store with the hashing embedder."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "retrieval"))

pytest.importorskip("numpy")  # the embeddings extra's, which the script runs with

from metrics import Corpus, Unit  # noqa: E402
from related import Related, related_stores  # noqa: E402
from run import cortex_search  # noqa: E402

from cortex.services.embeddings import HashingEmbedder  # noqa: E402

VOCABULARY = ["potatoes", "tomatoey", "finance", "quantum", "ledger"]


def test_a_memory_gets_the_closest_words_it_does_not_say() -> None:
    related = Related(HashingEmbedder(), VOCABULARY, per_memory=2, min_cosine=0.1)
    words = related("We planted tomatoes")
    assert words[0] == "potatoes"  # shares "ato", "toe", "oes" with tomatoes
    assert "tomatoey" not in words  # its first four letters are a word of the memory's
    assert len(words) <= 2
    assert Related(HashingEmbedder(), VOCABULARY, 2, min_cosine=0.99)("We planted tomatoes") == []


def test_a_question_finds_a_memory_by_its_related_words_only_with_the_column() -> None:
    units = [Unit("u1", "We planted tomatoes", "s1"), Unit("u2", "The ledger balanced", "s2")]
    corpus = Corpus("tiny", units)
    related = Related(HashingEmbedder(), VOCABULARY, per_memory=1, min_cosine=0.1)
    assert cortex_search()(corpus)("potatoes", 10) == []
    with related_stores(related, 0.25):
        search = cortex_search()(corpus)
    assert search("potatoes", 10) == ["u1"]
    assert search("ledger", 10) == ["u2"]  # the content still counts
