"""The worker: memory-lifecycle jobs on a schedule (``cortex worker``).

Each ``Job`` has a name, an interval (from the settings), an on/off switch (a feature flag) and
a ``run`` over the ``Services``. A pass runs every enabled job whose interval has elapsed since
it last started. Before running a job the worker takes its lease in the store (``claim_job``):
two workers (two machines on one PostgreSQL tenant, or two processes on one SQLite home) never
run the same job at once, and a worker that dies mid-job gives the lease up when it expires.

Built-in jobs: ``close_idle`` (write a checkpoint for, then close, open sessions idle for
``session_idle_close_minutes`` whose lease lapsed; each ends at its last activity),
``archive`` (sessions ended more than ``archive_after_days`` ago to cold storage),
``consolidate`` (a consolidation run; shadow mode while ``consolidation_shadow`` is true) and
``orphan_sweep`` (the continuity protocol's sweep: a session is suspended, resumable, within a
pass of its lease lapsing; ``close_idle`` ends it for good only after the long idle time).

Adding a job: build a ``Job`` and pass it to ``register_job`` (at import time of the module
that defines it), or add it to ``BUILTIN_JOBS``; ``Worker`` runs every registered job.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from cortex.clock import parse_time, to_iso
from cortex.config import Config
from cortex.core.hygiene import JobState
from cortex.errors import BusyError, CortexError, ValidationError
from cortex.logs import getLogger
from cortex.services.ids import new_uuid

if TYPE_CHECKING:
    from cortex.core.models import SessionState
    from cortex.services.app import Services
    from cortex.services.hosting import ServiceHost

log = getLogger("cortex")

JOB_LEASE_SECONDS = 1800
"""How long a claimed job is held: a worker that dies mid-job frees it after this."""
OK, FAILED, SKIPPED, BUSY = "ok", "failed", "not_due", "busy"


@dataclass(frozen=True)
class Job:
    """A scheduled job: ``run`` returns a small JSON-ready summary of what it did."""

    name: str
    interval_seconds: Callable[[Config], float]
    run: Callable[[Services], dict[str, Any]]
    enabled: Callable[[Config], bool] = lambda config: True


@dataclass(frozen=True)
class JobRun:
    """One job in one pass: ``ok``, ``failed``, ``not_due``, ``busy`` (another worker holds
    it) or ``disabled``."""

    name: str
    status: str
    detail: dict[str, Any]
    at: str
    tenant: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"job": self.name, "status": self.status, "detail": self.detail, "at": self.at}
        return out | ({"tenant": self.tenant} if self.tenant is not None else {})


def close_idle_sessions(app: Services) -> dict[str, Any]:
    """Checkpoint, then close, every open session idle past ``session_idle_close_minutes``
    whose lease lapsed (a live neighbour is never closed). A session another transaction
    holds past the lock timeout (``BusyError``) is passed over until the next pass, said in
    one log line and counted as ``busy``; the others are closed."""
    now = app.clock.now()
    idle_before = to_iso(now - timedelta(minutes=app.config.session_idle_close_minutes))
    closed: list[str] = []
    busy = 0
    for listed in app.sessions.open_sessions():
        if _idle_since(app, listed, idle_before) is None:
            continue
        try:
            idle = _close_idle(app, listed.session_id, idle_before)
        except BusyError:
            log.warning(
                "worker close_idle: session %s is held by another transaction past the lock "
                "timeout; passed over until the next pass",
                listed.session_id,
            )
            busy += 1
            continue
        if idle is None:
            continue
        app.metrics.writer.emit("session_idle_closed", listed.session_id,
                                {"idle_minutes": idle}, app.now_iso())  # fmt: skip
        closed.append(listed.session_id)
    return {"closed": len(closed), "session_ids": closed} | ({"busy": busy} if busy else {})


def _close_idle(app: Services, session_id: str, idle_before: str) -> int | None:
    """End session ``session_id`` if it is still idle since before ``idle_before``, with an
    interrupted checkpoint; its idle minutes, or None when it is not to be closed."""
    with app.sessions.transaction():
        # Read again, held until the end commits (on PostgreSQL the row is locked; SQLite
        # has one writer): a turn or pin that came since the listing, or is being written
        # now, keeps the session open instead of being ended at its old last activity.
        state = app.sessions.get_session(session_id)
        last = None if state is None else _idle_since(app, state, idle_before)
        if state is None or last is None:
            return None
        idle = round((app.clock.now() - parse_time(last)).total_seconds() / 60)
        summary = f"closed by the worker after {idle} idle minutes"
        app.compaction.checkpoint(session_id, type="interrupted", summary=summary)
        app.sessions.end_idle_session(session_id, last)
    return idle


def _idle_since(app: Services, state: SessionState, idle_before: str) -> str | None:
    """The last activity of ``state`` when ``close_idle`` may end it (open, idle since before
    ``idle_before``, its lease lapsed), else None."""
    last = state.last_activity or state.updated_at or state.start_time
    if not state.is_open or last >= idle_before or not app.sessions.is_lapsed(state):
        return None
    return last


def archive_old_sessions(app: Services) -> dict[str, Any]:
    """Sessions ended more than ``archive_after_days`` ago to JSON cold storage."""
    report = app.sessions.archive(app.config.archive_after_days)
    return {"archived": report.archived}


def consolidate_memories(app: Services) -> dict[str, Any]:
    """One consolidation run, in shadow mode while ``consolidation_shadow`` is true."""
    report = app.consolidation.run(dry_run=app.config.consolidation_shadow, actor="worker")
    counts = {k: v for k, v in report.run.to_dict().items() if k.endswith("_count")}
    return {"run_id": report.run.id, "mode": report.run.mode, **counts}


def sweep_orphans(app: Services) -> dict[str, Any]:
    """The continuity protocol's orphan sweep: every open session whose lease lapsed is
    suspended with an interrupted checkpoint and an incident, within one pass of its lease
    lapsing (``close_idle`` only ends sessions idle far longer, 120 minutes by default)."""
    return app.protocol.sweep_orphans().to_dict()


BUILTIN_JOBS = (
    Job(
        "close_idle",
        lambda c: float(c.worker_interval_seconds),
        close_idle_sessions,
        lambda c: c.memory_session_enabled,
    ),
    Job("archive", lambda c: c.worker_archive_hours * 3600, archive_old_sessions),
    Job(
        "consolidate",
        lambda c: c.worker_consolidate_hours * 3600,
        consolidate_memories,
        lambda c: c.memory_consolidation_enabled,
    ),
    Job("orphan_sweep", lambda c: float(c.worker_interval_seconds), sweep_orphans),
)
_REGISTERED: dict[str, Job] = {job.name: job for job in BUILTIN_JOBS}


def register_job(job: Job) -> Job:
    """Add ``job`` to what every ``Worker`` runs (a job of the same name is replaced)."""
    if not job.name or not all(c.isalnum() or c in "_-" for c in job.name):
        raise ValidationError(f"job name {job.name!r} is not a name; use letters, digits, - or _")
    _REGISTERED[job.name] = job
    return job


def unregister_job(name: str) -> None:
    """Stop running job ``name`` (nothing happens if there is none)."""
    _REGISTERED.pop(name, None)


def registered_jobs() -> list[Job]:
    """Every registered job, in registration order."""
    return list(_REGISTERED.values())


def worker_owner() -> str:
    """A lease owner name unique to this process: host, pid and a random part."""
    return f"{os.uname().nodename}:{os.getpid()}:{new_uuid()[:8]}"


def loop(
    run_pass: Callable[..., list[JobRun]],
    interval_seconds: float,
    on_pass: Callable[[list[JobRun]], None] | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Pass after pass, ``interval_seconds`` apart, until ``stop`` is set."""
    stop = stop or threading.Event()
    while not stop.is_set():
        runs = run_pass()
        if on_pass is not None:
            on_pass(runs)
        stop.wait(interval_seconds)


def job_states(app: Services) -> list[JobState]:
    """Each job's lease and last outcome, as the store keeps them."""
    return app.store.list_jobs()


class Worker:
    """Runs due jobs, each under its lease; ``run_once`` is one pass, ``run_forever`` loops."""

    def __init__(
        self, app: Services, jobs: Sequence[Job] | None = None, owner: str | None = None
    ) -> None:
        self.app = app
        self.jobs = list(jobs) if jobs is not None else registered_jobs()
        self.owner = owner or worker_owner()

    def _due(self, job: Job, last_started: str | None, force: bool) -> bool:
        if force or last_started is None:
            return True
        elapsed = (self.app.clock.now() - parse_time(last_started)).total_seconds()
        return elapsed >= job.interval_seconds(self.app.config)

    def run_once(self, *, force: bool = False) -> list[JobRun]:
        """One pass: every enabled job that is due (every enabled job with ``force``)."""
        started = {s.name: s.last_started_at for s in self.app.store.list_jobs()}
        return [self._run(job, started.get(job.name), force) for job in self.jobs]

    def _run(self, job: Job, last_started: str | None, force: bool) -> JobRun:
        now = self.app.clock.now()
        at = to_iso(now)
        if not job.enabled(self.app.config):
            return JobRun(job.name, "disabled", {}, at)
        if not self._due(job, last_started, force):
            return JobRun(job.name, SKIPPED, {"last_started_at": last_started}, at)
        until = to_iso(now + timedelta(seconds=JOB_LEASE_SECONDS))
        if not self.app.store.claim_job(job.name, self.owner, at, until):
            return JobRun(job.name, BUSY, {}, at)
        try:
            detail, status = job.run(self.app), OK
        except CortexError as exc:  # a job's failure is logged and recorded; the next runs
            detail, status = {"error": str(exc)}, FAILED
            log.warning("worker job %s failed: %s", job.name, exc)
        except Exception as exc:
            detail, status = {"error": f"{type(exc).__name__}: {exc}"}, FAILED
            if self.app.config.raise_errors:
                self.app.store.finish_job(job.name, self.owner, at, status, detail)
                raise
            log.exception("worker job %s failed", job.name)
        done = to_iso(self.app.clock.now())
        self.app.store.finish_job(job.name, self.owner, done, status, detail)
        return JobRun(job.name, status, detail, done)

    def run_forever(
        self,
        interval_seconds: float,
        *,
        stop: threading.Event | None = None,
        on_pass: Callable[[list[JobRun]], None] | None = None,
    ) -> None:
        """Pass after pass, ``interval_seconds`` apart, until ``stop`` is set."""
        loop(self.run_once, interval_seconds, on_pass, stop)


def hosted_pass(
    host: ServiceHost,
    jobs: Sequence[Job],
    owner: str,
    *,
    tenants: Sequence[str] = (),
    force: bool = False,
) -> list[JobRun]:
    """One pass over a team server's tenants (``tenants``, else every unrevoked one), each
    with its own services, settings and leases. A tenant that cannot be served (its settings
    are invalid) gets each job failed with the error; the other tenants' jobs still run."""
    if not tenants:
        with host.registry() as registry:
            tenants = [t.tenant for t in registry.tenants.list_tenants() if t.revoked_at is None]
    runs: list[JobRun] = []
    for tenant in tenants:
        try:
            with host.open(tenant) as app:
                done = Worker(app, jobs, owner).run_once(force=force)
        except CortexError as exc:  # its jobs' lines say it, pass after pass
            at = to_iso(host.clock.now())
            done = [JobRun(job.name, FAILED, {"error": str(exc)}, at) for job in jobs]
        runs += [replace(r, tenant=tenant) for r in done]
    return runs
