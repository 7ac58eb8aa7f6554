"""``/live``: server-sent events telling open pages that something was captured.

Every ``POLL_SECONDS`` the stream asks the store for its change marker (the newest session and
the most recently active open one: two indexed reads) and sends a ``change`` event when it
moved; the page then fetches itself again and swaps its content in. A comment line every
``KEEPALIVE_SECONDS`` keeps proxies from closing an idle stream. Each poll checks the caller
again (``Binding.recheck``): on the team server the stream ends once its key is revoked.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from cortex.adapters.server.ui.app import SECURITY_HEADERS, Ui
from cortex.errors import CortexError, UnauthorizedError

POLL_SECONDS = 1.0
KEEPALIVE_SECONDS = 15.0


def endpoint(ui: Ui) -> Callable[[Request], Awaitable[Response]]:
    """The SSE endpoint of ``ui``."""

    def marker(request: Request) -> str:
        with ui.binding.services(request) as app:
            return app.dashboard.change_marker()

    def poll(request: Request) -> str:
        ui.binding.recheck(request)
        return marker(request)

    async def stream(request: Request, first: str) -> AsyncIterator[str]:
        seen, quiet = first, 0.0
        yield "retry: 2000\n\n"
        while not await request.is_disconnected():
            await asyncio.sleep(POLL_SECONDS)
            try:
                now = await run_in_threadpool(poll, request)
            except UnauthorizedError:
                return  # the key was revoked: its pages are signed out, and so is the stream
            except CortexError:
                continue  # a locked or briefly unavailable store: ask again next second
            if now != seen:
                seen, quiet = now, 0.0
                yield "event: change\ndata: changed\n\n"
            else:
                quiet += POLL_SECONDS
                if quiet >= KEEPALIVE_SECONDS:
                    quiet = 0.0
                    yield ": keepalive\n\n"

    async def live(request: Request) -> Response:
        try:
            first = await run_in_threadpool(marker, request)
        except CortexError as exc:
            return ui.error(request, exc)
        headers = {**SECURITY_HEADERS, "X-Accel-Buffering": "no"}
        return StreamingResponse(
            stream(request, first), media_type="text/event-stream", headers=headers
        )

    return live
