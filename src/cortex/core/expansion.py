"""Query expansion by meaning (the optional embeddings extra): which words widen a question.

Pure: plain values in, plain values out. The search service gives the question, the texts of
the ``EXPANSION_MEMORIES`` memories closest to it in meaning, and a way to get the cosine of
a question term with each word of those texts (the model's vectors of single words).

A question's words widen with the words those memories use for the same things ("weddings"
with "bride" and "ceremony", "gardening" with "planting"), which lexical search misses::

    for each term of the question (``widenable_terms``: not a name it capitalizes, not a
    word of ``COMMON_TERMS``; letters only, three or more):
        take the vocabulary's words (``vocabulary``) by cosine with the term, best first,
        among the first EXPANSION_NEIGHBOURS;
        keep at most EXPANSION_PER_TERM with a cosine of EXPANSION_MIN_COSINE or more,
        leaving out the question's own terms and words sharing the term's first four
        letters (the index's stemmer matches those already).

The search then looks for the kept words on their own; a memory they find that the question
did not joins the candidates at ``EXPANSION_WEIGHT`` times the best candidate's score times
its relevance to them, if it holds one of the question's own terms (a memory that shares
nothing with the question but a word close to one of its words is too far from it: that
rule is what kept the adversarial questions of LoCoMo, which turn on who said what, from
losing recall). The session votes, neighbours and meaning then rank it like any candidate.
Measured on LoCoMo and LongMemEval in ``docs/benchmarks-history.md`` (the twentieth sitting).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Iterable, Sequence

from cortex.core.retrieval import STOPWORDS, query_terms, text_terms

EXPANSION_MEMORIES = 50
"""The memories closest to the question in meaning whose words may widen it."""
EXPANSION_NEIGHBOURS = 8
"""The vocabulary's words closest to a term that are looked at (the term itself among them)."""
EXPANSION_PER_TERM = 3
"""Most words added for one term of the question."""
EXPANSION_MIN_COSINE = 0.6
"""Least cosine of a word with the term it is added for."""
EXPANSION_WEIGHT = 0.15
"""A memory found by the added words alone joins at this share of the best candidate's score
(times its relevance to them)."""
COMMON_TERMS = frozenset(
    "many much one two three four five six seven eight nine ten first last next year years "
    "month months week weeks day days time times ago today recently past different type kind "
    "thing things something make made get got like likely".split()
)
"""Words a question uses for times, counts and kinds, too common to widen ("months" would
bring "weeks", "two" would bring "three")."""

_LETTERS = re.compile(r"[a-z]{3,}")
_NAME = re.compile(r"(?<!^)(?<![.?!] )\b[A-Z][a-z]+")
"""A capitalized word that does not open the text or a sentence: a name, which has no
synonyms to widen with."""


def widenable_terms(question: str) -> list[str]:
    """The terms of ``question`` that may widen: not names, not ``COMMON_TERMS``, letters."""
    names = {word.lower() for word in _NAME.findall(question)}
    return [
        term
        for term in query_terms(question)
        if _LETTERS.fullmatch(term) and term not in names and term not in COMMON_TERMS
    ]


def vocabulary(texts: Iterable[str]) -> list[str]:
    """The words ``texts`` hold that may be added, sorted: of each text, its terms
    (``text_terms``: its first ``MAX_QUERY_TERMS`` distinct words that are not stop words;
    not a question's, whose frame a memory has not), those of letters only, three or more
    (never a stop word: a text of stop words alone keeps them as its terms)."""
    words: set[str] = set()
    for text in texts:
        words.update(w for w in text_terms(text) if _LETTERS.fullmatch(w) and w not in STOPWORDS)
    return sorted(words)


def expansion_words(
    question: str, vocab: Sequence[str], cosines: Callable[[str], Sequence[float]]
) -> list[str]:
    """The words that widen ``question`` (see the module docstring), in order: those of its
    first widenable term first. ``cosines(term)`` gives the term's cosine with each word of
    ``vocab``, in ``vocab``'s order."""
    own = set(query_terms(question))
    added: list[str] = []
    for term in widenable_terms(question) if vocab else ():
        similarity = cosines(term)
        if len(similarity) != len(vocab):  # (no vector for the term)
            continue
        kept = 0
        for index in heapq.nlargest(
            EXPANSION_NEIGHBOURS, range(len(vocab)), similarity.__getitem__
        ):
            word = vocab[index]
            if similarity[index] < EXPANSION_MIN_COSINE or kept == EXPANSION_PER_TERM:
                break
            if word in own or word[:4] == term[:4] or word in added:
                continue
            added.append(word)
            kept += 1
    return added
