"""Requests whose id is no string or integer, answered before the SDK reads them.

JSON-RPC 2.0 answers ``{"jsonrpc": "2.0", "id": true, "method": "tools/list"}`` (an id of
``true``, ``null``, ``1.5``, ``{}``) with "invalid request" (-32600) under id null, and MCP takes
only string or integer ids. The SDK's parser reads such a line as a notification, dropping the
id it cannot take, so the server never answered it and the client waited for ever; once parsed,
it cannot be told from a true notification (no id), which must never be answered.

So the line is read before the SDK reads it. The SDK serves the wire from fd 0 (through a
duplicate of its own, fd 0 pointing at the null device meanwhile, so a handler or a child that
reads stdin cannot eat requests); explicit streams would skip that. ``stdin_gate`` puts a pipe on
fd 0 before the SDK claims it, and ``StdinGate.run`` feeds the pipe from the real stdin line by
line, unchanged, holding back each request with such an id and answering it instead.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from cortex.adapters.mcp.wire import BAD_ID, bad_id, error_answer, loads
from cortex.logs import getLogger

log = getLogger("cortex.mcp")


class StdinGate:
    """The real stdin, read line by line into the pipe the SDK reads as its stdin."""

    def __init__(self, stdin: BinaryIO, pipe: BinaryIO) -> None:
        self._stdin = stdin
        self._pipe = pipe

    async def run(self, answers: Any) -> None:
        """Forward each line, or send ``answers`` (the SDK's write stream) its error; at the
        end of stdin close the pipe, so the SDK reads its end too."""
        while line := await anyio.to_thread.run_sync(self._stdin.readline, abandon_on_cancel=True):
            kept = b""
            # (split as the SDK's text layer splits lines: at \r\n, \r or \n)
            for piece in line.splitlines(keepends=True):
                answer = held_back(piece)
                if answer is None:
                    kept += piece
                else:
                    await answers.send(answer)
            if kept:
                await anyio.to_thread.run_sync(self._forward, kept, abandon_on_cancel=True)
        self._pipe.close()

    def _forward(self, data: bytes) -> None:
        self._pipe.write(data)
        self._pipe.flush()


def held_back(line: bytes) -> SessionMessage | None:
    """The error answer to ``line`` if it is a request whose id is no string or integer."""
    if b"id" not in line and b"\\u" not in line:  # (a key may be escaped: "\u0069d")
        return None
    try:
        value = loads(line.decode("utf-8", "replace").rstrip("\r\n"))
    except ValueError:
        return None  # not JSON: the SDK refuses it and ``wire`` answers it
    if not bad_id(value):
        return None
    log.info("a request whose id is no string or integer was answered")
    return error_answer(types.INVALID_REQUEST, BAD_ID, None)


@contextmanager
def stdin_gate() -> Iterator[StdinGate | None]:
    """Put a pipe on fd 0 for the SDK to read, fed by the ``StdinGate`` yielded; on exit point
    fd 0 at the real stdin again. None (fd 0 left alone) where stdin is no descriptor 0 or no
    pipe can be made."""
    if sys.platform == "win32" or not _is_fd0(sys.stdin):
        yield None
        return
    try:
        real = _above_std(0)
        reader, writer = os.pipe()
    except OSError as exc:
        log.info("stdin is served unchecked for request ids: %s", exc)
        yield None
        return
    # Never closed: a worker thread may still block on it after serving (as the SDK's does).
    stdin = os.fdopen(real, "rb", closefd=False)
    try:
        os.dup2(reader, 0)
    finally:
        os.close(reader)
    try:
        yield StdinGate(stdin, os.fdopen(_moved_above_std(writer), "wb"))
    finally:
        os.dup2(real, 0)


def _is_fd0(stream: Any) -> bool:
    try:
        return bool(stream.buffer.fileno() == 0)
    except (AttributeError, OSError, ValueError):
        return False


def _above_std(fd: int) -> int:
    """A duplicate of ``fd`` that children do not inherit, above the standard descriptors."""
    import fcntl  # (POSIX only)

    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)


def _moved_above_std(fd: int) -> int:
    if fd > 2:
        return fd
    try:
        return _above_std(fd)
    finally:
        os.close(fd)
