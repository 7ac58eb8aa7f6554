"""The session service over a Cortex server: the methods adapters call, on the HTTP contract.

Every method answers with the same model objects as the local service (``SessionState``,
``RestoredSessionContext``, ``Pin``), built with their ``from_dict``. A write the server could
not take now is kept in the journal and answered from what the client knows: a start is a
cold start (no preamble), a turn returns the row the caller passed, an end returns the
session as ended now. What the contract does not cover (crash recovery, archive, updates of
single fields) needs the local store and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from cortex.clock import Clock
from cortex.config import Config
from cortex.core.models import COMPLETE, Pin, RestoredSessionContext, SessionState
from cortex.core.redaction import redact
from cortex.errors import NotFoundError, UnavailableError, command, param
from cortex.services.remote.client import RemoteClient, request_id
from cortex.services.remote.local_only import LocalOnly
from cortex.services.remote.transport import segment
from cortex.services.sessions.capture import SessionCapture
from cortex.services.sessions.context import START_OR_NAME, current_of
from cortex.services.sessions.manager import SessionPersistenceManager

if TYPE_CHECKING:
    from cortex.services.project import ProjectIdentity


def _compact(**fields: Any) -> dict[str, Any]:
    """The fields that carry something (the server applies its defaults to the others)."""
    return {k: v for k, v in fields.items() if v is not None and v != [] and v != ()}


_START = "/v1/sessions/start"
_END = "/v1/sessions/end"
OPEN_LISTED = 500
"""The most open sessions a client reads to find its current one (the API's page limit)."""


class RemoteSessions(SessionPersistenceManager):
    """``SessionPersistenceManager`` whose covered methods call the server."""

    def __init__(self, client: RemoteClient, config: Config, clock: Clock | None = None) -> None:
        super().__init__(LocalOnly.store(client.transport.url), config, clock)
        self.client = client
        self.capture = RemoteCapture(self)

    def close(self) -> None:
        """Close the connection to the server."""
        self.client.close()

    @contextmanager
    def transaction(
        self, defer: Callable[[Callable[[], object]], None] | None = None
    ) -> Iterator[None]:
        """Each request is its own unit on the server; nothing to group (or defer) here."""
        yield

    # -- lookups -------------------------------------------------------------------------------
    def get_session(self, session_id: str) -> SessionState | None:
        """The server's row; while the server is unavailable, what this home's journal says:
        a session whose start waits there (its writes follow it) is open, one whose end waits
        after any start is ended, any other is unknown (UnavailableError), as is one whose
        newest waiting start is a reopen with ``keep_ended`` (the server decides)."""
        try:
            return SessionState.from_dict(self.client.read("GET", session_path(session_id)))
        except NotFoundError:
            return None
        except UnavailableError:
            # (the read just tried to deliver the journal: look in it, without trying again)
            waiting = self.client.newest_queued(_START, _END, session_id=session_id)
            if waiting is None or waiting["body"].get("keep_ended"):
                raise
            state = self.assumed(session_id)
            if waiting["path"] == _END:
                return replace(state, end_time=state.start_time, state=COMPLETE)
            return state

    def resolve(self, session_id: str | None, project: str | None = None) -> SessionState:
        if session_id:
            return SessionState.from_dict(self.client.read("GET", session_path(session_id)))
        try:
            listed = self.list_sessions(20, project)
        except UnavailableError as exc:
            raise self._no_current() from exc
        for state in listed:
            if state.is_open:
                return state
        raise NotFoundError(f"no active session on the server; {START_OR_NAME}")

    def current_session(self, here: ProjectIdentity) -> SessionState:
        """The server's open sessions, chosen by the local rule (``current_of``): the newest
        open session of ``here``'s project. Without the server, a one-line error."""
        try:
            data = self.client.read("GET", f"/v1/sessions?open=true&limit={OPEN_LISTED}")
        except UnavailableError as exc:
            raise self._no_current() from exc
        states = (SessionState.from_dict(s) for s in data.get("sessions") or ())
        return current_of([s for s in states if s.is_open], here)

    def _no_current(self) -> UnavailableError:
        """The current session is the server's to find (its list of open sessions): while it
        is unreachable, the caller names the session it started."""
        return UnavailableError(
            f"server {self.client.transport.url} is unreachable, so the current session cannot "
            f"be found; pass {param('session_id', metavar='ID')} (the id "
            f"{command('session start')} gave)"
        )

    def list_sessions(
        self, limit: int = 20, project: str | None = None, offset: int = 0
    ) -> list[SessionState]:
        query = urlencode(_compact(limit=limit, project=project, offset=offset or None))
        data = self.client.read("GET", f"/v1/sessions?{query}")
        return [SessionState.from_dict(s) for s in data.get("sessions") or ()]

    def get_session_chain(self, session_id: str, depth: int = 5) -> list[SessionState]:
        data = self.client.read("GET", f"{session_path(session_id)}/chain?depth={int(depth)}")
        return [SessionState.from_dict(s) for s in data.get("sessions") or ()]

    # -- start, capture, end -------------------------------------------------------------------
    def on_session_start(
        self,
        session_id: str | None = None,
        channel: str = "cli",
        *,
        project: str | None = None,
        project_name: str | None = None,
        keywords: Iterable[str] = (),
        workdir: str | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        task_slug: str | None = None,
        owner_pid: int | None = None,
        parent_session: str | None = None,
        explain: bool = False,
        keep_ended: bool = False,
    ) -> RestoredSessionContext:
        """Start on the server; a cold start (no preamble) while it is unavailable.

        Every start is sent (or journaled) as asked, as online: the server applies them in
        order, so a start after an end waiting in the journal reopens the session, and one
        while a start waits is a resume. Only a reopen with ``keep_ended`` (a hook's,
        offline) is not journaled again while a start of the session is the newest of its
        starts and ends waiting there: it would add nothing. ``owner_pid`` is a local
        process: the server keeps sessions alive by their lease.
        """
        session_id = session_id or _new_session_id()
        if keep_ended:
            waiting = self.client.newest_waiting(_START, _END, session_id=session_id)
            if waiting is not None and waiting["path"] == _START:
                return RestoredSessionContext(session_id=session_id, preamble=None)
        body = _compact(
            session_id=session_id,
            channel=channel,
            project=project,
            project_name=project_name,
            keywords=list(keywords),
            workdir=workdir,
            agent_id=agent_id,
            user_id=user_id,
            task_slug=task_slug,
            parent_session=parent_session,
            explain=explain or None,
            keep_ended=keep_ended or None,
        )
        answer = self.client.write("POST", _START, body)
        if answer is None:
            return RestoredSessionContext(session_id=session_id, preamble=None)
        return RestoredSessionContext.from_dict({"session_id": session_id, **answer})

    def record(
        self,
        session_id: str | None = None,
        *,
        text: str | None = None,
        workdir: str | None = None,
        categories: Iterable[str] = (),
        learning_id: str | None = None,
        tool_name: str | None = None,
        tool_input: Mapping[str, Any] | None = None,
        files: Iterable[str] = (),
        weight: float = 1.0,
    ) -> SessionState:
        """Send the turn; the session as the server has it after (or as assumed, when kept)."""
        sid = session_id or self.resolve(None).session_id
        signals = {
            "text": text,
            "workdir": workdir,
            "categories": categories,
            "learning_id": learning_id,
            "tool_name": tool_name,
            "tool_input": tool_input,
            "files": files,
            "weight": weight,
        }
        if self.send_turn(sid, signals):
            try:
                found = self.get_session(sid)
            except NotFoundError:
                found = None
            if found is not None:
                return found
        return self.assumed(sid)

    def send_turn(self, session_id: str, signals: Mapping[str, Any]) -> bool:
        """POST one turn; whether the server took it now (False: it waits in the journal)."""
        body = _compact(**{name: _plain(value) for name, value in signals.items()})
        answer = self.client.write("POST", f"{session_path(session_id)}/turns", body)
        return answer is not None

    def on_session_end(self, session_id: str | None = None) -> SessionState:
        sid = session_id or self.resolve(None).session_id
        answer = self.client.write("POST", _END, {"session_id": sid})
        if answer is None or "start_time" not in answer:
            now = self.now_iso()
            return replace(self.assumed(sid), end_time=now, state=COMPLETE, updated_at=now)
        return SessionState.from_dict(answer)

    def assumed(self, session_id: str) -> SessionState:
        """The session as the client knows it without the server: open, active now."""
        now = self.now_iso()
        return SessionState(session_id=session_id, start_time=now, last_activity=now)

    # -- continue ------------------------------------------------------------------------------
    def force_inherit_session(
        self, target_session_id: str, session_id: str | None = None, *, actor: str = "cli"
    ) -> RestoredSessionContext:
        sid = session_id or self.resolve(None).session_id
        body = {"target_session_id": target_session_id}
        answer = self.client.write("POST", f"{session_path(sid)}/continue", body)
        if answer is None:
            return RestoredSessionContext(session_id=sid, preamble=None)
        return RestoredSessionContext.from_dict({"session_id": sid, **answer})

    # -- pins ----------------------------------------------------------------------------------
    def add_pin(
        self,
        label: str,
        content: str,
        session_id: str | None = None,
        *,
        critical: bool = False,
        confidence: float = 1.0,
    ) -> Pin:
        sid = session_id or self.resolve(None).session_id
        # Redacted here, as the local service does: the label is in the path, which the
        # journal keeps and the command echoes while the server is down.
        label, content = redact(label), redact(content)
        body = {"content": content, "critical": critical, "confidence": confidence}
        answer = self.client.write("PUT", _pin(sid, label), body)
        if answer is None or "label" not in answer:
            importance = "CRITICAL" if critical else "NORMAL"
            return Pin(label, content, self.now_iso(), importance, confidence)
        return Pin.from_dict(answer)

    def remove_pin(self, label: str, session_id: str | None = None) -> Pin:
        sid = session_id or self.resolve(None).session_id
        label = redact(label)  # as it was stored: a pin is unpinned by the label it was given
        answer = self.client.write("DELETE", _pin(sid, label), {})
        if answer is None or "label" not in answer:
            return Pin(label, "", self.now_iso())
        return Pin.from_dict(answer)

    def list_pins(self, session_id: str | None = None) -> tuple[Pin, ...]:
        sid = session_id or self.resolve(None).session_id
        data = self.client.read("GET", f"{session_path(sid)}/pins")
        return tuple(Pin.from_dict(p) for p in data.get("pins") or ())


class RemoteCapture(SessionCapture):
    """The capture the hooks call (``record`` with the row they read) over the server."""

    def __init__(self, sessions: RemoteSessions) -> None:
        self.sessions = sessions

    def record(
        self,
        session_id: str | None = None,
        *,
        current: SessionState | None = None,
        **signals: Any,
    ) -> SessionState:
        """Send the turn without reading the session back: a hook's turn is one request."""
        sid = session_id or (current.session_id if current else None)
        if sid is None:
            sid = self.sessions.resolve(None).session_id
        self.sessions.send_turn(sid, signals)
        return current or self.sessions.assumed(sid)

    def on_session_end(self, session_id: str | None = None) -> SessionState:
        return self.sessions.on_session_end(session_id)


def _plain(value: Any) -> Any:
    """A signal as JSON: mappings as objects, other collections as lists."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, (str, bytes, int, float, bool)) or value is None:
        return value
    return list(value)


def session_path(session_id: str) -> str:
    return f"/v1/sessions/{segment(session_id)}"


def _pin(session_id: str, label: str) -> str:
    return f"{session_path(session_id)}/pins/{segment(label)}"


def _new_session_id() -> str:
    """A uuid4 in its usual form, as the local service makes one."""
    h = request_id()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
