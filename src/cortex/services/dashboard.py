"""What the web dashboard shows, read-only: sessions over time, one session's history, what the
next start would inherit, and the store's health.

Nothing here writes: looking at a session does not emit a chain-traversal metric, and the
next-start preview plans a restoration without opening a session. Writes (edit a pin, forget a
memory) go through the same services as the CLI (``sessions``, ``memory``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from cortex.clock import Clock, parse_time, to_iso
from cortex.config import Config
from cortex.core.history_models import Checkpoint, CompactionEvent, SessionEvent, SessionSnapshot
from cortex.core.memory_models import Memory, MemoryFilter
from cortex.core.models import (
    ACTIVE,
    COMPLETE,
    INIT,
    SUSPENDED,
    TERMINATED,
    AuditEntry,
    MetricEvent,
    ScoredSession,
    SessionState,
)
from cortex.core.preamble import MAX_PREAMBLE_CHARS
from cortex.core.tokens import CHARS_PER_TOKEN, estimate_tokens
from cortex.core.topics import display_name
from cortex.errors import NotFoundError, ValidationError, command, param
from cortex.files import check_id
from cortex.services.base import Service
from cortex.services.metrics import MetricsService
from cortex.services.restoration import RestorePlan
from cortex.services.sessions.context import SessionContext
from cortex.services.sessions.restore import Restorer
from cortex.services.sessions.start import context_keywords

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from cortex.store.protocol import Store

CRASHED = "crashed"
STATUSES = (ACTIVE, COMPLETE, SUSPENDED, TERMINATED, INIT, CRASHED)
"""What the sessions list filters on: a session state, or ``crashed`` (recovered after a crash)."""
PROJECT_LIMIT = 500
"""Most projects offered in the filters."""
RECOVERIES = 20
"""The health page lists this many of the newest crash-recovered sessions."""
EVENT_LIMIT = 500
"""A session page shows its newest this many events."""
CHAIN_DEPTH = 10
LATENCY_FILE = "latency.jsonl"
"""What the hooks append per handled event under ``<home>/hooks`` (``at``, ``host``,
``event``, ``ms``), rotated once to ``latency.jsonl.1``."""
PREAMBLE_BUDGET_TOKENS = MAX_PREAMBLE_CHARS // CHARS_PER_TOKEN
"""The preamble is capped at ``MAX_PREAMBLE_CHARS`` characters: about this many tokens."""


@dataclass(frozen=True)
class SessionDetail:
    """One session and everything recorded about it."""

    session: SessionState
    events: tuple[SessionEvent, ...]
    checkpoints: tuple[Checkpoint, ...]
    snapshots: tuple[SessionSnapshot, ...]
    compactions: tuple[CompactionEvent, ...]
    chain: tuple[SessionState, ...]
    """Its predecessors (oldest first), itself, then the sessions that continued it."""
    metrics: tuple[MetricEvent, ...]


@dataclass(frozen=True)
class Candidate:
    """One prior session as the next start would weigh it."""

    session: SessionState
    scored: ScoredSession
    included: bool
    reason: str


@dataclass(frozen=True)
class NextStart:
    """What a session of ``project`` starting now would receive, and why."""

    project: str | None
    keywords: tuple[str, ...]
    threshold: float
    candidates: tuple[Candidate, ...]
    plan: RestorePlan | None
    preamble_tokens: int
    budget_tokens: int = PREAMBLE_BUDGET_TOKENS


@dataclass(frozen=True)
class Latency:
    """How long the hooks took for one (host, event): percentiles of the recorded samples."""

    host: str
    event: str
    count: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float


@dataclass(frozen=True)
class Health:
    """The store at a glance."""

    url: str
    size_bytes: int | None
    sessions: int
    memories: int | None
    """Live memories; counted only with ``checked`` (it reads every memory row)."""
    captures_per_day: tuple[tuple[str, int, int], ...]
    """(UTC day, sessions started, events recorded), one entry per day."""
    recoveries: tuple[SessionState, ...]
    hook_latency: tuple[Latency, ...]
    """From the home's ``hooks/latency.jsonl`` (empty on a server: hooks run on clients)."""
    damage: tuple[str, ...]
    pending_migrations: tuple[str, ...]
    checked: bool
    """Whether ``damage`` and the metrics fields come from a check run now."""
    metrics_ok: bool
    metrics_checked: int
    metrics_problems: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class MemoryHistory:
    """A memory, the versions it replaced and replaced it, and its audit trail."""

    memory: Memory
    versions: tuple[Memory, ...]
    """Oldest first, ``memory`` among them."""
    audit: tuple[AuditEntry, ...]


class Dashboard(Service):
    """Read-only views over the store for the web dashboard.

    ``metrics``: the metrics chain to verify (it holds the chain's key, which on a team server
    is each tenant's own).
    """

    def __init__(
        self, store: Store, config: Config, clock: Clock | None, metrics: MetricsService
    ) -> None:
        super().__init__(store, config, clock)
        self.metrics = metrics

    # -- sessions ------------------------------------------------------------------------------
    def sessions(
        self,
        *,
        project: str | None = None,
        status: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[SessionState]:
        """Sessions newest first, of ``project``, in ``status``, started in [since, until)."""
        if status is not None and status not in STATUSES:
            raise ValidationError(f"unknown status {status!r}; use one of {', '.join(STATUSES)}")
        return self.store.list_sessions(
            limit=limit,
            offset=offset,
            project=project,
            any_project=project is None,
            state=status if status != CRASHED else None,
            crashed=True if status == CRASHED else None,
            since=_day_bound(since, "since"),
            until=_day_bound(until, "until"),
        )

    def projects(self) -> list[str]:
        """Every project with a session, the most recently started first (at most 500)."""
        return self.store.session_projects(limit=PROJECT_LIMIT)

    def session(self, session_id: str) -> SessionDetail:
        """A session, its events, checkpoints, snapshots, compactions, chain and metrics."""
        state = self._get(session_id)
        sid = state.session_id
        return SessionDetail(
            session=state,
            events=tuple(self.store.list_session_events(sid, limit=EVENT_LIMIT)),
            checkpoints=tuple(self.store.list_checkpoints(sid)),
            snapshots=tuple(self.store.list_snapshots(sid)),
            compactions=tuple(self.store.list_compaction_events(sid)),
            chain=tuple(self._chain(state)),
            metrics=tuple(self.store.list_metrics(session_id=sid, limit=EVENT_LIMIT)),
        )

    def _get(self, session_id: str) -> SessionState:
        state = self.store.get_session(check_id(session_id))
        if state is None:
            raise NotFoundError(f"no session {session_id!r}; see {command('session list')}")
        return state

    def _chain(self, state: SessionState) -> list[SessionState]:
        """Up to ``CHAIN_DEPTH`` predecessors, ``state``, and its continuations (no metric)."""
        seen = {state.session_id}
        before = self._follow(state, "previous_session_id", seen)
        after = self._follow(state, "continued_by", seen)
        return [*reversed(before), state, *after]

    def _follow(self, state: SessionState, field: str, seen: set[str]) -> list[SessionState]:
        """The sessions one link ``field`` after another leads to from ``state``."""
        found: list[SessionState] = []
        link = getattr(state, field)
        while link and link not in seen and len(found) < CHAIN_DEPTH:
            other = self.store.get_session(link)
            if other is None:
                break
            seen.add(link)
            found.append(other)
            link = getattr(other, field)
        return found

    def change_marker(self) -> str:
        """Changes whenever a session starts, records a turn or ends (cheap: two indexed reads)."""
        newest = self.store.list_sessions(limit=1, any_project=True)
        live = self.store.latest_open_session(any_project=True)
        parts = [
            f"{s.session_id}@{s.updated_at or ''}@{s.last_activity or ''}"
            for s in (*newest, *([live] if live else []))
        ]
        return "|".join(parts)

    # -- next start ----------------------------------------------------------------------------
    def next_start(self, project: str | None, keywords: Sequence[str] = ()) -> NextStart:
        """What a session of ``project`` starting now with ``keywords`` would inherit.

        The same planning as a real start (candidates, scores, pins, tasks, preamble), without
        recovering crashed sessions, opening a session or writing any metric.
        """
        words = context_keywords(display_name(project), None, keywords)
        probe = SessionState("next-start-preview", self.now_iso(), project=project)
        restorer = Restorer(SessionContext(self.store, self.config, self.clock, None))
        plan, candidates = restorer.preview(probe, words)
        chosen = {s.session.session_id for s in plan.scored}
        givers = {s.session_id for s in plan.contributors}
        window = self.config.lookback_days * 24
        rows = [
            Candidate(
                s.session, s, s.session.session_id in givers, _reason(s, chosen, givers, window)
            )
            for s in candidates
        ]
        return NextStart(
            project=project,
            keywords=tuple(words),
            threshold=self.config.relevance_threshold,
            candidates=tuple(rows),
            plan=plan,
            preamble_tokens=estimate_tokens(plan.preamble or ""),
        )

    # -- memory --------------------------------------------------------------------------------
    def memory_history(self, memory_id: str) -> MemoryHistory:
        """The memory, the versions before and after it (by supersession), its audit trail."""
        memory = self.store.get_memory(check_id(memory_id))
        if memory is None:
            raise NotFoundError(f"no memory {memory_id!r}; see {command('memory list')}")
        versions = {memory.id: memory}
        for link in self.store.memory_links(memory.id):
            if link.kind != "supersedes":
                continue
            for other_id in (link.from_id, link.to_id):
                other = versions.get(other_id) or self.store.get_memory(other_id)
                if other is not None:
                    versions[other.id] = other
        ordered = sorted(
            versions.values(), key=lambda m: (m.created_at, m.superseded_by is None, m.id)
        )
        audit = self.store.list_audit(target=memory.id, limit=100)
        return MemoryHistory(memory, tuple(ordered), tuple(audit))

    # -- health --------------------------------------------------------------------------------
    def health(self, *, days: int = 30, check: bool = False) -> Health:
        """Counts, captures per day over ``days``, recent crash recoveries, migrations; with
        ``check``, also the live memories' count, the database's integrity check and the
        metrics chain's verification (each reads a whole table or more)."""
        from cortex.store.migrations import migration_names

        since = to_iso(self.clock.now() - timedelta(days=days))[:10]
        applied = {name for name, _ in self.store.applied_migrations()}
        report = self.metrics.verify() if check else None
        return Health(
            url=self.store.url,
            size_bytes=_file_size(self.store.url),
            sessions=self.store.count_sessions(),
            memories=self.store.count_memories(MemoryFilter(all_projects=True), self.now_iso())
            if check
            else None,
            captures_per_day=tuple(
                _fill_days(self.store.captures_per_day(since), since, self.now())
            ),
            recoveries=tuple(self.store.list_sessions(limit=RECOVERIES, crashed=True)),
            hook_latency=tuple(hook_latency(self.config.home / "hooks")),
            damage=tuple(self.store.check_integrity()) if check else (),
            pending_migrations=tuple(n for n in migration_names() if n not in applied),
            checked=check,
            metrics_ok=report.ok if report else True,
            metrics_checked=report.checked if report else 0,
            metrics_problems=tuple(report.problems) if report else (),
        )

    def now(self) -> datetime:
        return self.clock.now()


def hook_latency(folder: Path) -> list[Latency]:
    """Percentiles per (host, event) of the samples in ``latency.jsonl`` (and its rotated
    predecessor) under ``folder``; lines that do not parse are skipped."""
    samples: dict[tuple[str, str], list[float]] = {}
    for name in (LATENCY_FILE + ".1", LATENCY_FILE):
        try:
            text = (folder / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            try:
                row = json.loads(line)
                key, ms = (str(row["host"]), str(row["event"])), float(row["ms"])
            except (ValueError, TypeError, KeyError):
                continue
            samples.setdefault(key, []).append(ms)
    out = []
    for (host, event), values in sorted(samples.items()):
        values.sort()
        out.append(
            Latency(
                host,
                event,
                len(values),
                _rank(values, 0.5),
                _rank(values, 0.95),
                _rank(values, 0.99),
                values[-1],
            )  # fmt: skip
        )
    return out


def _rank(ordered: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` percentile of ``ordered`` (not empty, ascending)."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _reason(scored: ScoredSession, chosen: set[str], givers: set[str], window: float) -> str:
    """Why a candidate was or was not included in the next start."""
    sid = scored.session.session_id
    if sid in chosen:
        return "included: scored at or above the threshold"
    if sid in givers:
        return "included: holds a CRITICAL pin within the critical-inheritance window"
    if scored.hours_elapsed > window:
        return "left out: ended before the lookback window"
    return "left out: below the threshold, or beyond the most sessions scored"


def _day_bound(value: str | None, name: str) -> str | None:
    """A ``YYYY-MM-DD`` (or full ISO) bound as a comparable UTC timestamp prefix."""
    if not value:
        return None
    try:
        return to_iso(parse_time(value if "T" in value else value + "T00:00:00Z"))
    except ValidationError as exc:
        raise ValidationError(f"{param(name, repr(value))} is not a date; use YYYY-MM-DD") from exc


def _fill_days(
    counts: Sequence[tuple[str, int, int]], since: str, now: datetime
) -> list[tuple[str, int, int]]:
    """One entry per day from ``since`` to today, zeros where nothing was recorded."""
    known = {day: (sessions, events) for day, sessions, events in counts}
    day = parse_time(since + "T00:00:00Z")
    out = []
    while day.date() <= now.date():
        key = day.date().isoformat()
        out.append((key, *known.get(key, (0, 0))))
        day += timedelta(days=1)
    return out


def _file_size(url: str) -> int | None:
    """Bytes of a SQLite database (with its WAL); None for a server database."""
    if "://" in url or url == ":memory:":
        return None
    total = 0
    for suffix in ("", "-wal"):
        try:
            total += os.path.getsize(url + suffix)
        except OSError:
            continue
    return total
