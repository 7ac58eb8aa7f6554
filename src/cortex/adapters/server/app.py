"""``create_app``: the FastAPI application of the team server.

The process keeps two things between requests: the ``ServiceHost`` (one PostgreSQL pool, or
a SQLite path) and the per-key ``RateLimiter``. Every error leaves as
``{"error": {"code", "message"}}`` with the status of its ``cortex.errors`` class; bad input
is a 4xx, never a 500. A service's error adds ``parts``: its message with the parameters and
commands it names left as references, which a client renders in its own terms. ``/openapi.json``
declares that body for every error status and each route's 200 body (``answers``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cortex.adapters.server import memory, sessions, tasks
from cortex.adapters.server.answers import Health, Ready, answers, only_documented_answers
from cortex.adapters.server.apidocs import add_api_docs
from cortex.adapters.server.auth import RateLimitedError, RateLimiter
from cortex.adapters.server.direct import MAX_BODY_BYTES, DirectMiddleware, DirectRoutes, too_large
from cortex.adapters.server.models import ERROR_RESPONSES, PROBE_ERRORS
from cortex.adapters.server.ui.tenant import PREFIX as UI_PREFIX
from cortex.adapters.server.ui.tenant import tenant_ui
from cortex.core.server_numbers import (
    BURST,
    DATA_ENV,
    DB_ENV,
    LOCK_TIMEOUT,
    POOL,
    RATE,
    SECRET_ENV,
    TURN_BATCHES,
)
from cortex.errors import (
    BusyError,
    ConfigError,
    ConflictError,
    CortexError,
    ForbiddenError,
    NotFoundError,
    ServerConfigError,
    StorageError,
    Surface,
    UnauthorizedError,
    ValidationError,
    parts,
)
from cortex.logs import getLogger
from cortex.services.hosting import UNAVAILABLE, ServiceHost, check_server_secret

log = getLogger("cortex.server")
STARTUP_FAILURE = 3
"""The exit status of a worker that refuses its settings: uvicorn's and gunicorn's for a
worker that could not start, which their supervisors do not start again."""
_CODES: tuple[tuple[type[CortexError], str], ...] = (
    (UnauthorizedError, "unauthorized"),
    (ForbiddenError, "forbidden"),
    (NotFoundError, "not_found"),
    (ConflictError, "conflict"),
    (ValidationError, "validation_error"),
    (ConfigError, "validation_error"),
    (RateLimitedError, "rate_limited"),
    (StorageError, "unavailable"),
    (ServerConfigError, "unavailable"),
)
HTTP = Surface(
    '"{name}"',
    '"{name}": {value}',
    commands={
        "session list": "GET /v1/sessions",
        "session start": "POST /v1/sessions/start",
        "session end": "POST /v1/sessions/end",
        "session show": "GET /v1/sessions/{session_id}",
        "session snapshot": "GET /v1/sessions/{session_id}/snapshots",
        "session checkpoint list": "GET /v1/sessions/{session_id}/checkpoints",
        "pin list": "GET /v1/sessions/{session_id}/pins",
        "pin add": "PUT /v1/sessions/{session_id}/pins/{label}",
        "pin remove": "DELETE /v1/sessions/{session_id}/pins/{label}",
        "memory list": "POST /v1/memories/list",
        "task list": "GET /v1/tasks",
    },
)
"""How an error names a parameter here: as the JSON field or query parameter (the services'
keyword names them alike), and a command as the endpoint that does the same."""
_HTTP_CODES = {
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
}
NOT_JSON = "send the body as JSON, with Content-Type: application/json"
UNREADABLE = "There was an error parsing the body"
"""What FastAPI says of a body ``json`` cannot decode for a reason other than its syntax
(nested past the interpreter's recursion limit, an integer of more than 4,300 digits)."""


def error(
    status: int, code: str, message: str, template: str | None = None, **headers: str
) -> JSONResponse:
    """The error body; ``template`` (a service's message, unrendered) adds its ``parts``."""
    detail: dict[str, Any] = {"code": code, "message": " ".join(message.split())}
    if template is not None:
        detail["parts"] = parts(template)
    return JSONResponse({"error": detail}, status_code=status, headers=headers or None)


def _cortex_error(_: Request | None, exc: Exception) -> JSONResponse:
    assert isinstance(exc, CortexError)
    code = next((c for kind, c in _CODES if isinstance(exc, kind)), "internal")
    retry = getattr(exc, "retry_after", None)  # a rate limit's, a busy session's
    headers = {"Retry-After": str(retry)} if retry is not None else {}
    if isinstance(exc, UnauthorizedError):
        headers["WWW-Authenticate"] = "Bearer"  # RFC 9110: how to authenticate
    message, template = exc.render(HTTP), exc.template or str(exc)
    if code == "internal":
        log.error("request failed: %s", exc)
    elif isinstance(exc, BusyError):  # names the session, never where the database is
        log.warning("request gave up waiting for a lock: %s", exc)
    elif isinstance(exc, ServerConfigError):
        pass  # said as it is; the server's log has the file (once per tenant and error)
    elif code == "unavailable":
        log.warning("database unavailable: %s", exc)
        message, template = UNAVAILABLE, UNAVAILABLE  # where the database is stays in the log
    return error(exc.status, code, message, template, **headers)


def _invalid(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(p) for p in first.get("loc", ()))
    text = f"{where}: {first.get('msg', 'invalid input')}" if where else "invalid input"
    return error(422, "validation_error", f"{text}; fix the request (see /openapi.json)")


def _http(request: Request | None, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 400 and exc.detail == UNREADABLE:  # as a syntax error is answered
        return error(
            422,
            "validation_error",
            "body: JSON this server cannot read (nested too deeply, or a number with too many "
            "digits); send plainer JSON",
        )
    code = _HTTP_CODES.get(
        exc.status_code, "validation_error" if exc.status_code < 500 else "internal"
    )
    headers = dict(exc.headers or {})  # a 405's Allow
    if exc.status_code == 405 and request is not None:
        headers["Allow"] = _allowed(request) or headers.get("Allow", "")
    return error(
        exc.status_code, code, f"{exc.detail}; see /openapi.json for the endpoints", **headers
    )


def _allowed(request: Request) -> str | None:
    """The methods the OpenAPI document gives the request's path, for a 405's ``Allow`` (RFC
    9110); None for a path it does not list. Starlette's own names those of the path's first
    route only, where this API has a route per method (a memory's ``GET`` and ``DELETE``). A
    path two templates match is the concrete one's, as OpenAPI matches paths
    (``/v1/sessions/start``, not ``/v1/sessions/{session_id}``)."""
    path = request.scope["path"]
    paths: dict[str, dict[str, Any]] = request.app.openapi()["paths"]
    found = [template for template in paths if compile_path(template)[0].match(path)]
    if not found:
        return None
    template = min(found, key=lambda t: t.count("{"))
    return ", ".join(sorted(method.upper() for method in paths[template]))


def _answer(request: Request | None, exc: Exception) -> JSONResponse:
    """The error response of an exception raised outside FastAPI's routing (the direct
    routes), as its handlers answer it: a ``CortexError``'s, an ``HTTPException``'s, else
    the 500 of any other."""
    if isinstance(exc, HTTPException):
        return _http(request, exc)
    return _cortex_error(request, exc) if isinstance(exc, CortexError) else _unexpected(None, exc)


def _overflow(_: Request, exc: Exception) -> JSONResponse:
    """A number past what the database holds that no schema bound caught: bad input, not a
    server fault (the backends raise ``ValidationError`` for the ones they bind)."""
    log.warning("number out of range: %s", exc)
    return error(400, "validation_error", "a number in the request is too large; fix the input")


def _unexpected(_: Request | None, exc: Exception) -> JSONResponse:
    log.exception("unexpected error", exc_info=exc)
    return error(500, "internal", f"unexpected {type(exc).__name__}; see the server log")


class BodyLimit:
    """Refuses a request body over ``limit`` bytes with 413, by its length or as it streams."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"0")
        if not declared.isdigit() or int(declared) > self.limit:
            await self._refuse(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise too_large(self.limit)
            return message

        await self.app(scope, limited, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error(
            413, "payload_too_large", f"request body is over {self.limit} bytes; send less"
        )
        await response(scope, receive, send)


class JsonBodies:
    """Refuses with 415 a ``/v1`` request whose body is not declared JSON (``curl -d`` sends
    a form), rather than a 422 that does not say why."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/v1/"):
            headers = dict(scope["headers"])
            sized = headers.get(b"content-length", b"0") not in (b"0", b"")
            if (sized or b"transfer-encoding" in headers) and not _json_type(
                headers.get(b"content-type", b"")
            ):
                await error(415, "unsupported_media_type", NOT_JSON)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _json_type(content_type: bytes) -> bool:
    """``application/json`` or ``application/<something>+json``, as FastAPI reads JSON."""
    kind = content_type.split(b";", 1)[0].strip().lower()
    return kind == b"application/json" or (
        kind.startswith(b"application/") and kind.endswith(b"+json")
    )


class CortexAPI(FastAPI):
    """The FastAPI application with its direct routes (``direct``) in front of its
    middleware: a request they serve costs none of the middleware's calls, and a send costs
    no wrapper's. While FastAPI's own OpenTelemetry instrumentation is on, every request goes
    through FastAPI, and the direct routes are served inside it (``DirectMiddleware``)."""

    direct: DirectRoutes | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            found = None if self.direct is None else self.direct.match(scope)
            if found is None or self._traced():
                await super().__call__(scope, receive, send)
                return
            assert self.direct is not None
            await self.direct.serve(found, scope, receive, send, super().__call__, front=True)
        except asyncio.CancelledError:
            if scope["type"] == "http":
                await _stopping(send)
            raise

    def _traced(self) -> bool:
        """FastAPI's OpenTelemetry instrumentation is on (FastAPI 0.16x with a provider set)."""
        telemetry = getattr(self, "_native_telemetry", None)
        return telemetry is not None and bool(telemetry.enabled())


STOPPING = "the server is stopping; send the request again (its request_id makes a retry safe)"


async def _stopping(send: Send) -> None:
    """The answer to a request a stopping server gave up on (its shutdown timeout passed, so
    uvicorn cancelled it): 503 with ``Retry-After`` in the API's error body, not uvicorn's
    plain-text 500, when nothing of its answer was sent yet. Its transaction is rolled back
    with the server's connections, so a retry with the same ``request_id`` is safe."""
    answer = error(503, "unavailable", STOPPING, **{"Retry-After": "1"})
    try:
        await answer({"type": "http"}, _no_body, send)
    except (RuntimeError, OSError):  # its answer had started, or its connection is gone
        pass


async def _no_body() -> Message:
    return {"type": "http.disconnect"}


def _bearer_openapi(app: FastAPI) -> None:
    """Declare the API keys in ``/openapi.json``: an HTTP bearer scheme every ``/v1``
    operation needs (so ``/docs`` has its Authorize button and generated clients send it)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = build()  # kept as app.openapi_schema: changed in place, once
        schema.setdefault("components", {})["securitySchemes"] = {
            "bearer": {
                "type": "http",
                "scheme": "bearer",
                "description": "An API key from `cortex key create`: ctx_<key id>_<secret>.",
            }
        }
        for path, operations in schema["paths"].items():
            for operation in operations.values() if path.startswith("/v1/") else ():
                operation["security"] = [{"bearer": []}]
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def create_app(
    db_url: str,
    *,
    data_dir: Path | None = None,
    pool_size: int = POOL.default,
    rate_per_second: float = RATE.default,
    burst: int = BURST.default,
    max_body_bytes: int = MAX_BODY_BYTES,
    host: ServiceHost | None = None,
    secret: str | None = None,
    turn_batches: int = TURN_BATCHES.default,
    lock_timeout: float = LOCK_TIMEOUT.default,
) -> FastAPI:
    """The server over ``db_url`` (a postgresql:// URL, or a SQLite path for one person).

    Args:
        data_dir: where each tenant's home goes (default: ``~/.cortex/server``).
        pool_size: most PostgreSQL connections of this process.
        rate_per_second, burst: each API key's token bucket in this process.
        max_body_bytes: larger request bodies get 413.
        host: a ready ``ServiceHost`` (tests fix its clock); built from the others otherwise.
        secret: the server secret each tenant's metrics key is derived from.
        turn_batches: on PostgreSQL, how many batches of captured turns (group commit, one
            transaction each) this process writes at once; 0 writes each turn on its own.
        lock_timeout: on PostgreSQL, seconds a request waits for a lock (a session another
            request or transaction holds) before it answers 503 with ``Retry-After``.
    """
    data_dir = data_dir or Path.home() / ".cortex" / "server"
    app = CortexAPI(
        title="Cortex",
        version="1",
        summary="Session continuity and memory over HTTP",
        docs_url=None,  # FastAPI's loads Swagger UI from a CDN: ours is served here (apidocs)
        redoc_url=None,  # a second page over the same document, from a CDN too
    )
    app.state.host = host or ServiceHost(
        db_url, data_dir, pool_size=pool_size, secret=secret, lock_timeout=lock_timeout
    )
    app.state.limiter = RateLimiter(rate_per_second, burst)
    app.add_exception_handler(CortexError, _cortex_error)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(HTTPException, _http)
    app.add_exception_handler(OverflowError, _overflow)
    app.add_exception_handler(Exception, _unexpected)
    app.direct = DirectRoutes(
        host=app.state.host,
        limiter=app.state.limiter,
        render=_answer,
        turn_batches=turn_batches,
        max_body_bytes=max_body_bytes,
    )
    app.add_middleware(DirectMiddleware, direct=app.direct)
    app.add_middleware(JsonBodies)
    app.add_middleware(BodyLimit, limit=max_body_bytes)  # the outer one: it applies to all
    for router in (sessions.router, memory.router, tasks.router):
        app.include_router(router, responses=ERROR_RESPONSES)
    # The dashboard, per API key's tenant, within the same rate limit as the API.
    app.mount(UI_PREFIX, tenant_ui(app.state.host, app.state.limiter))
    _probes(app)
    add_api_docs(app)
    _bearer_openapi(app)
    only_documented_answers(app)
    app.router.on_shutdown.append(app.state.host.close)
    return app


def _probes(app: FastAPI) -> None:
    @app.get("/healthz", tags=["probes"], responses=PROBE_ERRORS | answers(Health))
    def healthz() -> dict[str, Any]:
        """The process answers (the database is not asked)."""
        return {"status": "ok"}

    @app.get(
        "/readyz",
        tags=["probes"],
        response_model=None,
        responses=PROBE_ERRORS | {503: ERROR_RESPONSES[503]} | answers(Ready),
    )
    def readyz() -> dict[str, Any] | JSONResponse:
        """The database answers and is migrated: 200, else 503."""
        try:
            problem = app.state.host.ready()
        except StorageError as exc:
            return _cortex_error(None, exc)
        if problem is None:
            return {"status": "ready"}
        return error(503, "unavailable", problem)


def app_from_env() -> FastAPI:
    """The app ``cortex serve`` gives uvicorn's workers (each builds its own from env). A
    setting it cannot take (a variable out of its range, ``ServerNumber.read``; a server
    secret too short) stops the process with the one line ``cortex serve`` gives and exit
    status ``STARTUP_FAILURE``, never a traceback, however the worker was started; and stops
    the uvicorn ``--workers`` supervisor that started it (``_stop_supervisor``)."""
    try:
        return _app_from(os.environ)
    except ConfigError as exc:
        _say(f"error: {exc}\n")  # as the command line says it
        _stop_supervisor()
        raise SystemExit(STARTUP_FAILURE) from None


def _say(line: str) -> None:
    """``line`` on stderr in one ``write``: the workers of one server share that pipe, and a
    line printed in pieces could be cut by another worker's."""
    sys.stderr.flush()
    try:
        os.write(sys.stderr.fileno(), line.encode(errors="backslashreplace"))
    except (AttributeError, OSError, ValueError):  # no descriptor (an embedding host's stream)
        print(line, end="", file=sys.stderr, flush=True)


def _stop_supervisor() -> None:
    """Kill the uvicorn ``--workers`` supervisor this process is a worker of, if it is one.

    The settings are the environment every worker of it inherits, so each worker it would
    start refuses alike: older uvicorn versions start them again for ever, newer ones stop on
    ``STARTUP_FAILURE`` but exit with status 0, which a process manager reads as a clean stop.
    Killed, it exits non-zero at once; its other workers refuse and exit on their own. Only a
    parent uvicorn's supervisor spawned this process from is ever signalled (``uvicorn.run``
    inside another program's own child process, ``--reload`` and a single worker are not)."""
    import multiprocessing

    parent = multiprocessing.parent_process()
    if parent is None or parent.pid is None or parent.pid != os.getppid():
        return  # not a spawned child, or its parent has already gone
    spawned = getattr(multiprocessing.current_process(), "_kwargs", None) or {}
    config = spawned.get("config")  # what uvicorn hands each process it spawns
    if type(config).__module__ != "uvicorn.config" or getattr(config, "should_reload", True):
        return
    if getattr(config, "workers", 1) > 1:
        os.kill(parent.pid, getattr(signal, "SIGKILL", signal.SIGTERM))


def _app_from(env: Mapping[str, str]) -> FastAPI:
    """The app the ``CORTEX_SERVER_*`` variables of ``env`` describe, else ``ConfigError``."""
    url = env.get(DB_ENV)
    if not url:
        raise ConfigError(f"{DB_ENV} is not set; start the server with `cortex serve --db URL`")
    secret = env.get(SECRET_ENV) or None
    check_server_secret(url, secret, "export the server secret and restart")
    home = Path(env.get("CORTEX_HOME") or Path.home() / ".cortex").expanduser()
    return create_app(
        url,
        data_dir=Path(env.get(DATA_ENV) or home / "server"),
        pool_size=POOL.read(env),
        secret=secret,
        turn_batches=TURN_BATCHES.read(env),
        rate_per_second=RATE.read(env),
        burst=BURST.read(env),
        lock_timeout=LOCK_TIMEOUT.read(env),
    )
