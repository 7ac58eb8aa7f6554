"""SessionPersistenceManager: capture and restore sessions.

The public facade over the session use cases, each its own object sharing one unit of work
(``SessionContext``: store, settings, clock, the transaction whose metrics join it at commit):
``starts`` (start + restore), ``capture`` (turns, field updates, end), ``recovery`` (leases),
``continuation`` (manual continue, chains) and ``pins``. Formulas live in the pure core and
SQL in the store. A session with no end is only crashed when its lease lapsed or its owning
process is gone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import timedelta

from cortex.clock import Clock, to_iso
from cortex.config import Config
from cortex.core.models import PendingTask, Pin, RestoredSessionContext, SessionState
from cortex.core.plaintext import plain
from cortex.services.base import Service
from cortex.services.sessions.capture import SessionCapture
from cortex.services.sessions.context import SessionContext
from cortex.services.sessions.continuation import Continuation
from cortex.services.sessions.pins import SessionPins
from cortex.services.sessions.recovery import CrashRecovery
from cortex.services.sessions.restore import Restorer
from cortex.services.sessions.start import SessionStart

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any, Self

    from cortex.services.archive import ArchiveReport
    from cortex.services.metrics import MetricsWriter
    from cortex.services.project import ProjectIdentity
    from cortex.services.tasks import TaskSource
    from cortex.store.protocol import Store


class SessionPersistenceManager(Service):
    """Capture, restore, recover and chain sessions over one ``Store``.

    ``tasks`` is where pending tasks come from (default: the home's pipeline file).
    """

    def __init__(
        self,
        store: Store,
        config: Config,
        clock: Clock | None = None,
        metrics: MetricsWriter | None = None,
        tasks: TaskSource | None = None,
    ) -> None:
        super().__init__(store, config, clock)
        context = SessionContext(self.store, self.config, self.clock, metrics, tasks)
        restorer = Restorer(context)
        self._context = context
        self.recovery = CrashRecovery(context)
        self.starts = SessionStart(context, restorer, self.recovery)
        self.capture = SessionCapture(context)
        self.continuation = Continuation(context, restorer)
        self.pins = SessionPins(context)

    @classmethod
    def remote(cls, config: Config, clock: Clock | None) -> Self:
        """Client mode: the manager over the server the settings name, as
        ``Services.open(config).sessions`` is (a subclass opens the local database only)."""
        if cls is not SessionPersistenceManager:
            return super().remote(config, clock)
        from cortex.services.app import Services

        return Services.open(config, clock).sessions  # type: ignore[return-value]

    @property
    def metrics(self) -> MetricsWriter:
        """The metrics chain's writer, opened on the first event."""
        return self._context.metrics

    @contextmanager
    def transaction(
        self, defer: Callable[[Callable[[], object]], None] | None = None
    ) -> Iterator[None]:
        """Run several calls as one unit: one store transaction, metrics written at commit.

        ``defer``, when given, gets the step that advances the metrics chain's head file once
        the transaction committed (a hook server runs it after its answer is sent) instead
        of that step running before this returns.
        """
        with self._context.tx(defer):
            yield

    # -- lookups -------------------------------------------------------------------------------
    def get_session(self, session_id: str) -> SessionState | None:
        """The session ``session_id``, or None when there is none."""
        return self._context.get(session_id)

    def resolve(self, session_id: str | None, project: str | None = None) -> SessionState:
        """The named session, or the current active one (newest activity) of this home."""
        return self._context.resolve(session_id, project)

    def list_sessions(
        self, limit: int = 20, project: str | None = None, offset: int = 0
    ) -> list[SessionState]:
        """Sessions newest first; with ``project``, of the projects it names (as a person types
        it: a name, a path, a remote or the id itself; see ``projects_matching``)."""
        if project is None:
            return self.store.list_sessions(limit=limit, offset=offset, any_project=True)
        plain(project, "project")
        found = [
            state
            for matched in self.projects_matching(project)
            for state in self.store.list_sessions(
                limit=limit + offset, project=matched, any_project=False
            )
        ]
        found.sort(key=lambda s: (s.start_time, s.session_id), reverse=True)
        return found[offset : offset + limit]

    def projects_matching(self, typed: str) -> list[str]:
        """The stored projects ``typed`` names: the id itself, a project's name (any case), its
        remote or a trailing part of it (``acme-corp/repoa``), or a directory of it."""
        from cortex.services.project import project_matches, typed_path_identity

        path_id = typed_path_identity(typed, self.config.home / "cache")
        matched = [p for p in self.store.session_projects() if project_matches(typed, p, path_id)]
        return matched

    def project_named(self, typed: str) -> str:
        """The project a person's ``typed`` text means, as it is stored: the one stored
        project it names (``projects_matching``: ``api`` names
        ``git:github.com/acme-corp/api#...``, the id the hooks record), or the text itself
        when it is a stored project or names none (a new project, or one known only by that
        name). Credentials in the text are redacted first, as in everything stored."""
        text = typed.strip()
        if text and self.store.project_known(text):
            return text
        from cortex.core.redaction import redact
        from cortex.errors import ConflictError, ValidationError, param
        from cortex.services.project import project_label

        text = redact(text)
        if not text:
            raise ValidationError(f"empty project name; pass {param('project', metavar='NAME')}")
        matched = self.projects_matching(text)
        if not matched or text in matched:
            return text
        if len(matched) == 1:
            return matched[0]
        named = ", ".join(f"{project_label(p)} ({p})" for p in matched[:5])
        raise ConflictError(
            f"project {text!r} names {len(matched)} projects: {named}; "
            "give its remote (org/repo) or its id"
        )

    def current_session(self, here: ProjectIdentity) -> SessionState:
        """The session a command run in project ``here`` means when it names none.

        The newest open session of ``here`` (by id, name or directory); else the newest open
        session recorded under no project or a typed name, when they are all of one; never
        another place's session: that is a ``NotFoundError`` listing the open sessions, and
        open sessions of several typed projects a ``ConflictError`` listing them.
        """
        return self._context.current(here)

    def open_sessions(self) -> list[SessionState]:
        """Every session with no end yet, live or lapsed (``is_lapsed`` tells which)."""
        return self.recovery.open_sessions()

    def detect_pending(
        self,
        pins: Sequence[Pin],
        pipeline: Mapping[str, dict[str, Any]] | None = None,
        project: str | None = None,
    ) -> tuple[PendingTask, ...]:
        """Pipeline tasks in build/verify/validate, plus tasks pins say are unfinished.

        ``pipeline`` is the already-loaded pipeline file, when the caller has it; a pipeline
        task that names a project is pending only for ``project``.
        """
        return self._context.detect_pending(pins, pipeline, project)

    # -- start ---------------------------------------------------------------------------------
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
        """Recover lapsed sessions, open this one and restore what is relevant.

        ``project`` scopes restoration (a canonical id such as ``git:host/org/repo#root``);
        ``project_name`` is how the project appears in topics and keywords (default: the
        readable part of ``project``, e.g. ``radio`` for ``git:github.com/org/radio#1a2b``).
        ``explain`` records the score breakdown of every candidate. Starting an existing id
        again (a resume) reopens it and restores idempotently; with ``keep_ended`` a session
        that ended normally (``SessionState.ended_normally``) stays ended and the start is a
        ``ConflictError``, as a write to it is, while one crash recovery closed is reopened.
        """
        return self.starts.on_session_start(
            session_id,
            channel,
            project=project,
            project_name=project_name,
            keywords=keywords,
            workdir=workdir,
            user_id=user_id,
            agent_id=agent_id,
            task_slug=task_slug,
            owner_pid=owner_pid,
            parent_session=parent_session,
            explain=explain,
            keep_ended=keep_ended,
        )

    # -- capture -------------------------------------------------------------------------------
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
        """Crash-safe per-turn capture: fold this turn's signals into the stored session."""
        return self.capture.record(
            session_id,
            text=text,
            workdir=workdir,
            categories=categories,
            learning_id=learning_id,
            tool_name=tool_name,
            tool_input=tool_input,
            files=files,
            weight=weight,
        )

    def update_session_state(self, session_id: str, partial: Mapping[str, Any]) -> SessionState:
        """UPSERT the session-record fields present in ``partial``, keeping all others."""
        return self.capture.update_session_state(session_id, partial)

    def on_session_end(self, session_id: str | None = None) -> SessionState:
        """The final record (redacted pins, tasks, topics), its mirror and metric."""
        return self.capture.on_session_end(session_id)

    def end_idle_session(self, session_id: str, last_activity: str) -> SessionState:
        """End a session that sat idle: its final record, ended at its last activity."""
        return self.capture.end_idle(session_id, last_activity)

    # -- crash recovery ------------------------------------------------------------------------
    def is_lapsed(self, state: SessionState) -> bool:
        """An open session is crashed when its lease lapsed or its owner process is gone."""
        return self.recovery.is_lapsed(state)

    def detect_and_recover_crashed(self, current_session_id: str) -> list[SessionState]:
        """Close lapsed sessions with an estimated end and ``crash_recovered``."""
        return self.recovery.detect_and_recover_crashed(current_session_id)

    # -- manual continue and chain -------------------------------------------------------------
    def force_inherit_session(
        self, target_session_id: str, session_id: str | None = None, *, actor: str = "cli"
    ) -> RestoredSessionContext:
        """Inherit everything from a session whatever its age or score (audited)."""
        return self.continuation.force_inherit_session(target_session_id, session_id, actor=actor)

    def get_session_chain(self, session_id: str, depth: int = 5) -> list[SessionState]:
        """Up to ``depth`` sessions ending at ``session_id``, oldest first."""
        return self.continuation.get_session_chain(session_id, depth)

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
        """Pin a note in the session's working memory (same label replaces; 10 at most)."""
        return self.pins.add_pin(
            label, content, session_id, critical=critical, confidence=confidence
        )

    def remove_pin(self, label: str, session_id: str | None = None) -> Pin:
        """Remove the pin labelled ``label`` from the session's working memory."""
        return self.pins.remove_pin(label, session_id)

    def list_pins(self, session_id: str | None = None) -> tuple[Pin, ...]:
        """The pins of the named session, or of the current active one."""
        return self.pins.list_pins(session_id)

    # -- retention -----------------------------------------------------------------------------
    def archive(self, older_than_days: int = 30, batch: int = 500) -> ArchiveReport:
        """Move sessions ended more than N days ago to JSON, then drop their rows (imported
        here: no hook event or session command archives)."""
        from cortex.services.archive import archive_sessions

        before = to_iso(self.clock.now() - timedelta(days=older_than_days))
        return archive_sessions(self.store, self.config.sessions_dir, before, batch)
