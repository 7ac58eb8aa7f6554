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
as a tool error naming it). Every other refused line is answered as JSON-RPC 2.0 says:

- a line that is not JSON (``hello``, a request cut short, binary noise) with a parse error
  (-32700) under id null: no id can be read from it;
- JSON that is no JSON-RPC message (``5``, ``[]``, ``{"foo": 1}``, ``"params": "x"``, a
  notification whose ``method`` is no string) with an "invalid request" error (-32600), under
  the request's id when it names a method and a usable id (a string or an integer), else
  under id null.

A request whose id is no string or integer (``true``, ``null``, ``1.5``) passes the SDK's parser
as a notification, its id dropped; ``gate`` answers it before the SDK reads it, and a refused line
with such an id, which mending would make one, is answered here: -32600 under id null.

Two refused lines stay unanswered: a blank line (no message at all) and a malformed answer to
one of the server's own requests (no ``method``, a ``result`` or ``error``): JSON-RPC answers
no answer, and an error under its id, which is the server's, could fail a request of the
client's that has the same id. A valid notification passes the SDK's parser and never gets
here, so it is never answered.
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

INVALID_REQUEST = (
    'not a valid JSON-RPC request (each needs jsonrpc "2.0", an id, a method and, '
    "if any, params as an object); fix the request and send it again"
)
BAD_ID = (
    "not a valid JSON-RPC request (its id must be a string or an integer); "
    "fix the request and send it again"
)
BATCH = (
    "not a valid JSON-RPC request (a batch, a JSON array, is not supported); "
    "send each message as a JSON object on a line of its own"
)


def mend(error: ValidationError) -> SessionMessage | None:
    """What to do with the line ``error`` (the SDK's parse error) refused: its message,
    mended, to serve; an error answer to send back; or None (nothing to serve or answer)."""
    text = _unparsed(error)
    if text is None:  # the line parsed; its shape is no JSON-RPC message
        return _invalid_request(_message_value(error), error)
    if not text.strip():
        return None  # a blank line: no message
    try:
        value = loads(text.rstrip("\n"))
    except ValueError as exc:
        log.info("a request line that is not JSON was answered (%d characters)", len(text))
        return error_answer(types.PARSE_ERROR, _parse_error(exc), None)
    if bad_id(value):  # (the SDK would read it as a notification, its id dropped)
        return error_answer(types.INVALID_REQUEST, BAD_ID, None)
    try:
        line = json.dumps(_mended(value, 1), allow_nan=True)
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except (ValidationError, ValueError) as exc:
        return _invalid_request(value, exc)


def _unparsed(error: ValidationError) -> str | None:
    """The text of the refused line when it did not parse, or None when it parsed."""
    for detail in error.errors():
        found = detail.get("input")
        if detail["type"] == "json_invalid" and isinstance(found, str | bytes):
            return found if isinstance(found, str) else found.decode("utf-8", "replace")
    return None


def _message_value(error: ValidationError) -> Any:
    """The JSON value of a line that parsed but fits no JSON-RPC message: the input of an
    error about the whole value (``5``, ``[]``) or about a key it lacks (``{"foo": 1}``). An
    object that holds every message kind's keys, each failing, is in no error whole: it is
    read as an empty object (nothing readable, so an id null answer)."""
    for detail in error.errors():
        loc = detail["loc"]  # (the kind of message, then a key of it)
        whole = len(loc) <= 1 or (detail["type"] == "missing" and len(loc) == 2)
        if whole and "input" in detail:
            return detail["input"]
    return {}


def loads(line: str) -> Any:
    """``line``'s JSON value, read leniently (see the module docstring); ValueError if it is
    not JSON."""
    try:
        return json.loads(line, parse_int=_int, strict=False)
    except RecursionError:
        return json.loads(_flatten(line), parse_int=_int, strict=False)


def _parse_error(error: ValueError) -> str:
    """``Parse error: ...`` in one line: where the JSON broke and the form a line takes."""
    where = ""
    if isinstance(error, json.JSONDecodeError):
        at = "the end of the line" if error.pos >= len(error.doc) else f"column {error.pos + 1}"
        where = f" ({error.msg.lower()} at {at})"
    return (
        f"Parse error: the line is not JSON{where}; send each JSON-RPC message as one "
        'line of JSON, e.g. {"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    )


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
    """A JSON-RPC "invalid request" answer (see the module docstring for its id), or None for
    a malformed answer to one of the server's own requests."""
    asks = isinstance(value, dict) and "method" in value
    if isinstance(value, dict) and not asks and ("result" in value or "error" in value):
        log.info("a malformed answer to a server request was dropped: %s", _first_line(error))
        return None
    request_id = value.get("id") if asks and _usable(value.get("id")) else None
    log.info("a JSON line that is no JSON-RPC message was answered: %s", _first_line(error))
    message = BATCH if isinstance(value, list) else INVALID_REQUEST
    return error_answer(types.INVALID_REQUEST, message, request_id)


def bad_id(value: Any) -> bool:
    """Whether ``value`` is a request whose id is no string or integer (``true``, ``null``,
    ``1.5``, ``{}``): JSON-RPC's "invalid request", answered under id null."""
    return (
        isinstance(value, dict) and "method" in value and "id" in value and not _usable(value["id"])
    )


def _usable(request_id: Any) -> bool:
    return isinstance(request_id, int | str) and not isinstance(request_id, bool)


def error_answer(code: int, message: str, request_id: int | str | None) -> SessionMessage:
    error_data = types.ErrorData(code=code, message=message)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error_data))


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


class MendedStream:
    """The transport's read stream, with each refused line mended (or answered) by ``mend``.

    An answer goes straight to ``answers`` (the transport's write stream); a line with nothing
    to serve or answer goes nowhere; everything else passes through as it came.
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
            if not isinstance(item, ValidationError):
                return item  # a message, or a fault of the transport's for the server
            mended = mend(item)
            if mended is None:
                continue
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
