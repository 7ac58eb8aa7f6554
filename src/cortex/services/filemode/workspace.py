"""The workspace's files: where they are, reading them in bounded memory, appending, the lock
and the sync state.

Reads never hold a whole file: lines come one at a time, each cut at ``MAX_LINE_BYTES``, bytes
that are not UTF-8 become U+FFFD and their line numbers are reported; the bootstrap reads the
head of the semantic file and the tail of a daily log. Every write is redacted by the caller;
here a rewrite is atomic (temporary file, fsync, rename), an append is fsynced, and a snapshot
file is created exclusively (an existing file is never overwritten).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cortex.core.filemode import MAX_LINE_BYTES, Layout, daily_title
from cortex.errors import ConflictError, StorageError
from cortex.files import atomic_write_text, ensure_dir, file_lock, read_json, write_json

STATE_NAME = ".cortex-file-sync.json"
LOCK_NAME = ".cortex-file-sync"
TAIL_SCAN_BYTES = 256 * 1024
"""How far back from the end an append looks for its own marker (an append a crash may have
already made is at the end of the file)."""


@dataclass
class ReadNotes:
    """What reading a file found: lines with bytes that are not UTF-8, lines cut short."""

    bad_lines: list[int] = field(default_factory=list)
    long_lines: list[int] = field(default_factory=list)

    def messages(self, rel: str) -> list[str]:
        out = []
        if self.bad_lines:
            out.append(
                f"{rel}: {len(self.bad_lines)} line(s) hold bytes that are not UTF-8 (first at "
                f"line {self.bad_lines[0]}); they were read with U+FFFD in their place; "
                "save the file as UTF-8"
            )
        if self.long_lines:
            out.append(
                f"{rel}: {len(self.long_lines)} line(s) are longer than {MAX_LINE_BYTES:,} bytes "
                f"(first at line {self.long_lines[0]}); only their start was read"
            )
        return out


class Workspace:
    """One workspace directory laid out as ``layout`` says."""

    def __init__(self, root: Path, layout: Layout) -> None:
        self.root = root
        self.layout = layout

    def path(self, rel: str) -> Path:
        """``rel`` under the root, refused when a link in it leads outside the workspace (an
        agent that may write only its workspace could plant one to make Cortex append to, or
        import, a file elsewhere); a link that stays inside is followed."""
        path = self.root.joinpath(*rel.split("/"))
        root = os.path.realpath(self.root)
        real = os.path.realpath(path)
        if real != root and not real.startswith(root.rstrip(os.sep) + os.sep):
            raise StorageError(
                f"{path} leads outside the workspace {self.root} (a symbolic link to {real}); "
                "Cortex reads and writes only inside it: replace the link with the file itself"
            )
        return path

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def semantic_rel(self) -> str:
        """The semantic file in use: the first candidate that exists, else the first."""
        for name in self.layout.semantic_names:
            if self.path(name).is_file():
                return name
        return self.layout.semantic_names[0]

    def daily_logs(self) -> list[tuple[str, str]]:
        """(day, relative path) of every daily log, oldest first."""
        directory = self.path(self.layout.daily_dir)
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StorageError(
                f"cannot list {directory} ({exc.strerror}); check permissions"
            ) from exc
        found = [(self.layout.daily_day(n), n) for n in names]
        return sorted((day, f"{self.layout.daily_dir}/{n}") for day, n in found if day)

    # -- the lock and the state ----------------------------------------------------------------
    def ready(self) -> None:
        """Make the workspace folder and its lock file, or fail: a trigger that stores
        something checks this first, so a workspace that cannot be written (a path too long,
        a read-only folder) fails the command before anything reaches the database."""
        with self.lock():
            pass

    @contextlib.contextmanager
    def lock(self, *, wait: bool = True) -> Iterator[None]:
        """Hold the workspace's sync lock: one sync, append or rewrite at a time."""
        try:
            with file_lock(self.path(LOCK_NAME), wait=wait):
                yield
        except BlockingIOError as exc:
            raise ConflictError(
                f"another process is syncing {self.root}; try again when it is done"
            ) from exc

    def read_state(self) -> dict[str, Any]:
        """The sync state; an empty one when it is missing or unreadable (the next sync
        rebuilds it: it holds no memory, only what the files held when Cortex wrote them)."""
        try:
            data = read_json(self.path(STATE_NAME))
        except (ValueError, UnicodeDecodeError):
            data = None
        if not isinstance(data, dict):
            return {"version": 1, "renderings": [], "daily": {}}
        data.setdefault("renderings", [])
        data.setdefault("daily", {})
        return data

    def write_state(self, state: dict[str, Any]) -> None:
        write_json(self.path(STATE_NAME), state)

    # -- reading -------------------------------------------------------------------------------
    def read_lines(self, rel: str, notes: ReadNotes) -> Iterator[str]:
        """The file's lines (with their newlines), decoded; raises FileNotFoundError."""
        with self.path(rel).open("rb") as handle:
            number = 0
            while raw := handle.readline(MAX_LINE_BYTES):
                number += 1
                if len(raw) == MAX_LINE_BYTES and not raw.endswith(b"\n"):
                    notes.long_lines.append(number)
                    raw = _cut_to_char(raw) + b"\n"
                    while (rest := handle.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                        pass  # skip the rest of the over-long line
                try:
                    yield raw.decode("utf-8")
                except UnicodeDecodeError:
                    notes.bad_lines.append(number)
                    yield raw.decode("utf-8", "replace")

    def read_head(self, rel: str, limit: int) -> tuple[str, bool]:
        """The first ``limit`` bytes (cut at a line end), and whether the file is longer."""
        try:
            with self.path(rel).open("rb") as handle:
                data = handle.read(limit + 1)
        except FileNotFoundError:
            return "", False
        if len(data) <= limit:
            return data.decode("utf-8", "replace"), False
        cut = data[:limit].rfind(b"\n")
        return data[: cut + 1 if cut > 0 else limit].decode("utf-8", "replace"), True

    def read_tail(self, rel: str, limit: int) -> tuple[str, bool]:
        """The last ``limit`` bytes (from a line start), and whether the file is longer."""
        try:
            with self.path(rel).open("rb") as handle:
                size = handle.seek(0, os.SEEK_END)
                start = max(0, size - limit)
                handle.seek(start)
                data = handle.read(limit)
        except FileNotFoundError:
            return "", False
        if start > 0:
            newline = data.find(b"\n")
            data = data[newline + 1 :] if newline >= 0 else b""
        return data.decode("utf-8", "replace"), start > 0

    def stat(self, rel: str) -> tuple[int, int] | None:
        """(size, mtime in ns), or None when the file is gone."""
        try:
            st = self.path(rel).stat()
        except FileNotFoundError:
            return None
        return st.st_size, st.st_mtime_ns

    # -- writing -------------------------------------------------------------------------------
    def rewrite(self, rel: str, text: str) -> None:
        atomic_write_text(self.path(rel), text)

    def keep_copy(self, rel: str, suffix: str, clean: Callable[[str], str]) -> str | None:
        """Copy a file aside before it is rewritten (its bytes could not be kept otherwise):
        its text passed through ``clean`` (redaction; bytes that are not UTF-8 kept as they
        are), 0600, and whole or not at all (written aside, then linked into place)."""
        source = self.path(rel)
        target = source.with_name(f"{source.name}.{suffix}")
        tmp = source.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            text = source.read_bytes().decode("utf-8", errors="surrogateescape")
            data = clean(text).encode("utf-8", errors="surrogateescape")
            with contextlib.suppress(FileNotFoundError):  # a crashed run's, or a planted link
                os.unlink(tmp)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                os.fchmod(fd, 0o600)  # whatever the umask
                handle.write(data)
                handle.flush()
                os.fsync(fd)
            with contextlib.suppress(FileExistsError):  # a copy of an earlier run stays
                os.link(tmp, target)
        except OSError as exc:
            raise StorageError(
                f"cannot keep a copy of {source} ({exc.strerror}); check the disk and the "
                "workspace folder's permissions, then run it again"
            ) from exc
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        return self.rel(target)

    def append(self, rel: str, block: str, marker: str, day: str) -> bool:
        """Append ``block`` to a daily log (created with its title); False when the block's
        marker is already at the end of the file (a repeated append after a crash)."""
        path = self.path(rel)
        ensure_dir(path.parent)
        try:
            with path.open("a+b") as handle:
                os.chmod(path, 0o600)
                size = handle.seek(0, os.SEEK_END)
                handle.seek(max(0, size - TAIL_SCAN_BYTES))
                tail = handle.read()
                if f"<!-- cortex:{marker} -->".encode() in tail:
                    return False
                prefix = "" if size else daily_title(day)
                if tail and not tail.endswith(b"\n"):
                    prefix = "\n"
                handle.write((prefix + block).encode("utf-8"))
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            raise StorageError(
                f"cannot append to {path} ({exc.strerror}); check permissions"
            ) from exc
        return True

    def create(self, rel: str, text: str) -> bool:
        """Create a file that must not exist yet; False when it does."""
        path = self.path(rel)
        ensure_dir(path.parent)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return False
        except OSError as exc:
            raise StorageError(f"cannot write {path} ({exc.strerror}); check permissions") from exc
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        return True


def _cut_to_char(raw: bytes) -> bytes:
    """``raw`` without a UTF-8 character cut in half at its end."""
    for back in range(1, 4):
        if len(raw) > back and raw[-back] & 0xC0 == 0xC0:  # a lead byte this close to the end
            needed = 2 if raw[-back] < 0xE0 else 3 if raw[-back] < 0xF0 else 4
            return raw[:-back] if needed > back else raw
    return raw
