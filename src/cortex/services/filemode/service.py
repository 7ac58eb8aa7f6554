"""FileModeService: OpenClaw file mode, the triggers that read and write the workspace files.

Read trigger: ``bootstrap`` (a session starts) syncs, then returns the semantic file and the
daily logs of today and yesterday (UTC days) as text for the restored context. Write triggers:
``flush`` (before a compaction) appends the checkpoint to today's daily log; ``snapshot`` (on
``/new`` or ``/reset``) writes the session's transcript to a snapshot file before the session
is cleared; ``remember`` routes an explicit memory, semantic to the semantic file and episodic
to the daily log. ``sync`` is the two-way sync (``cortex.services.filemode.sync``).

Every one of them holds the workspace lock, and everything written is redacted first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from cortex.clock import Clock
from cortex.config import Config
from cortex.core.filemode import (
    EPISODE,
    LAYOUTS,
    Layout,
    daily_entry,
    day_tag,
    layout,
    strip_markers,
)
from cortex.core.history_models import SessionSnapshot
from cortex.core.memory_models import EXPLICIT, LONG_TERM
from cortex.core.redaction import redact
from cortex.core.transcripts import format_checkpoint
from cortex.errors import ConfigError, ConflictError, NotFoundError, ValidationError, command
from cortex.services.base import Service
from cortex.services.filemode.sync import Sync, SyncReport
from cortex.services.filemode.workspace import Workspace

if TYPE_CHECKING:
    from cortex.core.history_models import Checkpoint
    from cortex.services.compaction import CompactionService
    from cortex.services.events import EventLog
    from cortex.services.memory import MemoryService
    from cortex.store.protocol import Store

BOOTSTRAP_SEMANTIC_BYTES = 32_000
"""Bytes of the semantic file a bootstrap reads (its head; the file is capped in lines)."""
BOOTSTRAP_DAILY_BYTES = 16_000
"""Bytes of each daily log a bootstrap reads (its tail: the newest entries)."""
SNAPSHOT_TRIGGERS = ("new_session", "reset", "manual")
KINDS = ("semantic", "episodic")
MAX_SLUG_TRIES = 100


@dataclass(frozen=True)
class FileRead:
    """One workspace file a bootstrap read: its path, the characters taken, whether cut."""

    path: str
    chars: int
    truncated: bool

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "chars": self.chars, "truncated": self.truncated}


@dataclass(frozen=True)
class Bootstrap:
    """What a session starts with: the files' text, which files, and the sync before it."""

    text: str
    files: tuple[FileRead, ...]
    sync: SyncReport | None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "files": [f.to_dict() for f in self.files],
            "sync": self.sync.to_dict() if self.sync else None,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class Written:
    """A file a write trigger wrote (or found already written: ``appended`` false)."""

    path: str
    id: str
    appended: bool
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "id": self.id, "written": self.appended} | self.extra


class FileModeService(Service):
    """The workspace files of OpenClaw file mode over one ``Store``."""

    def __init__(
        self,
        store: Store,
        config: Config,
        clock: Clock | None,
        memory: MemoryService,
        compaction: CompactionService,
        events: EventLog,
    ) -> None:
        super().__init__(store, config, clock)
        self.memory = memory
        self.compaction = compaction
        self.events = events

    @property
    def lines(self) -> int:
        return self.config.file_mode_memory_lines

    @property
    def layout(self) -> Layout:
        if self.config.file_mode_layout not in LAYOUTS:
            raise ConfigError(
                f"file_mode_layout={self.config.file_mode_layout!r} is not a layout; "
                "use rfc or openclaw"
            )
        return layout(self.config.file_mode_layout)

    @property
    def workspace(self) -> Workspace:
        return Workspace(self.config.file_mode_workspace, self.layout)

    def redacted(self, text: str) -> str:
        return redact(text)

    def today(self) -> str:
        return self.now_iso()[:10]

    # -- sync ----------------------------------------------------------------------------------
    def sync(self, project: str | None = None, *, wait: bool = True) -> SyncReport:
        """Two-way sync of the workspace's files and the database (see ``sync``'s rule)."""
        ws = self.workspace
        with ws.lock(wait=wait):
            return Sync(self, ws, project).run()

    # -- read trigger --------------------------------------------------------------------------
    def bootstrap(self, project: str | None = None, *, sync: bool = True) -> Bootstrap:
        """Sync (unless another process is syncing), then read the semantic file and the
        daily logs of yesterday and today for a new session's context."""
        report, notes = None, []
        if sync:
            try:
                report = self.sync(project, wait=False)
            except ConflictError as exc:
                notes.append(f"sync skipped: {exc}")
        ws = self.workspace
        yesterday = (self.clock.now() - timedelta(days=1)).strftime("%Y-%m-%d")
        semantic = ws.semantic_rel()
        reads = [(semantic, *ws.read_head(semantic, BOOTSTRAP_SEMANTIC_BYTES), " (its start)")]
        for day in (yesterday, self.today()):
            rel = self.layout.daily(day)
            reads.append((rel, *ws.read_tail(rel, BOOTSTRAP_DAILY_BYTES), " (its newest part)"))
        parts, files = [], []
        for rel, raw, truncated, part in reads:
            text = redact(strip_markers(raw))
            if text:
                parts.append(f"## {rel}{part if truncated else ''}\n\n{text}")
                files.append(FileRead(rel, len(text), truncated))
        body = "\n\n".join(parts)
        text = f'<workspace-memory path="{ws.root}">\n{body}\n</workspace-memory>' if body else ""
        return Bootstrap(text, tuple(files), report, tuple(notes))

    # -- write triggers ------------------------------------------------------------------------
    def flush(
        self, session_id: str, *, checkpoint_id: str | None = None, summary: str = ""
    ) -> Written:
        """Append a checkpoint to today's daily log: ``checkpoint_id`` (one of the session's),
        else a new write-ahead checkpoint (as before a compaction)."""
        self.workspace.ready()
        if checkpoint_id is None:
            checkpoint = self.compaction.pre_compact(session_id, "manual", summary)
        else:
            checkpoint = self._checkpoint(session_id, checkpoint_id)
        return self.append_checkpoint(checkpoint)

    def _checkpoint(self, session_id: str, checkpoint_id: str) -> Checkpoint:
        self.events.session(session_id)
        for found in self.store.list_checkpoints(session_id, limit=1000):
            if found.checkpoint_id == checkpoint_id:
                return found
        raise NotFoundError(
            f"no checkpoint {checkpoint_id!r} in session {session_id}; "
            f"see {command('session checkpoint list')}"
        )

    def append_checkpoint(self, checkpoint: Checkpoint) -> Written:
        """Append ``checkpoint`` to the daily log of its day (once: a repeat is a no-op)."""
        day = checkpoint.timestamp[:10]
        body = format_checkpoint(checkpoint).split("\n", 1)[-1]
        title = f"checkpoint {checkpoint.type} (session {checkpoint.session_id})"
        block = daily_entry(checkpoint.timestamp, title, checkpoint.checkpoint_id, body)
        return self._append(day, checkpoint.checkpoint_id, block)

    def _append(self, day: str, marker: str, block: str) -> Written:
        ws = self.workspace
        rel = self.layout.daily(day)
        with ws.lock():
            appended = ws.append(rel, redact(block), marker, day)
        return Written(rel, marker, appended)

    def snapshot(
        self, session_id: str, trigger: str = "manual", *, slug: str | None = None
    ) -> Written:
        """Write the session's transcript (meaningful events) to a new snapshot file."""
        if trigger not in SNAPSHOT_TRIGGERS:
            raise ValidationError(
                f"unknown trigger {trigger!r}; use one of {', '.join(SNAPSHOT_TRIGGERS)}"
            )
        self.workspace.ready()
        snap = self.events.snapshot(session_id, trigger, slug=slug)  # (which checks the slug)
        return self.write_snapshot(snap)

    def write_snapshot(self, snap: SessionSnapshot) -> Written:
        """A new file for ``snap`` (``SLUG.md``, else ``SLUG-2.md``...: never overwritten)."""
        ws, day = self.workspace, snap.created_at[:10]
        text = f"<!-- cortex:{snap.id} -->\n" + redact(snap.transcript_md)
        extra = {"snapshot_id": snap.id, "trigger": snap.source_trigger}
        with ws.lock():
            for n in range(1, MAX_SLUG_TRIES + 1):
                rel = self.layout.snapshot(day, snap.slug if n == 1 else f"{snap.slug}-{n}")
                if ws.create(rel, text):
                    return Written(rel, snap.id, True, extra)
        raise ConflictError(
            f"{MAX_SLUG_TRIES} snapshots named {snap.slug!r} on {day} already; pass another slug"
        )

    def remember(
        self,
        content: str,
        *,
        kind: str = "semantic",
        project: str | None = None,
        session_id: str | None = None,
    ) -> Written:
        """An explicit memory: semantic ones into the database and the semantic file (by a
        sync), episodic ones into the database and today's daily log."""
        if kind not in KINDS:
            raise ValidationError(f"unknown kind {kind!r}; use semantic or episodic")
        self.workspace.ready()
        day = self.today()
        added = self.memory.add(
            content,
            layer=LONG_TERM,
            type=EPISODE if kind == "episodic" else None,
            project=project,
            tags=[day_tag(day)] if kind == "episodic" else None,
            session_id=session_id,
            remember_intent=EXPLICIT,
            actor="file-mode",
        ).memory
        if kind == "semantic":
            report = self.sync(project or added.project)
            rel = report.semantic_file
            return Written(rel, added.id, added.id in self._rendered_ids(), report.to_dict())
        block = daily_entry(added.created_at, "remember", added.id, added.content)
        return self._append(day, added.id, block)

    def _rendered_ids(self) -> set[str]:
        renderings = self.workspace.read_state()["renderings"]
        latest = renderings[0] if renderings and isinstance(renderings[0], dict) else {}
        entries = latest.get("entries")
        return set(entries) if isinstance(entries, dict) else set()


__all__ = ["Bootstrap", "FileModeService", "Written"]
