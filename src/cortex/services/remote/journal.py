"""The client's write-ahead journal: mutations the server did not take yet, in order.

``$CORTEX_HOME/spool/journal.jsonl`` holds one JSON object a line: ``method``, ``path``,
``body`` (with its ``request_id``, credentials redacted) and ``created_at``. ``journal.offset``
holds how many bytes of it were delivered (``{"offset": n}``, replaced atomically).

Guarantees:

- ``append`` returns only once its line is on disk (``os.write`` of the whole line, then
  ``fsync``, under an exclusive lock), so an acknowledged entry survives a crash. A writer
  killed mid-line leaves a line with no newline; the next append ends it first, so the torn
  line never merges with a good one (the drain sets it aside as unreadable).
- ``drain`` sends entries oldest first and commits the offset every ``COMMIT_EVERY`` entries,
  at a rejection and when it stops. A crash before a commit sends those entries again: the
  server applies a ``request_id`` at most once, so nothing is lost and nothing applied twice.
- When everything was delivered the journal is emptied: the offset is reset first, then the
  file truncated, so a crash in between only replays entries the server already has.
- One drainer at a time (``drain.lock``); appends take ``journal.lock`` briefly, so a hook
  never waits for a drain's network calls.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cortex.core.redaction import redact_value
from cortex.errors import StorageError
from cortex.files import atomic_write_text, ensure_dir, file_lock

JOURNAL = "journal.jsonl"
REJECTED = "rejected.jsonl"
OFFSET = "journal.offset"
COMMIT_EVERY = 32
"""Entries sent between offset commits: a crash replays at most these (the server dedupes)."""


class Rejected(Exception):
    """The server refused an entry for good (a 4xx that retrying cannot fix)."""


@dataclass(frozen=True)
class DrainReport:
    """What one drain did: entries delivered, still waiting, and set aside as rejected."""

    sent: int
    left: int
    rejected: int
    error: str | None = None
    """Why the drain stopped early (the server is unreachable), else None."""

    def to_dict(self) -> dict[str, Any]:
        return {"sent": self.sent, "left": self.left, "rejected": self.rejected}


class Journal:
    """The spool directory of one Cortex home (created 0700, files 0600)."""

    def __init__(self, home: Path) -> None:
        self.dir = home / "spool"
        self.path = self.dir / JOURNAL

    # -- append --------------------------------------------------------------------------------
    def append(self, method: str, path: str, body: dict[str, Any], created_at: str) -> None:
        """Add one mutation at the end, durably (it is on disk when this returns)."""
        entry = {
            "method": method,
            "path": path,
            "body": redact_value(body),
            "created_at": created_at,
        }
        line = (json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        with file_lock(self.dir / "journal"):
            fd = self._open(self.path, os.O_RDWR | os.O_APPEND)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    line = b"\n" + line  # end a line a killed writer left unfinished
                _write_all(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)

    # -- read ----------------------------------------------------------------------------------
    def pending(self) -> int:
        """How many bytes wait to be delivered (0: nothing; cheap, for every call)."""
        try:
            size = self.path.stat().st_size
        except OSError:
            return 0
        return max(0, size - self._offset()) if size else 0

    def entries(self) -> list[dict[str, Any]]:
        """The undelivered entries, oldest first (unreadable lines left out)."""
        return [e for _, e in self._read_from(self._offset()) if e is not None]

    def count(self) -> int:
        """How many whole lines wait to be delivered."""
        return len(self._read_from(self._offset()))

    # -- drain ---------------------------------------------------------------------------------
    def drain(self, send: Callable[[dict[str, Any]], None], *, wait: bool = False) -> DrainReport:
        """Send every undelivered entry in order with ``send`` until one fails.

        ``send`` returns when the server took the entry (or answered it was a duplicate),
        raises ``Rejected`` when the server refused it for good (the entry moves to
        ``rejected.jsonl``), and raises anything else to stop the drain (the entry stays).
        Without ``wait``, a drain already running elsewhere makes this one return at once.
        """
        sent = rejected = 0
        try:
            with file_lock(self.dir / "drain", wait=wait):
                while True:
                    offset = self._offset()
                    batch = self._read_from(offset)
                    if not batch:
                        self._reset_if_drained()
                        return DrainReport(sent, 0, rejected)
                    for n, (end, entry) in enumerate(batch, 1):
                        try:
                            if entry is None:
                                raise Rejected("unreadable journal line (a writer was killed)")
                            send(entry)
                            sent += 1
                        except Rejected as exc:
                            self._reject(entry, str(exc))
                            rejected += 1
                            n = 0  # commit now: a replay would reject it twice
                        except Exception as exc:  # noqa: BLE001 - stop; the entry stays
                            self._commit(offset)
                            left = len(self._read_from(offset))
                            return DrainReport(sent, left, rejected, str(exc))
                        offset = end
                        if n % COMMIT_EVERY == 0 or n == len(batch):
                            self._commit(offset)
        except BlockingIOError:
            return DrainReport(sent, self.count(), rejected, "another process is draining")

    # -- internals -----------------------------------------------------------------------------
    def _read_from(self, offset: int) -> list[tuple[int, dict[str, Any] | None]]:
        """(end offset, entry or None when unreadable) of each whole line after ``offset``."""
        try:
            with self.path.open("rb") as f:
                f.seek(offset)
                data = f.read()
        except OSError:
            return []
        out: list[tuple[int, dict[str, Any] | None]] = []
        position = offset
        for raw in data.splitlines(keepends=True):
            if not raw.endswith(b"\n"):
                break  # being written, or torn: the next append ends it
            position += len(raw)
            if raw.strip():
                out.append((position, _parse(raw)))
        return out

    def _offset(self) -> int:
        try:
            data = json.loads((self.dir / OFFSET).read_text(encoding="utf-8"))
            return max(0, int(data["offset"]))
        except (OSError, ValueError, TypeError, KeyError):
            return 0

    def _commit(self, offset: int) -> None:
        """Record ``offset`` as delivered: an atomic, fsynced rewrite, then the directory."""
        atomic_write_text(self.dir / OFFSET, json.dumps({"offset": offset}))
        _fsync_dir(self.dir)

    def _reset_if_drained(self) -> None:
        """Empty a fully delivered journal (offset first: a crash then only replays)."""
        with file_lock(self.dir / "journal"):
            offset = self._offset()
            try:
                size = self.path.stat().st_size
            except OSError:
                return
            if offset == 0 or size != offset:
                return
            self._commit(0)
            fd = self._open(self.path, os.O_WRONLY)
            try:
                os.ftruncate(fd, 0)
                os.fsync(fd)
            finally:
                os.close(fd)

    def _reject(self, entry: dict[str, Any] | None, why: str) -> None:
        record = {"entry": entry, "error": why}
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode()
        fd = self._open(self.dir / REJECTED, os.O_WRONLY | os.O_APPEND)
        try:
            _write_all(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _open(self, path: Path, flags: int) -> int:
        try:
            ensure_dir(self.dir)
            return os.open(path, flags | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StorageError(
                f"cannot write the client journal {path} ({exc.strerror}); "
                "check the permissions of the Cortex home"
            ) from exc


def _parse(raw: bytes) -> dict[str, Any] | None:
    try:
        entry = json.loads(raw)
    except ValueError:
        return None
    ok = isinstance(entry, dict) and isinstance(entry.get("body"), dict)
    return entry if ok and isinstance(entry.get("path"), str) else None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
