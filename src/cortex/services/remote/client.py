"""Calls to the server that never lose a write: the transport plus the journal.

``write`` gives every mutation a fresh ``request_id`` and sends it, after delivering whatever
the journal still holds (order is kept: while older entries wait, a new one waits behind
them). When the server is unavailable the mutation goes to the journal and ``write`` returns
None, as if accepted; the caller answers with what it knows locally. ``read`` delivers the
journal first too, then asks.

A write kept in the journal is reported once, by whoever can: the command line, the MCP tools
and the bridge answer it themselves (their ``queued`` field and line, ``announce`` off), and
elsewhere (a hook's ``hooks.log``, a Python caller's logging) the first write of an outage,
the one that finds the journal empty, logs one line naming the next step.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from cortex.clock import Clock, to_iso
from cortex.config import Config
from cortex.errors import ConfigError, CortexError, StorageError, UnavailableError
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
        self.journal = Journal(config.home, self.transport.target())
        self.clock = clock
        self._warned_held = False
        self.spooled = 0
        """How many writes this client kept in the journal instead of sending them."""
        self.announce = True
        """Whether the first write of an outage logs a line: False where the caller answers
        every write the journal kept itself (``RemoteServices.answers_queued``)."""

    def read(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """A request that changes nothing; the journal is delivered first (best effort: a
        server that the delivery found unavailable is not asked again)."""
        report = self._behind()
        if report is not None and isinstance(report.cause, UnavailableError):
            raise report.cause
        return self.transport.request(method, path, body)

    def write(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """A mutation: the server's answer, or None when it was kept in the journal."""
        body = {**body, "request_id": request_id()}
        report = self._behind()
        if report is not None:
            self._spool(method, path, body, report.cause)
            if isinstance(report.cause, ConfigError):
                raise _kept(report.cause)  # the key was refused: say so, the writes are all kept
            return None
        try:
            return self.transport.request(method, path, body)
        except UnavailableError as exc:
            self._spool(method, path, body, exc)
            return None
        except ConfigError as exc:
            self._spool(method, path, body, None)
            raise _kept(exc) from None  # kept for when the key is fixed, and said at once

    def send(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """A mutation that is not kept for later: the server's answer, or UnavailableError
        (after the journal, which must reach the server first)."""
        report = self._behind()
        if report is not None:
            if isinstance(report.cause, CortexError):
                raise report.cause
            raise UnavailableError(
                f"older writes still wait in the journal ({report.error}); `cortex sync` "
                "delivers them once the server answers, then run this again"
            )
        return self.transport.request(method, path, {**body, "request_id": request_id()})

    def newest_waiting(self, *paths: str, **fields: object) -> dict[str, Any] | None:
        """The newest journal entry of a write to one of ``paths`` whose body holds
        ``fields`` that still waits after one more attempt to deliver the journal (the server
        is unavailable); None when none waits."""
        if self._behind() is None:
            return None
        return self.newest_queued(*paths, **fields)

    def newest_queued(self, *paths: str, **fields: object) -> dict[str, Any] | None:
        """``newest_waiting`` without another attempt to deliver the journal (for a caller
        whose request just made one)."""
        found = None
        for entry in self.journal.entries():
            if entry.get("path") in paths and all(
                entry["body"].get(k) == v for k, v in fields.items()
            ):
                found = entry
        return found

    def sync(self) -> DrainReport:
        """Deliver the journal now, waiting for a drain running elsewhere to finish; ``held``
        counts the entries kept for another server or key."""
        report = self._drain(partial(self._send, force=True), wait=True)
        held = len(self.journal.held())
        if held:
            self._note_held()
        return replace(report, held=held)

    def close(self) -> None:
        self.transport.close()

    def _behind(self) -> DrainReport | None:
        """Deliver pending journal entries; what the drain did when writes still wait after
        it (it stopped early, or left some), None when none does."""
        if not self.journal.pending() and not self.journal.holds():
            return None
        report = self._drain(self._send, wait=False)
        return report if report.error is not None or report.left else None

    def _drain(self, send: Callable[[dict[str, Any]], None], *, wait: bool) -> DrainReport:
        """The entries of this server and key once set aside (they are older) first, then
        the journal; the counts of both."""
        earlier = self.journal.drain_held(send, wait=wait) if self.journal.holds() else None
        if earlier is not None and earlier.error is not None:
            return replace(earlier, left=earlier.left + self.journal.count())
        report = self.journal.drain(send, wait=wait)
        if report.held:
            self._note_held()
        if earlier is None:
            return report
        return replace(
            report, sent=earlier.sent + report.sent, rejected=earlier.rejected + report.rejected
        )

    def _note_held(self) -> None:
        """One line, once a process: writes made for another server or key were set aside."""
        if not self._warned_held:
            self._warned_held = True
            log.warning("journal: %s", self.held_note())

    def held_note(self) -> str:
        """What the held entries are and what to do with them, in one line."""
        entries = [e for e in self.journal.held() if not self.journal.ours(e)]
        whom = sorted({f"key {e.get('key') or '(none)'} at {e.get('server')}" for e in entries})
        return (
            f"{len(entries)} write(s) in spool/held.jsonl were made for {', '.join(whom[:3])}, "
            "not this server and key, and are never sent with it; run `cortex sync` with that "
            "CORTEX_SERVER and CORTEX_API_KEY to deliver them, or delete the file to drop them"
        )

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
            raise Rejected(self.transport.refusal(exc.status, str(exc))) from exc

    def _spool(self, method: str, path: str, body: dict[str, Any], cause: Exception | None) -> None:
        """Keep a write the server did not take; ``cause``: why (an unavailable server says
        so in one line when nothing waited before this write and no answer reports it)."""
        first = self.announce and isinstance(cause, UnavailableError) and not self.journal.pending()
        try:
            self.journal.append(method, path, body, to_iso(self.clock.now()))
        except StorageError as exc:  # (a read-only home) the write is lost: say that, once
            raise _lost(cause, exc) from None
        self.spooled += 1
        if first:
            log.warning("%s", cause)


def _lost(cause: Exception | None, failed: StorageError) -> StorageError:
    """A write neither the server took nor the journal could keep, in one line: why the
    server did not take it (its own first clause, which would promise the journal), why the
    journal could not, and the fix."""
    why = str(cause).split(";")[0] if cause is not None else "the server refused the key"
    return StorageError(
        f"{why}, and the client journal cannot keep the write ({str(failed).split(';')[0]}): "
        "it is lost; make the Cortex home writable, or point CORTEX_HOME at a writable home"
    )


def _kept(refused: ConfigError) -> ConfigError:
    """The server's refusal of the key, saying that the write it refused is not lost."""
    return ConfigError(
        f"{refused}; the write waits in the local journal: fix the key, then `cortex sync`"
    )
