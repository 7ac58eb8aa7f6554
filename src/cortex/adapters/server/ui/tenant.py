"""The dashboard on the team server: each API key sees its own tenant's pages at ``/ui``.

A browser cannot send a Bearer header on a link, so the key is given once on ``/ui/login``
and kept in an HttpOnly, SameSite=Strict cookie scoped to ``/ui``; every request
authenticates it against the registry again (a revoked key fails at once), spends a token of
the key's rate limit, as an API request does, and opens that tenant's services only. The live
stream, one long request, authenticates its key again at every poll and ends once it is
revoked. Sign-in attempts spend tokens of a bucket per client address. The form token is an
HMAC of the key, so every server process agrees on it without storing anything, and a page of
one key is useless with another. Changes need a key with the ``write`` scope. Signing in and
out come before any form token exists, so a browser's request from another site (what its
``Sec-Fetch-Site`` or, lacking it, its ``Origin`` says) is refused there: a hostile page
cannot sign its visitor into another tenant, or out.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from cortex.adapters.server.auth import RateLimiter
from cortex.adapters.server.ui.app import MAX_FORM_BYTES, Binding, Ui, create_ui
from cortex.core.tenancy import WRITE, allows, parse_key
from cortex.errors import CortexError, ForbiddenError, UnauthorizedError
from cortex.services.hosting import ServiceHost

COOKIE = "cortex_ui_key"
PREFIX = "/ui"


@dataclass(frozen=True)
class _Caller:
    """The tenant, scopes and key id of the API key a dashboard request came with."""

    tenant: str
    scopes: tuple[str, ...]
    key: str


def tenant_ui(host: ServiceHost, limiter: RateLimiter) -> Starlette:
    """The dashboard of the tenant of each request's API key (mount it at ``/ui``), within
    ``limiter``'s rate for each key (the API's own limiter)."""

    def authenticated(request: Request) -> _Caller:
        key = request.cookies.get(COOKIE, "")
        if not key:
            raise UnauthorizedError("sign in with an API key")
        tenant, scopes = host.authenticate(key)
        found = _Caller(tenant, scopes, key)
        request.state.cortex_caller = found
        return found

    def caller(request: Request) -> _Caller:
        known = getattr(request.state, "cortex_caller", None)
        if isinstance(known, _Caller):
            return known  # authenticated once per request, and one token spent
        found = authenticated(request)
        parsed = parse_key(found.key)
        assert parsed is not None  # authenticate accepted it, so it parses
        limiter.take(parsed[0])
        return found

    def may_change(request: Request) -> None:
        scopes = caller(request).scopes
        if not allows(scopes, WRITE):
            raise ForbiddenError(
                f"this API key has scopes {','.join(scopes)}; changes need write: "
                "sign in with a key created with --scopes write"
            )

    binding = Binding(
        services=lambda request: host.open(caller(request).tenant),
        token=lambda request: form_token(caller(request).key),
        label=lambda request: f"tenant {caller(request).tenant}",
        may_change=may_change,
        recheck=authenticated,
        store_details=False,
    )
    app = create_ui(binding)
    ui: Ui = app.state.ui
    app.router.routes[:0] = [
        Route("/login", lambda request: ui.render(request, "login.html", {"failed": ""})),
        Route("/login", _login(ui, host, limiter), methods=["POST"]),
        Route("/logout", _logout, methods=["POST"]),
    ]
    return app


def form_token(key: str) -> str:
    """The form token of pages served to ``key``'s holder."""
    return hmac.new(key.encode(), b"cortex-ui-form-token", hashlib.sha256).hexdigest()


def _login(
    ui: Ui, host: ServiceHost, limiter: RateLimiter
) -> Callable[[Request], Awaitable[Response]]:
    async def login(request: Request) -> Response:
        client = request.client.host if request.client else ""
        try:
            _same_site_only(request)
            limiter.take(f"login:{client}")  # a bucket per address: keys are not guessed fast
        except CortexError as exc:
            return ui.error(request, exc)
        body = await request.body()
        fields = parse_qs(body[:MAX_FORM_BYTES].decode("utf-8", "replace"))
        key = (fields.get("key") or [""])[-1].strip()
        try:
            await run_in_threadpool(host.authenticate, key)
        except CortexError as exc:
            failed = ui.message(exc)
            if isinstance(exc, UnauthorizedError):  # the API's advice names a header
                failed = failed.split(";")[0] + "; paste a live key from `cortex key create`"
            return ui.render(request, "login.html", {"failed": failed}, exc.status)
        response = RedirectResponse(ui.base(request) + "/sessions", status_code=303)
        response.set_cookie(  # Secure over HTTPS, so the browser never sends it in clear
            COOKIE,
            key,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path=ui.base(request) or "/",
        )
        return response

    return login


def _same_site_only(request: Request) -> None:
    """Refuse a browser's request another site's page sent: by ``Sec-Fetch-Site`` where the
    browser sends it, else by an ``Origin`` whose host and port are not this request's. A
    request with neither (a script, an older browser's same-origin POST) goes on."""
    fetched = request.headers.get("sec-fetch-site")
    if fetched is not None:
        crossed = fetched not in ("same-origin", "none")
    else:
        origin = request.headers.get("origin")
        crossed = origin is not None and urlsplit(origin).netloc != request.headers.get("host")
    if crossed:
        raise ForbiddenError(
            "another site's page may not sign in or out here; open the dashboard's own page"
        )


async def _logout(request: Request) -> Response:
    try:
        _same_site_only(request)
    except ForbiddenError as exc:
        return Response(f"error: {exc}\n", status_code=exc.status, media_type="text/plain")
    base = str(request.scope.get("root_path", "")).rstrip("/")
    response = RedirectResponse(base + "/login", status_code=303)
    response.delete_cookie(COOKIE, path=base or "/")
    return response
