"""HTTP to a Cortex server with the standard library: one keep-alive connection per process.

``Transport.request`` sends one JSON request and returns the JSON answer. Errors, each one
line that never carries the API key:

- ``UnavailableError``: no connection, a timeout, a 5xx, a 408 or a 429. Worth retrying;
  the client spools a mutation that met one. After one, the transport fails fast for a few seconds
  (``RETRY_AFTER_SECONDS``, or the server's ``Retry-After``) instead of waiting again, with the
  same line and cause (``..., moments ago, not retried yet``).
- ``ConfigError`` for 401/403 (the key), ``ValidationError`` for 400/413/422,
  ``NotFoundError`` for 404, ``ConflictError`` for 409. A service's refusal (the error's
  ``parts``) is raised with the service's message, its parameters and commands unrendered, so
  every adapter words it as it words the same refusal in a local home; any other names the
  server and the status before the server's one-line message.
"""

from __future__ import annotations

import _thread
import http.client
import json
import socket
import time
from typing import Any
from urllib.parse import quote, urlsplit

from cortex.config import mask_url
from cortex.errors import (
    ConfigError,
    ConflictError,
    CortexError,
    NotFoundError,
    UnavailableError,
    ValidationError,
    from_parts,
)

MAX_MESSAGE_CHARS = 2000
"""The longest service message taken from a server's error as it is (a longer one is cut)."""
RETRY_AFTER_SECONDS = 5.0
"""How long a process stops trying a server that just failed (a hook must not wait twice)."""
RETRYABLE = frozenset({408, 429})
HEX = frozenset("0123456789abcdef")
ERRORS: dict[int, type[CortexError]] = {
    400: ValidationError,
    401: ConfigError,
    403: ConfigError,
    404: NotFoundError,
    409: ConflictError,
    413: ValidationError,
    422: ValidationError,
}


def segment(value: str) -> str:
    """One path segment, escaped (a label may hold ``/`` or spaces)."""
    return quote(value, safe="")


class Transport:
    """Requests to one server: ``Authorization: Bearer`` and JSON, over a reused connection."""

    def __init__(self, url: str, api_key: str, timeout: float) -> None:
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(
                f"server_url {mask_url(url)!r} is not an http(s)://host[:port] address; "
                "fix CORTEX_SERVER"
            )
        # The address as shown and compared: without a user or password, which are never sent
        # (the API key authenticates) and would be printed with it.
        self.url = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self._key = api_key
        self.timeout = timeout
        self._conn: http.client.HTTPConnection | None = None
        self._down_until = 0.0
        self._down_why = ""
        """Why the server failed last (said again by the requests its back-off refuses)."""
        self.connections = 0
        """How many connections this transport opened (keep-alive keeps it at 1)."""

    def target(self) -> dict[str, str]:
        """Whom a journal entry is written for: this server and key, never the key's secret
        (a key's id, ``ctx_<id>``, or a SHA-256 prefix of a key without one)."""
        return {"server": (self.url + self._prefix).lower(), "key": key_label(self._key)}

    def same_server(self, url: str, api_key: str) -> bool:
        parts = urlsplit(url.strip())
        address = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
        return address == self.url and api_key == self._key

    def request(
        self, method: str, path: str, body: dict[str, Any] | None = None, *, force: bool = False
    ) -> dict[str, Any]:
        """Send one request; the decoded JSON object answered. ``force`` ignores the back-off."""
        if not force and time.monotonic() < self._down_until:
            raise self._unavailable(f"{self._down_why}, moments ago, not retried yet")
        payload = json.dumps(body).encode() if body is not None else None
        headers = {"Accept": "application/json", "Connection": "keep-alive"}
        if payload is not None:
            headers["Content-Type"] = "application/json"
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        status, retry_after, raw = self._exchange(method, self._prefix + path, payload, headers)
        return self._answer(status, retry_after, raw)

    def refusal(self, status: int, message: str) -> str:
        """``message`` of a refusal, after the server and the status that refused it."""
        prefix = f"server {self.url} refused the request ({status}): "
        return message if message.startswith(prefix) else prefix + message

    def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()

    def _exchange(
        self, method: str, path: str, payload: bytes | None, headers: dict[str, str]
    ) -> tuple[int, str | None, bytes]:
        """One round trip; a reused connection the server closed meanwhile is retried once."""
        for attempt in (1, 2):
            reused = self._conn is not None
            conn = self._connection()
            deadline = _Deadline(conn, self.timeout)
            try:
                conn.request(method, path, body=payload, headers=headers)
                response = conn.getresponse()
                raw = response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                self.close()
                if reused and attempt == 1 and not deadline.passed:
                    continue  # the server closed an idle keep-alive connection
                raise self._down(deadline.why(exc)) from exc
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                raise self._down(deadline.why(exc)) from exc
            finally:
                deadline.cancel()
            if deadline.passed:  # what was read when the socket was shut is no whole answer
                self.close()
                raise self._down("timed out")
            if response.will_close:
                self.close()
            return response.status, response.getheader("Retry-After"), raw
        raise AssertionError("unreachable")  # pragma: no cover

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            self._conn = kind(self._host, self._port, timeout=self.timeout)
            self.connections += 1
        return self._conn

    def _down(self, why: str, retry_after: float = RETRY_AFTER_SECONDS) -> UnavailableError:
        self._down_until = time.monotonic() + retry_after
        self._down_why = why
        return self._unavailable(why)

    def _unavailable(self, why: str) -> UnavailableError:
        """The one line of a server that failed (``why``), its first clause before a ``;``
        (what a lost write quotes)."""
        return UnavailableError(
            f"server {self.url} is unavailable ({why}); writes are kept in the local journal "
            "until `cortex sync` or the next call delivers them"
        )

    def _answer(self, status: int, retry_after: str | None, raw: bytes) -> dict[str, Any]:
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            data = None
        if 200 <= status < 300 and isinstance(data, dict):
            return data
        message = _error_message(data) or f"HTTP {status}"
        if status >= 500 or status in RETRYABLE:
            return_after = _seconds(retry_after) if status in RETRYABLE else RETRY_AFTER_SECONDS
            raise self._down(f"{status}: {message}", return_after)
        if 200 <= status < 300:
            raise UnavailableError(f"server {self.url} answered {status} without a JSON object")
        error = ERRORS.get(status, ValidationError)
        template = _error_template(data)
        if template is not None and status not in (401, 403):
            raise error(template)  # a service's refusal: as a local home says it
        message = self.refusal(status, template or message)
        if status in (401, 403):
            message += "; check CORTEX_API_KEY (a key looks like ctx_<id>_<secret>)"
        raise error(message)


class _Deadline:
    """The whole request's bound: a socket's timeout bounds each wait for bytes, so a server
    (or a proxy) that sends its answer a byte at a time held a request, and the hook making it,
    for ever. Past ``seconds`` a watcher thread shuts the connection's socket down, which ends
    the wait in progress; the request then fails as a timeout."""

    def __init__(self, conn: http.client.HTTPConnection, seconds: float) -> None:
        self.passed = False
        self._done = _thread.allocate_lock()
        self._done.acquire()
        _thread.start_new_thread(self._watch, (conn, seconds))

    def _watch(self, conn: http.client.HTTPConnection, seconds: float) -> None:
        if self._done.acquire(timeout=seconds):
            return
        self.passed = True
        sock = conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # (closed meanwhile)

    def cancel(self) -> None:
        self._done.release()

    def why(self, exc: BaseException) -> str:
        """What a failed request is said to have met."""
        if self.passed or isinstance(exc, socket.timeout):
            return "timed out"
        if isinstance(exc, (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)):
            return f"{type(exc).__name__}: {exc}"
        return str(exc) or type(exc).__name__


def key_label(key: str) -> str:
    """An API key as a journal names it: ``ctx_<key id>``, or ``sha256:<16 hex>`` of a key
    not of the form ``ctx_<12 hex>_<secret>``; "" for no key."""
    if not key:
        return ""
    head, _, rest = key.strip().partition("_")
    key_id, _, secret = rest.partition("_")
    if head == "ctx" and len(key_id) == 12 and secret and all(c in HEX for c in key_id):
        return f"ctx_{key_id}"
    import hashlib  # (only for a key of another form)

    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()[:16]


def _error_message(data: object) -> str | None:
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        message = data["error"].get("message")
        if isinstance(message, str) and message.strip():
            return " ".join(message.split())[:300]
    return None


def _error_template(data: object) -> str | None:
    """A service's message from the error's ``parts``, its references unrendered, so that
    each adapter renders it as it renders a local error; None without them (an older server,
    or a refusal of the HTTP layer: the schema, the body's size)."""
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        template = from_parts(data["error"].get("parts"))
        if template and len(template) <= MAX_MESSAGE_CHARS:
            return template
    return None


def _seconds(header: str | None) -> float:
    try:
        return min(max(float(header or ""), 0.0), 300.0)
    except ValueError:
        return RETRY_AFTER_SECONDS
