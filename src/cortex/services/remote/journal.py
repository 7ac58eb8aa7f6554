"""The client's write-ahead journal: mutations the server did not take yet, in order.

``$CORTEX_HOME/spool/journal.jsonl`` holds one JSON object a line: ``method``, ``path``,
``body`` (with its ``request_id``; credentials redacted in both), ``created_at``, and the ``server``
and ``key`` (the API key's id, or a hash of a key without one; never the secret) it was
written for. ``journal.offset`` holds how many bytes of it were delivered (``{"offset": n}``,
replaced atomically).

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
- An entry is delivered only to the server and with the key it was written for. A drain under
  another server or key moves it to ``held.jsonl`` (in order, under the drain lock) instead of
  sending it; a drain of ``held`` (``cortex sync``) sends those of the current server and key
  first, and keeps the others. An entry without ``server`` (an older version's) is the
  current one's.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from cortex.core.redaction import redact, redact_value
from cortex.errors import StorageError
from cortex.files import atomic_write_text, ensure_dir, file_lock

JOURNAL = "journal.jsonl"
REJECTED = "rejected.jsonl"
HELD = "held.jsonl"
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
    held: int = 0
    """Entries of another server or key this drain set aside in ``held.jsonl``."""
    cause: Exception | None = field(default=None, compare=False, repr=False)
    """The exception that stopped the drain, when one did."""

    def to_dict(self) -> dict[str, Any]:
        return {"sent": self.sent, "left": self.left, "rejected": self.rejected, "held": self.held}


class Journal:
    """The spool directory of one Cortex home (created 0700, files 0600).

    ``target`` (``{"server": ..., "key": ...}``) is whom this process writes for: appends
    record it, and drains deliver only the entries written for it.
    """

    def __init__(self, home: Path, target: dict[str, str] | None = None) -> None:
        self.dir = home / "spool"
        self.path = self.dir / JOURNAL
        self.target = target or {}

    def ours(self, entry: dict[str, Any]) -> bool:
        """Whether ``entry`` was written for this journal's server and key."""
        if "server" not in entry:
            return True  # written before entries named their server: the current one's
        return all(entry.get(name) == value for name, value in self.target.items())

    # -- append --------------------------------------------------------------------------------
    def append(self, method: str, path: str, body: dict[str, Any], created_at: str) -> None:
        """Add one mutation at the end, durably (it is on disk when this returns)."""
        entry = {
            "method": method,
            "path": _redacted_path(path),
            "body": redact_value(body),
            "created_at": created_at,
            **self.target,
        }
        line = _line(entry)
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
        """The undelivered entries of this server and key, oldest first (unreadable lines
        and other keys' entries left out)."""
        return [e for _, e in self._read_from(self._offset()) if e is not None and self.ours(e)]

    def held(self) -> list[dict[str, Any]]:
        """The entries set aside for another server or key, oldest first."""
        return [e for _, e in _read_lines(self.dir / HELD, 0) if e is not None]

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
        sent = rejected = held = 0
        try:
            with file_lock(self.dir / "drain", wait=wait):
                while True:
                    offset = self._offset()
                    batch = self._read_from(offset)
                    if not batch:
                        self._reset_if_drained()
                        return DrainReport(sent, 0, rejected, held=held)
                    for n, (end, entry) in enumerate(batch, 1):
                        try:
                            if entry is not None and not self.ours(entry):
                                self._keep(HELD, entry)
                                held += 1
                                n = 0  # commit now: a replay would hold it twice
                            elif self._deliver(entry, send):
                                sent += 1
                            else:
                                rejected += 1
                                n = 0  # commit now: a replay would reject it twice
                        except Exception as exc:  # noqa: BLE001 - stop; the entry stays
                            self._commit(offset)
                            left = len(self._read_from(offset))
                            return DrainReport(sent, left, rejected, str(exc), held, exc)
                        offset = end
                        if n % COMMIT_EVERY == 0 or n == len(batch):
                            self._commit(offset)
        except BlockingIOError:
            return DrainReport(sent, self.count(), rejected, "another process is draining", held)

    def holds(self) -> bool:
        """Whether any entry is held (cheap: one ``stat``)."""
        try:
            return (self.dir / HELD).stat().st_size > 0
        except OSError:
            return False

    def drain_held(
        self, send: Callable[[dict[str, Any]], None], *, wait: bool = True
    ) -> DrainReport:
        """Send the held entries of this server and key, oldest first, like ``drain``; the
        others stay held. ``left`` counts this key's entries still held, ``held`` the others'."""
        try:
            with file_lock(self.dir / "drain", wait=wait):
                return self._drain_held(send)
        except BlockingIOError:
            left = sum(1 for entry in self.held() if self.ours(entry))
            return DrainReport(0, left, 0, "another process is draining")

    def _drain_held(self, send: Callable[[dict[str, Any]], None]) -> DrainReport:
        """``drain_held`` under the drain lock: the file is rewritten with what stays."""
        sent = rejected = 0
        kept: list[dict[str, Any]] = []
        error: Exception | None = None
        for entry in self.held():
            if error is not None or not self.ours(entry):
                kept.append(entry)
                continue
            try:
                if self._deliver(entry, send):
                    sent += 1
                else:
                    rejected += 1
            except Exception as exc:  # noqa: BLE001 - stop; this and the rest stay held
                error = exc
                kept.append(entry)
        if sent or rejected:
            atomic_write_text(self.dir / HELD, "".join(_line(e).decode() for e in kept))
        left = sum(1 for entry in kept if self.ours(entry))
        why = str(error) if error is not None else None
        return DrainReport(sent, left, rejected, why, len(kept) - left, error)

    # -- internals -----------------------------------------------------------------------------
    def _deliver(
        self, entry: dict[str, Any] | None, send: Callable[[dict[str, Any]], None]
    ) -> bool:
        """Send ``entry``: True once the server took it, False when it refused it for good
        (it moved to ``rejected.jsonl``); anything else raises (the entry stays)."""
        try:
            if entry is None:
                raise Rejected("unreadable journal line (a writer was killed)")
            send(entry)
            return True
        except Rejected as exc:
            self._reject(entry, str(exc))
            return False

    # -- files ---------------------------------------------------------------------------------
    def _read_from(self, offset: int) -> list[tuple[int, dict[str, Any] | None]]:
        """(end offset, entry or None when unreadable) of each whole line after ``offset``."""
        return _read_lines(self.path, offset)

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
        self._keep(REJECTED, {"entry": entry, "error": why})

    def _keep(self, name: str, record: dict[str, Any]) -> None:
        """Append ``record`` to the spool file ``name``, durably."""
        fd = self._open(self.dir / name, os.O_WRONLY | os.O_APPEND)
        try:
            _write_all(fd, _line(record))
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


def _redacted_path(path: str) -> str:
    """``path`` with credentials in its segments redacted (a pin's label is one)."""
    segments = path.split("/")
    for n, segment in enumerate(segments):
        text = unquote(segment)
        if redact(text) != text:
            segments[n] = quote(redact(text), safe="")
    return "/".join(segments)


def _line(record: dict[str, Any]) -> bytes:
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def _read_lines(path: Path, offset: int) -> list[tuple[int, dict[str, Any] | None]]:
    """(end offset, entry or None when unreadable) of each whole line of ``path`` after
    ``offset``."""
    try:
        with path.open("rb") as f:
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
