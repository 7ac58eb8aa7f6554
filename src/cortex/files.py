"""Crash-safe local files: atomic JSON writes under a lock, and ids safe to use as file names.

A file Cortex writes is written to a temporary file in the same directory, fsynced, and
renamed over the target, so a reader sees the old content or the new, never half of either.
Writers of one file serialize on an advisory lock (``<file>.lock``). Files are 0600 and the
directories Cortex creates 0700, since pins and sessions can hold private notes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from cortex.errors import StorageError, UnsafeIdError

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+-]{0,127}")


_ID_EXAMPLES = {"task id": "task-12", "checkpoint id": "ckpt-2026-02-18-3f2a9c1e"}
"""An id of the kind, for the error's example (other ids are UUIDs)."""


def check_id(value: str, what: str = "session id") -> str:
    """Return ``value`` if it is safe as a file name (no path separators, no ``..``)."""
    if not isinstance(value, str) or not _SAFE_ID.fullmatch(value) or ".." in value:
        shown = repr(value)[:60]
        raise UnsafeIdError(
            f"invalid {what} {shown}: use 1-128 letters, digits or . _ : @ + - "
            f"(no '/', no '..'), e.g. {_ID_EXAMPLES.get(what, 'a UUID')}"
        )
    return value


def ensure_dir(path: Path) -> Path:
    """Create ``path`` and its missing parents, each 0700; return it."""
    try:
        if path.exists():  # the common case: one stat instead of one per parent
            return path
        missing = [p for p in (path, *path.parents) if not p.exists()]
        for directory in reversed(missing):  # mkdir(parents=True) would use the umask
            directory.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        raise StorageError(
            f"cannot create directory {path} ({exc.strerror}); check permissions or set CORTEX_HOME"
        ) from exc
    return path


BRIEF_LOCK_SECONDS = 0.5
"""How long a write waits for a lock its writers hold for milliseconds (a session's or the
pins' mirror, the metrics chain's key and head): a longer hold is a process stopped or stuck
while holding it, and a hook must not wait on that past its host's time limit (Claude Code
gives a SessionEnd 1.5 s). Past it the write fails with a StorageError; the mirrors and the
head are copies, which the next write brings up to date."""


@contextlib.contextmanager
def file_lock(target: Path, *, wait: bool | float = True) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``<target>.lock`` for the block.

    With ``wait=False`` a lock held elsewhere raises ``BlockingIOError`` at once; with a
    number, StorageError once it has been held that many seconds more.
    """
    ensure_dir(target.parent)
    lock_path = target.with_name(target.name + ".lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise StorageError(
            f"cannot lock {target} ({exc.strerror}); check permissions on its directory"
        ) from exc
    try:
        if isinstance(wait, bool):
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            _flock_within(fd, wait, lock_path)
        yield
    finally:
        os.close(fd)


def _flock_within(fd: int, seconds: float, lock_path: Path) -> None:
    """Take the lock on ``fd``, polling, within ``seconds``; StorageError past that."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise StorageError(
                    f"{lock_path} has been held by another process for over {seconds:g} s;"
                    " if this repeats, stop the process that holds it (fuser shows it)"
                ) from None
            time.sleep(0.005)


def atomic_write_text(target: Path, text: str, *, durable: bool = True) -> None:
    """Write ``text`` to ``target`` via temp file (+ fsync when ``durable``) + rename.

    The caller holds the lock. A mirror that the database can rebuild skips the fsync
    (``durable=False``): the rename still makes the swap atomic for readers.
    """
    ensure_dir(target.parent)
    try:
        # A unique sibling name (tempfile costs ~10 ms to import on the hook path).
        tmp = str(target.parent / f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}")
        data = memoryview(text.encode("utf-8"))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            try:  # plain writes on the descriptor: no buffered text file object to set up
                while data:
                    data = data[os.write(fd, data) :]
                if durable:
                    os.fsync(fd)
                os.fchmod(fd, 0o600)  # exactly 0600 whatever the umask
            finally:
                os.close(fd)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        raise StorageError(
            f"cannot write {target} ({exc.strerror}); check free space and permissions"
        ) from exc


def write_json(
    target: Path,
    data: Any,
    *,
    durable: bool = True,
    lock: bool = True,
    wait: bool | float = True,
) -> None:
    """Atomically write ``data`` as pretty JSON under the file's lock (``lock=False``: the
    caller holds it), waiting for the lock as ``file_lock``'s ``wait`` says."""
    text = pretty_json(data) + "\n"
    with file_lock(target, wait=wait) if lock else contextlib.nullcontext():
        atomic_write_text(target, text, durable=durable)


def pretty_json(data: Any) -> str:
    """``json.dumps(data, indent=2, ensure_ascii=False)``, the same text, about three times
    faster: with an indent ``json`` encodes in Python, one generator per container, and every
    session start writes a mirror. Anything but strings, numbers, booleans, None, lists,
    tuples and dicts with string keys (or a cycle) goes to ``json.dumps`` itself."""
    out: list[str] = []
    try:
        _pretty_into(data, "\n", out)
    except (_NotPlainJSON, RecursionError):
        return json.dumps(data, indent=2, ensure_ascii=False)
    return "".join(out)


class _NotPlainJSON(Exception):
    """A value ``pretty_json`` leaves to ``json.dumps``."""


_encode_string = json.encoder.encode_basestring  # json's own, for ensure_ascii=False


def _pretty_into(value: Any, newline: str, out: list[str]) -> None:
    """Append ``value``'s indented JSON to ``out``; ``newline`` starts its own line."""
    if isinstance(value, str):
        out.append(_encode_string(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        finite = value - value == 0.0  # not inf or nan, which json spells its own way
        out.append(float.__repr__(value) if finite else json.dumps(value))
    elif isinstance(value, list | tuple):
        _pretty_items(value, "[]", newline, out)
    elif isinstance(value, dict):
        _pretty_items(value, "{}", newline, out)
    else:
        raise _NotPlainJSON


def _pretty_items(
    value: list[Any] | tuple[Any, ...] | dict[Any, Any], ends: str, newline: str, out: list[str]
) -> None:
    """A list's items or a dict's pairs, one a line, indented two spaces past ``newline``."""
    if not value:
        out.append(ends)
        return
    inner = newline + "  "
    separator = ends[0] + inner
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise _NotPlainJSON  # json turns some keys into strings: let it
            out.append(separator + _encode_string(key) + ": ")
            _pretty_into(item, inner, out)
            separator = "," + inner
    else:
        for item in value:
            out.append(separator)
            _pretty_into(item, inner, out)
            separator = "," + inner
    out.append(newline + ends[1])


def file_uri(path: Path | str) -> str:
    """``path`` as SQLite's ``file:`` URI, for a connection that takes options after ``?``
    (``mode=ro``): absolute, with ``%``, ``?`` and ``#`` escaped, so that a folder named
    ``a#1`` is not cut at its ``#`` (the rest read as a fragment, and the options with it).
    """
    text = os.path.abspath(path).replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    return f"file:{text}"


def read_regular(target: Path, limit: int | None = None) -> bytes:
    """The bytes of the regular file ``target`` (its first ``limit`` bytes, if given);
    OSError when it is missing or no regular file. Opened without blocking, so a FIFO or a
    device in its place (nothing ever writes to it) fails at once instead of holding the
    reader, a hook, for ever."""
    fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(target))
        chunks: list[bytes] = []
        size = 0
        while limit is None or size < limit:
            chunk = os.read(fd, 1 << 20 if limit is None else min(1 << 20, limit - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_json(target: Path) -> Any:
    """Read a JSON file; None if it does not exist. Raises ValueError on bad content."""
    try:
        raw = read_regular(target)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(f"cannot read {target} ({exc.strerror}); check permissions") from exc
    return json.loads(raw.decode("utf-8"))


def aside_path(target: Path, stamp: str, label: str = "corrupt") -> Path:
    """Where ``target`` goes when it is moved or copied aside: ``<name>.<label>-<stamp>``."""
    safe_stamp = re.sub(r"[^0-9A-Za-z]", "", stamp)
    return target.with_name(f"{target.name}.{label}-{safe_stamp}")


def quarantine(target: Path, stamp: str, label: str = "corrupt") -> Path:
    """Move a corrupt file aside (never delete it) and return where it went."""
    dest = aside_path(target, stamp, label)
    with contextlib.suppress(OSError):
        os.replace(target, dest)
    return dest
