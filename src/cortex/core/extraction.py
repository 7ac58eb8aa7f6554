"""Candidate extraction: durable facts a session stated, found without a model.

A ``SourceText`` is one piece of a session (a user message, a checkpoint decision); the
built-in ``RuleExtractor`` keeps the lines that state a preference, a rule, a decision or an
explicit "remember", each as a ``Candidate`` with a memory type. Users with a model plug in
their own extractor: any callable taking the source texts and returning candidates
(``Extractor``), named by the ``consolidation_extractor`` setting as ``module:callable``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

MAX_CANDIDATE_CHARS = 500
MIN_CANDIDATE_WORDS = 3


@dataclass(frozen=True)
class SourceText:
    """Text a session produced, with where it came from."""

    text: str
    session_id: str
    project: str | None = None
    user_id: str | None = None
    kind: str = "message"
    """``message`` (a user's words) or ``decision`` (recorded in a checkpoint)."""


@dataclass(frozen=True)
class Candidate:
    """A fact to consider for long-term memory, with its memory type and source."""

    content: str
    type: str
    session_id: str
    project: str | None = None
    user_id: str | None = None


class Extractor(Protocol):
    """What ``consolidation_extractor`` names: source texts in, candidates out."""

    def __call__(self, sources: Sequence[SourceText]) -> Sequence[Candidate]: ...


_REMEMBER = re.compile(r"^(?:please\s+)?(?:remember|note)(?:\s+that)?[:,]?\s+(?P<fact>.+)$", re.I)
_PREFERENCE = re.compile(
    r"\b(?:i|we)\s+(?:prefer|like|want|use|always|never|don't|do not)\b|\bprefer(?:s|red)?\b",
    re.I,
)
_RULE = re.compile(r"^(?:always|never|don't|do not|must|make sure)\b", re.I)
_DECISION = re.compile(
    r"\b(?:decided|decision|we will|we'll|going with|chose|agreed|settled on)\b", re.I
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def _clean(text: str) -> str:
    return " ".join(text.strip(" -*\t>").split())[:MAX_CANDIDATE_CHARS]


def _kind(sentence: str) -> str | None:
    """The memory type a sentence states, or None when it states nothing durable."""
    if _REMEMBER.match(sentence):
        return "note"
    if _RULE.match(sentence):
        return "convention"
    if _PREFERENCE.search(sentence):
        return "preference"
    if _DECISION.search(sentence):
        return "decision"
    return None


class RuleExtractor:
    """The built-in extractor: sentences of user messages that match a pattern, and every
    checkpoint decision. Questions are never facts."""

    name = "rules"

    def __call__(self, sources: Sequence[SourceText]) -> list[Candidate]:
        found: dict[tuple[str, str | None, str], Candidate] = {}
        for source in sources:
            pieces = [source.text] if source.kind == "decision" else _SENTENCE.split(source.text)
            for piece in pieces:
                sentence = _clean(piece)
                if len(sentence.split()) < MIN_CANDIDATE_WORDS or sentence.endswith("?"):
                    continue
                kind = "decision" if source.kind == "decision" else _kind(sentence)
                if kind is None:
                    continue
                match = _REMEMBER.match(sentence)
                content = _clean(match["fact"]) if match else sentence
                key = (content.lower(), source.project, kind)
                found.setdefault(
                    key,
                    Candidate(content, kind, source.session_id, source.project, source.user_id),
                )
        return list(found.values())
