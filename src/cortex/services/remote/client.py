"""Calls to the server that never lose a write: the transport plus the journal.

``write`` gives every mutation a fresh ``request_id`` and sends it, after delivering whatever
the journal still holds (order is kept: while older entries wait, a new one waits behind
them). When the server is unavailable the mutation goes to the journal and ``write`` returns
None, as if accepted; the caller answers with what it knows locally. ``read`` delivers the
journal first too, then asks.
"""

from __future__ import annotations

import os
from typing import Any

from cortex.clock import Clock, to_iso
from cortex.config import Config
from cortex.errors import ConfigError, CortexError, UnavailableError
from cortex.logs import getLogger
from cortex.services.remote.journal import DrainReport, Journal, Rejected
from cortex.services.remote.transport import Transport

log = getLogger("cortex.remote")


def request_id() -> str:
    """A random uuid4 as 32 hex digits (without importing ``uuid``, which costs a hook ~8 ms)."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return raw.hex()


class RemoteClient:
    """One server's transport and one home's journal, shared by the remote services."""

    def __init__(self, config: Config, clock: Clock) -> None:
        self.transport = Transport(config.server_url, config.api_key, config.server_timeout_seconds)
        self.journal = Journal(config.home)
        self.clock = clock
        self._warned = False

    def read(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """A request that changes nothing; the journal is delivered first (best effort)."""
        self._catch_up()
        return self.transport.request(method, path, body)

    def write(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """A mutation: the server's answer, or None when it was kept in the journal."""
        body = {**body, "request_id": request_id()}
        if not self._catch_up():
            self._spool(method, path, body, "older writes are still waiting")
            return None
        try:
            return self.transport.request(method, path, body)
        except UnavailableError as exc:
            self._spool(method, path, body, str(exc))
            return None
        except ConfigError:
            self._spool(method, path, body, "the server refused the API key")
            raise  # kept for when the key is fixed, and said at once

    def waiting(self, path: str, **fields: object) -> bool:
        """Whether a write to ``path`` whose body holds ``fields`` still waits in the journal
        after one more attempt to deliver it (the server is unavailable)."""
        if self._catch_up():
            return False
        return any(
            entry.get("path") == path and all(entry["body"].get(k) == v for k, v in fields.items())
            for entry in self.journal.entries()
        )

    def sync(self) -> DrainReport:
        """Deliver the journal now, waiting for a drain running elsewhere to finish."""
        return self.journal.drain(lambda entry: self._send(entry, force=True), wait=True)

    def close(self) -> None:
        self.transport.close()

    def _catch_up(self) -> bool:
        """Deliver pending journal entries; whether none is left."""
        if not self.journal.pending():
            return True
        report = self.journal.drain(self._send)
        return report.error is None and report.left == 0

    def _send(self, entry: dict[str, Any], *, force: bool = False) -> None:
        try:
            self.transport.request(
                str(entry.get("method") or "POST"), entry["path"], entry["body"], force=force
            )
        except (UnavailableError, ConfigError):
            raise  # later; a refused key (ConfigError) refuses every entry: keep them all
        except CortexError as exc:
            log.warning(
                "journal: %s %s rejected for good (%s); kept in spool/rejected.jsonl",
                entry.get("method"),
                entry.get("path"),
                exc,
            )
            raise Rejected(str(exc)) from exc

    def _spool(self, method: str, path: str, body: dict[str, Any], why: str) -> None:
        self.journal.append(method, path, body, to_iso(self.clock.now()))
        if not self._warned:
            self._warned = True
            log.warning("spooled %s %s to the local journal: %s", method, path, why)
