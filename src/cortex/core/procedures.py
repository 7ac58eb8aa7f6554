"""Procedural memory: which procedure fits a task, and a completed session as a procedure.

Pure. A procedure *matches* a query when at least ``MATCH_THRESHOLD`` of the query's terms
(``cortex.core.retrieval.query_terms``) appear in the procedure's key, title or steps. Among
matches, use counts a little::

    score = overlap * (1 + USAGE_WEIGHT * ln(1 + usage_count))

so a workflow used 20 times outranks an equally matching one never used, but never one that
matches the task clearly better. Matching procedures come first in context assembly
(procedural-first ranking).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cortex.core.history_models import SessionEvent
from cortex.core.hygiene import Procedure
from cortex.core.retrieval import matched_terms
from cortex.core.transcripts import slugify

MATCH_THRESHOLD = 0.5
USAGE_WEIGHT = 0.1
MAX_STEPS = 20
MAX_STEP_CHARS = 300


@dataclass(frozen=True)
class ScoredProcedure:
    """A procedure that matches the task, its score and why."""

    procedure: Procedure
    score: float
    why: str
    tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        return self.procedure.to_dict() | {
            "score": round(self.score, 6),
            "why": self.why,
            "tokens": self.tokens,
        }


def procedure_text(p: Procedure) -> str:
    """What a query is matched against: key, title and steps."""
    return " ".join([p.procedure_key.replace("-", " "), p.title, *p.steps])


def match_procedures(
    terms: Sequence[str], procedures: Sequence[Procedure], threshold: float = MATCH_THRESHOLD
) -> list[ScoredProcedure]:
    """The procedures whose text holds at least ``threshold`` of ``terms``, best first."""
    if not terms:
        return []
    found = []
    for p in procedures:
        matched = matched_terms(terms, procedure_text(p))
        overlap = len(matched) / len(terms)
        if overlap < threshold:
            continue
        score = overlap * (1 + USAGE_WEIGHT * math.log1p(p.usage_count))
        why = f"workflow matches {', '.join(repr(t) for t in matched[:3])}"
        if p.usage_count:
            why += f"; used {p.usage_count} times"
        found.append(ScoredProcedure(p, score, why))
    found.sort(key=lambda s: (-s.score, s.procedure.id))
    return found


def steps_from_events(events: Sequence[SessionEvent]) -> list[str]:
    """A completed session's steps: its user requests in order, one line each, repeats and
    empty ones dropped, at most ``MAX_STEPS``."""
    steps: list[str] = []
    for event in events:
        if (event.role, event.kind) != ("user", "message") or not event.is_meaningful:
            continue
        line = " ".join(event.content.split())[:MAX_STEP_CHARS]
        if line and line not in steps:
            steps.append(line)
    return steps[:MAX_STEPS]


def procedure_key_for(title: str) -> str:
    """A stable key for a procedure title (a slug)."""
    return slugify(title, fallback="procedure")
