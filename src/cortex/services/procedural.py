"""ProceduralService: reusable workflows with usage signals (procedural memory).

A procedure is a title and numbered steps under a ``procedure_key`` (one live procedure per key
and owner; saving the same key again rewrites its steps and keeps its usage). ``use`` counts a
use; context assembly puts the procedures that match the task first (``matching``). A
successful episode, a session whose task completed (ended normally with no pending task),
becomes a procedure with ``promote``: its user requests, in order, are the steps.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence

from cortex.config import Config
from cortex.core.hygiene import Procedure
from cortex.core.memory_models import GLOBAL, PROJECT
from cortex.core.models import COMPLETE
from cortex.core.procedures import (
    ScoredProcedure,
    match_procedures,
    procedure_key_for,
    steps_from_events,
)
from cortex.core.redaction import redact
from cortex.core.retrieval import query_terms
from cortex.errors import ConfigError, NotFoundError, ValidationError, command, param
from cortex.files import check_id
from cortex.services.base import Service
from cortex.services.ids import lookup, new_uuid, resolve_id
from cortex.services.memory_checks import MAX_KEY_CHARS, check_content, check_limit

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from cortex.store.protocol import Store

MAX_TITLE_CHARS = 200
MAX_STEPS = 50
CANDIDATE_LIMIT = 200
"""Procedures of a scope ranked for one context (most used first)."""
EVENT_LIMIT = 2000


class ProceduralService(Service):
    """Add, list, use, forget and promote procedures; rank them for a task."""

    def _check_enabled(self) -> None:
        if not self.config.memory_procedural_enabled:
            raise ConfigError(
                "procedural memory is off (memory_procedural_enabled=false); set it to true"
            )

    def add(
        self,
        title: str,
        steps: Sequence[str],
        *,
        procedure_key: str | None = None,
        project: str | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        actor: str = "api",
    ) -> Procedure:
        """Save a procedure (its key defaults to a slug of the title); audited."""
        self._check_enabled()
        title = check_content(title, "procedure title")[:MAX_TITLE_CHARS]
        cleaned = [check_content(s, "procedure step") for s in steps if s and s.strip()]
        if not cleaned or len(cleaned) > MAX_STEPS:
            raise ValidationError(f"a procedure needs 1-{MAX_STEPS} steps; give its steps")
        key = (procedure_key or "").strip() or procedure_key_for(title)
        if len(key) > MAX_KEY_CHARS:
            raise ValidationError(
                f"{param('procedure_key')} is longer than {MAX_KEY_CHARS} characters; shorten it"
            )
        now = self.now_iso()
        procedure = Procedure(
            id=new_uuid(), procedure_key=key, title=title, steps=tuple(cleaned),
            scope=PROJECT if project else GLOBAL, project=project or None,
            user_id=user_id or None, source_session_id=session_id, created_at=now,
            updated_at=now,
        )  # fmt: skip
        with self.store.transaction():
            stored = self.store.save_procedure(procedure)
            detail = {"procedure_key": key, "steps": len(cleaned)}
            self.store.append_audit("procedure.save", actor, stored.id, detail, now)
        return stored

    def get(self, procedure_id: str) -> Procedure:
        """The live procedure ``procedure_id`` names: its id or a unique prefix of it."""
        found = lookup(self.store, "procedure", procedure_id, self.store.get_procedure)
        if found is None or found.deleted_at is not None:
            raise NotFoundError(f"no procedure {procedure_id!r}; see {command('procedure list')}")
        return found

    def list(
        self, *, project: str | None = None, user_id: str | None = None, limit: int = 50
    ) -> builtins.list[Procedure]:
        """Live procedures of ``project`` plus global ones, most used first."""
        check_limit(limit)
        return self.store.list_procedures(project, user_id, limit=limit)

    def use(self, procedure_id: str, *, actor: str = "api") -> Procedure:
        """Count one use of a procedure (it ranks higher among equal matches)."""
        self._check_enabled()
        now = self.now_iso()
        procedure_id = resolve_id(self.store, "procedure", procedure_id) or procedure_id
        with self.store.transaction():
            if not self.store.record_procedure_use(procedure_id, now):
                raise NotFoundError(
                    f"no procedure {procedure_id!r}; see {command('procedure list')}"
                )
            self.store.append_audit("procedure.use", actor, procedure_id, {}, now)
        return self.get(procedure_id)

    def forget(self, procedure_id: str, *, actor: str = "api") -> Procedure:
        """Soft-delete a procedure (audited)."""
        now = self.now_iso()
        with self.store.transaction():
            found = self.get(procedure_id)
            self.store.delete_procedure(found.id, now)
            self.store.append_audit("procedure.forget", actor, found.id, {}, now)
        return found

    def promote(
        self,
        session_id: str,
        *,
        title: str | None = None,
        procedure_key: str | None = None,
        actor: str = "api",
    ) -> Procedure:
        """Turn a completed session (ended normally, no pending task) into a procedure whose
        steps are its user requests; promoting the same workflow again counts a use."""
        self._check_enabled()
        state = lookup(self.store, "session", check_id(session_id), self.store.get_session)
        if state is None:
            raise NotFoundError(f"no session {session_id!r}; see {command('session list')}")
        session_id = state.session_id  # a prefix names the session it begins
        if state.is_open or state.state != COMPLETE or state.crash_recovered:
            raise ValidationError(
                f"session {session_id} did not complete; end it with {command('session end')} "
                "once its task is done, then promote it"
            )
        if state.pending_tasks:
            raise ValidationError(
                f"session {session_id} left {len(state.pending_tasks)} pending task(s); "
                "promote a session whose task completed"
            )
        events = self.store.list_session_events(session_id, meaningful_only=True,
                                                limit=EVENT_LIMIT)  # fmt: skip
        steps = steps_from_events(events)
        if not steps:
            raise ValidationError(
                f"session {session_id} recorded no request to make a step of; give the steps "
                f"yourself with {command('procedure add')}"
            )
        name = title or state.task_slug or steps[0]
        procedure = self.add(
            redact(name)[:MAX_TITLE_CHARS], steps, procedure_key=procedure_key,
            project=state.project, user_id=state.user_id, session_id=session_id, actor=actor,
        )  # fmt: skip
        if procedure.source_session_id != session_id:  # the workflow existed: one more use
            procedure = self.use(procedure.id, actor=actor)
        return procedure

    def matching(
        self,
        query: str | None,
        *,
        project: str | None = None,
        user_id: str | None = None,
        limit: int = 3,
    ) -> builtins.list[ScoredProcedure]:
        """The procedures that fit ``query``, best first (none when procedural memory is
        off or there is no query)."""
        return rank_procedures(self.store, self.config, query, project, user_id, limit)


def rank_procedures(
    store: Store,
    config: Config,
    query: str | None,
    project: str | None,
    user_id: str | None,
    limit: int = 3,
) -> builtins.list[ScoredProcedure]:
    """The procedures of the scope that fit ``query``, best first (none when procedural memory
    is off or there is no query)."""
    if not config.memory_procedural_enabled or not query or not query.strip():
        return []
    candidates = store.list_procedures(project, user_id, limit=CANDIDATE_LIMIT)
    return match_procedures(query_terms(query), candidates)[:limit]
