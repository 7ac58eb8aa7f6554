"""``RemoteServices``: the composition root of a home in client mode (``server_url`` set).

``Services.open`` returns one when the settings name a server. It has the attributes adapters
use (``sessions``, ``compaction``, ``metrics``, ...), each the local service with the methods
the server contract covers sent over HTTP; anything else needs the local store and says so
in one line (``LocalOnly``). ``sync()`` delivers the journal of writes the server missed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlencode

from cortex.clock import Clock
from cortex.config import Config
from cortex.core.history_models import Checkpoint, CompactionEvent, SessionEvent, SessionSnapshot
from cortex.core.models import SessionState
from cortex.core.redaction import redact
from cortex.core.tasks import DONE_STAGES
from cortex.errors import UnavailableError, command
from cortex.files import check_id
from cortex.services.app import DatabaseHealth, Services
from cortex.services.compaction import CompactionService
from cortex.services.events import EventLog
from cortex.services.metrics import MetricsService
from cortex.services.metrics_verify import VerifyReport
from cortex.services.remote.client import RemoteClient
from cortex.services.remote.journal import DrainReport
from cortex.services.remote.local_only import LocalOnly
from cortex.services.remote.sessions import RemoteSessions, session_path
from cortex.services.remote.transport import segment
from cortex.services.tasks import (
    TaskService,
    TaskSource,
    check_stage,
    check_title,
    task_view,
)

if TYPE_CHECKING:
    from cortex.services.memory import MemoryService
    from cortex.services.sessions.manager import SessionPersistenceManager
    from cortex.store.protocol import Store


NO_SNAPSHOT = (
    "the server is unreachable, and a snapshot is made from the session's log it holds; "
    f"run {command('session snapshot')} again once it answers"
)
"""Why a snapshot cannot be made in a client home while its server is down."""


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
    def memory(self) -> MemoryService:
        from cortex.services.remote.memory import RemoteMemory

        return RemoteMemory(self.client, self.config, self.clock)

    @cached_property
    def events(self) -> EventLog:
        return RemoteEvents(self.client, self.config, self.clock)

    @cached_property
    def compaction(self) -> CompactionService:
        return RemoteCompaction(self.client, self.config, self.clock, self.events)

    @cached_property
    def metrics(self) -> MetricsService:
        return RemoteMetrics(self.client, self.config, self.clock)

    @cached_property
    def tasks(self) -> TaskService:
        return RemoteTasks(self.client, self.config, self.clock)

    @cached_property
    def task_source(self) -> TaskSource:
        """Tasks live on the server: nothing here may read or edit a local task list."""
        return cast(TaskSource, LocalOnly(self.client.transport.url))

    def sync(self) -> DrainReport:
        """Deliver every write waiting in the journal, in order, now."""
        return self.client.sync()

    def queued(self, since: int = 0) -> dict[str, Any] | None:
        """When a write of this process (since ``since``) went to the journal (the server did
        not take it): the server, how many writes were queued and how many wait in all."""
        if self.client.spooled <= since:
            return None
        return {
            "server": self.client.transport.url,
            "writes": self.client.spooled - since,
            "waiting": self.client.journal.count(),
            "deliver": "cortex sync",
        }

    def spooled(self) -> int:
        return self.client.spooled

    def answers_queued(self) -> Services:
        self.client.announce = False
        return self

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
        services = RemoteServices(config, clock, self.client if same else None)
        return services if self.client.announce else services.answers_queued()

    def close(self) -> None:
        self.client.close()


class RemoteEvents(EventLog):
    """A session's event log and snapshots on the server."""

    def __init__(self, client: RemoteClient, config: Config, clock: Clock) -> None:
        super().__init__(LocalOnly.store(client.transport.url), config, clock)
        self.client = client

    def session(self, session_id: str) -> SessionState:
        return SessionState.from_dict(self.client.read("GET", session_path(session_id)))

    def append(
        self,
        session_id: str,
        content: str,
        *,
        role: str = "user",
        kind: str = "message",
        turn_index: int | None = None,
        meaningful: bool = True,
        token_count: int | None = None,
        ending: bool = False,
    ) -> SessionEvent:
        """``POST /v1/sessions/{id}/events`` (the server numbers the turn and counts tokens);
        while it is unavailable the event waits in the journal. The server refuses it for a
        session that has ended (``ending`` is for the steps of an ending, which need the
        local store)."""
        body = {"content": content, "role": role, "kind": kind, "meaningful": meaningful}
        answer = self.client.write("POST", f"{session_path(session_id)}/events", body)
        if answer is not None and "id" in answer:
            return SessionEvent(**answer)
        return SessionEvent("", session_id, role, kind, content, token_count or 0, turn_index,
                            meaningful, self.now_iso())  # fmt: skip

    def events(
        self, session_id: str, *, meaningful_only: bool = False, limit: int | None = None
    ) -> list[SessionEvent]:
        fields: dict[str, object] = {"meaningful_only": str(meaningful_only).lower()}
        if limit:
            fields["limit"] = limit
        query = urlencode(fields)
        data = self.client.read("GET", f"{session_path(session_id)}/events?{query}")
        return [SessionEvent(**e) for e in data.get("events") or ()]

    def snapshot(
        self, session_id: str, trigger: str = "manual", *, slug: str | None = None
    ) -> SessionSnapshot:
        """``POST /v1/sessions/{id}/snapshots``: the server writes it from the log it holds.
        Never queued: its answer is the point, and a snapshot written at a later sync would
        be one more than asked for when the command is run again."""
        body = {"trigger": trigger, **({"slug": slug} if slug else {})}
        try:
            answer = self.client.send("POST", f"{session_path(session_id)}/snapshots", body)
        except UnavailableError as exc:
            raise UnavailableError(NO_SNAPSHOT) from exc
        return SessionSnapshot(**answer)

    def snapshots(self, session_id: str, *, limit: int = 20) -> list[SessionSnapshot]:
        data = self.client.read("GET", f"{session_path(session_id)}/snapshots?limit={int(limit)}")
        return [SessionSnapshot(**s) for s in data.get("snapshots") or ()]


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
        ending: bool = False,
    ) -> Checkpoint:
        """``POST /v1/sessions/checkpoint``; while the server is unavailable, the checkpoint
        waits in the journal and this returns what was asked for. The server's checkpoint
        takes the reason, decisions and next steps; task folders are local only (the
        protocol's commands need a local store), as are the checkpoints of an ending
        (``ending``): the server refuses one for a session that has ended."""
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
        """``POST /v1/sessions/{id}/precompact``: the server writes the checkpoint (from the
        session it holds), the snapshot and the compaction event; while it is unavailable the
        request waits in the journal and this returns the checkpoint as asked for."""
        body = {"trigger": trigger, "summary": summary}
        answer = self.client.write("POST", f"{session_path(session_id)}/precompact", body)
        if answer is not None and "checkpoint_id" in answer:
            return Checkpoint.from_dict(answer)
        return Checkpoint("", session_id, self.now_iso(), "pre_compaction", summary)

    def post_compact(self, session_id: str, summary: str, trigger: str = "auto") -> CompactionEvent:
        """``POST /v1/sessions/{id}/postcompact``: the host's summary completes the event."""
        body = {"trigger": trigger, "summary": summary}
        answer = self.client.write("POST", f"{session_path(session_id)}/postcompact", body)
        if answer is not None and "id" in answer:
            return CompactionEvent(**answer)
        now = self.now_iso()
        return CompactionEvent("", session_id, "manual", "waiting for the server", 0, 0, None,
                               None, now, now)  # fmt: skip

    def checkpoints(self, session_id: str, *, limit: int = 20) -> list[Checkpoint]:
        """``GET /v1/sessions/{id}/checkpoints``, newest first."""
        data = self.client.read("GET", f"{session_path(session_id)}/checkpoints?limit={int(limit)}")
        return [Checkpoint.from_dict(c) for c in data.get("checkpoints") or ()]


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


class RemoteTasks(TaskService):
    """A tenant's pipeline tasks on the server (``/v1/tasks``); while the server is
    unavailable an add or a done waits in the journal and this answers with what was asked."""

    def __init__(self, client: RemoteClient, config: Config, clock: Clock) -> None:
        local = LocalOnly(client.transport.url)
        super().__init__(cast("Store", local), config, clock, cast(TaskSource, local))
        self.client = client

    def list_tasks(
        self, *, pending_only: bool = False, project: str | None = None
    ) -> list[dict[str, Any]]:
        query = urlencode(
            {"pending": str(pending_only).lower(), **({"project": project} if project else {})}
        )
        return list(self.client.read("GET", f"/v1/tasks?{query}").get("tasks") or ())

    def add(
        self,
        task_id: str,
        title: str,
        stage: str = "build",
        project: str | None = None,
        *,
        new_project: str | None = None,
    ) -> dict[str, Any]:
        task_id, stage = check_id(task_id, "task id"), check_stage(stage)
        body = {"title": redact(check_title(title)) or task_id, "stage": stage}
        if project is not None:
            body["project"] = project
        elif new_project is not None:
            body["new_project"] = new_project
        answer = self.client.write("PUT", _task_path(task_id), body)
        if answer is not None and "task_id" in answer:
            return answer
        assumed = {"task_id": task_id, **body, "updated_at": self.now_iso()}
        return task_view({k: v for k, v in assumed.items() if v != ""})

    def done(self, task_id: str) -> dict[str, Any]:
        task_id = check_id(task_id, "task id")
        answer = self.client.write("POST", f"{_task_path(task_id)}/done", {})
        if answer is not None and "task_id" in answer:
            return answer
        return task_view(
            {"task_id": task_id, "stage": DONE_STAGES[0], "updated_at": self.now_iso()}
        )


def _task_path(task_id: str) -> str:
    return f"/v1/tasks/{segment(task_id)}"
