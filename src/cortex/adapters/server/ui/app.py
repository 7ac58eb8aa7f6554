"""``create_ui``: the dashboard as a Starlette application over one ``Binding``.

A ``Binding`` says how a request reaches its services and which form token it must carry:
``cortex ui`` binds the local home's store and the per-install token; the team server binds
each API key's tenant. The pages themselves never see which.

Security, on every response: templates escape all text (Jinja2 autoescape), a strict
Content-Security-Policy allows only this application's own script and style, and the page
cannot be framed. Every POST must carry the token (form field ``csrf`` or header
``X-Cortex-Token``), compared in constant time. Static files are served from an allow-list
read from the package at start-up: no part of a URL ever reaches the file system.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import parse_qs

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from cortex.adapters.server.ui import filters
from cortex.errors import (
    CortexError,
    ForbiddenError,
    StorageError,
    Surface,
    UnauthorizedError,
    ValidationError,
)
from cortex.logs import getLogger
from cortex.services.app import Services
from cortex.services.hosting import UNAVAILABLE

log = getLogger("cortex.server")

MAX_FORM_BYTES = 256 * 1024
TOKEN_HEADER = "x-cortex-token"
NOTICES = {
    "pin-saved": "pin saved",
    "pin-removed": "pin removed",
    "memory-saved": "memory saved",
    "memory-forgotten": "memory forgotten",
}
"""What a page says after a change, by the code its redirect carries: a link can name a
notice, never write one (a crafted ``?notice=`` on the sign-in page would read as ours)."""
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class DashboardSurface(Surface):
    """A page's terms: a parameter named as the form field a person sees, a command as the
    page or button that does it. A parameter with no field on the pages is named in words
    (``session_id``: ``session id``), never as a keyword or a flag."""

    def name(self, param: str) -> str:
        return self.names.get(param, param.replace("_", " "))


DASHBOARD = DashboardSurface(
    "{name}",
    "{name} {value}",
    names={
        "project": "the Project field",
        "layer": "the Layer field",
        "since": "From",
        "until": "Before",
        "keywords": "Context words",
        "session_id": "a session id",
        "into_session_id": "a session id to continue into",
    },
    commands={
        "session list": "the Sessions page",
        "session show": "the session's page",
        "pin list": "the session's Pins table",
        "pin add": "the Pin form on the session's page",
        "pin remove": "a pin's Remove button on the session's page",
        "memory list": "the Memory page",
    },
)
"""How a page names a parameter and a command in an error; a command no page does (``cortex
session start``) is shown as the command line's: a ``cortex ui`` user has it, and a team
server's user has it in client mode."""
_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}


def _anyone(_: Request) -> None:
    return None


@dataclass(frozen=True)
class Binding:
    """How a request reaches its data: ``services`` opens them (the caller closes them),
    ``token`` is the form token its POSTs must carry, ``label`` names the store in the page
    header (a home, a tenant), ``may_change`` raises when the caller may only read."""

    services: Callable[[Request], Services]
    token: Callable[[Request], str]
    label: Callable[[Request], str]
    may_change: Callable[[Request], None] = _anyone
    recheck: Callable[[Request], object] = _anyone
    """Checks the caller again (raises ``UnauthorizedError`` once its key is revoked): a
    long request, the live stream, calls it at every poll."""
    store_details: bool = True
    """Whether pages may say where the store is (a home's path); never a team server's
    shared database, whose failures its pages report without the cause (in the log)."""
    doctor: Callable[[], dict[str, Any]] | None = None
    """``cortex doctor``'s report of this home (hooks installed, events arriving), when the
    caller can run it (``cortex ui``; a team server has no hooks of its own)."""


Handler = Callable[[Request, Services], Response]


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("cortex.adapters.server.ui", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(filters.FILTERS)
    return env


def _static_files() -> dict[str, tuple[bytes, str]]:
    """Every file of ``static/`` by name, read once: the only files the app serves."""
    folder = resources.files("cortex.adapters.server.ui").joinpath("static")
    out = {}
    for item in folder.iterdir():
        suffix = "." + item.name.rsplit(".", 1)[-1]
        if item.is_file() and suffix in _TYPES:
            out[item.name] = (item.read_bytes(), _TYPES[suffix])
    return out


class Ui:
    """The rendering and request plumbing the page modules share."""

    def __init__(self, binding: Binding) -> None:
        self.binding = binding
        self.env = _environment()
        self.static = _static_files()

    def base(self, request: Request) -> str:
        """The path prefix the app is mounted at ('' at the root)."""
        return str(request.scope.get("root_path", "")).rstrip("/")

    def render(
        self, request: Request, template: str, context: dict[str, Any], status: int = 200
    ) -> HTMLResponse:
        try:
            token, label = self.binding.token(request), self.binding.label(request)
        except CortexError:  # not signed in (a team server's login and error pages)
            token, label = "", ""
        page = self.env.get_template(template).render(
            base=self.base(request),
            token=token,
            store_label=label,
            path=request.url.path,
            notice=NOTICES.get(request.query_params.get("notice", ""), ""),
            **context,
        )
        return HTMLResponse(page, status_code=status, headers=SECURITY_HEADERS)

    def message(self, exc: CortexError) -> str:
        """What a page says of ``exc``: a storage failure's cause only where the store's
        location may be shown (``Binding.store_details``), else it goes to the log."""
        if isinstance(exc, StorageError) and not self.binding.store_details:
            log.warning("database unavailable: %s", exc)
            return UNAVAILABLE
        return exc.render(DASHBOARD)

    def error(self, request: Request, exc: CortexError) -> Response:
        if isinstance(exc, UnauthorizedError):
            return RedirectResponse(self.base(request) + "/login", status_code=303)
        page = self.render(request, "error.html", {"message": self.message(exc)}, exc.status)
        retry_after = getattr(exc, "retry_after", None)  # a rate limit's (the team server's)
        if retry_after is not None:
            page.headers["Retry-After"] = str(retry_after)
        return page

    def page(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        """A GET endpoint: ``handler`` runs in a worker thread with the request's services."""

        async def endpoint(request: Request) -> Response:
            return await run_in_threadpool(self._run, handler, request)

        return endpoint

    def _run(self, handler: Handler, request: Request) -> Response:
        try:
            with self.binding.services(request) as app:
                return handler(request, app)
        except CortexError as exc:
            return self.error(request, exc)

    def action(
        self, handler: Callable[[Request, Services, dict[str, str]], str]
    ) -> Callable[[Request], Awaitable[Response]]:
        """A POST endpoint: the form is read and its token checked, then ``handler`` runs
        and returns the path (under the app) to redirect to."""

        async def endpoint(request: Request) -> Response:
            try:
                form = await self.form(request)
            except CortexError as exc:
                return self.error(request, exc)

            def run(request: Request, app: Services) -> Response:
                target = handler(request, app, form)
                return RedirectResponse(self.base(request) + target, status_code=303)

            return await run_in_threadpool(self._run, run, request)

        return endpoint

    async def form(self, request: Request) -> dict[str, str]:
        """The URL-encoded form of a POST, once its token is verified."""
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            raise ValidationError(f"form is over {MAX_FORM_BYTES} bytes; send less")
        kind = request.headers.get("content-type", "").split(";")[0].strip()
        if body and kind != "application/x-www-form-urlencoded":
            raise ValidationError("send the form URL-encoded (as the page does)")
        text = body.decode("utf-8", "replace")
        fields = {k: v[-1] for k, v in parse_qs(text, keep_blank_values=True).items()}
        given = fields.pop("csrf", "") or request.headers.get(TOKEN_HEADER, "")
        expected = await run_in_threadpool(self.binding.token, request)
        if not hmac.compare_digest(given.encode(), expected.encode()):
            raise ForbiddenError("the form token is missing or wrong; reload the page and retry")
        await run_in_threadpool(self.binding.may_change, request)
        return fields

    def static_file(self, request: Request) -> Response:
        found = self.static.get(str(request.path_params["name"]))
        if found is None:
            return Response("not found", status_code=404, media_type="text/plain")
        body, kind = found
        return Response(body, media_type=kind, headers={"X-Content-Type-Options": "nosniff"})


def create_ui(binding: Binding) -> Starlette:
    """The dashboard over ``binding``: mount it anywhere (``cortex ui`` serves it at /)."""
    from cortex.adapters.server.ui import live, memory, pages

    ui = Ui(binding)
    routes = [
        Route("/", lambda request: RedirectResponse(ui.base(request) + "/sessions", 302)),
        Route("/static/{name}", ui.static_file),
        Route("/live", live.endpoint(ui)),
        *pages.routes(ui),
        *memory.routes(ui),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        from cortex.errors import NotFoundError

        return ui.error(request, NotFoundError("no such page; start from the sessions list"))

    app = Starlette(routes=routes, exception_handlers={404: not_found})
    app.state.ui = ui
    return app
