"""The sync between the database and a workspace's memory files, and its one rule.

Source of truth, decided entry by entry:

- The semantic file shows the database: after a sync it is rewritten from the live rule and
  long-term memories (highest ranked first, at most ``file_mode_memory_lines`` lines).
- A change a person made in the file wins over the database. The file's header holds the
  checksum of what Cortex last wrote and the sync state keeps each entry's checksum in that
  rendering, so a sync tells an entry someone edited (file wins: the memory is edited) from
  one the database changed (database wins: the file follows). A new line is a new memory; a
  line Cortex wrote and someone deleted forgets its memory. Deleting the whole file forgets
  nothing: it is written again from the database.
- Daily logs are append-only: Cortex appends marked entries and never rewrites them. Entries
  without a marker (a person's or the agent's own notes) are imported once, keyed by the
  checksum of their text; an entry edited or deleted by hand replaces or forgets its import.
  Deleting a daily log forgets nothing.

Crash safety: imports are keyed by content (the same text always finds its first copy), the
state is written before the file it describes, and the file is replaced atomically, so a sync
killed at any point and run again neither duplicates nor loses an entry.
"""

from __future__ import annotations

import builtins
import collections
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cortex.core.filemode import (
    DAILY_KEY,
    EPISODE,
    FILE_TAG,
    SEMANTIC_KEY,
    BodyDigest,
    Entry,
    ParseNotes,
    Rendering,
    canonical,
    day_tag,
    import_key,
    parse_entries,
    render_semantic,
    truncation_note,
)
from cortex.core.memory_models import EXPLICIT, LONG_TERM, RULE, Memory, MemoryFilter
from cortex.errors import CortexError
from cortex.services.filemode.workspace import ReadNotes, Workspace

if TYPE_CHECKING:
    from cortex.services.filemode.service import FileModeService

MAX_IMPORTS_PER_SYNC = 5000
"""Entries one sync imports at most; the rest wait for the next sync (bounded time)."""
MAX_DAILY_ENTRIES = 2000
"""Newest entries of one daily log mirrored in the database; older ones stay in the file."""
BATCH = 200
KEPT_RENDERINGS = 4
LOOKUP_LIMIT = 1_000_000


@dataclass
class SyncReport:
    """What one sync did, and what a person should know about the files."""

    semantic_file: str = ""
    imported: int = 0
    edited: int = 0
    forgotten: int = 0
    exported: int = 0
    omitted: int = 0
    rewritten: bool = False
    daily_logs: int = 0
    deferred: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.imported or self.edited or self.forgotten or self.rewritten)

    def to_dict(self) -> dict[str, Any]:
        return {
            "semantic_file": self.semantic_file,
            "imported": self.imported,
            "edited": self.edited,
            "forgotten": self.forgotten,
            "exported": self.exported,
            "omitted": self.omitted,
            "rewritten": self.rewritten,
            "daily_logs_read": self.daily_logs,
            "deferred": self.deferred,
            "notes": list(self.notes),
        }


class Sync:
    """One sync of one workspace for one project; the caller holds the workspace lock."""

    def __init__(self, service: FileModeService, ws: Workspace, project: str | None) -> None:
        self.service = service
        self.ws = ws
        self.project = project
        self.now = service.now_iso()
        self.state = ws.read_state()
        self.report = SyncReport(semantic_file=ws.semantic_rel())
        self.budget = MAX_IMPORTS_PER_SYNC
        self.keep_file = False
        """Something in the semantic file is not in the database yet: do not rewrite it."""
        self.semantic_stat = ws.stat(self.report.semantic_file)
        """The semantic file as this sync read it: a file changed since is not rewritten."""
        self.daily_before = dict(self.state["daily"])

    def run(self) -> SyncReport:
        damaged = self.import_semantic()
        self.import_daily()
        self.export_semantic(damaged)
        return self.report

    # -- lookups -------------------------------------------------------------------------------
    def _imports(self, tag: str, prefix: str) -> dict[str, Memory]:
        """Live memories this workspace imported under ``tag``, by their key."""
        flt = MemoryFilter(tags=(tag,), project=self.project)
        found = self.service.store.list_memories(flt, self.now, limit=LOOKUP_LIMIT)
        return {m.upsert_key: m for m in found if m.upsert_key and m.upsert_key.startswith(prefix)}

    def _rendering(self, sha: str | None) -> dict[str, str] | None:
        for item in self.state["renderings"]:
            if isinstance(item, dict) and item.get("sha") == sha:
                entries = item.get("entries")
                return entries if isinstance(entries, dict) else None
        return None

    # -- the semantic file ---------------------------------------------------------------------
    def import_semantic(self) -> str | None:
        """Import a person's changes to the semantic file; return the name of a copy to keep
        (the file held bytes that were not UTF-8) or None."""
        rel = self.report.semantic_file
        digest, notes, read = BodyDigest(), ParseNotes(), ReadNotes()
        try:
            entries = list(parse_entries(_digesting(self.ws.read_lines(rel, read), digest), notes))
        except FileNotFoundError:
            if self.state["renderings"]:
                self.report.notes.append(
                    f"{rel} was missing; it is written again from the database "
                    "(deleting the file forgets nothing: delete lines to forget)"
                )
            return None
        self.report.notes += read.messages(rel)
        self._parse_notes(rel, notes)
        if notes.rendering == digest.hexdigest() and not read.bad_lines:
            return None  # the file is exactly what Cortex wrote
        rendering = self._rendering(notes.rendering)
        seen = self._apply_entries(rel, entries, rendering)
        if rendering is not None:
            self._forget_removed(rendering, seen)
        return "invalid-utf8-" + self.now.replace(":", "") if read.bad_lines else None

    def _apply_entries(
        self, rel: str, entries: Sequence[Entry], rendering: dict[str, str] | None
    ) -> set[str]:
        """Edit, import or leave each entry; return the ids the file still holds."""
        memory, store = self.service.memory, self.service.store
        known = self._imports(FILE_TAG, SEMANTIC_KEY)
        seen: set[str] = set()
        queued: set[str] = set()
        new: list[tuple[str, Entry]] = []
        for entry in entries:
            marker = entry.marker
            found = store.get_memory(marker) if marker is not None and marker not in seen else None
            if found is not None and found.project not in (None, self.project):
                found = None  # another project's memory is never changed from this workspace
            untouched = (
                rendering is not None
                and found is not None
                and (rendering.get(found.id) == entry.sha)
            )
            if found is not None and found.is_live(self.now):
                seen.add(found.id)
                if canonical(found.content) != entry.text and not untouched:
                    content = entry.text + truncation_note(entry, rel)
                    if self._guard(memory.edit, found.id, actor="file-mode", content=content):
                        self.report.edited += 1
                    else:
                        self.keep_file = True
                continue
            if found is not None and untouched:
                seen.add(found.id)  # forgotten or replaced in the database: the file follows
                continue
            key = import_key(SEMANTIC_KEY, None, entry.sha)
            if key in known:
                seen.add(known[key].id)
            elif key not in queued:  # the same line twice is one memory
                queued.add(key)
                new.append((key, entry))
        self._import(rel, new, None)
        return seen

    def _forget_removed(self, rendering: dict[str, str], seen: set[str]) -> None:
        """Forget the memories whose lines Cortex wrote and a person deleted."""
        for memory_id in rendering:
            if memory_id in seen:
                continue
            found = self.service.store.get_memory(memory_id)
            if found is not None and found.is_live(self.now):
                if self._guard(self.service.memory.forget, memory_id, actor="file-mode"):
                    self.report.forgotten += 1

    def export_semantic(self, damaged: str | None) -> None:
        """Rewrite the semantic file from the database (the state first: see the module)."""
        rel = self.report.semantic_file
        rendering = render_semantic(self._semantic_memories(), self.service.lines)
        self.report.exported, self.report.omitted = len(rendering.entries), rendering.omitted
        if self.keep_file:
            self.report.notes.append(
                f"{rel} was not rewritten: some of its entries are not imported yet "
                "(run the sync again)"
            )
            return
        current = self.ws.stat(rel)
        if current != self.semantic_stat:
            self.report.notes.append(
                f"{rel} changed during the sync; it is left as it is (run the sync again)"
            )
            return
        self._remember_rendering(rendering)
        if current is not None and self._is_current(rel, rendering):
            return
        if damaged:
            kept = self.ws.keep_copy(rel, damaged, self.service.redacted)
            self.report.notes.append(f"{rel}: the file as it was is kept in {kept}")
        self.ws.rewrite(rel, self.service.redacted(rendering.text))
        self.report.rewritten = True

    def _is_current(self, rel: str, rendering: Rendering) -> bool:
        digest, notes, read = BodyDigest(), ParseNotes(), ReadNotes()
        try:
            for _ in parse_entries(_digesting(self.ws.read_lines(rel, read), digest), notes):
                pass
        except FileNotFoundError:
            return False
        return notes.rendering == rendering.sha == digest.hexdigest() and not read.bad_lines

    def _semantic_memories(self) -> list[Memory]:
        flt = MemoryFilter(layers=(RULE, LONG_TERM), project=self.project)
        found = self.service.store.list_memories(flt, self.now, limit=LOOKUP_LIMIT)
        return [m for m in found if m.type != EPISODE]

    def _remember_rendering(self, rendering: Rendering) -> None:
        kept = [r for r in self.state["renderings"] if isinstance(r, dict)]
        if kept and kept[0].get("sha") == rendering.sha:
            return
        item = {"sha": rendering.sha, "entries": rendering.entries}
        others = [r for r in kept if r.get("sha") != rendering.sha]
        self.state["renderings"] = [item, *others][:KEPT_RENDERINGS]
        self.ws.write_state(self.state)

    # -- daily logs ----------------------------------------------------------------------------
    def import_daily(self) -> None:
        """Import the unmarked entries of every daily log that changed since the last sync."""
        daily: dict[str, Any] = self.state["daily"]
        logs = self.ws.daily_logs()
        for gone in set(daily) - {rel for _, rel in logs}:
            del daily[gone]  # a deleted log forgets nothing; its imports stay
        for day, rel in logs:
            stat = self.ws.stat(rel)
            if stat is None:
                self.report.notes.append(f"{rel} was deleted during the sync; nothing forgotten")
                daily.pop(rel, None)
                continue
            if daily.get(rel) == list(stat):
                continue
            self.report.daily_logs += 1
            try:
                complete = self._import_daily_log(day, rel)
            except FileNotFoundError:
                self.report.notes.append(f"{rel} was deleted during the sync; nothing forgotten")
                daily.pop(rel, None)
                continue
            if complete:
                daily[rel] = list(stat)
        if daily != self.daily_before:
            self.ws.write_state(self.state)

    def _import_daily_log(self, day: str, rel: str) -> bool:
        known = self._imports(day_tag(day), DAILY_KEY)
        seen: set[str] = set()
        window: collections.deque[tuple[str, Entry]] = collections.deque(maxlen=MAX_DAILY_ENTRIES)
        notes, read, older = ParseNotes(), ReadNotes(), 0
        for entry in parse_entries(self.ws.read_lines(rel, read), notes):
            if entry.marker is not None:
                continue  # written by Cortex from the database
            key = import_key(DAILY_KEY, day, entry.sha)
            if key in known:
                seen.add(key)
            elif key not in seen:
                older += len(window) == window.maxlen
                window.append((key, entry))
        self.report.notes += read.messages(rel)
        self._parse_notes(rel, notes)
        if older:
            self.report.notes.append(
                f"{rel}: {older:,} older entries were not imported (a daily log is mirrored up "
                f"to its newest {MAX_DAILY_ENTRIES:,} entries); they stay in the file"
            )
        new = list(dict(window).items())
        complete = self._import(rel, new, day)
        for key, found in known.items():
            if key not in seen:  # edited or deleted by hand: its new text was imported above
                if self._guard(self.service.memory.forget, found.id, actor="file-mode"):
                    self.report.forgotten += 1
        return complete

    # -- shared --------------------------------------------------------------------------------
    def _import(self, rel: str, new: Sequence[tuple[str, Entry]], day: str | None) -> bool:
        """Add ``new`` entries in batches, within this sync's budget; False if some wait."""
        from cortex.services.memory import NewMemory

        take, self.budget = new[: self.budget], max(0, self.budget - len(new))
        if len(take) < len(new):
            self.report.deferred += len(new) - len(take)
            self.keep_file = self.keep_file or day is None
            self.report.notes.append(
                f"{rel}: {len(new) - len(take):,} entries are left for the next sync "
                f"(one sync imports at most {MAX_IMPORTS_PER_SYNC:,})"
            )
        tags = [FILE_TAG, day_tag(day)] if day else [FILE_TAG]
        items = [
            NewMemory(
                entry.text + truncation_note(entry, rel),
                layer=LONG_TERM,
                type=EPISODE if day else None,
                project=self.project,
                tags=tags,
                upsert_key=key,
                remember_intent=EXPLICIT if day is None else None,
            )
            for key, entry in take
        ]
        for batch in _batches(items, BATCH):
            added = self._guard(self.service.memory.add_many, batch, actor="file-mode")
            if added is None:
                self.keep_file = self.keep_file or day is None
                return False
            self.report.imported += len(added)
        return len(take) == len(new)

    def _guard(self, call: Any, *args: Any, **kwargs: Any) -> Any:
        """Run one database change; a refusal becomes a note (the file keeps the text)."""
        try:
            return call(*args, **kwargs)
        except CortexError as exc:
            self.report.notes.append(f"skipped a change: {exc}")
            return None

    def _parse_notes(self, rel: str, notes: ParseNotes) -> None:
        if notes.open_fence_line is not None:
            self.report.notes.append(
                f"{rel}: the code fence opened at line {notes.open_fence_line} is never closed; "
                "everything after it was read as one entry"
            )
        if notes.truncated_entries:
            self.report.notes.append(
                f"{rel}: {notes.truncated_entries} entries are over 60 KB; their memory keeps "
                "the start and a note (the file keeps them whole)"
            )


def _digesting(lines: Iterable[str], digest: BodyDigest) -> Iterator[str]:
    for line in lines:
        digest.update(line)
        yield line


def _batches(items: Sequence[Any], size: int) -> Iterator[builtins.list[Any]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


__all__ = ["MAX_DAILY_ENTRIES", "MAX_IMPORTS_PER_SYNC", "Sync", "SyncReport"]
