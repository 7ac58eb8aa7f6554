"""The session-continuity preamble and the pins re-injection block.

Both are plain text built from plain values; the current time is a parameter. Output is capped
in characters: the least important lines go first, and the cap is never exceeded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from cortex.clock import parse_time
from cortex.core.models import PendingTask, Pin, RestoredSessionContext, SessionState
from cortex.errors import ValidationError

MAX_TITLE_CHARS = 120
MAX_PIN_CONTENT_CHARS = 500
MAX_PREAMBLE_CHARS = 8000
"""The preamble's default cap in characters."""
ELLIPSIS = "…"


def _one_line(text: str, limit: int) -> str:
    """Collapse whitespace to single spaces and cut to ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(0, limit - 1)] + ELLIPSIS


def unique_casefold(items: Iterable[str], limit: int) -> list[str]:
    """Non-empty items, deduplicated case-insensitively in order, at most ``limit``."""
    seen: set[str] = set()
    out: list[str] = []
    for text in items:
        if len(out) >= limit:
            break
        if text and text.casefold() not in seen:
            seen.add(text.casefold())
            out.append(text)
    return out


def _dedupe(items: Iterable[str], limit: int) -> list[str]:
    """Items made one-line and stripped, then ``unique_casefold``."""
    return unique_casefold((_one_line(str(item), MAX_TITLE_CHARS) for item in items), limit)


def format_age(moment: str | None, now: datetime, date_format: str = "relative") -> str | None:
    """``"{h}h ago"`` under a day, else ``"{d}d ago"`` (floored); ``YYYY-MM-DD`` if absolute.

    Returns None when ``moment`` is missing or does not parse.
    """
    if not moment:
        return None
    try:
        when = parse_time(moment)
    except ValidationError:
        return None
    if date_format == "absolute":
        return when.strftime("%Y-%m-%d")
    hours = max(0.0, (now - when).total_seconds() / 3600.0)
    return f"{int(hours)}h ago" if hours < 24 else f"{int(hours // 24)}d ago"


def _task_line(task: PendingTask, age: str | None) -> str:
    stage = _one_line(task.stage, 40) or "unknown"
    title = _one_line(task.title, MAX_TITLE_CHARS) or task.task_id
    when = f", {age}" if age else ""
    return f"- [{_one_line(task.task_id, 80)}] {title} (last stage: {stage}{when})"


def _pins_line(count: int) -> str | None:
    if not count:
        return None
    return (
        # The spec's wording up to the parenthesis ("1 pins" included: parsers may rely on it);
        # the spec's "use working_memory view" names no command, so this names two that exist.
        f"WORKING MEMORY RESTORED: {count} pins inherited "
        "(see all with `cortex pin list` or the working_memory_view tool)"
    )


def _more_line(hidden: int) -> str:
    return f"- {ELLIPSIS} {hidden} more"


@dataclass
class _Preamble:
    """The preamble's parts, so the cap can drop lines without re-reading the inputs."""

    header: str
    tasks: list[str]
    projects: list[str]
    topics: list[str]
    pins_line: str | None
    hidden_tasks: int = 0

    def render(self) -> str:
        blocks = [self.header]
        if self.tasks or self.hidden_tasks:
            more = [_more_line(self.hidden_tasks)] if self.hidden_tasks else []
            blocks.append("\n".join(["PENDING TASKS:", *self.tasks, *more]))
        if self.projects:
            blocks.append("ACTIVE PROJECTS: " + ", ".join(self.projects))
        if self.topics:
            blocks.append("HOT TOPICS: " + ", ".join(self.topics))
        if self.pins_line:
            blocks.append(self.pins_line)
        return "\n\n".join(blocks)

    def drop_tasks(self, max_chars: int) -> None:
        """Drop task lines from the end (counted in a ``- … N more`` line) until it fits.

        The length is tracked arithmetically, so thousands of tasks cost one render.
        """
        length = len(self.render())
        while length > max_chars and self.tasks:
            line = self.tasks.pop()
            before = len(_more_line(self.hidden_tasks)) + 1 if self.hidden_tasks else 0
            self.hidden_tasks += 1
            length += len(_more_line(self.hidden_tasks)) + 1 - before - (len(line) + 1)


def _fit(parts: _Preamble, max_chars: int) -> str:
    """Render within ``max_chars``: drop task lines, then topics, then projects, then cut."""
    parts.drop_tasks(max_chars)
    for items in (parts.topics, parts.projects):
        while items and len(parts.render()) > max_chars:
            items.pop()
    text = parts.render()
    return text if len(text) <= max_chars else text[: max_chars - 1] + ELLIPSIS


def format_preamble(
    *,
    session_count: int,
    inherited_pins: Sequence[Pin],
    pending_tasks: Sequence[PendingTask],
    hot_topics: Sequence[str],
    active_projects: Sequence[str],
    now: datetime,
    task_ages: Mapping[str, str] | None = None,
    max_topics: int = 10,
    max_projects: int = 5,
    date_format: str = "relative",
    max_chars: int = MAX_PREAMBLE_CHARS,
    crash_recovered: Sequence[str] = (),
) -> str | None:
    """The continuity preamble, or None on a cold start.

    Sections in order: header (plus ``RECOVERED AFTER CRASH: ...`` when sessions were
    recovered), ``PENDING TASKS``, ``ACTIVE PROJECTS``, ``HOT TOPICS``, ``WORKING MEMORY
    RESTORED``; an empty section is left out with its blank line. A task's age comes from
    ``task_ages[task_id]`` (an ISO time), else ``task.updated_at``.

    Returns:
        The text (at most ``max_chars`` characters), or None when ``session_count`` is 0, when
        there are no pins, tasks or topics, or when ``max_chars`` leaves no room at all.
    """
    topics = _dedupe(hot_topics, max_topics)
    if session_count <= 0 or not (inherited_pins or pending_tasks or topics) or max_chars <= 0:
        return None
    ages = task_ages or {}
    header = f"[SESSION CONTINUITY — inherited from {session_count} prior session(s)]"
    header += _recovered_line(crash_recovered)
    parts = _Preamble(
        header=header,
        tasks=[
            _task_line(t, format_age(ages.get(t.task_id) or t.updated_at, now, date_format))
            for t in pending_tasks
        ],
        projects=_dedupe(active_projects, max_projects),
        topics=topics,
        pins_line=_pins_line(len(inherited_pins)),
    )
    return _fit(parts, max_chars)


def format_cold_preamble(why: str, crash_recovered: Sequence[str] = ()) -> str:
    """What a start whose restoration failed (``why``, in a few words: the cause itself is
    logged, not shown) tells the agent: that it inherited nothing, and the sessions crash
    recovery closed at this start, on the line a warm start's header names them::

        [SESSION CONTINUITY — nothing inherited: restoration failed, starting cold]
        RECOVERED AFTER CRASH: s1
    """
    header = f"[SESSION CONTINUITY — nothing inherited: {why}, starting cold]"
    return header + _recovered_line(crash_recovered)


def _recovered_line(crash_recovered: Sequence[str]) -> str:
    """``\nRECOVERED AFTER CRASH: a1b2c3d4, ...`` (ids cut to 8), or "" for none."""
    recovered = _dedupe((sid[:8] for sid in crash_recovered), len(crash_recovered))
    return "\nRECOVERED AFTER CRASH: " + ", ".join(recovered) if recovered else ""


def _pin_line(pin: Pin) -> str:
    label = _one_line(pin.label, MAX_TITLE_CHARS)
    content = _one_line(pin.content, MAX_PIN_CONTENT_CHARS)
    tag = "[CRITICAL] " if pin.is_critical else ""
    if not label or content.startswith(label.rstrip(ELLIPSIS)):
        return f"- {tag}{content}"
    return f"- {tag}{label}: {content}"


def format_pins_block(pins: Sequence[Pin], max_chars: int = 2000) -> str | None:
    """A compact ``WORKING MEMORY PINS:`` list for re-injection after compaction.

    CRITICAL pins come first (marked ``[CRITICAL]``), then the others in order; lines that do
    not fit within ``max_chars`` are replaced by ``- … N more``. None when there are no pins.
    """
    if not pins or max_chars <= 0:
        return None
    ordered = [p for p in pins if p.is_critical] + [p for p in pins if not p.is_critical]
    lines = ["WORKING MEMORY PINS:"]
    length = len(lines[0])
    for index, pin in enumerate(ordered):
        line = _pin_line(pin)
        hidden = len(ordered) - index - 1
        reserve = len(_more_line(hidden)) + 1 if hidden else 0
        if length + 1 + len(line) + reserve > max_chars:
            lines.append(_more_line(len(ordered) - index))
            break
        lines.append(line)
        length += 1 + len(line)
    text = "\n".join(lines)
    return text if len(text) <= max_chars else text[: max_chars - 1] + ELLIPSIS


def format_continue_summary(target: SessionState, restored: RestoredSessionContext) -> str:
    """What a manual continue from ``target`` inherited (``restored``), as
    ``cortex session continue`` prints it and the MCP tool returns it::

        Inherited from session a1b2c3d4 (2026-02-14 09:23 UTC):
        - 4 working memory pins restored
        - 2 pending tasks surfaced
        - 15 hot topics loaded
        Pins written to working memory.

    The time is when ``target`` ended (or started, if it never ended).
    """
    moment = parse_time(target.end_time or target.start_time).strftime("%Y-%m-%d %H:%M")
    pins = len(restored.inherited_pins)
    lines = [
        f"Inherited from session {target.session_id[:8]} ({moment} UTC):",
        f"- {pins} working memory pins restored",
        f"- {restored.pending_task_count} pending tasks surfaced",
        f"- {len(target.hot_topics)} hot topics loaded",
        "Pins written to working memory." if pins else "No pin was new: nothing written.",
    ]
    return "\n".join(lines)
