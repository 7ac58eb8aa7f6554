"""The worker: idle sessions closed, old ones archived, consolidation scheduled, each job under
a lease no second worker can take, and ``cortex worker`` end to end."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import T0, cortex, ok
from cortex.clock import FixedClock, to_iso
from cortex.config import Config
from cortex.errors import StorageError, ValidationError
from cortex.services.app import Services
from cortex.services.worker import (
    BUILTIN_JOBS,
    Job,
    Worker,
    register_job,
    registered_jobs,
    unregister_job,
)


def statuses(runs: list[Any]) -> dict[str, str]:
    return {r.name: r.status for r in runs}


@pytest.fixture
def app(make_config: Callable[..., Config], clock: FixedClock) -> Iterator[Services]:
    with Services.open(make_config(lease_seconds=60), clock) as opened:
        yield opened


def test_first_pass_runs_every_job_then_each_waits_for_its_interval(
    app: Services, clock: FixedClock
) -> None:
    worker = Worker(app, BUILTIN_JOBS)
    assert statuses(worker.run_once()) == {"close_idle": "ok", "archive": "ok",
                                           "consolidate": "ok", "orphan_sweep": "ok"}  # fmt: skip
    assert set(statuses(worker.run_once()).values()) == {"not_due"}
    clock.advance(seconds=61)  # close_idle runs every worker_interval_seconds (60)
    assert statuses(worker.run_once()) == {"close_idle": "ok", "archive": "not_due",
                                           "consolidate": "not_due",
                                           "orphan_sweep": "ok"}  # fmt: skip
    clock.advance(hours=6)
    assert statuses(worker.run_once())["consolidate"] == "ok"
    assert statuses(worker.run_once(force=True)) == dict.fromkeys(statuses(worker.run_once()), "ok")


def test_close_idle_checkpoints_and_closes_only_lapsed_idle_sessions(
    app: Services, clock: FixedClock
) -> None:
    idle = app.sessions.on_session_start(project="api").session_id
    app.events.append(idle, "working on the auth refactor")
    live = app.sessions.on_session_start(project="web").session_id
    clock.advance(hours=3)
    app.sessions.record(live, text="still typing")  # its lease is fresh: never closed
    (run,) = Worker(app, [BUILTIN_JOBS[0]]).run_once()
    assert (run.status, run.detail["session_ids"]) == ("ok", [idle])
    closed = app.sessions.get_session(idle)
    assert closed is not None and not closed.is_open
    # It ended when it went quiet, not three hours later when the worker noticed: a worker
    # pass must not make an abandoned session the most recent one at the next restore.
    assert closed.end_time == closed.last_activity < still_time(app, live)
    checkpoint = app.compaction.latest_checkpoint(idle)
    assert checkpoint is not None and checkpoint.type == "interrupted"
    assert "180 idle minutes" in checkpoint.summary
    still = app.sessions.get_session(live)
    assert still is not None and still.is_open
    (metric,) = app.metrics.list(event="session_idle_closed")
    assert (metric.session_id, metric.payload) == (idle, {"idle_minutes": 180})


def still_time(app: Services, session_id: str) -> str:
    state = app.sessions.get_session(session_id)
    assert state is not None and state.last_activity is not None
    return state.last_activity


def test_archive_and_consolidate_jobs(
    make_config: Callable[..., Config], clock: FixedClock
) -> None:
    with Services.open(make_config(consolidation_shadow=False), clock) as app:
        sid = app.sessions.on_session_start(project="api").session_id
        app.sessions.on_session_end(sid)
        app.memory.add("User prefers tabs")
        app.memory.add("user prefers tabs!")
        clock.advance(hours=24 * 40)
        runs = {r.name: r for r in Worker(app, BUILTIN_JOBS[1:]).run_once()}
        assert runs["archive"].detail == {"archived": 1}
        assert (runs["consolidate"].detail["mode"], runs["consolidate"].detail["merged_count"]) == (
            "apply", 1,
        )  # fmt: skip
        assert app.sessions.get_session(sid) is None  # now in the archive


def test_scheduled_consolidation_is_shadow_by_default(app: Services) -> None:
    app.memory.add("User prefers tabs")
    app.memory.add("user prefers tabs!")
    (run,) = Worker(app, [BUILTIN_JOBS[2]]).run_once()
    assert (run.detail["mode"], run.detail["merged_count"]) == ("shadow", 1)
    assert len(app.memory.list()) == 2


def test_a_job_another_worker_holds_is_not_run_twice(app: Services, clock: FixedClock) -> None:
    first, second = Worker(app, BUILTIN_JOBS, owner="a"), Worker(app, BUILTIN_JOBS, owner="b")
    now = app.now_iso()
    assert app.store.claim_job("archive", "a", now, "2999-01-01T00:00:00Z")  # a is mid-job
    assert statuses(second.run_once())["archive"] == "not_due"  # a started it just now
    assert statuses(second.run_once(force=True))["archive"] == "busy"  # and still holds it
    assert app.store.finish_job("archive", "a", now, "ok", {})
    clock.advance(hours=25)
    assert statuses(second.run_once())["archive"] == "ok"
    assert statuses(first.run_once())["archive"] == "not_due"


def test_a_failing_job_is_recorded_and_frees_its_lease(app: Services) -> None:
    def broken(_: Services) -> dict[str, Any]:
        raise StorageError("disk full; free space")

    (run,) = Worker(app, [Job("broken", lambda c: 60.0, broken)]).run_once()
    assert (run.status, run.detail) == ("failed", {"error": "disk full; free space"})
    (state,) = app.store.list_jobs()
    assert (state.last_status, state.locked_until) == ("failed", None)


def test_flags_switch_jobs_off(make_config: Callable[..., Config], clock: FixedClock) -> None:
    config = make_config(memory_session_enabled=False, memory_consolidation_enabled=False)
    with Services.open(config, clock) as app:
        assert statuses(Worker(app, BUILTIN_JOBS).run_once()) == {
            "close_idle": "disabled", "archive": "ok", "consolidate": "disabled",
            "orphan_sweep": "ok",
        }  # fmt: skip


def test_register_job_adds_to_every_worker(app: Services) -> None:
    seen: list[str] = []
    job = register_job(Job("orphan_sweep_test", lambda c: 60.0, lambda a: {"swept": len(seen)}))
    try:
        assert job in registered_jobs()
        runs = {r.name: r for r in Worker(app).run_once()}
        assert runs["orphan_sweep_test"].detail == {"swept": 0}
    finally:
        unregister_job(job.name)
    assert job not in registered_jobs()
    for bad in ("", "a b", "../x"):
        with pytest.raises(ValidationError):
            register_job(Job(bad, lambda c: 1.0, lambda a: {}))


def test_cli_worker_once_status_and_errors(home: Path) -> None:
    ok(cortex(home, "memory", "add", "User prefers tabs"))
    ok(cortex(home, "memory", "add", "user prefers tabs."))
    runs = json.loads(ok(cortex(home, "--json", "worker", "--once")))
    assert {r["job"]: r["status"] for r in runs} == {"close_idle": "ok", "archive": "ok",
                                                      "consolidate": "ok",
                                                      "orphan_sweep": "ok"}  # fmt: skip
    again = ok(cortex(home, "worker", "--once", "--job", "archive"))
    assert again.split()[1:3] == ["archive", "not_due:"]
    status = json.loads(ok(cortex(home, "--json", "worker", "--status")))
    assert [s["name"] for s in status] == ["archive", "close_idle", "consolidate", "orphan_sweep"]
    assert all(s["locked_until"] is None for s in status)
    bad = cortex(home, "worker", "--once", "--job", "nope")
    assert bad.returncode == 2
    assert bad.stderr == (
        "error: unknown job 'nope'; use one of close_idle, archive, consolidate, orphan_sweep\n"
    )
    listed = json.loads(ok(cortex(home, "--json", "consolidate", "list")))
    assert [r["mode"] for r in listed] == ["shadow"]
    local = cortex(home, "worker", "--once", "--lock-timeout", "2")
    assert (local.returncode, local.stderr) == (2, (
        "error: --lock-timeout needs --db (a local home's database has no such wait); give the "
        "team server's database, or leave --lock-timeout out\n"))  # fmt: skip
    assert ok(cortex(home, "worker", "--once", env={"CORTEX_WORKER_LOCK_TIMEOUT": "2"}))
    for given in (["--lock-timeout", "nan"], ["--lock-timeout", "0"]):
        refused = cortex(home, "worker", "--once", "--db", "postgresql://nowhere/x", *given)
        assert refused.returncode == 2 and "--lock-timeout " in refused.stderr, refused.stderr
        assert "is not a number of seconds in 0.05-3600" in refused.stderr
    env = {"CORTEX_WORKER_LOCK_TIMEOUT": "ten"}
    refused = cortex(home, "worker", "--once", "--db", "postgresql://nowhere/x", env=env)
    assert refused.stderr == (
        "error: CORTEX_WORKER_LOCK_TIMEOUT='ten' is not a number of seconds in 0.05-3600; fix "
        "it, or pass `cortex worker --lock-timeout SECONDS`\n"
    )


def test_hosted_pass_works_for_each_tenant_apart(pg_url: str, tmp_path: Path) -> None:
    import secrets

    from cortex.services.hosting import ServiceHost
    from cortex.services.worker import hosted_pass

    host = ServiceHost(pg_url, tmp_path / "server", secret="worker-test-secret-0123456789abcdef")
    try:
        names = [f"w-{secrets.token_hex(4)}" for _ in range(2)]
        with host.registry() as registry:
            for name in names:
                registry.tenants.create_tenant(name)
        for n, name in enumerate(names):
            with host.open(name) as app:
                for _ in range(n + 2):
                    app.memory.add("User prefers tabs")
        runs = hosted_pass(host, BUILTIN_JOBS[2:3], "owner-1", tenants=names)
        assert [(r.tenant, r.status) for r in runs] == [(names[0], "ok"), (names[1], "ok")]
        assert [r.detail["input_count"] for r in runs] == [2, 3]  # each its own memories
        assert [r.detail["mode"] for r in runs] == ["shadow", "shadow"]
        again = hosted_pass(host, BUILTIN_JOBS[2:3], "owner-2", tenants=names)
        assert [r.status for r in again] == ["not_due", "not_due"]
        assert all("tenant" in r.to_dict() for r in again)
    finally:
        host.close()


def test_worker_db_lines_name_their_tenant_and_one_invalid_tenant_stops_no_other(
    pg_url: str, tmp_path: Path
) -> None:
    """``cortex worker --db`` over two tenants, the real CLI: each job line and JSON record
    names its tenant, and a tenant whose settings file is invalid gets its jobs failed with
    the error while the other's run."""
    import secrets

    from cortex.services.hosting import ServiceHost

    home = tmp_path / "home"
    good, bad = (f"w-{secrets.token_hex(4)}" for _ in range(2))
    host = ServiceHost(pg_url, home / "server")
    try:
        with host.registry() as registry:
            for name in (good, bad):
                registry.tenants.create_tenant(name)
    finally:
        host.close()
    settings = home / "server" / "tenants" / bad / "config.toml"
    settings.parent.mkdir(parents=True)
    settings.write_text("session_idle_close_minutes = 1\n")
    args = ["worker", "--db", pg_url, "--tenant", good, "--tenant", bad, "--once", "--force"]
    env = {"CORTEX_SERVER_SECRET": "worker-test-secret-0123456789abcdef"}
    lines = ok(cortex(home, *args, "--job", "archive", env=env)).splitlines()
    assert [line.split()[1:4] for line in lines] == [
        [good, "archive", "ok:"],
        [bad, "archive", "failed:"],
    ]
    assert f"settings for tenant {bad!r} are invalid (session_idle_close_minutes=1" in lines[1]
    runs = json.loads(ok(cortex(home, "--json", *args, "--job", "archive", env=env)))
    assert [(r["tenant"], r["job"], r["status"]) for r in runs] == [
        (good, "archive", "ok"),
        (bad, "archive", "failed"),
    ]


def test_the_orphan_sweep_suspends_a_crashed_session_within_a_pass(
    app: Services, clock: FixedClock
) -> None:
    crashed = app.sessions.on_session_start(project="radio").session_id
    clock.advance(seconds=app.config.lease_seconds + 30)  # its lease lapsed, no one ended it
    (run,) = Worker(app, [BUILTIN_JOBS[-1]]).run_once()
    assert (run.name, run.status, run.detail["session_ids"]) == ("orphan_sweep", "ok", [crashed])
    state = app.sessions.get_session(crashed)
    assert state is not None and state.state == "SUSPENDED"
    assert [c.type for c in app.compaction.checkpoints(crashed)] == ["interrupted"]


def test_close_idle_leaves_a_session_whose_turn_is_being_written(
    pg_url: str, tmp_path: Path, clock: FixedClock
) -> None:
    """The worker lists the session idle, but a turn of it is being committed: the worker
    waits for that turn and leaves the session open, instead of ending it at its old last
    activity (and writing back a copy without the turn)."""
    import secrets
    import threading

    from cortex.services.hosting import ServiceHost
    from cortex.services.worker import close_idle_sessions
    from pg_helpers import waiting_or_done

    host = ServiceHost(pg_url, tmp_path / "server", clock=clock)
    try:
        tenant = f"w-{secrets.token_hex(4)}"
        with host.registry() as registry:
            registry.tenants.create_tenant(tenant)
        with host.open(tenant) as app:
            sid = app.sessions.on_session_start(project="api").session_id
        clock.advance(hours=3)
        reports: list[dict[str, Any]] = []
        with host.open(tenant) as app, host.open(tenant) as worker_app:
            with app.sessions.transaction():
                app.sessions.record(sid, text="back at the keyboard")
                worker = threading.Thread(
                    target=lambda: reports.append(close_idle_sessions(worker_app))
                )
                worker.start()
                assert waiting_or_done(worker, pg_url)  # held until the turn commits
            worker.join(10)
            state = app.sessions.get_session(sid)
            assert reports == [{"closed": 0, "session_ids": []}]
            assert (
                state is not None and state.is_open and state.last_activity == to_iso(clock.now())
            )
            assert app.compaction.checkpoints(sid) == []
    finally:
        host.close()


def test_worker_db_passes_over_a_held_session_within_its_lock_timeout(
    pg_url: str, tmp_path: Path
) -> None:
    """A session another transaction holds (a stuck request, an operator's open ``psql``)
    keeps ``cortex worker --db`` waiting no longer than ``--lock-timeout``: the pass ends,
    that session is passed over with one log line and the others are handled; the next pass
    handles it once it is let go."""
    import secrets
    import threading
    import time

    from cortex.services.hosting import ServiceHost
    from pg_helpers import Holder

    home, secret = tmp_path / "home", "worker-test-secret-0123456789abcdef"
    earlier = FixedClock(FixedClock(T0).now() - timedelta(days=40))  # the worker's clock: T0
    host = ServiceHost(pg_url, home / "server", clock=earlier, secret=secret)
    tenant = f"w-{secrets.token_hex(4)}"
    try:
        with host.registry() as registry:
            registry.tenants.create_tenant(tenant)
        with host.open(tenant) as app:  # two sessions ended 40 days ago, to archive
            old = [app.sessions.on_session_end(app.sessions.on_session_start(project=p).session_id)
                   for p in "xy"]  # fmt: skip
            earlier.advance(hours=40 * 24 - 3)  # three sessions idle for 3 hours, to close
            held, *others = (app.sessions.on_session_start(project=p).session_id for p in "abc")
    finally:
        host.close()
    args = ["--json", "worker", "--db", pg_url, "--tenant", tenant, "--once", "--force"]
    env = {"CORTEX_SERVER_SECRET": secret}

    def close_idle(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
        runs = {r["job"]: r for r in json.loads(ok(done))}
        assert {r["status"] for r in runs.values()} == {"ok"}, runs
        archived.append(runs["archive"]["detail"]["archived"])
        return dict(runs["close_idle"]["detail"])

    archived: list[int] = []
    holder, old_holder = Holder(pg_url, tenant, held), Holder(pg_url, tenant, old[0].session_id)
    try:
        finished: list[subprocess.CompletedProcess[str]] = []
        worker = threading.Thread(
            target=lambda: finished.append(cortex(home, *args, "--lock-timeout", "0.3", env=env)),
            daemon=True,
        )
        began = time.monotonic()
        worker.start()
        worker.join(20)  # with no bound it would wait until the holder lets go
        waited = time.monotonic() - began
        assert finished, "the worker waited for the held session past its bound"
    finally:
        holder.release()
        old_holder.release()
        worker.join(60)
    first = close_idle(finished[0])
    first["session_ids"].sort()
    assert first == {"closed": 2, "session_ids": sorted(others), "busy": 1}, waited
    passed_over = [line for line in finished[0].stderr.splitlines() if held in line]
    assert passed_over == [
        f"cortex: worker close_idle: session {held} is held by another transaction past the lock "
        "timeout; passed over until the next pass"
    ], finished[0].stderr
    assert "Traceback" not in finished[0].stderr and "discarding" not in finished[0].stderr
    assert close_idle(cortex(home, *args, env=env)) == {"closed": 1, "session_ids": [held]}
    assert archived == [1, 1]  # the held one of the two ended sessions, at the second pass


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_worker_db_runs_at_the_time_now_gives(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``cortex --now T worker --db ...`` works at T, as ``cortex --now T worker`` does on a
    home: which sessions are idle, which jobs are due and the time each run records all
    follow the fixed clock, on a SQLite server database and on PostgreSQL."""
    import secrets

    from cortex.services.hosting import ServiceHost

    home, secret = tmp_path / "home", "worker-test-secret-0123456789abcdef"
    if backend == "postgres":
        url, tenant = request.getfixturevalue("pg_url"), f"w-{secrets.token_hex(4)}"
    else:
        url, tenant = str(tmp_path / "server.db"), "default"
    host = ServiceHost(url, home / "server", clock=FixedClock(T0), secret=secret)
    try:
        if backend == "postgres":
            with host.registry() as registry:
                registry.tenants.create_tenant(tenant)
        with host.open(tenant) as app:
            sid = app.sessions.on_session_start(project="api").session_id
    finally:
        host.close()
    env = {"CORTEX_SERVER_SECRET": secret}
    args = ["--json", "worker", "--db", url, "--tenant", tenant, "--once", "--job", "close_idle"]

    def close_idle(now: str) -> tuple[str, str, dict[str, Any]]:
        (run,) = json.loads(ok(cortex(home, "--now", now, *args, env=env)))
        return run["at"], run["status"], run["detail"]

    # Half an hour on, the session is not idle yet (whatever the system clock says today); a
    # minute later the job is not due again; three hours on it closes the session.
    half_hour, a_minute_later = "2026-02-16T09:30:00Z", "2026-02-16T09:30:30Z"
    assert close_idle(half_hour) == (
        "2026-02-16T09:30:00.000000Z", "ok", {"closed": 0, "session_ids": []}
    )  # fmt: skip
    assert close_idle(a_minute_later)[1] == "not_due"
    assert close_idle("2026-02-16T12:00:00Z") == (
        "2026-02-16T12:00:00.000000Z", "ok", {"closed": 1, "session_ids": [sid]}
    )  # fmt: skip
