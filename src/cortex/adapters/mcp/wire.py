"""Request lines the SDK's stdio parser refuses: mended and served, or answered, never dropped.

The SDK reads each stdin line with pydantic's JSON parser and hands a line it cannot read to
the server as an exception, which the server drops: the request gets no answer and the
client waits for ever. Valid JSON that parser refuses:

- a lone UTF-16 surrogate (``"\\ud83d"``, a JavaScript string cut inside an emoji);
- an integer of more digits than Python converts (4300);
- arrays or objects nested deeper than it goes (about 200 levels);
- a control character left unescaped in a string.

``MendedStream`` sits between the transport and the server. Such a line is read with Python's
``json`` and served mended: a lone surrogate becomes U+FFFD (as the services make free text
storable), an over-long integer becomes an infinite number, and a value nested deeper than
``MAX_DEPTH`` becomes null (no tool takes anything nested: the argument still fails its schema,
as a tool error naming it). A JSON request that is not a JSON-RPC request (``"params": "x"``)
is answered with a JSON-RPC "invalid request" error under its id. A line that is not JSON
has no id to answer under and is dropped, as the SDK does.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from cortex.core.plaintext import utf8
from cortex.logs import getLogger

log = getLogger("cortex.mcp")

MAX_DEPTH = 64
"""Nesting kept in a mended line (a tool's arguments are at most a list of strings, 4 deep
in the message); the SDK's parser stops at about 200."""

_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
"""A JSON string (skipped whole, brackets inside it included) or a bracket."""


def mend(error: Exception) -> SessionMessage | None:
    """The message of the line ``error`` (the SDK's parse error) refused, mended; an error
    answer when it is JSON but no JSON-RPC message (a request's id to answer under); None when
    there is nothing to serve or answer."""
    if not isinstance(error, ValidationError):
        return None
    value = _message_value(error)
    if value is None:
        return None
    try:
        line = json.dumps(_mended(value, 1), allow_nan=True)
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except (ValidationError, ValueError) as exc:
        return _invalid_request(value, exc)


def _message_value(error: ValidationError) -> Any:
    """The JSON value of the refused line: read again from its text (a parse error), or the
    message object a field error was found in (the line parsed, its shape did not fit)."""
    for detail in error.errors():
        found = detail.get("input")
        if detail["type"] == "json_invalid" and isinstance(found, str | bytes):
            return _loads(found if isinstance(found, str) else found.decode("utf-8", "replace"))
        if isinstance(found, dict) and "jsonrpc" in found:
            return found
    return None


def _loads(line: str) -> Any:
    """``line``'s JSON value, read leniently (see the module docstring), or None if it is not
    JSON."""
    try:
        try:
            return json.loads(line, parse_int=_int, strict=False)
        except RecursionError:
            return json.loads(_flatten(line), parse_int=_int, strict=False)
    except (ValueError, RecursionError):
        log.info("a request line that is not JSON was dropped (%d characters)", len(line))
        return None


def _int(digits: str) -> int | float:
    try:
        return int(digits)
    except ValueError:  # more digits than Python converts: as far out of range as it gets
        return -math.inf if digits.startswith("-") else math.inf


def _flatten(line: str) -> str:
    """``line`` with every array or object deeper than ``MAX_DEPTH`` replaced by ``null``."""
    kept: list[str] = []
    depth, start, cut = 0, 0, -1
    for token in _TOKENS.finditer(line):
        char = token.group()
        if char in "[{":
            depth += 1
            if depth == MAX_DEPTH + 1:
                cut = token.start()
        elif char in "]}":
            if depth == MAX_DEPTH + 1 and cut >= 0:
                kept += [line[start:cut], "null"]
                start, cut = token.end(), -1
            depth -= 1
    return "".join(kept) + line[start:]


def _mended(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        return utf8(value)
    if depth > MAX_DEPTH and isinstance(value, dict | list):
        return None
    if isinstance(value, dict):
        return {utf8(k): _mended(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_mended(item, depth + 1) for item in value]
    return value


def _invalid_request(value: Any, error: Exception) -> SessionMessage | None:
    """A JSON-RPC "invalid request" answer under the request's id, or None without one (a
    notification, or a malformed answer to one of the server's own requests: its id is the
    server's, and an error under it could fail a request of the client's)."""
    is_request = isinstance(value, dict) and isinstance(value.get("method"), str)
    request_id = value.get("id") if is_request else None
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        log.info("a JSON line that is no JSON-RPC message was dropped: %s", _first_line(error))
        return None
    message = (
        'not a valid JSON-RPC request (each needs jsonrpc "2.0", an id, a method and, '
        "if any, params as an object); fix the request and send it again"
    )
    error_data = types.ErrorData(code=types.INVALID_REQUEST, message=message)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error_data))


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


class MendedStream:
    """The transport's read stream, with each refused line mended (or answered) by ``mend``.

    An answer goes straight to ``answers`` (the transport's write stream); everything else
    passes through as it came.
    """

    def __init__(self, inner: Any, answers: Any) -> None:
        self._inner = inner
        self._answers = answers

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            mended = mend(item)
            if mended is None:
                return item  # (the server logs and drops it)
            if isinstance(mended.message, types.JSONRPCError):
                await self._answers.send(mended)
                continue
            return mended

    def __aiter__(self) -> MendedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> MendedStream:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._inner.__aexit__(*exc)

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()
