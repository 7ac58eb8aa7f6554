"""The hottest endpoints (session start, per-turn capture, end) served without FastAPI's
per-request machinery: a well-formed request is validated by the endpoint's own pydantic
model, authenticated and applied in one worker-thread call, by the endpoint's own function.

The application (``app.CortexAPI``) hands such a request to ``DirectRoutes.serve`` before
any of its middleware runs, and does for it what that middleware would: a body over the
limit is left to the application (its 413), and an unexpected error is answered with the
application's 500 and raised on to uvicorn's log. When FastAPI's own OpenTelemetry
instrumentation is on, requests go through the application instead, and
``DirectMiddleware`` serves these routes inside it, so that their spans and metrics are
recorded as before.

Everything else goes to the FastAPI application unchanged, which still documents these
endpoints in ``/openapi.json``: another method or path, a body that is not JSON or fails its
model, a path parameter the route would refuse, a missing ``Content-Length``. So a bad
request gets the same 4xx body either way, and the Cortex errors raised here (401, 403, 404,
429, ...) are answered by the application's own handler. What this saves per request: one
of two worker-thread hops, FastAPI's middleware, routing, dependency solving and response
validation (see "Team server under load" in docs/benchmarks.md).

Turns queue for as many threads as half the pool's connections, starts and ends for the
other half (each its own threads): under load a restore, which someone waits for, is not
queued behind every turn, and these routes never wait in the pool for a connection (that
wait times out).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic import ValidationError as ModelError
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cortex.adapters.server import sessions
from cortex.adapters.server.auth import Json, RateLimiter, admit, authorize_ahead, bearer
from cortex.adapters.server.batching import TurnBatcher
from cortex.adapters.server.models import ID_PATTERN, EndIn, StartIn, TurnIn
from cortex.adapters.server.threads import Threads
from cortex.core.jsontext import compact_encoder
from cortex.core.tenancy import WRITE
from cortex.errors import CortexError
from cortex.services.hosting import ServiceHost
from cortex.services.turn_batch import Turn

_ID = re.compile(ID_PATTERN)
MAX_ID_CHARS = 128
MAX_BODY_BYTES = 1024 * 1024
_JSON = compact_encoder(allow_nan=False)  # what JSONResponse writes; a record has no cycle
_JSON_TYPE = (b"content-type", b"application/json")


@dataclass(frozen=True)
class DirectRoute:
    """``POST path`` (a regex; its groups are ``Id`` path parameters) served by ``call``."""

    path: re.Pattern[str]
    model: type[BaseModel]
    needed: str
    call: Callable[..., Json]
    queue: bool = False
    batched: bool = False
    """Captured turns: with group commit on, written in batches (``batching``)."""


ROUTES = (
    DirectRoute(
        re.compile(r"/v1/sessions/([^/]+)/turns"), TurnIn, WRITE, sessions.turn, True, True
    ),
    DirectRoute(re.compile(r"/v1/sessions/start"), StartIn, WRITE, sessions.start),
    DirectRoute(re.compile(r"/v1/sessions/end"), EndIn, WRITE, sessions.end),
)


Found = tuple[DirectRoute, tuple[str, ...]]
"""What ``DirectRoutes.match`` found: the route and its path parameters."""


def _is_json(content_type: bytes) -> bool:
    return content_type.split(b";", 1)[0].strip().lower() == b"application/json"


class DirectRoutes:
    """The direct routes of one application: ``match`` a request, ``serve`` it.

    Args:
        host, limiter: the application's service host and rate limiter.
        render: the application's answer to an exception: a ``CortexError``'s or an
            ``HTTPException``'s handler, else its 500.
        max_body_bytes: a larger body is left to the application (its 413).
    """

    def __init__(
        self,
        *,
        host: ServiceHost,
        limiter: RateLimiter,
        render: Callable[[Any, Exception], JSONResponse],
        routes: tuple[DirectRoute, ...] = ROUTES,
        turn_batches: int = 0,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self.host = host
        self.limiter = limiter
        self.render = render
        self.routes = routes
        self.max_body_bytes = max_body_bytes
        self.turn_batches = turn_batches
        """As asked (``--turn-batches``); ``_batches`` writes at most half the pool's."""
        # Turns take at most half the pool's connections, so that a session start (a
        # restore, which someone waits for) or end finds one at once rather than queueing
        # behind every captured turn; with group commit, turns take only their batches'
        # (one connection each). Starts and ends take the rest, as do the turns a batch
        # leaves to capture alone (a held session's waits for it off the batch's slot, beside
        # other held sessions' turns, leaving a start at least one thread of the rest):
        # together they never hold more threads than the pool has connections, so past
        # that a request waits here, without a deadline, not in the pool, whose wait times
        # out (a 503) when the machine falls behind.
        half = max(1, host.pool_size // 2)
        batches = min(turn_batches, half) if host.postgres else 0
        turns = batches or half
        # Threads of their own rather than anyio's: a call costs one trip through the event
        # loop, not three (checkpoints, a limiter), on every request of these routes. With
        # group commit, the batches' writer threads are the batcher's own.
        self._others = Threads(max(1, host.pool_size - turns), "cortex-sessions")
        self._queue: Threads | None = None
        self._batches: TurnBatcher | None = None
        if batches > 0:
            self._batches = TurnBatcher(
                host,
                lambda key_id, _, scopes: admit(limiter, WRITE, key_id, scopes),
                slots=batches,
                alone=self._others,
            )
        else:
            self._queue = Threads(turns, "cortex-turns")

    async def serve(
        self, found: Found, scope: Scope, receive: Receive, send: Send, app: ASGIApp, *, front: bool
    ) -> None:
        """Answer the request ``match`` found; one that fails its model goes to ``app``.
        ``front``: no middleware runs around this call, so an unexpected error is answered
        here (the application's 500) before it is raised."""
        route, params = found
        try:
            body = await _read(receive, self.max_body_bytes)
        except HTTPException as exc:  # over the body limit while it streamed
            await self.render(None, exc)(scope, receive, send)
            return
        if body is None:
            return  # the client went away before sending its body
        try:
            parsed = route.model.model_validate_json(body)
        except ModelError:
            await app(scope, _replay(body, receive), send)  # its 422, word for word
            return
        header = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
        try:
            body = _JSON(await self._answer(route, params, parsed, header)).encode()
        except (CortexError, HTTPException) as exc:
            await self.render(None, exc)(scope, receive, send)
            return
        except Exception as exc:  # a bug (an answer JSON cannot hold, a NaN, included)
            if front:  # as Starlette's ServerErrorMiddleware does behind the application
                await self.render(None, exc)(scope, receive, send)
            raise
        length = (b"content-length", str(len(body)).encode("latin-1"))
        await send({"type": "http.response.start", "status": 200, "headers": [length, _JSON_TYPE]})
        await send({"type": "http.response.body", "body": body})

    async def _answer(
        self, route: DirectRoute, params: tuple[str, ...], parsed: BaseModel, header: bytes
    ) -> Json:
        """The route's answer; a Cortex or HTTP error it refuses with is raised."""
        if route.batched and self._batches is not None:
            assert isinstance(parsed, TurnIn)
            return await self._turn(self._batches, params[0], parsed, header)

        def work() -> Json:
            who = authorize_ahead(self.host, self.limiter, header.decode("latin-1"), route.needed)
            return route.call(*params, parsed, who)

        threads = self._queue if route.queue and self._queue is not None else self._others
        return await threads.run(work)

    async def _turn(
        self, batches: TurnBatcher, session_id: str, body: TurnIn, header: bytes
    ) -> Json:
        """A captured turn's answer, once the batch that carries it committed."""
        token = bearer(header.decode("latin-1"))
        turn = Turn(token, session_id, body.request_id, sessions.turn_signals(body))
        outcome = await batches.submit(turn)
        if isinstance(outcome, Exception):
            raise outcome  # a refusal (rendered), else a bug (the server's 500)
        return sessions.turn_answer(session_id, outcome)

    def match(self, scope: Scope) -> Found | None:
        """The route and path parameters of a request served directly, else None."""
        if scope["type"] != "http" or scope["method"] != "POST" or scope.get("root_path"):
            return None
        path: str = scope["path"]
        if not path.startswith("/v1/sessions/"):
            return None
        for route in self.routes:
            match = route.path.fullmatch(path)
            if match is not None:
                break
        else:
            return None
        params = match.groups()
        if any(len(p) > MAX_ID_CHARS or not _ID.fullmatch(p) for p in params):
            return None
        headers = dict(scope["headers"])
        if not _is_json(headers.get(b"content-type", b"")):
            return None
        length = headers.get(b"content-length", b"")
        if not length.isdigit() or int(length) > self.max_body_bytes:
            return None  # none, or over the limit: the application's answer (413)
        return route, params


class DirectMiddleware:
    """``direct``'s routes served inside the application's middleware (see the module's
    docstring), everything else passed to ``app``."""

    def __init__(self, app: ASGIApp, *, direct: DirectRoutes) -> None:
        self.app = app
        self.direct = direct

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = self.direct.match(scope)
        if found is None:
            await self.app(scope, receive, send)
        else:
            await self.direct.serve(found, scope, receive, send, self.app, front=False)


def too_large(limit: int) -> HTTPException:
    """The refusal of a body found over ``limit`` bytes as it streams (a 413)."""
    return HTTPException(413, f"request body is over {limit} bytes")


async def _read(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or None when the client disconnects first; over ``limit``
    bytes, ``too_large``."""
    chunks = []
    seen = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        seen += len(chunk)
        if seen > limit:
            raise too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` for an application that reads the body this middleware already read."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if sent:
            return await receive()  # a disconnect, when the client goes
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again
