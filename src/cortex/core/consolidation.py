"""Consolidation without a model: duplicates, overwrites and conflicts among live memories.

Pure: memories in, a plan out. Two memories are compared only within one group (same scope,
project, user and layer; any type), and only through their words:

- ``words(text)``: lowercase ``\\w+`` tokens; ``normalized`` joins them, so case, spacing and
  punctuation never make two memories different (an *exact* duplicate).
- ``content_tokens``: the words less stop words (negations are kept: they change a meaning),
  a final plural ``s`` dropped.
- ``shingles``: the content tokens and their adjacent pairs (order matters a little).

Rules, in this order:

1. **Duplicate**: the same normalized text, or shingle Jaccard >= ``near`` with the same
   polarity (an even or odd number of negations) and the same numbers. Duplicates merge into
   the one that takes precedence: explicit before implicit, then the newest.
2. **Same subject, different statement** ("related"): content-token Jaccard >= ``related``
   (or the same words with other numbers: a changed value) and not a duplicate. The newer
   one supersedes the older when it is explicit (a person said it); otherwise both stay
   live and are linked as a conflict, never silently dropped.
3. A **candidate** (extracted from sessions, not stored yet) that duplicates a live memory is
   not added; otherwise it is promoted, and linked as a conflict to any live memory on the
   same subject (a candidate is implicit, so it never supersedes).

An upsert key names one fact: a memory with a key is merged into or superseded by only a
memory of its type without a key, which takes the key (so that the next upsert with it
replaces the survivor, not a second live truth). Two memories under different keys, or a keyed
one and one of another type, are linked as a conflict instead.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from cortex.core.memory_models import EXPLICIT, Memory
from cortex.core.retrieval import STOPWORDS

NEAR_DUPLICATE = 0.8
"""Default shingle Jaccard at or above which two memories say the same thing."""
RELATED = 0.6
"""Default content-token Jaccard at or above which two memories are about the same subject."""
MERGE, SUPERSEDE, CONFLICT, PROMOTE, DUPLICATE_CANDIDATE = (
    "merge",
    "supersede",
    "conflict",
    "promote",
    "duplicate_candidate",
)

_WORD = re.compile(r"\w+(?:'\w+)?", re.UNICODE)
NEGATIONS = frozenset(
    "not no never none nobody nothing neither nor without don't doesn't didn't isn't aren't "
    "wasn't weren't won't can't cannot shouldn't wouldn't dont doesnt didnt isnt arent wont "
    "cant shouldnt avoid stop".split()
)
_DIGIT = re.compile(r"\d")


def words(text: str) -> list[str]:
    """Lowercase word tokens of ``text`` (apostrophes kept inside a word: ``don't``)."""
    return _WORD.findall(text.lower())


def normalized(text: str) -> str:
    """``text`` with case, spacing and punctuation folded away: equal means exact duplicate."""
    return " ".join(words(text))


def stem(word: str) -> str:
    """A plural or third-person ``s`` dropped (``prefers`` -> ``prefer``); nothing more."""
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def content_tokens(text: str) -> list[str]:
    """The words that carry meaning, lightly stemmed: stop words dropped, negations kept."""
    return [stem(w) for w in words(text) if w in NEGATIONS or w not in STOPWORDS]


def shingles(tokens: Sequence[str]) -> set[str]:
    """Unigrams and adjacent pairs of ``tokens``."""
    return set(tokens) | {f"{a} {b}" for a, b in zip(tokens, tokens[1:], strict=False)}


def jaccard(a: AbstractSet[str], b: AbstractSet[str]) -> float:
    """|a & b| / |a | b|, 0 for two empty sets."""
    if not a and not b:
        return 0.0
    shared = len(a & b)
    return shared / (len(a) + len(b) - shared)


@dataclass(frozen=True)
class Fingerprint:
    """What comparing a memory needs, computed once."""

    normalized: str
    tokens: frozenset[str]
    shingles: frozenset[str]
    negative: bool
    numbers: frozenset[str]

    @classmethod
    def of(cls, text: str) -> Fingerprint:
        tokens = content_tokens(text)
        negations = sum(t in NEGATIONS for t in tokens)
        return cls(
            normalized=normalized(text),
            tokens=frozenset(tokens),
            shingles=frozenset(shingles(tokens)),
            negative=negations % 2 == 1,
            numbers=frozenset(t for t in tokens if _DIGIT.search(t)),
        )


def similarity(a: Fingerprint, b: Fingerprint) -> float:
    """Shingle Jaccard of two fingerprints (1.0 for exact duplicates)."""
    if a.normalized == b.normalized:
        return 1.0
    return jaccard(a.shingles, b.shingles)


def is_duplicate(a: Fingerprint, b: Fingerprint, near: float = NEAR_DUPLICATE) -> bool:
    """Rule 1: the same text, or near-identical with the same polarity and numbers."""
    if a.normalized == b.normalized:
        return True
    return (
        a.negative == b.negative
        and a.numbers == b.numbers
        and jaccard(a.shingles, b.shingles) >= near
    )


def is_related(a: Fingerprint, b: Fingerprint, related: float = RELATED) -> bool:
    """Rule 2's test: about the same subject (content-token Jaccard), or the same words with
    other numbers (a value that changed: a port, a version, a limit)."""
    if jaccard(a.tokens, b.tokens) >= related:
        return True
    rest = a.tokens - a.numbers
    return bool(rest) and bool(a.numbers) and rest == b.tokens - b.numbers


def group_key(m: Memory) -> tuple[str, str, str, str]:
    """Memories are compared only within one (scope, project, user, layer) group: a
    preference noted as a ``note`` and extracted as a ``preference`` is still one fact."""
    return (m.scope, m.project or "", m.user_id or "", m.layer)


def absorbs(keeper: Memory, other: Memory, keeper_key: str | None) -> bool:
    """Whether ``keeper`` (whose upsert key is ``keeper_key`` by now) may merge or supersede
    ``other``: ``other`` has no key, or ``keeper`` is of its type with no key and takes it."""
    return other.upsert_key is None or (keeper.type == other.type and keeper_key is None)


def precedence(m: Memory) -> tuple[bool, str, str]:
    """Which of two duplicates survives: explicit first, then the most recently confirmed or
    created, then the larger id (deterministic)."""
    return (m.remember_intent == EXPLICIT, m.last_confirmed_at or m.created_at, m.id)


@dataclass(frozen=True)
class Action:
    """One step of a plan: ``kind`` is merge, supersede, conflict, promote or
    duplicate_candidate; ``keep_id`` survives (or is the candidate), ``other_id`` is merged,
    superseded, linked or duplicated (None for a plain promotion)."""

    kind: str
    keep_id: str
    other_id: str | None
    similarity: float
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "keep_id": self.keep_id,
            "other_id": self.other_id,
            "similarity": round(self.similarity, 4),
            "reason": self.reason,
        }


@dataclass
class Plan:
    """What a consolidation would do; ``counts`` are the run's audit numbers."""

    input_count: int
    candidate_count: int
    actions: list[Action] = field(default_factory=list)

    def of_kind(self, kind: str) -> list[Action]:
        return [a for a in self.actions if a.kind == kind]

    def counts(self) -> dict[str, int]:
        """merged = duplicates merged plus candidates dropped as duplicates."""
        return {
            "input_count": self.input_count,
            "candidate_count": self.candidate_count,
            "promoted_count": len(self.of_kind(PROMOTE)),
            "merged_count": len(self.of_kind(MERGE)) + len(self.of_kind(DUPLICATE_CANDIDATE)),
            "superseded_count": len(self.of_kind(SUPERSEDE)),
            "conflicted_count": len(self.of_kind(CONFLICT)),
        }


CANDIDATE_OVERLAP = 0.3
"""Word overlap (Jaccard) below which two memories are never compared: below every
threshold the settings allow (their shingles cannot overlap enough either)."""


class _Group:
    """The live memories of one group and an inverted index of their tokens."""

    def __init__(self) -> None:
        self.alive: dict[str, tuple[Memory, Fingerprint]] = {}
        self.postings: dict[str, list[str]] = {}
        self.rank: dict[str, tuple[bool, str, str]] = {}

    def add(self, m: Memory, fp: Fingerprint) -> None:
        self.alive[m.id] = (m, fp)
        self.rank[m.id] = precedence(m)
        for token in fp.tokens or {fp.normalized}:
            self.postings.setdefault(token, []).append(m.id)

    def neighbours(self, fp: Fingerprint, exclude: str) -> list[tuple[Memory, Fingerprint]]:
        """Alive members whose words overlap ``fp``'s enough to be similar at all, in order
        of precedence (counted through the token index: never a comparison with all)."""
        shared: Counter[str] = Counter()
        for token in fp.tokens or {fp.normalized}:
            shared.update(self.postings.get(token, ()))
        size = len(fp.tokens) or 1
        found = []
        for other_id, count in shared.items():
            pair = self.alive.get(other_id)
            if pair is None or other_id == exclude:
                continue
            union = size + (len(pair[1].tokens) or 1) - count
            if count / union >= CANDIDATE_OVERLAP or pair[1].normalized == fp.normalized:
                found.append(pair)
        found.sort(key=lambda pair: self.rank[pair[0].id], reverse=True)
        return found

    def drop(self, memory_id: str) -> None:
        self.alive.pop(memory_id, None)


def plan_consolidation(
    memories: Iterable[Memory],
    candidates: Iterable[Memory] = (),
    *,
    near: float = NEAR_DUPLICATE,
    related: float = RELATED,
    linked: Iterable[frozenset[str]] = (),
) -> Plan:
    """The plan for ``memories`` (live) and ``candidates`` (to add), by the module's rules.

    ``linked`` are pairs already linked as conflicts: never reported again.
    """
    known = set(linked)
    live, new = list(memories), list(candidates)
    plan = Plan(input_count=len(live), candidate_count=len(new))
    groups: dict[tuple[str, ...], _Group] = {}
    ordered = sorted(live, key=precedence, reverse=True)
    prints = {m.id: Fingerprint.of(m.content) for m in [*ordered, *new]}
    keys = {m.id: m.upsert_key for m in ordered}  # a survivor takes its merged memory's key
    for m in ordered:
        groups.setdefault(group_key(m), _Group()).add(m, prints[m.id])
    for m in ordered:  # rule 1, best first: each survivor absorbs its duplicates
        group = groups[group_key(m)]
        if m.id not in group.alive:
            continue
        for other, fp in group.neighbours(prints[m.id], m.id):
            if not is_duplicate(prints[m.id], fp, near):
                continue
            score = similarity(prints[m.id], fp)
            if absorbs(m, other, keys[m.id]):
                plan.actions.append(Action(MERGE, m.id, other.id, score, _merge_reason(score)))
                keys[m.id] = keys[m.id] or other.upsert_key
                group.drop(other.id)
            elif frozenset((m.id, other.id)) not in known:
                why = f"{_merge_reason(score)} under another upsert key or type; kept both"
                plan.actions.append(Action(CONFLICT, m.id, other.id, score, why))
                known.add(frozenset((m.id, other.id)))
    for group in groups.values():  # rule 2, newest first
        _overwrite_or_link(group, plan, related, known, keys)
    for c in new:  # rule 3
        _place_candidate(c, prints[c.id], groups, plan, near, related, known)
    return plan


def _merge_reason(score: float) -> str:
    return "exact duplicate" if score >= 1.0 else f"near duplicate (similarity {score:.2f})"


def _overwrite_or_link(
    group: _Group,
    plan: Plan,
    related: float,
    known: set[frozenset[str]],
    keys: dict[str, str | None],
) -> None:
    newest_first = sorted(group.alive.values(), key=lambda p: (p[0].created_at, p[0].id))[::-1]
    for m, fp in newest_first:
        if m.id not in group.alive:
            continue
        for other, ofp in group.neighbours(fp, m.id):
            if (other.created_at, other.id) >= (m.created_at, m.id) or not is_related(
                fp, ofp, related
            ):
                continue
            score = jaccard(fp.tokens, ofp.tokens)
            if m.remember_intent == EXPLICIT and absorbs(m, other, keys[m.id]):
                why = f"newer explicit statement on the same subject (overlap {score:.2f})"
                plan.actions.append(Action(SUPERSEDE, m.id, other.id, score, why))
                keys[m.id] = keys[m.id] or other.upsert_key
                group.drop(other.id)
            elif frozenset((m.id, other.id)) not in known:
                why = f"same subject, different statement (overlap {score:.2f}); kept both"
                plan.actions.append(Action(CONFLICT, m.id, other.id, score, why))
                known.add(frozenset((m.id, other.id)))


def _place_candidate(
    c: Memory,
    fp: Fingerprint,
    groups: dict[tuple[str, ...], _Group],
    plan: Plan,
    near: float,
    related: float,
    known: set[frozenset[str]],
) -> None:
    group = groups.setdefault(group_key(c), _Group())
    neighbours = group.neighbours(fp, c.id)
    for other, ofp in neighbours:
        if is_duplicate(fp, ofp, near):
            score = similarity(fp, ofp)
            why = f"already known as {other.id} ({_merge_reason(score)})"
            plan.actions.append(Action(DUPLICATE_CANDIDATE, c.id, other.id, score, why))
            return
    plan.actions.append(Action(PROMOTE, c.id, None, 0.0, "new fact from a session"))
    for other, ofp in neighbours:
        if is_related(fp, ofp, related) and frozenset((c.id, other.id)) not in known:
            score = jaccard(fp.tokens, ofp.tokens)
            why = f"same subject as {other.id}, different statement (overlap {score:.2f})"
            plan.actions.append(Action(CONFLICT, c.id, other.id, score, why))
            known.add(frozenset((c.id, other.id)))
    group.add(c, fp)
