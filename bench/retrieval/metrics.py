"""Retrieval metrics and the two benchmarks' protocols (shared/data/README.md).

Pure functions over ids: a ranked list of retrieved ids and the set of gold ids.

- ``recall_fraction@k`` (LoCoMo's "recall accuracy"): share of gold ids in the top k.
- ``recall_any@k`` / ``recall_all@k`` (LongMemEval ``eval_utils.py``): any / every gold id in
  the top k.
- ``ndcg@k``: binary relevance, ideal ranking = every gold id first.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

LOCOMO_CATEGORIES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}


def recall_fraction(ranked: Sequence[str], gold: set[str], k: int) -> float:
    return len(set(ranked[:k]) & gold) / len(gold) if gold else 0.0


def recall_any(ranked: Sequence[str], gold: set[str], k: int) -> float:
    return 1.0 if set(ranked[:k]) & gold else 0.0


def recall_all(ranked: Sequence[str], gold: set[str], k: int) -> float:
    return 1.0 if gold and gold <= set(ranked[:k]) else 0.0


def ndcg(ranked: Sequence[str], gold: set[str], k: int) -> float:
    dcg = sum(1.0 / math.log2(i + 2) for i, doc in enumerate(ranked[:k]) if doc in gold)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(gold), k)))
    return dcg / ideal if ideal else 0.0


def distinct_in_order(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


# -- LoCoMo ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Unit:
    """One retrieval unit (a memory): its id, text, the session it belongs to and when that
    session took place (ISO 8601 UTC, when the data says)."""

    id: str
    text: str
    session: str
    at: str | None = None


@dataclass(frozen=True)
class Question:
    text: str
    gold: frozenset[str]
    category: str
    gold_sessions: frozenset[str] = frozenset()


@dataclass
class Corpus:
    """One haystack (a LoCoMo conversation, a LongMemEval question) and its questions."""

    name: str
    units: list[Unit]
    questions: list[Question] = field(default_factory=list)
    now: str | None = None
    """When the questions are asked (ISO 8601 UTC), when the data says."""


_EVIDENCE = re.compile(r"D\d+:\d+")


def clean_evidence(raw: Sequence[str], known: set[str]) -> frozenset[str]:
    """Fix the data's malformed evidence ids (``D:11:26``, ``D30:05``, ``a; b``) and drop ids
    that do not exist (data README: skip empty or malformed evidence)."""
    found = set()
    for item in raw:
        text = item.replace("D:", "D")
        for match in _EVIDENCE.findall(text):
            session, turn = match[1:].split(":")
            found.add(f"D{int(session)}:{int(turn)}")
    return frozenset(found & known)


def locomo_corpora(samples: list[dict[str, Any]]) -> list[Corpus]:
    """Turn units (``speaker: text [shares caption]``) and questions with valid evidence."""
    corpora = []
    for sample in samples:
        conv = sample["conversation"]
        units = []
        for key in sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=_num):
            at = locomo_time(conv.get(f"{key}_date_time"))
            for turn in conv[key]:
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [shares {turn['blip_caption']}]"
                units.append(Unit(turn["dia_id"], text, key, at))
        known = {u.id for u in units}
        session_of = {u.id: u.session for u in units}
        corpus = Corpus(sample["sample_id"], units)
        for qa in sample["qa"]:
            gold = clean_evidence(qa.get("evidence") or [], known)
            if gold:
                corpus.questions.append(
                    Question(
                        qa["question"],
                        gold,
                        LOCOMO_CATEGORIES[int(qa["category"])],
                        frozenset(session_of[g] for g in gold),
                    )
                )
        corpora.append(corpus)
    return corpora


def locomo_time(text: str | None) -> str | None:
    """A LoCoMo session time (``1:56 pm on 8 May, 2023``) as ISO 8601 UTC, or None."""
    if not text:
        return None
    moment = datetime.strptime(" ".join(text.split()), "%I:%M %p on %d %B, %Y")
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def lme_time(text: str) -> str:
    """A LongMemEval time (``2023/05/20 (Sat) 02:21``) as ISO 8601 UTC."""
    moment = datetime.strptime(re.sub(r"\s*\(\w+\)\s*", " ", text), "%Y/%m/%d %H:%M")
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _num(key: str) -> int:
    return int(key.rsplit("_", 1)[1])


# -- LongMemEval (official retrieval protocol) -----------------------------------------------
def longmemeval_corpora(items: list[dict[str, Any]], level: str) -> list[Corpus]:
    """One corpus per question: its haystack as session documents (user turns joined by a
    space) or as user turns; gold per the official protocol (abstention and no-user-gold
    questions skipped; an answer session without a user ``has_answer`` turn is not gold)."""
    corpora = []
    for item in items:
        if item["question_id"].endswith("_abs"):
            continue
        units, gold = [], set()
        sessions = zip(item["haystack_session_ids"], item["haystack_sessions"],
                       item["haystack_dates"], strict=True)  # fmt: skip
        for sid, turns, when in sessions:
            at = lme_time(when)
            user = [t for t in turns if t["role"] == "user"]
            has_gold = "answer" in sid and any(t.get("has_answer") for t in user)
            if level == "session":
                units.append(Unit(sid, " ".join(t["content"] for t in user), sid, at))
                if has_gold:
                    gold.add(sid)
                continue
            for index, turn in enumerate(user):
                uid = f"{sid}#{index}"
                units.append(Unit(uid, turn["content"], sid, at))
                if "answer" in sid and turn.get("has_answer"):
                    gold.add(uid)
        if gold:
            question = Question(item["question"], frozenset(gold), item["question_type"])
            now = lme_time(item["question_date"])
            corpora.append(Corpus(item["question_id"], units, [question], now))
    return corpora


# -- the figures a change to the ranking is judged by ----------------------------------------
COLUMNS = (  # (label, suite, category or None for the headline mean, metric)
    ("R@10", "locomo", None, "R@10"),
    ("multi-hop", "locomo", "multi-hop", "R@10"),
    ("open-domain", "locomo", "open-domain", "R@10"),
    ("temporal", "locomo", "temporal", "R@10"),
    ("single-hop", "locomo", "single-hop", "R@10"),
    ("adv. R@5", "locomo", "adversarial", "R@5"),
    ("LME sess all@5", "lme_session", None, "R_all@5"),
    ("any@1", "lme_session", None, "R_any@1"),
    ("sess nDCG", "lme_session", None, "nDCG@10"),
    ("LME turn all@10", "lme_turn", None, "R_all@10"),
    ("turn nDCG", "lme_turn", None, "nDCG@10"),
)
"""The headline figures of a ``run.py`` report, each (its label, the set, the category or
None for the set's overall figure, the metric); ``figures`` adds each LoCoMo conversation's
R@10."""


def figures(report: dict[str, Any]) -> dict[str, float]:
    """``COLUMNS``' figures of ``run.py``'s report of one system (per set: its ``table``,
    ``overall`` and, for LoCoMo, ``per_corpus``), and each LoCoMo conversation's R@10 under
    its name; a set or a category the report lacks (``--quick``, ``--locomo-only``) gives
    none."""
    out = {}
    for label, suite, category, metric in COLUMNS:
        part = report.get(suite)
        if part is None:
            continue
        found = part["overall"] if category is None else part["table"].get(category)
        if found is not None:
            out[label] = found[metric]
    for name, headline in report.get("locomo", {}).get("per_corpus", {}).items():
        out[name] = headline["R@10"]
    return out


def keeps_every_split(row: dict[str, float], base: dict[str, float]) -> bool:
    """Whether no figure of ``base`` (``figures``) is lower in ``row``: the benchmark's rule
    for keeping a change to the ranking (a gain must hold on every set and every LoCoMo
    conversation)."""
    return all(row[k] >= base[k] - 1e-9 for k in base)
