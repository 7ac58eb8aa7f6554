"""A task's folder: its status file, implementation log, checkpoint files and index, and logs.

::

    <tasks_root>/<slug>/
      json/task-status.json           where the task stands (gate, status, last session, retries)
      json/checkpoint-index.json      one entry per checkpoint, with the SHA-256 of its content
      json/checkpoints/<id>.json      each checkpoint, in the protocol's schema
      work/implementation-log.md      one entry per session, in the protocol's template
      logs/sessions.log               the evidence lines (start, health, checkpoint, end)
      logs/incidents.jsonl            interrupted sessions found by the orphan sweep
      logs/long-context/              sandbox runs after a degrade-to-sandbox decision

Every JSON file is written atomically under its lock. A file Cortex cannot read (corrupt JSON)
is never overwritten: the call fails with one line naming the file.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from cortex.core.history_models import Checkpoint
from cortex.core.lifecycle import GATE_IDS, check_slug
from cortex.core.redaction import redact
from cortex.errors import NotFoundError, StorageError, ValidationError, command
from cortex.files import (
    aside_path,
    atomic_write_text,
    check_id,
    ensure_dir,
    file_lock,
    quarantine,
    read_json,
)

STATUS_FILE = "task-status.json"
INDEX_FILE = "checkpoint-index.json"
LOG_FILE = "implementation-log.md"
STATUSES = ("pending", "in-progress", "complete", "blocked")
LOG_TAIL_BYTES = 64 * 1024  # what a start shows of a log, and where a rerun looks for its entry


def content_hash(data: dict[str, Any]) -> str:
    """SHA-256 of a checkpoint's canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _dump(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


class TaskFolder:
    """The files of one task under ``root``; the slug is checked before any path is built."""

    def __init__(self, root: Path, slug: str) -> None:
        self.slug = check_slug(slug)
        self.root = root
        self.path = root / self.slug

    # -- paths -------------------------------------------------------------------------------
    @property
    def status_path(self) -> Path:
        return self.path / "json" / STATUS_FILE

    @property
    def index_path(self) -> Path:
        return self.path / "json" / INDEX_FILE

    @property
    def checkpoints_dir(self) -> Path:
        return self.path / "json" / "checkpoints"

    @property
    def log_path(self) -> Path:
        return self.path / "work" / LOG_FILE

    @property
    def logs_dir(self) -> Path:
        return self.path / "logs"

    def checkpoint_path(self, checkpoint_id: str) -> Path:
        return self.checkpoints_dir / f"{check_id(checkpoint_id, 'checkpoint id')}.json"

    def exists(self) -> bool:
        return self.status_path.is_file()

    # -- init --------------------------------------------------------------------------------
    def init(self, title: str, at: str) -> tuple[dict[str, Any], bool]:
        """Create the folder, its status, index and log (existing files are kept); return the
        status and whether it was created now."""
        for directory in (self.checkpoints_dir, self.path / "work", self.logs_dir / "long-context"):
            ensure_dir(directory)
        created = False
        with file_lock(self.status_path):
            status = self._read(self.status_path)
            if status is None:
                status = new_status(self.slug, title, at)
                atomic_write_text(self.status_path, _dump(status))
                created = True
        with file_lock(self.index_path):
            if self._read(self.index_path) is None:
                atomic_write_text(
                    self.index_path, _dump({"task_slug": self.slug, "checkpoints": []})
                )
        if not self.log_path.exists():
            self.append_log(f"# Implementation log: {self.slug}\n")
        return status, created

    # -- status ------------------------------------------------------------------------------
    def _read(self, path: Path) -> Any:
        try:
            return read_json(path)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValidationError(
                f"{path} is not valid JSON ({str(exc)[:80]}); fix it or move it aside "
                "(Cortex never overwrites a file it cannot read)"
            ) from exc

    def require(self) -> None:
        """NotFoundError, naming ``cortex task init``, when the folder was never made."""
        if not self.exists():
            raise NotFoundError(
                f"no task folder {self.path}; "
                f"create it with {command('task init', f' {self.slug}')}"
            )

    def status(self) -> dict[str, Any]:
        """The status file's content; NotFoundError or ValidationError (corrupt) otherwise."""
        self.require()
        data = self._read(self.status_path)
        if not isinstance(data, dict) or data.get("task_slug") != self.slug:
            raise ValidationError(
                f"{self.status_path} is not this task's status (expected an object with "
                f"task_slug {self.slug!r}); fix it or move it aside"
            )
        problem = status_problem(data)
        if problem:
            raise ValidationError(f"{self.status_path}: {problem}; fix it or move it aside")
        return data

    def update_status(
        self, change: Callable[[dict[str, Any]], None], *, set_aside: str | None = None
    ) -> dict[str, Any]:
        """Apply ``change`` to the status under its lock and write it back atomically; with
        ``set_aside`` (a time stamp), a change that alters it first keeps a copy of the file
        it replaces (``set_aside_path``), and one that alters nothing writes nothing."""
        self.require()
        with file_lock(self.status_path):
            status = self.status()
            before = json.dumps(status, sort_keys=True)
            change(status)
            if set_aside is not None:
                if json.dumps(status, sort_keys=True) == before:
                    return status
                kept = self.set_aside_path(self.status_path, set_aside)
                atomic_write_text(kept, self.status_path.read_text(encoding="utf-8"))
            atomic_write_text(self.status_path, _dump(status))
        return status

    # -- checkpoints -------------------------------------------------------------------------
    def write_checkpoint(self, checkpoint: Checkpoint) -> dict[str, Any]:
        """Write the checkpoint's file, then its index entry; return the entry."""
        self.require()
        entry = index_entry(checkpoint)
        with self.index_lock():  # one lock for the file and its entry
            self.write_checkpoint_file(checkpoint)
            index = self.index()
            kept = [
                e for e in index["checkpoints"] if e.get("checkpoint_id") != entry["checkpoint_id"]
            ]
            self.write_index([*kept, entry])
        return entry

    def write_checkpoint_file(self, checkpoint: Checkpoint) -> None:
        """The checkpoint's file alone (the caller holds the index's lock)."""
        path = self.checkpoint_path(checkpoint.checkpoint_id)
        atomic_write_text(path, _dump(checkpoint.to_dict()))

    def write_index(self, entries: list[dict[str, Any]]) -> None:
        """The index with these entries (the caller holds its lock)."""
        atomic_write_text(self.index_path, _dump({"task_slug": self.slug, "checkpoints": entries}))

    def index_lock(self) -> AbstractContextManager[None]:
        """The lock writers of checkpoint files and index entries hold."""
        return file_lock(self.index_path)

    def set_aside_path(self, path: Path, stamp: str) -> Path:
        """Where ``set_aside`` moves ``path`` (or a copy of it is kept)."""
        return aside_path(path, stamp, "set-aside")

    def status_copies(self) -> list[tuple[str, dict[str, Any]]]:
        """The copies of this task's status that repairs kept (``set_aside_path``), newest
        first, each with its file's name; one that is not this task's readable status is left
        out."""
        copies = []
        aside = self.status_path.parent.glob(f"{STATUS_FILE}.set-aside-*")
        for path in sorted(aside, reverse=True):  # the names end in their time
            try:
                data = read_json(path)
            except (StorageError, ValueError, UnicodeDecodeError):  # unreadable, not JSON
                continue
            if isinstance(data, dict) and data.get("task_slug") == self.slug:
                copies.append((path.name, data))
        return copies

    def set_aside(self, path: Path, stamp: str) -> Path:
        """Move a file (or whatever stands at ``path``) aside, never deleting it."""
        moved = quarantine(path, stamp, "set-aside")
        if os.path.lexists(path):
            raise StorageError(f"cannot move {path} aside; check permissions on {path.parent}")
        return moved

    def index(self) -> dict[str, Any]:
        data = self._read(self.index_path)
        if data is None:
            return {"task_slug": self.slug, "checkpoints": []}
        if not isinstance(data, dict) or not isinstance(data.get("checkpoints"), list):
            raise ValidationError(
                f"{self.index_path} is not a checkpoint index; fix it or move it aside"
            )
        return data

    def checkpoint_files(self) -> dict[str, Path]:
        """Checkpoint files by the id their name gives."""
        if not self.checkpoints_dir.is_dir():
            return {}
        return {
            p.name[: -len(".json")]: p
            for p in sorted(self.checkpoints_dir.iterdir())
            if p.name.endswith(".json") and not p.name.startswith(".")
        }

    def read_checkpoint_file(self, checkpoint_id: str) -> Any:
        """The parsed file of a checkpoint (None when absent); ValidationError when corrupt."""
        return self._read(self.checkpoint_path(checkpoint_id))

    # -- logs --------------------------------------------------------------------------------
    def append_log(self, text: str, *, once: str | None = None) -> bool:
        """Append ``text`` (redacted) to the implementation log; with ``once``, only when the
        log's tail does not hold that key yet (a rerun's entry is not written twice). Returns
        whether it appended."""
        text = redact(text) + ("" if text.endswith("\n") else "\n")
        return self._append(self.log_path, text, once=once)

    def read_log(self, tail_bytes: int = LOG_TAIL_BYTES) -> str:
        """The end of the implementation log (its last ``tail_bytes``, however long it grew)."""
        return _tail(self.log_path, tail_bytes)

    @property
    def evidence_path(self) -> Path:
        return self.logs_dir / "sessions.log"

    def evidence(self, at: str, line: str, *, once: str | None = None) -> bool:
        """Append one evidence line (with its time) to ``logs/sessions.log``; with ``once``,
        only when the log's tail does not hold that key yet."""
        return self._append(self.evidence_path, f"{at} {redact(line)}\n", once=once)

    def read_evidence(self) -> str:
        """All of ``logs/sessions.log`` ("" when it does not exist)."""
        return _tail(self.evidence_path, None)

    def incident(self, record: dict[str, Any]) -> None:
        self._append(
            self.logs_dir / "incidents.jsonl", json.dumps(record, ensure_ascii=False) + "\n"
        )

    def _append(self, path: Path, text: str, *, once: str | None = None) -> bool:
        ensure_dir(path.parent)
        with file_lock(path):
            if once is not None and once in _tail(path, LOG_TAIL_BYTES):
                return False
            try:
                # Never through a link: a log a link replaced would send the task's text to
                # wherever it points (a tasks_root inside a repository is another's to write).
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | _NOFOLLOW, 0o600)
                with os.fdopen(fd, "a", encoding="utf-8") as handle:
                    handle.write(text)
            except OSError as exc:
                if path.is_symlink():
                    raise StorageError(
                        f"{path} is a symbolic link, and a task's log is never written through "
                        "one; remove the link (the next entry starts the file again)"
                    ) from exc
                raise StorageError(
                    f"cannot append to {path} ({exc.strerror}); check free space and permissions"
                ) from exc
        return True


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
"""Refuse a link at the file's own name (POSIX; where the flag is missing, nothing is added)."""


def _tail(path: Path, size: int | None) -> str:
    """The last ``size`` bytes of a text file (None: all of it), decoded (a character cut at
    the start, or a byte that is not UTF-8, becomes U+FFFD); "" when it does not exist."""
    try:
        with open(path, "rb") as handle:
            if size is not None:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - size))
            return handle.read(size).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise StorageError(f"cannot read {path} ({exc.strerror}); check permissions") from exc


_STATUS_TYPES: dict[str, tuple[type, ...]] = {
    "retries": (dict,),
    "budget": (dict,),
    "health": (dict, type(None)),
    "sandbox": (bool,),
}


def status_problem(status: dict[str, Any]) -> str | None:
    """What is wrong with the fields of a status file that Cortex reads (None: nothing)."""
    gate = status.get("current_gate")
    if gate is not None and gate not in GATE_IDS:
        return f"current_gate {str(gate)[:20]!r} is not a gate (G0..G10)"
    if status.get("status", "pending") not in STATUSES:
        return f"status {str(status.get('status'))[:20]!r} is not one of {', '.join(STATUSES)}"
    for key, types in _STATUS_TYPES.items():
        if key in status and not isinstance(status[key], types):
            return f"{key} is a {type(status[key]).__name__}, not {types[0].__name__}"
    return None


def index_entry(checkpoint: Checkpoint) -> dict[str, Any]:
    """A checkpoint's entry in the index: what it is, and the SHA-256 of its content."""
    return {
        "checkpoint_id": checkpoint.checkpoint_id,
        "session_id": checkpoint.session_id,
        "timestamp": checkpoint.timestamp,
        "type": checkpoint.type,
        "gate": checkpoint.gate,
        "step": checkpoint.step,
        "summary": checkpoint.summary[:200],
        "sha256": content_hash(checkpoint.to_dict()),
    }


def new_status(slug: str, title: str, at: str) -> dict[str, Any]:
    """A new task's status: pending at G0, no session yet."""
    return {
        "task_slug": slug,
        "title": redact(title) or slug,
        "status": "pending",
        "current_gate": "G0",
        "last_session": None,
        "last_activity": at,
        "created_at": at,
        "goal": None,
        "health": None,
        "retries": {"steps": {}, "history": []},
        "budget": {},
        "sandbox": False,
    }
