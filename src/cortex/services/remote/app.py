"""``RemoteServices``: the composition root of a home in client mode (``server_url`` set).

``Services.open`` returns one when the settings name a server. It has the attributes adapters
use (``sessions``, ``compaction``, ``metrics``, ...), each the local service with the methods
the server contract covers sent over HTTP; anything else needs the local store and says so
in one line (``LocalOnly``). ``sync()`` delivers the journal of writes the server missed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from cortex.clock import Clock
from cortex.config import Config
from cortex.core.memory_models import Checkpoint
from cortex.services.app import DatabaseHealth, Services
from cortex.services.compaction import CompactionService
from cortex.services.events import EventLog
from cortex.services.metrics import MetricsService, VerifyReport
from cortex.services.remote.client import RemoteClient
from cortex.services.remote.journal import DrainReport
from cortex.services.remote.local_only import LocalOnly
from cortex.services.remote.sessions import RemoteSessions

if TYPE_CHECKING:
    from cortex.services.sessions.manager import SessionPersistenceManager


class RemoteServices(Services):
    """Every service a client needs, over one server connection and one local journal."""

    def __init__(
        self, config: Config, clock: Clock | None = None, client: RemoteClient | None = None
    ) -> None:
        super().__init__(LocalOnly.store(config.server_url), config, clock)
        self.client = client or RemoteClient(config, self.clock)

    @cached_property
    def sessions(self) -> SessionPersistenceManager:
        return RemoteSessions(self.client, self.config, self.clock)

    @cached_property
    def compaction(self) -> CompactionService:
        return RemoteCompaction(self.client, self.config, self.clock, self.events)

    @cached_property
    def metrics(self) -> MetricsService:
        return RemoteMetrics(self.client, self.config, self.clock)

    def sync(self) -> DrainReport:
        """Deliver every write waiting in the journal, in order, now."""
        return self.client.sync()

    def health(self) -> DatabaseHealth:
        """The server's readiness, in the shape of a database diagnosis."""
        answer = self.client.transport.request("GET", "/readyz")
        damage = () if answer.get("status", "ok") in ("ok", "ready") else (str(answer),)
        return DatabaseHealth(url=self.client.transport.url, damage=damage, applied=(), pending=())

    def rebind(self, config: Config, clock: Clock | None = None) -> Services:
        """The same connection under another event's settings, when they name the same server
        and key (the hook server keeps one connection between events); else a new client."""
        if not config.server_url:
            return Services.open(config, clock)
        same = self.client.transport.same_server(config.server_url, config.api_key)
        return RemoteServices(config, clock, self.client if same else None)

    def close(self) -> None:
        self.client.close()


class RemoteCompaction(CompactionService):
    """Checkpoints over the server; compaction runs and their history need the local store."""

    def __init__(
        self, client: RemoteClient, config: Config, clock: Clock, events: EventLog
    ) -> None:
        super().__init__(LocalOnly.store(client.transport.url), config, clock, events)
        self.client = client

    def checkpoint(
        self,
        session_id: str,
        *,
        type: str = "manual",
        summary: str = "",
        next_steps: Sequence[str] = (),
        decisions: Sequence[str] = (),
        files_changed: Sequence[str] = (),
        resume_instructions: str = "",
        gate: str | None = None,
        step: int | None = None,
        extra_state: Mapping[str, Any] | None = None,
        can_resume: bool = True,
        strict_mirror: bool = False,
    ) -> Checkpoint:
        """``POST /v1/sessions/checkpoint``; while the server is unavailable, the checkpoint
        waits in the journal and this returns what was asked for. The server's checkpoint
        takes the reason, decisions and next steps; task folders are local only (the
        protocol's commands need a local store)."""
        body = {
            "session_id": session_id,
            "reason": summary or type,
            "decisions": list(decisions),
            "next_steps": list(next_steps),
        }
        answer = self.client.write("POST", "/v1/sessions/checkpoint", body)
        if answer is not None and "checkpoint_id" in answer:
            return Checkpoint.from_dict({"session_id": session_id, **answer})
        return Checkpoint(
            checkpoint_id="",
            session_id=session_id,
            timestamp=self.now_iso(),
            type=type,
            summary=summary,
            next_steps=tuple(next_steps),
        )

    def pre_compact(self, session_id: str, trigger: str = "auto", summary: str = "") -> Checkpoint:
        """The write-ahead checkpoint before a host compacts, as a server checkpoint."""
        reason = f"before {trigger} compaction" + (f": {summary}" if summary else "")
        return self.checkpoint(session_id, type="pre_compact", summary=reason)


class RemoteMetrics(MetricsService):
    """The server's metrics chain: verified there (``GET /v1/metrics/verify``)."""

    def __init__(self, client: RemoteClient, config: Config, clock: Clock) -> None:
        super().__init__(LocalOnly.store(client.transport.url), config, clock)
        self.client = client

    def verify(self) -> VerifyReport:
        data = self.client.read("GET", "/v1/metrics/verify")
        problems = [str(p) for p in data.get("problems") or ()]
        ok = bool(data.get("ok", not problems))
        return VerifyReport(ok=ok, checked=int(data.get("checked") or 0), problems=problems)
