"""The dashboard over one person's home: ``cortex ui`` on 127.0.0.1.

The per-install token (``ui.token`` in the home, 64 hex characters, mode 0600) is made once
and kept, so a page left open across restarts still posts. It is also what lets a browser in:
127.0.0.1 is shared by every user and process of the machine, while the home is 0700, so a
request must carry it (the cookie the address ``cortex ui`` prints sets, or the
``X-Cortex-Token`` header); only the static files are served without it. Requests whose
``Host`` is not a loopback name are refused (a web page cannot reach the dashboard by
rebinding a DNS name to 127.0.0.1).
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from cortex.adapters.server.ui.app import Binding, create_ui
from cortex.clock import Clock
from cortex.config import Config
from cortex.errors import StorageError
from cortex.files import atomic_write_text, file_lock
from cortex.services.app import Services

TOKEN_FILE = "ui.token"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost")
COOKIE = "cortex_ui_token"
TOKEN_PARAM = "token"


def install_token(home: Path) -> str:
    """The home's form token, made on first use."""
    path = home / TOKEN_FILE
    with file_lock(path):
        try:
            text = path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            text = ""
        except OSError as exc:
            raise StorageError(f"cannot read {path} ({exc}); check its permissions") from exc
        if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
            text = secrets.token_hex(32)
            atomic_write_text(path, text + "\n")
    return text


def local_app(
    config: Config,
    clock: Clock | None = None,
    doctor: Callable[[], dict[str, Any]] | None = None,
) -> Starlette:
    """The dashboard over ``config``'s home: migrated once here, then a store per request;
    ``doctor`` (``cortex doctor``'s report) joins the health page's check."""
    Services.open(config, clock).close()
    token = install_token(config.home)

    def services(_request: object) -> Services:
        # A page reads: opening a database that vanished would make an empty one in its place.
        if not config.db_path.exists():
            raise StorageError(
                f"no database at {config.db_path} (it was moved or deleted while the dashboard "
                "ran); put it back, or restart `cortex ui` to start an empty one"
            )
        return Services.open(config, clock, migrate=False)

    binding = Binding(
        services=services,
        token=lambda _request: token,
        label=lambda _request: str(config.home),
        doctor=doctor,
    )
    app = create_ui(binding)
    app.add_middleware(TokenGate, token=token, home=config.home)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(LOOPBACK_HOSTS))
    return app


def signed_in_url(port: int, token: str) -> str:
    """The address ``cortex ui`` gives: it signs the browser in, then drops the token."""
    return f"http://127.0.0.1:{port}/?{TOKEN_PARAM}={token}"


def opener_file(home: Path, url: str) -> Path:
    """A 0600 page in the home that sends a browser to ``url``: a browser started with the
    address itself would show the token in its command line, which every user can list."""
    path = home / "run" / "ui-open.html"
    atomic_write_text(
        path,
        f'<!doctype html><meta http-equiv="refresh" content="0; url={url}">'
        f'<a href="{url}">Cortex dashboard</a>\n',
    )
    return path


class TokenGate:
    """Lets through a request that carries the home's token (its cookie, or the
    ``X-Cortex-Token`` header), and the static files; ``?token=`` sets the cookie and sends
    the browser to the same address without it. Anything else is a 401 naming the way in."""

    def __init__(self, app: ASGIApp, token: str, home: Path) -> None:
        self.app = app
        self.token = token.encode()
        self.home = home

    def _is_token(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or str(scope["path"]).startswith("/static/"):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if self._is_token(request.query_params.get(TOKEN_PARAM)):
            await self._sign_in(request)(scope, receive, send)
        elif self._is_token(request.cookies.get(COOKIE)) or self._is_token(
            request.headers.get("x-cortex-token")
        ):
            await self.app(scope, receive, send)
        else:
            await PlainTextResponse(
                "this dashboard needs its token: open the address `cortex ui` printed, or "
                f"append ?{TOKEN_PARAM}= and the token in {self.home / TOKEN_FILE}\n",
                status_code=401,
                headers={"Cache-Control": "no-store"},
            )(scope, receive, send)

    def _sign_in(self, request: Request) -> Response:
        rest = [(k, v) for k, v in request.query_params.multi_items() if k != TOKEN_PARAM]
        path = "/" + request.url.path.lstrip("/")  # never "//host": another site
        target = path + (f"?{urlencode(rest)}" if rest else "")
        response = RedirectResponse(target, status_code=303, headers={"Cache-Control": "no-store"})
        response.set_cookie(COOKIE, self.token.decode(), httponly=True, samesite="strict", path="/")
        return response
