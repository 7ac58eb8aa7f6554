"""EventLog: a session's events and snapshots, on the one session entity.

Each event (a message, checkpoint, summary or other event) is appended as it happens, with its
role, kind, estimated token count and turn index, so a session killed at any moment keeps
every finished turn. A snapshot is a markdown transcript of the meaningful events, written
on ``new_session``, ``reset``, ``manual`` or ``auto_compaction``.
"""

from __future__ import annotations

from cortex.core.history_models import (
    EVENT_KINDS,
    ROLES,
    SNAPSHOT_TRIGGERS,
    SessionEvent,
    SessionSnapshot,
)
from cortex.core.models import SessionState
from cortex.core.plaintext import storable
from cortex.core.redaction import redact
from cortex.core.tokens import estimate_tokens
from cortex.core.transcripts import slugify, transcript_markdown
from cortex.errors import NotFoundError, ValidationError, command
from cortex.files import check_id
from cortex.services.base import Service
from cortex.services.ids import lookup, new_uuid

MAX_EVENT_CHARS = 65_536
"""Characters of one event's content that are stored (a bounded payload); the token
count is estimated on the whole content, so budgets stay right."""
SNAPSHOT_EVENT_LIMIT = 5000
TRUNCATED = "\n…[truncated {n:,} characters]"


class EventLog(Service):
    """Append and read session events; write and read snapshots."""

    def session(self, session_id: str) -> SessionState:
        """The session row (the whole id or a unique prefix of it), or a ``NotFoundError``
        naming the next step."""
        state = lookup(self.store, "session", check_id(session_id), self.store.get_session)
        if state is None:
            raise NotFoundError(
                f"no session {session_id!r}; "
                f"start it with {command('session start', ' --session-id')}"
            )
        return state

    def writable(self, session_id: str, *, ending: bool = False) -> SessionState:
        """The session a write goes to: ``session``, and a ``ConflictError`` naming the next
        step once it has ended. An ended session keeps its final record: a late write (a
        hook event or a journaled request delivered after the end) is refused, never
        applied to it or reopening it; only a start with its id (a resume) reopens it.
        ``ending``: the write is a step of the session's own ending (crash recovery's
        ``interrupted`` checkpoint, the shutdown ritual's ``session.complete`` event), made
        in the transaction that ended it."""
        from cortex.services.sessions.context import check_open  # (a write's: reads need none)

        state = self.session(session_id)
        return state if ending else check_open(state)

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
        """Append one event (content redacted and capped) and return it.

        ``turn_index`` defaults to the session's last turn, plus one for a user message. A
        session that has ended takes none (``writable``; ``ending`` as there).
        """
        if role not in ROLES:
            raise ValidationError(f"unknown role {role!r}; use one of {', '.join(ROLES)}")
        if kind not in EVENT_KINDS:
            raise ValidationError(f"unknown kind {kind!r}; use one of {', '.join(EVENT_KINDS)}")
        if not isinstance(content, str) or not content.strip():
            raise ValidationError("event content is empty; give the message text")
        if token_count is not None and token_count < 0:
            raise ValidationError(f"token_count {token_count} is negative; give 0 or more")
        if turn_index is not None and turn_index < 0:
            raise ValidationError(f"turn_index {turn_index} is negative; give 0 or more")
        with self.store.transaction():
            session_id = self.writable(session_id, ending=ending).session_id
            if turn_index is None:
                last = self.store.session_event_totals(session_id).last_turn_index
                bump = 1 if (role, kind) == ("user", "message") else 0
                turn_index = 0 if last is None else last + bump
            event = SessionEvent(
                id=new_uuid(),
                session_id=session_id,
                role=role,
                kind=kind,
                content=_capped(redact(storable(content))),
                token_count=estimate_tokens(content) if token_count is None else token_count,
                turn_index=turn_index,
                is_meaningful=meaningful,
                created_at=self.now_iso(),
            )
            self.store.append_session_event(event)
        return event

    def events(
        self, session_id: str, *, meaningful_only: bool = False, limit: int | None = None
    ) -> list[SessionEvent]:
        """A session's events in order (the newest ``limit`` of them)."""
        session_id = self.session(session_id).session_id
        return self.store.list_session_events(
            session_id, meaningful_only=meaningful_only, limit=limit
        )

    def snapshot(
        self, session_id: str, trigger: str = "manual", *, slug: str | None = None
    ) -> SessionSnapshot:
        """Write a markdown transcript of the session's meaningful events and return it.

        A ``slug`` given is used as it is or refused (``check_slug``), on every surface and in
        file mode alike; only the default one is made from the task or the first request.
        """
        if trigger not in SNAPSHOT_TRIGGERS:
            raise ValidationError(
                f"unknown trigger {trigger!r}; use one of {', '.join(SNAPSHOT_TRIGGERS)}"
            )
        if slug is not None:
            from cortex.core.filemode import check_slug  # (only a snapshot named by hand)

            check_slug(slug)
        with self.store.transaction():
            state = self.session(session_id)
            session_id = state.session_id
            events = self.store.list_session_events(
                session_id, meaningful_only=True, limit=SNAPSHOT_EVENT_LIMIT
            )
            first_user = next((e.content for e in events if e.role == "user"), "")
            name = slugify(slug or state.task_slug or " ".join(first_user.split()[:8]))
            at = self.now_iso()
            title = f"Session {session_id} - {name} ({trigger}, {at[:16].replace('T', ' ')} UTC)"
            snap = SessionSnapshot(
                id=new_uuid(),
                session_id=session_id,
                slug=name,
                source_trigger=trigger,
                transcript_md=transcript_markdown(title, events),
                message_count=sum(1 for e in events if e.kind == "message"),
                created_at=at,
            )
            self.store.save_snapshot(snap)
        return snap

    def snapshots(self, session_id: str, *, limit: int = 20) -> list[SessionSnapshot]:
        """A session's snapshots, newest first."""
        session_id = self.session(session_id).session_id
        return self.store.list_snapshots(session_id, limit=limit)

    def get_snapshot(self, snapshot_id: str) -> SessionSnapshot:
        """The snapshot ``snapshot_id`` names: the whole id or a unique prefix of it."""
        snap = lookup(self.store, "snapshot", snapshot_id, self.store.get_snapshot)
        if snap is None:
            raise NotFoundError(f"no snapshot {snapshot_id!r}; see {command('session snapshot')}")
        return snap


def _capped(text: str) -> str:
    if len(text) <= MAX_EVENT_CHARS:
        return text
    return text[:MAX_EVENT_CHARS] + TRUNCATED.format(n=len(text) - MAX_EVENT_CHARS)
