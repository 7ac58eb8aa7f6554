"""A test double of the Cortex server as the client sees it over the network.

A real ``ThreadingHTTPServer`` (HTTP/1.1, keep-alive) that implements the few endpoints the
client tests need, records every request (method, path, body, the client's port) and applies
each ``request_id`` at most once, answering a replay with ``"duplicate": true`` as the
contract says. ``mode`` makes it fail: ``"500"``, ``"429"``, ``"401"``, ``"slow"``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

NOW = "2026-01-01T00:00:00Z"


@dataclass
class Peer:
    """What the double saw and how it behaves."""

    mode: str = "ok"
    slow_seconds: float = 5.0
    reject: set[str] = field(default_factory=set)
    """Paths answered 422 (a permanent rejection)."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)
    """request ids applied, in order (each once)."""
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def paths(self) -> list[str]:
        return [r["path"] for r in self.requests]


def _state(session_id: str, ended: bool = False) -> dict[str, Any]:
    return {"session_id": session_id, "start_time": NOW, "end_time": NOW if ended else None}


def _handler(peer: Peer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        wbufsize = 1 << 16  # headers and body in one segment (no Nagle/delayed-ACK stalls)

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            with peer.lock:
                peer.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "body": body,
                        "port": self.client_address[1],
                        "auth": self.headers.get("Authorization"),
                    }
                )
            status, answer = self._answer(body or {})
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if status == 429:
                self.send_header("Retry-After", "1")
            self.end_headers()
            self.wfile.write(data)

        def _answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
            if peer.mode == "slow":
                time.sleep(peer.slow_seconds)
            failure = {"500": 500, "429": 429, "401": 401}.get(peer.mode)
            if failure:
                return failure, {"error": {"code": "x", "message": f"mode {peer.mode}"}}
            if self.path in peer.reject:
                return 422, {"error": {"code": "validation_error", "message": "bad input"}}
            rid = body.get("request_id")
            with peer.lock:
                if rid is not None and rid in peer.applied:
                    return 200, {"duplicate": True}
                if rid is not None:
                    peer.applied.append(rid)
                return self._route(body)

        def _route(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
            parts = self.path.split("?")[0].strip("/").split("/")
            if self.path == "/v1/sessions/start":
                sid = body["session_id"]
                peer.sessions[sid] = _state(sid)
                return 200, {"session_id": sid, "preamble": f"restored {sid}"}
            if self.path == "/v1/sessions/end":
                peer.sessions[body["session_id"]] = _state(body["session_id"], ended=True)
                return 200, peer.sessions[body["session_id"]]
            if len(parts) == 4 and parts[3] == "turns":
                return 200, {"session_id": parts[2], "duplicate": False}
            if self.command == "GET" and len(parts) == 3 and parts[1] == "sessions":
                found = peer.sessions.get(parts[2])
                if found is None:
                    return 404, {"error": {"code": "not_found", "message": "no such session"}}
                return 200, found
            return 200, {}

        do_GET = do_POST = do_PUT = do_DELETE = _handle

    return Handler


@contextmanager
def serve(peer: Peer | None = None, port: int = 0) -> Iterator[tuple[str, Peer]]:
    """A running double on 127.0.0.1 (``port`` 0: any free one); yields (url, peer)."""
    peer = peer or Peer()
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(peer))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", peer
    finally:
        server.shutdown()
        server.server_close()
