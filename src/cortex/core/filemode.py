"""OpenClaw file mode, the pure part: where the files are, how their entries read and render.

A workspace holds three kinds of memory file:

- the semantic file (``memory.md``, or ``MEMORY.md`` in the OpenClaw layout): one entry per
  top-level list item or paragraph, each entry Cortex wrote carrying its memory id in a
  ``<!-- cortex:ID -->`` marker, and a header line with the checksum of what Cortex wrote, so
  that a sync can tell a file it left alone from one a person edited;
- daily logs (``YYYY-MM-DD.md``), append-only episodic notes: entries Cortex appends start with
  a ``## HH:MM ... <!-- cortex:ID -->`` heading; anything else in them (written by a person or
  by the agent itself) is read as entries the same way as the semantic file;
- snapshots, one markdown transcript per file, named by day and slug.

Everything here takes and returns plain values (relative POSIX paths, strings, lines); the
service in ``cortex.services.filemode`` does the reading and writing.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from cortex.core.memory_models import EXPLICIT, RULE, Memory
from cortex.errors import UnsafeIdError

RFC = "rfc"
OPENCLAW = "openclaw"
LAYOUTS = (RFC, OPENCLAW)

EPISODE = "episode"
"""The memory type of an episodic entry (a daily-log line); never rendered in the semantic file."""
FILE_TAG = "file-mode"
"""Tag of every memory imported from a workspace file (the sync looks its imports up by it)."""
SEMANTIC_KEY = "md:"
DAILY_KEY = "daily:"

MAX_LINE_BYTES = 65_536
"""Bytes of one physical line that are read; the rest of a longer line is skipped."""
MAX_ENTRY_BYTES = 60_000
"""UTF-8 bytes of one entry kept as memory content (a memory holds at most 64 KB)."""
TRUNCATED = "\n…[truncated {n:,} bytes; the whole entry is in {path}]"
CHECKSUM_CHARS = 16

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_SLUG = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
_MARKER = re.compile(r"\s*<!--\s*cortex:([A-Za-z0-9][A-Za-z0-9._:@+-]{0,127})\s*-->")
_HEADER = re.compile(r"<!--\s*cortex:rendering\s+([0-9a-f]{16})\b.*-->\s*")
_END = re.compile(r"<!--\s*/cortex\s*-->\s*")
_OMITTED = re.compile(r"<!--\s*cortex:omitted\b.*-->\s*")
_ITEM = re.compile(r"(?:[-*+]|\d{1,9}[.)])(?:\s+(.*)|$)")
_HEADING = re.compile(r"(#{1,6})(?:\s+(.*)|$)")
_FENCE = re.compile(r"\s{0,3}(```|~~~)")

HEADER_TEXT = (
    "<!-- cortex:rendering {sha} | Cortex keeps this file in sync with its memory: add a "
    '"- " line to remember something, edit or delete lines to change or forget them, then run '
    "`cortex openclaw memory sync`. -->"
)
END_TEXT = "<!-- /cortex -->"
OMITTED_TEXT = (
    "<!-- cortex:omitted {n} more memories (this file holds at most {cap} lines); "
    "see `cortex memory list` -->"
)


# -- paths -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Layout:
    """Where a layout keeps each file, relative to the workspace (POSIX paths)."""

    name: str
    semantic_names: tuple[str, ...]
    """Candidates for the semantic file: the first that exists is used, else the first."""
    daily_dir: str
    snapshot_pattern: str

    def daily(self, day: str) -> str:
        return f"{self.daily_dir}/{check_day(day)}.md"

    def snapshot(self, day: str, slug: str) -> str:
        return self.snapshot_pattern.format(day=check_day(day), slug=check_slug(slug))

    def daily_day(self, name: str) -> str | None:
        """The day a file name in ``daily_dir`` is the log of, or None (not a daily log)."""
        stem, dot, ext = name.rpartition(".")
        return stem if dot and ext == "md" and _DAY.fullmatch(stem) else None


_LAYOUTS = {
    RFC: Layout(RFC, ("memory.md",), "memory/daily", "memory/snapshots/{day}/{slug}.md"),
    # OpenClaw reads MEMORY.md (or memory.md) and memory/YYYY-MM-DD.md; its memory tools index
    # memory/*.md, so snapshots sit beside the daily logs under a name no daily log can have.
    OPENCLAW: Layout(OPENCLAW, ("MEMORY.md", "memory.md"), "memory", "memory/{day}-{slug}.md"),
}


def layout(name: str) -> Layout:
    """The layout called ``name`` (``rfc`` or ``openclaw``)."""
    found = _LAYOUTS.get(name)
    if found is None:
        raise ValueError(f"unknown file-mode layout {name!r}; use rfc or openclaw")
    return found


def check_day(day: str) -> str:
    if not _DAY.fullmatch(day):
        raise UnsafeIdError(f"invalid day {day[:40]!r}: use YYYY-MM-DD")
    return day


def check_slug(slug: str) -> str:
    """Return ``slug`` if it is safe in a file name: lowercase letters, digits and dashes."""
    if not isinstance(slug, str) or not _SLUG.fullmatch(slug):
        raise UnsafeIdError(
            f"invalid snapshot slug {str(slug)[:60]!r}: use 1-64 lowercase letters, digits or "
            "dashes, starting with a letter or digit (no '/', no '..'), e.g. auth-refactor"
        )
    return slug


def checksum(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:CHECKSUM_CHARS]


def canonical(text: str) -> str:
    """The form two texts are compared in: markers gone, lines right-stripped, no blank lines."""
    lines = (line.rstrip() for line in _MARKER.sub("", text).splitlines())
    return "\n".join(line for line in lines if line.strip()).strip()


# -- reading -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    """One entry of a memory file: its text (canonical), its marker and where it starts."""

    text: str
    marker: str | None
    line: int
    heading: str | None = None
    cortex_section: bool = False
    """Under a heading Cortex wrote (a checkpoint or remember in a daily log)."""
    truncated_bytes: int = 0
    sha: str = ""


@dataclass
class _Building:
    """A memory file's entry while its lines are read: where it starts, its heading, its text."""

    line: int
    heading: str | None
    cortex_section: bool
    lines: list[str] = field(default_factory=list)
    size: int = 0
    dropped: int = 0
    digest: hashlib._Hash = field(default_factory=hashlib.sha256)

    def add(self, text: str) -> None:
        stripped = text.rstrip()
        if not stripped.strip():
            return
        self.digest.update(_MARKER.sub("", stripped).encode("utf-8", "surrogatepass") + b"\n")
        data = stripped.encode("utf-8", "surrogatepass")
        room = 0 if self.dropped else MAX_ENTRY_BYTES - self.size
        if len(data) + 1 > room:
            kept = data[: max(0, room - 1)].decode("utf-8", "ignore")
            if kept.strip():
                self.lines.append(kept)
            self.dropped += len(data) + 1 - len(kept.encode("utf-8", "surrogatepass"))
            self.size = MAX_ENTRY_BYTES
            return
        self.lines.append(stripped)
        self.size += len(data) + 1

    def entry(self) -> Entry | None:
        joined = "\n".join(self.lines)
        found = _MARKER.search(joined)
        text = canonical(joined)
        if not text and found is None:
            return None
        return Entry(
            text=text,
            marker=found.group(1) if found else None,
            line=self.line,
            heading=self.heading,
            cortex_section=self.cortex_section,
            truncated_bytes=self.dropped,
            sha=self.digest.hexdigest()[:CHECKSUM_CHARS] if self.dropped else checksum(text),
        )


@dataclass
class ParseNotes:
    """What a parse noticed that a person should hear about (broken markdown)."""

    rendering: str | None = None
    open_fence_line: int | None = None
    truncated_entries: int = 0


def parse_entries(lines: Iterable[str], notes: ParseNotes | None = None) -> Iterator[Entry]:
    """The entries of a memory file, one at a time (lines without their newlines).

    Tolerant of any input: a top-level list item or a paragraph starts an entry; indented lines
    and lines right after continue it; a blank line or a heading ends it; a code fence keeps
    everything up to its closing fence (or the end of the file) in one entry. A heading with a
    Cortex marker starts a section Cortex wrote: its body is one entry carrying that marker.
    """
    notes = notes if notes is not None else ParseNotes()
    current: _Building | None = None
    heading: str | None = None
    section = False
    fence: str | None = None

    def done() -> Iterator[Entry]:
        nonlocal current
        if current is not None:
            entry = current.entry()
            current = None
            if entry is not None:
                notes.truncated_entries += bool(entry.truncated_bytes)
                yield entry

    for number, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if fence is not None and current is not None:
            current.add(line[2:] if line.startswith("  ") else line)
            if line.strip().startswith(fence):
                fence, notes.open_fence_line = None, None
            continue
        if (header := _HEADER.fullmatch(line.rstrip())) is not None:
            notes.rendering = notes.rendering or header.group(1)
            yield from done()
            section = False
            continue
        if section and _END.fullmatch(line.strip()):
            yield from done()
            section = False
            continue
        if not line.strip() or _OMITTED.fullmatch(line.rstrip()):
            if not section:
                yield from done()
            continue
        if (head := _HEADING.fullmatch(line)) is not None:
            yield from done()
            heading_text = head.group(2) or ""
            section = _MARKER.search(heading_text) is not None
            heading = canonical(heading_text) or None
            if section:
                current = _Building(number, heading, True)
                current.add(heading_text)
            continue
        item = None if section else _ITEM.fullmatch(line)
        if item is not None:
            yield from done()
            current = _Building(number, heading, False)
            line = item.group(1) or ""
        elif current is None:  # a paragraph starts (or a section Cortex wrote goes on)
            current = _Building(number, heading, section)
        # else: an indented line, a paragraph's next line or a list item's lazy continuation
        current.add(line[2:] if line.startswith("  ") else line)
        if (opened := _FENCE.match(raw)) is not None:
            fence, notes.open_fence_line = opened.group(1), number
    yield from done()


# -- the semantic file -------------------------------------------------------------------------
def semantic_order(memory: Memory) -> tuple[int, int, float, str, str]:
    """Rules first, then explicit memories, then by confidence, newest first, by id."""
    newest = "".join(chr(0x10FFFF - ord(c)) for c in (memory.updated_at or memory.created_at))
    return (
        memory.layer != RULE,
        memory.remember_intent != EXPLICIT,
        -memory.confidence,
        newest,
        memory.id,
    )


@dataclass(frozen=True)
class Rendering:
    """A semantic file as Cortex writes it: the text, its checksum, the entries it holds."""

    text: str
    sha: str
    entries: dict[str, str]
    """memory id -> checksum of its entry text."""
    omitted: int


def entry_lines(content: str) -> list[str]:
    """A memory's content as a list item: ``- first line``, then indented lines."""
    lines = canonical(content).splitlines() or [""]
    return [f"- {lines[0]}"] + [f"  {line}" for line in lines[1:]]


def render_semantic(memories: Sequence[Memory], cap: int, title: str = "Memory") -> Rendering:
    """The semantic file for ``memories`` (in ``semantic_order``), at most ``cap`` lines.

    Each entry's first line ends with its marker. Memories that do not fit are left out and
    counted in a last comment line; the database keeps them all.
    """
    head = [f"# {title}", "", HEADER_TEXT.format(sha="0" * CHECKSUM_CHARS), ""]
    ordered = [m for m in sorted(memories, key=semantic_order) if canonical(m.content)]
    blocks = [entry_lines(m.content) for m in ordered]
    room = cap - len(head)
    if sum(map(len, blocks)) > room:
        room -= 1  # one line for the "omitted" note
    body: list[str] = []
    entries: dict[str, str] = {}
    for memory, lines in zip(ordered, blocks, strict=True):
        if len(body) + len(lines) > room:
            break  # strict order: a lower-ranked short memory never jumps ahead
        body += [f"{lines[0]} <!-- cortex:{memory.id} -->", *lines[1:]]
        entries[memory.id] = checksum(canonical(memory.content))
    omitted = len(ordered) - len(entries)
    tail = [OMITTED_TEXT.format(n=omitted, cap=cap)] if omitted else []
    text = "\n".join(head + body + tail) + "\n"
    sha = body_checksum(text)
    return Rendering(text.replace("0" * CHECKSUM_CHARS, sha, 1), sha, entries, omitted)


def is_header(line: str) -> bool:
    """Whether ``line`` is the semantic file's header (the checksum Cortex wrote)."""
    return _HEADER.fullmatch(line.rstrip()) is not None


def body_checksum(text: str) -> str:
    """The checksum of a semantic file without its header line (what the header records).

    Computed line by line, as ``BodyDigest`` does over a file read one line at a time.
    """
    digest = BodyDigest()
    for line in text.splitlines(keepends=True):
        digest.update(line)
    return digest.hexdigest()


class BodyDigest:
    """``body_checksum`` fed one line (with its newline) at a time."""

    def __init__(self) -> None:
        self._digest = hashlib.sha256()

    def update(self, line: str) -> None:
        if not is_header(line):
            self._digest.update(line.encode("utf-8", "surrogatepass"))

    def hexdigest(self) -> str:
        return self._digest.hexdigest()[:CHECKSUM_CHARS]


# -- daily logs --------------------------------------------------------------------------------
def daily_title(day: str) -> str:
    return f"# {check_day(day)}\n"


def daily_entry(at_iso: str, title: str, marker: str, body: str) -> str:
    """A block Cortex appends to a daily log: a marked ``##`` heading, the body, an end mark
    (what follows it, a person's or the agent's own notes, is theirs)."""
    clock = at_iso[11:16] or "00:00"
    text = body.strip()
    body_text = f"{text}\n\n" if text else ""
    return f"\n## {clock} UTC {title} <!-- cortex:{marker} -->\n\n{body_text}{END_TEXT}\n"


def strip_markers(text: str) -> str:
    """Text with Cortex's markers and header comments removed (for the agent's context)."""
    kept = [
        line
        for line in _MARKER.sub("", text).split("\n")
        if not any(p.fullmatch(line.rstrip()) for p in (_HEADER, _OMITTED, _END))
    ]
    return "\n".join(kept).strip()


def import_key(prefix: str, day: str | None, sha: str) -> str:
    """The upsert key of an imported entry: the same text always gets the same key, so an
    import that is repeated (after a crash) finds its first copy instead of adding another."""
    return f"{prefix}{day}:{sha}" if day else f"{prefix}{sha}"


def day_tag(day: str) -> str:
    return f"daily-{check_day(day)}"


def truncation_note(entry: Entry, path: str) -> str:
    return TRUNCATED.format(n=entry.truncated_bytes, path=path) if entry.truncated_bytes else ""
