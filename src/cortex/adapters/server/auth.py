"""Who is calling: the API key of each request, its scopes, and its rate limit.

The key is checked against the registry on every request (a revoked key fails at once);
``RateLimiter`` is a token bucket per key held in this process's memory, so with N worker
processes a key may make up to N times the configured rate.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Path, Request

from cortex.adapters.server.models import ID_PATTERN
from cortex.core.tenancy import ADMIN, READ, WRITE, allows, parse_key
from cortex.errors import CortexError, ForbiddenError, UnauthorizedError
from cortex.services.app import Services
from cortex.services.hosting import KeyCheck, ServiceHost


class RateLimitedError(CortexError):
    """The key made more requests than its rate allows; ``retry_after`` seconds to wait."""

    status = 429

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RateLimiter:
    """A token bucket per API key: ``rate`` requests a second on average, ``burst`` at once."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = burst
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key_id: str) -> None:
        """Spend one token of ``key_id``'s bucket, or raise ``RateLimitedError``."""
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(key_id, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            if tokens < 1:
                self._buckets[key_id] = (tokens, now)
                wait = max(1, math.ceil((1 - tokens) / self.rate))
                raise RateLimitedError(
                    f"rate limit of {self.rate:g} requests/s exceeded; retry in {wait}s",
                    retry_after=wait,
                )
            self._buckets[key_id] = (tokens - 1, now)


@dataclass(frozen=True)
class Caller:
    """An authenticated request: its tenant and scopes, and the host to open services on."""

    tenant: str
    scopes: tuple[str, ...]
    host: ServiceHost
    key: KeyCheck | None = None
    """The key's check still to make (``authorize_ahead``): by ``apply_once``, with the
    request's first statement."""

    def services(self) -> Services:
        """The tenant's services for this request (use as ``with caller.services() as app``)."""
        return self.host.open(self.tenant)


def bearer(header: str) -> str:
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise UnauthorizedError(  # no sample key in it: redaction would mask it
            "missing API key; send a key from `cortex key create TENANT` as a Bearer token "
            "in the Authorization header"
        )
    return token.strip()


def authorize(host: ServiceHost, limiter: RateLimiter, header: str, needed: str) -> Caller:
    """The caller an ``Authorization`` header names, once its key is live (read from the
    registry now), within its rate limit, and with a scope that allows ``needed``."""
    token = bearer(header)
    tenant, scopes = host.authenticate(token)
    parsed = parse_key(token)
    assert parsed is not None  # authenticate accepted it, so it parses
    admit(limiter, needed, parsed[0], scopes)
    return Caller(tenant, scopes, host)


def authorize_ahead(host: ServiceHost, limiter: RateLimiter, header: str, needed: str) -> Caller:
    """``authorize``, but for a key this process authenticated before (on PostgreSQL) the
    registry's read of it, the rate limit and the scope check are left to the request's
    first statement (``Caller.key``, for ``apply_once``): one round trip fewer. The errors
    and their order are ``authorize``'s."""
    token = bearer(header)
    parsed = parse_key(token)
    if parsed is not None:
        check = host.key_check(token, lambda scopes: admit(limiter, needed, parsed[0], scopes))
        if check is not None:
            return Caller(*check.known, host, check)
    return authorize(host, limiter, header, needed)


def admit(limiter: RateLimiter, needed: str, key_id: str, scopes: tuple[str, ...]) -> None:
    """Let an authenticated key's request through: within its rate limit (a token spent),
    with a scope that allows ``needed``."""
    limiter.take(key_id)
    if not allows(scopes, needed):
        raise ForbiddenError(
            f"this API key has scopes {','.join(scopes)}; this call needs {needed}: "
            f"use a key created with --scopes {needed}"
        )


def scope(needed: str) -> Callable[[Request], Caller]:
    """A dependency that authenticates the request and checks it may do ``needed``."""

    def dependency(request: Request) -> Caller:
        state = request.app.state
        return authorize(
            state.host, state.limiter, request.headers.get("authorization", ""), needed
        )

    return dependency


reader, writer, admin = scope(READ), scope(WRITE), scope(ADMIN)

Reader = Annotated[Caller, Depends(reader)]
Writer = Annotated[Caller, Depends(writer)]
Json = dict[str, Any]
Id = Annotated[str, Path(min_length=1, max_length=128, pattern=ID_PATTERN)]
Label = Annotated[str, Path(min_length=1, max_length=1000)]
"""A session, memory or pin label in a path."""
DUPLICATE: Json = {"duplicate": True}
"""The answer to a replayed ``request_id``: nothing was changed."""
