"""Text forms of a session: snapshot transcripts, checkpoint re-injection text, decisions.

Pure: events and checkpoints in, strings out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from cortex.core.history_models import Checkpoint, SessionEvent

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

MAX_SLUG_CHARS = 48
MAX_DECISIONS = 5
_DECISION = re.compile(
    r"\b(decided|decision|we will|we'll|going with|chose|choose to|agreed|settled on)\b",
    re.IGNORECASE,
)
_NON_SLUG = re.compile(r"[^a-z0-9]+")


def slugify(text: str, fallback: str = "session") -> str:
    """A lowercase, dash-separated slug of ``text`` (``fallback`` when nothing is left)."""
    slug = _NON_SLUG.sub("-", text.lower()).strip("-")[:MAX_SLUG_CHARS].strip("-")
    return slug or fallback


def transcript_markdown(title: str, events: Sequence[SessionEvent]) -> str:
    """A markdown transcript: a heading, then one section per meaningful event, in order."""
    lines = [f"# {title}", ""]
    for event in events:
        if not event.is_meaningful:
            continue
        turn = f" (turn {event.turn_index})" if event.turn_index is not None else ""
        label = event.role if event.kind == "message" else f"{event.role} {event.kind}"
        lines += [f"## {label}{turn} - {event.created_at[:19]}Z", "", event.content.strip(), ""]
    return "\n".join(lines).rstrip() + "\n"


def extract_decisions(events: Sequence[SessionEvent], limit: int = MAX_DECISIONS) -> list[str]:
    """The latest meaningful lines that state a decision ("decided", "going with"...)."""
    found: list[str] = []
    for event in reversed(events):
        if not event.is_meaningful:
            continue
        for line in reversed(event.content.splitlines()):
            text = line.strip(" -*\t")
            if text and _DECISION.search(text) and text not in found:
                found.append(text[:500])
                if len(found) >= limit:
                    return list(reversed(found))
    return list(reversed(found))


def format_checkpoint(checkpoint: Checkpoint) -> str:
    """The text re-injected after a compaction: what the agent must not lose."""
    state = checkpoint.state
    lines = [
        f"[CORTEX CHECKPOINT {checkpoint.checkpoint_id} - {checkpoint.type}, "
        f"{checkpoint.timestamp[:16].replace('T', ' ')} UTC]",
    ]
    if checkpoint.summary:
        lines += ["", f"SUMMARY: {checkpoint.summary}"]
    rules = [_text(r) for r in state.get("rules") or ()]
    if isinstance(state.get("rules_left_out"), int) and state["rules_left_out"] > 0:
        rules.append(
            f"({state['rules_left_out']} more rules left out; cortex memory list --layer rule)"
        )
    lines += _section("RULES", rules)
    lines += _section("PINS", [_pin(p) for p in state.get("pins") or ()])
    lines += _section("PENDING TASKS", [_task(t) for t in state.get("pending_tasks") or ()])
    lines += _section("DECISIONS", [_decision(d) for d in state.get("decisions") or ()])
    lines += _section("WORKING MEMORY", [_text(m) for m in state.get("working_memories") or ()])
    lines += _section("FILES CHANGED", [_file(f) for f in state.get("files_changed") or ()])
    lines += _section("NEXT STEPS", list(checkpoint.next_steps))
    if checkpoint.resume_instructions:
        lines += ["", f"RESUME: {checkpoint.resume_instructions}"]
    return "\n".join(lines) + "\n"


def _section(title: str, items: Sequence[str]) -> list[str]:
    shown = [i for i in items if i]
    return ["", f"{title}:", *(f"- {i}" for i in shown)] if shown else []


def _text(item: Any) -> str:
    if isinstance(item, dict):
        return str(item.get("content") or "")
    return str(item)


def _pin(pin: Any) -> str:
    if not isinstance(pin, dict):
        return str(pin)
    mark = " [CRITICAL]" if str(pin.get("importance", "")).upper() == "CRITICAL" else ""
    return f"{pin.get('label', '')}{mark}: {pin.get('content', '')}"


def _task(task: Any) -> str:
    if not isinstance(task, dict):
        return str(task)
    return f"[{task.get('task_id', '')}] {task.get('title', '')} ({task.get('stage', '')})"


def _decision(decision: Any) -> str:
    if isinstance(decision, dict):
        return str(decision.get("decision") or decision.get("content") or "")
    return str(decision)


def _file(item: Any) -> str:
    if isinstance(item, dict):
        return f"{item.get('path', '')} ({item.get('action', 'modified')})"
    return str(item)
