"""ConsolidationService: one current truth per fact, every change audited, no model needed.

A run reads the live long-term and rule memories (newest ``consolidation_batch`` of them), plus
the candidates an extractor finds in the sessions active since the last applied run, and
plans with ``cortex.core.consolidation``: duplicates merge into the one that takes
precedence, a newer explicit statement supersedes an older one on the same subject, other
statements on one subject are linked as ``conflicts`` (both stay live), and new facts from
sessions are promoted to long-term memory. In shadow mode (``dry_run``) nothing changes; either
way the run leaves a ``consolidation_runs`` row with its counts and its actions, and a
``consolidation_run`` metrics event.

Applying runs in one store transaction: on PostgreSQL the memories read are locked (``FOR
UPDATE SKIP LOCKED``), on SQLite the transaction holds the write lock (``BEGIN IMMEDIATE``),
so two servers never consolidate the same rows at once; a memory that stopped being live
meanwhile is left alone and not counted.

The extractor is pluggable: ``consolidation_extractor = "module:callable"`` names any callable
that takes ``SourceText`` items and returns ``Candidate`` items (or dicts with ``content`` and
``type``); empty means the built-in ``RuleExtractor``.
"""

from __future__ import annotations

import builtins
import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cortex.clock import Clock
from cortex.config import Config
from cortex.core.consolidation import (
    CONFLICT,
    MERGE,
    PROMOTE,
    SUPERSEDE,
    Action,
    Plan,
    plan_consolidation,
)
from cortex.core.extraction import Candidate, Extractor, RuleExtractor, SourceText
from cortex.core.hygiene import APPLY, SHADOW, ConsolidationRun
from cortex.core.memory_models import (
    GLOBAL,
    LONG_TERM,
    PROJECT,
    RULE,
    Memory,
    MemoryFilter,
    MemoryLink,
)
from cortex.core.plaintext import plain, storable
from cortex.errors import ConfigError, CortexError, ValidationError
from cortex.logs import getLogger
from cortex.services.base import Service
from cortex.services.ids import new_uuid
from cortex.services.memory import NewMemory

if TYPE_CHECKING:
    from cortex.services.memory import MemoryService
    from cortex.services.metrics import MetricsService
    from cortex.store.protocol import Store

log = getLogger("cortex")

SESSION_SCAN_LIMIT = 200
"""Most recent sessions a run reads candidates from."""
EVENT_SCAN_LIMIT = 500
CONFLICT_SCAN_LIMIT = 10_000
METADATA_ACTIONS = 500
"""Most actions a run's audit row lists (the counts always cover all of them)."""


RECORD_TYPES = ("checkpoint",)
"""Memory types that record an event (the protocol's checkpoints mirrored for search), not a
statement that could duplicate or contradict another: consolidation leaves them alone."""


@dataclass(frozen=True)
class ConsolidationReport:
    """A run's audit row and every action it took (or, in shadow mode, would take)."""

    run: ConsolidationRun
    actions: tuple[Action, ...]

    @property
    def applied(self) -> bool:
        return self.run.mode == APPLY

    def to_dict(self) -> dict[str, Any]:
        return self.run.to_dict() | {
            "applied": self.applied,
            "actions": [a.to_dict() for a in self.actions],
        }


def load_extractor(spec: str) -> tuple[str, Extractor]:
    """The extractor ``spec`` names (``module:callable``) and its name; the built-in rules
    when ``spec`` is empty."""
    if not spec.strip():
        return RuleExtractor.name, RuleExtractor()
    module_name, sep, attr = spec.strip().partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(
            f"consolidation_extractor={spec!r} is not module:callable; e.g. mypkg.extract:run"
        )
    try:
        target: Any = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"cannot load consolidation_extractor {spec!r} ({exc}); install it or unset it"
        ) from exc
    if isinstance(target, type):
        target = target()
    if not callable(target):
        raise ConfigError(f"consolidation_extractor {spec!r} is not callable; name a function")
    return spec.strip(), target


def _candidate(item: object) -> Candidate:
    """An extractor's item as a ``Candidate`` (plugins may return dicts)."""
    if isinstance(item, Candidate):
        return item
    if isinstance(item, dict) and isinstance(item.get("content"), str):
        return Candidate(
            content=item["content"],
            type=str(item.get("type") or "note"),
            session_id=str(item.get("session_id") or ""),
            project=item.get("project"),
            user_id=item.get("user_id"),
        )
    raise ValidationError(
        f"the consolidation extractor returned {type(item).__name__}; return Candidate "
        "items or dicts with content and type"
    )


def decision_text(decision: object) -> str:
    """A checkpoint's decision item (``{"decision": text}`` or plain text) as text."""
    return str(decision.get("decision") if isinstance(decision, dict) else decision)


class ConsolidationService(Service):
    """Plan and apply consolidation runs over one ``Store``; list past runs."""

    def __init__(
        self,
        store: Store,
        config: Config,
        clock: Clock | None,
        memory: MemoryService,
        metrics: MetricsService | None = None,
    ) -> None:
        super().__init__(store, config, clock)
        self.memory = memory
        self.metrics = metrics

    def runs(self, *, limit: int = 20) -> builtins.list[ConsolidationRun]:
        """Past runs, newest first."""
        if not 1 <= limit <= 1000:
            raise ValidationError(f"limit {limit} is out of range; use 1-1000")
        return self.store.list_consolidation_runs(limit=limit)

    def run(
        self,
        *,
        dry_run: bool = False,
        project: str | None = None,
        user_id: str | None = None,
        extract: bool = True,
        actor: str = "api",
    ) -> ConsolidationReport:
        """One consolidation run (see the module docstring); ``project`` limits it to that
        project's memories plus global ones, else every project's."""
        if not self.config.memory_consolidation_enabled:
            raise ConfigError(
                "consolidation is off (memory_consolidation_enabled=false); set it to true"
            )
        project, user_id = storable(project) if project else project, plain(user_id, "user_id")
        model, extractor = load_extractor(self.config.consolidation_extractor)
        now = self.now_iso()
        flt = MemoryFilter(
            layers=(RULE, LONG_TERM), project=project, user_id=user_id,
            all_projects=project is None,
        )  # fmt: skip
        # Extraction (perhaps a model call) runs before the write transaction, never holding
        # the write lock; a candidate another run promoted meanwhile is a duplicate below.
        candidates = self._candidates(extractor, project) if extract else []
        with self.store.transaction():
            live = [
                m
                for m in self.store.consolidation_candidates(
                    flt, now, limit=self.config.consolidation_batch
                )
                if m.type not in RECORD_TYPES
            ]
            linked = [
                frozenset((a.id, b.id))
                for a, b in self.store.memory_conflicts(flt, now, limit=CONFLICT_SCAN_LIMIT)
            ]
            plan = plan_consolidation(
                live,
                candidates,
                near=self.config.consolidation_similarity,
                related=self.config.consolidation_related,
                linked=linked,
            )
            if not dry_run:
                plan = self._apply(plan, live, candidates, now, actor)
            run = self._record(plan, dry_run, project, user_id, model, now)
        self._emit(run)
        return ConsolidationReport(run, tuple(plan.actions))

    # -- candidates ----------------------------------------------------------------------------
    def _candidates(self, extractor: Extractor, project: str | None) -> builtins.list[Memory]:
        """Candidates from the sessions active since the last applied run, as memories."""
        since = next((r.created_at for r in self.store.list_consolidation_runs(limit=50)
                      if r.mode == APPLY), None)  # fmt: skip
        sources = self._sources(since, project)
        if not sources:
            return []
        try:
            found = [_candidate(item) for item in extractor(sources)]
        except CortexError:
            raise
        except Exception as exc:  # a plugin's failure is the plugin's: say so in one line
            raise ConfigError(
                f"the consolidation extractor failed ({type(exc).__name__}: {exc}); fix it or "
                "unset consolidation_extractor"
            ) from exc
        memories = []
        for c in found:
            item = NewMemory(
                c.content, layer=LONG_TERM, type=c.type,
                scope=PROJECT if c.project else GLOBAL, project=c.project, user_id=c.user_id,
                session_id=c.session_id or None, tags=("consolidated",),
            )  # fmt: skip
            memories.append(self.memory.build(item))
        return memories

    def _sources(self, since: str | None, project: str | None) -> builtins.list[SourceText]:
        """User messages and checkpoint decisions of the sessions active after ``since``."""
        sessions = self.store.list_sessions(
            limit=SESSION_SCAN_LIMIT, project=project, any_project=project is None
        )
        sources: builtins.list[SourceText] = []
        for state in sessions:
            last = state.last_activity or state.updated_at or state.start_time
            if since is not None and last <= since:
                continue
            texts = [
                (e.content, "message")
                for e in self.store.list_session_events(
                    state.session_id, since=since, meaningful_only=True, limit=EVENT_SCAN_LIMIT
                )
                if (e.role, e.kind) == ("user", "message")
            ]
            for checkpoint in self.store.list_checkpoints(state.session_id, limit=20):
                if since is None or checkpoint.timestamp > since:
                    texts += [(decision_text(d), "decision")
                              for d in checkpoint.state.get("decisions") or [] if d]  # fmt: skip
            sources += [
                SourceText(text, state.session_id, state.project, state.user_id, kind)
                for text, kind in texts
            ]
        return sources

    # -- applying ------------------------------------------------------------------------------
    def _apply(
        self, plan: Plan, live: Sequence[Memory], candidates: Sequence[Memory], now: str, actor: str
    ) -> Plan:
        """Carry out ``plan`` over ``live`` in the caller's transaction; the plan of what was
        applied."""
        stored = {m.id: m for m in live}
        promoted = {a.keep_id for a in plan.actions if a.kind == PROMOTE}
        added = [c for c in candidates if c.id in promoted]
        if added:
            self.store.add_memories(added)
        done: builtins.list[Action] = []
        for action in plan.actions:
            if action.kind in (MERGE, SUPERSEDE):
                assert action.other_id is not None
                keep, other = stored[action.keep_id], stored[action.other_id]
                if not self.memory.supersede(other, keep, now):
                    continue  # no longer live: another run or a person got there first
            elif action.kind == CONFLICT:
                assert action.other_id is not None
                link = MemoryLink(action.keep_id, action.other_id, "conflicts", now)
                self.store.add_memory_link(link)
            done.append(action)
            detail = action.to_dict()
            self.store.append_audit(f"memory.consolidate.{action.kind}", actor,
                                    action.other_id or action.keep_id, detail, now)  # fmt: skip
        return Plan(plan.input_count, plan.candidate_count, done)

    def _record(
        self,
        plan: Plan,
        dry_run: bool,
        project: str | None,
        user_id: str | None,
        model: str,
        now: str,
    ) -> ConsolidationRun:
        counts = plan.counts()
        run = ConsolidationRun(
            id=new_uuid(),
            scope=PROJECT if project else GLOBAL,
            project=project,
            user_id=user_id,
            mode=SHADOW if dry_run else APPLY,
            model=model,
            created_at=now,
            metadata={"actions": [a.to_dict() for a in plan.actions[:METADATA_ACTIONS]]},
            **counts,
        )
        self.store.save_consolidation_run(run)
        return run

    def _emit(self, run: ConsolidationRun) -> None:
        """The run's counts on the metrics chain (after the commit: the chain's head file)."""
        if self.metrics is None:
            return
        payload = {k: v for k, v in run.to_dict().items() if k.endswith("_count")}
        payload |= {"run_id": run.id, "mode": run.mode, "project": run.project}
        try:
            self.metrics.writer.emit("consolidation_run", None, payload, run.created_at)
        except CortexError as exc:  # the run is committed: a failed command would be run again
            log.warning("consolidation_run metric not written: %s", exc)
