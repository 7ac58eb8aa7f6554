"""The hottest endpoints (session start, per-turn capture, end) served without FastAPI's
per-request machinery: a well-formed request is validated by the endpoint's own pydantic
model, authenticated and applied in one worker-thread call, by the endpoint's own function.

Everything else goes to the FastAPI application unchanged, which still documents these
endpoints in ``/openapi.json``: another method or path, a body that is not JSON or fails its
model, a path parameter the route would refuse, a missing ``Content-Length``. So a bad
request gets the same 4xx body either way, and the Cortex errors raised here (401, 403, 404,
429, ...) are answered by the application's own handler. What this saves per request: one
of two worker-thread hops, FastAPI's routing, dependency solving and response validation
(see "Team server under load" in docs/benchmarks.md).

Turns queue for as many threads as half the pool's connections, starts and ends for the
other half (each its own threads): under load a restore, which someone waits for, is not
queued behind every turn, and these routes never wait in the pool for a connection (that
wait times out).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
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
from cortex.core.tenancy import WRITE
from cortex.errors import CortexError
from cortex.services.hosting import ServiceHost
from cortex.services.turn_batch import Turn

_ID = re.compile(ID_PATTERN)
MAX_ID_CHARS = 128


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


def _is_json(content_type: bytes) -> bool:
    return content_type.split(b";", 1)[0].strip().lower() == b"application/json"


class DirectRoutes:
    """ASGI middleware serving ``routes`` itself and passing everything else to ``app``.

    Args:
        host, limiter: the application's service host and rate limiter.
        render: the application's handler of a ``CortexError`` or an ``HTTPException``.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        host: ServiceHost,
        limiter: RateLimiter,
        render: Callable[[Any, Exception], JSONResponse],
        routes: tuple[DirectRoute, ...] = ROUTES,
        turn_batches: int = 0,
    ) -> None:
        self.app = app
        self.host = host
        self.limiter = limiter
        self.render = render
        self.routes = routes
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
        # loop, not three (checkpoints, a limiter), on every request of these routes.
        self._queue = ThreadPoolExecutor(turns, thread_name_prefix="cortex-turns")
        others = max(1, host.pool_size - turns)
        self._others = ThreadPoolExecutor(others, thread_name_prefix="cortex-sessions")
        self._batches = (
            TurnBatcher(
                host,
                lambda key_id, _, scopes: admit(limiter, WRITE, key_id, scopes),
                slots=batches,
                threads=self._queue,
                alone=self._others,
                alone_threads=others,
            )
            if batches > 0
            else None
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = self._match(scope)
        if found is None:
            await self.app(scope, receive, send)
            return
        route, params = found
        try:
            body = await _read(receive)
        except HTTPException as exc:  # over the body limit while it streamed
            await self.render(None, exc)(scope, receive, send)
            return
        if body is None:
            return  # the client went away before sending its body
        try:
            parsed = route.model.model_validate_json(body)
        except ModelError:
            await self.app(scope, _replay(body, receive), send)  # its 422, word for word
            return
        header = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
        if route.batched and self._batches is not None:
            assert isinstance(parsed, TurnIn)
            response = await self._turn(self._batches, params[0], parsed, header)
            await response(scope, receive, send)
            return

        def work() -> Json:
            who = authorize_ahead(self.host, self.limiter, header.decode("latin-1"), route.needed)
            return route.call(*params, parsed, who)

        try:
            threads = self._queue if route.queue else self._others
            answer = await asyncio.get_running_loop().run_in_executor(threads, work)
        except (CortexError, HTTPException) as exc:
            response = self.render(None, exc)
        else:
            response = JSONResponse(answer)
        await response(scope, receive, send)

    async def _turn(
        self, batches: TurnBatcher, session_id: str, body: TurnIn, header: bytes
    ) -> JSONResponse:
        """A captured turn's answer, once the batch that carries it committed."""
        try:
            token = bearer(header.decode("latin-1"))
        except CortexError as exc:
            return self.render(None, exc)
        turn = Turn(token, session_id, body.request_id, sessions.turn_signals(body))
        outcome = await batches.submit(turn)
        if isinstance(outcome, (CortexError, HTTPException)):
            return self.render(None, outcome)
        if isinstance(outcome, Exception):
            raise outcome  # a bug: the server's 500, as on the single-request path
        return JSONResponse(sessions.turn_answer(session_id, outcome))

    def _match(self, scope: Scope) -> tuple[DirectRoute, tuple[str, ...]] | None:
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
        if not _is_json(headers.get(b"content-type", b"")) or b"content-length" not in headers:
            return None
        return route, params


async def _read(receive: Receive) -> bytes | None:
    """The whole request body, or None when the client disconnects first."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
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
