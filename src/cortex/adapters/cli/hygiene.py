"""CLI commands of memory hygiene: ``consolidate run|list``, ``worker`` and ``procedure``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from click.core import ParameterSource

from cortex.adapters.cli.runtime import (
    CONTEXT,
    Runtime,
    UsageLine,
    clean,
    database,
    number_option,
    pass_rt,
    project_option,
    server_host,
    user_option,
)
from cortex.core.hygiene import ConsolidationRun, Procedure
from cortex.core.server_numbers import DB_ENV, SECRET_ENV, WORKER_LOCK_TIMEOUT

if TYPE_CHECKING:
    from collections.abc import Callable

    from cortex.services.worker import Job, JobRun


def format_run(run: ConsolidationRun) -> str:
    where = run.project or "all projects"
    return (
        f"{run.id}  {run.mode:<6} {run.created_at}  {where}: read {run.input_count}, "
        f"candidates {run.candidate_count}, promoted {run.promoted_count}, merged "
        f"{run.merged_count}, superseded {run.superseded_count}, conflicts {run.conflicted_count}"
    )


@click.group(context_settings=CONTEXT)
def consolidate() -> None:
    """Consolidate memories: merge duplicates, let newer explicit truths supersede older ones,
    link conflicting ones, promote facts stated in sessions.

    \b
    Example:
      cortex consolidate run --dry-run
    """


@consolidate.command("run", context_settings=CONTEXT)
@click.option("--dry-run", is_flag=True, help="Shadow mode: report and record, change nothing.")
@project_option("Only this project's memories plus global ones.", "every project")
@user_option("Only this user's memories plus shared ones.", "every user's memories")
@click.option("--no-extract", is_flag=True, help="Skip candidate extraction from sessions.")
@pass_rt
def consolidate_run(
    rt: Runtime, dry_run: bool, project: str | None, user_id: str | None, no_extract: bool
) -> None:
    """Run one consolidation (every change audited; the run is recorded either way).

    \b
    Examples:
      cortex consolidate run --dry-run          # what would change
      cortex consolidate run --project api      # apply it
    """
    report = rt.services.consolidation.run(
        dry_run=dry_run, project=clean(project), user_id=user_id, extract=not no_extract,
        actor="cli",
    )  # fmt: skip

    def text() -> str:
        lines = [format_run(report.run)]
        lines += [f"- {a.kind} {a.other_id or ''} -> {a.keep_id}: {a.reason}"
                  for a in report.actions]  # fmt: skip
        if not report.applied and report.actions:
            lines.append("shadow run: nothing changed; run without --dry-run to apply")
        return "\n".join(lines)

    rt.emit(report.to_dict(), text)


@consolidate.command("list", context_settings=CONTEXT)
@click.option("--limit", default=20, show_default=True, type=int)
@pass_rt
def consolidate_list(rt: Runtime, limit: int) -> None:
    """List past consolidation runs (the audit rows), newest first.

    \b
    Example:
      cortex consolidate list --limit 5
    """
    runs = rt.services.consolidation.runs(limit=limit)
    rt.emit([r.to_dict() for r in runs],
            lambda: "\n".join(format_run(r) for r in runs) or "no consolidation runs")  # fmt: skip


def format_procedure(p: Procedure) -> str:
    where = p.project or "global"
    head = f"{p.id}  {p.procedure_key}  {where}  used {p.usage_count}x"
    return head + "\n" + "\n".join(f"    {line}" for line in p.text().splitlines())


@click.group(context_settings=CONTEXT)
def procedure() -> None:
    """Procedural memory: reusable workflows, ranked first in context when the task matches.

    \b
    Example:
      cortex procedure add "Release a version" "bump the version" "tag it" "push the tag"
    """


@procedure.command("add", context_settings=CONTEXT)
@click.argument("title")
@click.argument("steps", nargs=-1, required=True)
@click.option("--key", "procedure_key", help="Stable key (default: a slug of the title).")
@project_option("Project the procedure belongs to (default: global).", "a global procedure")
@user_option("User the procedure belongs to.", "a procedure of no user")
@pass_rt
def procedure_add(
    rt: Runtime,
    title: str,
    steps: tuple[str, ...],
    procedure_key: str | None,
    project: str | None,
    user_id: str | None,
) -> None:
    """Save a procedure (TITLE, then its STEPS in order); the same key again rewrites it.

    \b
    Example:
      cortex procedure add "Deploy api" "make test" "make deploy ENV=prod" --project api
    """
    saved = rt.services.procedures.add(
        clean(title) or "", [clean(s) or "" for s in steps], procedure_key=clean(procedure_key),
        project=clean(project), user_id=user_id, actor="cli",
    )  # fmt: skip
    rt.emit(saved.to_dict(), f"saved procedure {saved.id} ({saved.procedure_key})")


@procedure.command("list", context_settings=CONTEXT)
@project_option("This project's procedures plus global ones.", "global procedures only")
@user_option("This user's procedures plus shared ones.", "every user's procedures")
@click.option("--limit", default=50, show_default=True, type=int)
@pass_rt
def procedure_list(rt: Runtime, project: str | None, user_id: str | None, limit: int) -> None:
    """List procedures, most used first.

    \b
    Example:
      cortex procedure list --project api
    """
    found = rt.services.procedures.list(project=clean(project), user_id=user_id, limit=limit)
    rt.emit([p.to_dict() for p in found],
            lambda: "\n".join(format_procedure(p) for p in found) or "no procedures")  # fmt: skip


@procedure.command("use", context_settings=CONTEXT)
@click.argument("procedure_id")
@pass_rt
def procedure_use(rt: Runtime, procedure_id: str) -> None:
    """Count one use of a procedure (used ones rank higher).

    \b
    Example:
      cortex procedure use 3f2a9c1e-...
    """
    used = rt.services.procedures.use(procedure_id, actor="cli")
    rt.emit(used.to_dict(), f"{used.procedure_key}: used {used.usage_count} times")


@procedure.command("promote", context_settings=CONTEXT)
@click.argument("session_id")
@click.option("--title", help="Title (default: the session's task or first request).")
@click.option("--key", "procedure_key", help="Stable key (default: a slug of the title).")
@pass_rt
def procedure_promote(
    rt: Runtime, session_id: str, title: str | None, procedure_key: str | None
) -> None:
    """Make a completed session (ended, no pending task) a procedure: its requests are the steps.

    \b
    Example:
      cortex procedure promote 3f2a9c1e-... --title "Rotate the API keys"
    """
    saved = rt.services.procedures.promote(
        session_id, title=clean(title), procedure_key=clean(procedure_key), actor="cli"
    )
    rt.emit(saved.to_dict(), lambda: format_procedure(saved))


@procedure.command("forget", context_settings=CONTEXT)
@click.argument("procedure_id")
@pass_rt
def procedure_forget(rt: Runtime, procedure_id: str) -> None:
    """Forget a procedure (the row stays for the audit trail).

    \b
    Example:
      cortex procedure forget 3f2a9c1e-...
    """
    gone = rt.services.procedures.forget(procedure_id, actor="cli")
    rt.emit(gone.to_dict(), f"forgot procedure {gone.id}")


def register(group: click.Group) -> None:
    """Add ``consolidate``, ``worker`` and ``procedure`` to the CLI."""
    group.add_command(consolidate)
    group.add_command(worker)
    group.add_command(procedure)


@click.command(context_settings=CONTEXT)
@click.option("--once", is_flag=True, help="One pass, then exit (for cron or a timer unit).")
@click.option(
    "--interval",
    type=click.IntRange(1, 86400),
    help="Seconds between passes (default: the worker_interval_seconds setting).",
)
@click.option("--job", "only", multiple=True, help="Run only this job (repeatable).")
@click.option("--force", is_flag=True, help="Run the jobs now even if they are not due.")
@click.option("--status", is_flag=True, help="Show each job's last run and lease, run nothing.")
@click.option(
    "--db",
    "db_url",
    envvar=DB_ENV,
    show_envvar=True,
    callback=database,
    help="A team server's database (postgresql://...): work for its tenants.",
)
@click.option(
    "--tenant",
    "tenants",
    multiple=True,
    help="With --db: only this tenant (repeatable; default: every unrevoked one).",
)
@number_option(WORKER_LOCK_TIMEOUT, "With --db: how long a job waits for a session another "
               "request or transaction holds, then passes over it until the next pass")  # fmt: skip
@pass_rt
def worker(
    rt: Runtime,
    once: bool,
    interval: int | None,
    only: tuple[str, ...],
    force: bool,
    status: bool,
    db_url: str | None,
    tenants: tuple[str, ...],
    lock_timeout: float,
) -> None:
    """Run the memory-lifecycle jobs on a schedule: close idle sessions, archive old ones,
    consolidate memories. Two workers never run the same job at once.

    With --db it works for a team server's tenants, each under its own settings and leases
    (CORTEX_SERVER_SECRET, as for `cortex serve`, keys their metrics).

    \b
    Examples:
      cortex worker                 # loop, a pass every worker_interval_seconds
      cortex worker --once          # one pass (cron, systemd timer)
      cortex worker --once --job consolidate --force
      cortex --json worker --status
      cortex worker --db postgresql://cortex@db/cortex --once
    """
    from cortex.services.worker import Worker, job_states, loop, registered_jobs

    if status:
        states = job_states(rt.services)
        rt.emit([j.to_dict() for j in states], lambda: "\n".join(
            f"{j.name:<12} {j.last_status or '-':<8} last {j.last_started_at or 'never'}"
            + (f" (held by {j.owner} until {j.locked_until})" if j.locked_until else "")
            for j in states) or "no job has run yet")  # fmt: skip
        return
    jobs = registered_jobs()
    unknown = sorted(set(only) - {j.name for j in jobs})
    if unknown:
        names = ", ".join(j.name for j in jobs)
        raise UsageLine(f"unknown job {unknown[0]!r}; use one of {names}")
    chosen = [j for j in jobs if not only or j.name in only]
    if tenants and not db_url:
        raise UsageLine(
            "--tenant needs --db; give the team server's database, or leave --tenant out"
        )
    timed = click.get_current_context().get_parameter_source("lock_timeout")
    if timed is ParameterSource.COMMANDLINE and not db_url:
        raise UsageLine(
            "--lock-timeout needs --db (a local home's database has no such wait); give the "
            "team server's database, or leave --lock-timeout out"
        )
    if db_url:
        run_pass = _hosted(rt, db_url, chosen, tenants, lock_timeout)
    else:
        runner = Worker(rt.services, chosen)
        run_pass = runner.run_once
    if once:
        runs = run_pass(force=force)
        rt.emit([r.to_dict() for r in runs], lambda: "\n".join(format_job(r) for r in runs))
        return

    def report(runs: list[JobRun]) -> None:
        for run in runs:
            if run.status not in ("not_due", "disabled"):
                rt.emit(run.to_dict(), format_job(run))

    try:
        loop(run_pass, interval or rt.config.worker_interval_seconds, report)
    except KeyboardInterrupt:
        click.echo("worker stopped", err=True)


def _hosted(
    rt: Runtime, db_url: str, jobs: list[Job], tenants: tuple[str, ...], lock_timeout: float
) -> Callable[..., list[JobRun]]:
    """A pass over the tenants of a team server's database (the server secret from the
    environment, as ``cortex serve`` takes it), each statement waiting at most
    ``lock_timeout`` seconds for a lock, at the command's time (``--now``, as on a home)."""
    from cortex.services.worker import hosted_pass, worker_owner

    secret = rt.env.get(SECRET_ENV)
    host = server_host(rt, db_url, secret=secret, lock_timeout=lock_timeout)
    owner = worker_owner()
    return lambda force=False: hosted_pass(host, jobs, owner, tenants=tenants, force=force)


def format_job(run: JobRun) -> str:
    """One line of a job's run: when, whose (a team server's tenant), which, how it went."""
    detail = ", ".join(f"{k} {v}" for k, v in run.detail.items() if not isinstance(v, list))
    whose = f"{run.tenant}  " if run.tenant is not None else ""
    return f"{run.at}  {whose}{run.name:<12} {run.status}" + (f": {detail}" if detail else "")
