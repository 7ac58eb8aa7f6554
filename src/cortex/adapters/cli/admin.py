"""CLI commands around the sessions: tasks, metrics, archive, config, db and the demo."""

from __future__ import annotations

import os
from pathlib import Path

import click

from cortex.adapters.cli.runtime import (
    CONTEXT,
    LazyGroup,
    Runtime,
    UsageLine,
    clean,
    filled,
    megabytes,
    pass_rt,
    project_option,
)
from cortex.config import SETTINGS
from cortex.core.tasks import KNOWN_STAGES, STAGES
from cortex.errors import ValidationError
from cortex.services.project import project_label


@click.group(cls=LazyGroup, context_settings=CONTEXT)
def task() -> None:
    """Tasks: pending work every preamble carries (the pipeline state file, or the team
    server's tasks in client mode), and protocol tasks (task folders, the start and end
    rituals, retries, budgets: see docs/protocol.md).

    \b
    Examples:
      cortex task add task-12 "Rotate signing keys" --stage build
      cortex task init feat-user-auth
    """


@task.command("add", context_settings=CONTEXT)
@click.argument("task_id")
@click.argument("title")
@click.option(
    "--stage",
    default="build",
    show_default=True,
    help="Pipeline stage; build, verify and validate count as pending.",
)
@project_option(
    "Project identity the task belongs to (default: the current directory's project).",
    "this directory's project",
)
@click.option("--any-project", is_flag=True, help="Pending for the sessions of every project.")
@pass_rt
def task_add(
    rt: Runtime, task_id: str, title: str, stage: str, project: str | None, any_project: bool
) -> None:
    """Add TASK_ID (or update its title and stage).

    The task belongs to one project, so only that project's sessions carry it: --project,
    else the current directory's project (the identity hooks use: git remote and root
    commit, else the path) when it has an open session, else the project of the most
    recently active open session, else the current directory's. In client mode
    (CORTEX_SERVER set) the task goes to the server, where every machine of the tenant sees
    it; while the server is down it waits in the journal (`cortex sync` delivers it).

    \b
    Example:
      cortex task add task-004-session-persistence "Session persistence" --stage build
    """
    if stage.strip().lower() not in KNOWN_STAGES:
        raise UsageLine(f"unknown stage {stage!r}; use one of {', '.join(STAGES)}")
    asked = "" if any_project else rt.project(project)
    added = rt.services.tasks.add(
        task_id,
        clean(title) or "",
        stage,
        asked,
        new_project=None if asked is not None else _current_project(rt),
    )
    was = added.get("moved_from")
    moved = (
        f" (moved from {project_label(was) if was else 'every project'})" if was is not None else ""
    )
    rt.emit(added, f"task {task_id} at stage {added['stage']}{moved}")


def _current_project(rt: Runtime) -> str:
    """The project a task added here belongs to (see ``task add``)."""
    from cortex.errors import NotFoundError, UnavailableError

    identity = rt.here().id
    for candidate in (identity, None):
        try:
            return rt.sessions.resolve(None, candidate).project or identity
        except NotFoundError:
            continue
        except UnavailableError:  # client mode, server down: the task waits in the journal
            break
    return identity


@task.command("list", context_settings=CONTEXT)
@click.option("--pending", "pending_only", is_flag=True, help="Only the pending tasks.")
@project_option("Only this project's tasks and those of no project.", "every project's tasks")
@pass_rt
def task_list(rt: Runtime, pending_only: bool, project: str | None) -> None:
    """List the tasks and whether each is pending (in client mode, the server's).

    \b
    Example:
      cortex task list --pending
    """
    tasks = rt.services.tasks.list_tasks(pending_only=pending_only, project=rt.project(project))
    rt.emit(
        tasks,
        "\n".join(
            f"[{t['task_id']}] {t.get('title', '')} (stage: {t.get('stage') or '-'}"
            f"{', pending' if t['pending'] else ''})"
            for t in tasks
        )
        or "no tasks",
    )


@task.command("done", context_settings=CONTEXT)
@click.argument("task_id")
@pass_rt
def task_done(rt: Runtime, task_id: str) -> None:
    """Mark TASK_ID done: it is dropped from later preambles.

    \b
    Example:
      cortex task done task-004-session-persistence
    """
    done = rt.services.tasks.done(task_id)
    rt.emit(done, f"task {task_id} done")


@click.group(context_settings=CONTEXT)
def metrics() -> None:
    """Tamper-evident session metrics: show, verify.

    \b
    Example:
      cortex metrics verify
    """


@metrics.command("list", context_settings=CONTEXT)
@click.option(
    "--event",
    help="Only this event name, e.g. session_restored.",
    callback=filled("every event", "an event name"),
)
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 100000))
@pass_rt
def metrics_list(rt: Runtime, event: str | None, limit: int) -> None:
    """List metrics events, oldest first.

    \b
    Example:
      cortex metrics list --event session_restored
    """
    rows = rt.services.metrics.list(event=event, limit=limit)
    data = [
        {
            "seq": m.seq,
            "event": m.event,
            "session_id": m.session_id,
            "created_at": m.created_at,
            **m.payload,
        }
        for m in rows
    ]
    rt.emit(
        data,
        "\n".join(f"{m.seq:>5}  {m.created_at[:19]}  {m.event:<26} {m.payload}" for m in rows)
        or "no metrics events",
    )


@metrics.command("lifecycle", context_settings=CONTEXT)
@click.option("--days", default=14, show_default=True, type=click.IntRange(1, 3660))
@pass_rt
def metrics_lifecycle(rt: Runtime, days: int) -> None:
    """Lifecycle metrics per day: sessions, idle closes, compactions (share kept, decisions
    lost), consolidation runs (merged, superseded, conflicts) and the contradiction trend.

    \b
    Example:
      cortex metrics lifecycle --days 7
    """
    report = rt.services.metrics.lifecycle(days=days)

    def text() -> str:
        head = (
            f"{'day':<10} {'sess':>5} {'idle':>5} {'comp':>5} {'kept':>6} {'lost':>5} "
            f"{'runs':>5} {'merged':>7} {'supers':>7} {'confl':>6}"
        )
        rows = [head] + [
            f"{d['day'] or 'total':<10} {d['sessions']:>5} {d['idle_closed']:>5} "
            f"{d['compactions']:>5} {_ratio(d['mean_kept_ratio']):>6} {d['decisions_lost']:>5} "
            f"{d['consolidation_runs']:>5} {d['merged']:>7} {d['superseded']:>7} "
            f"{d['conflicted']:>6}"
            for d in [*report["days"], report["totals"]]
        ]
        return "\n".join([*rows, f"open conflicts: {report['open_conflicts']}"])

    rt.emit(report, text)


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


@metrics.command("verify", context_settings=CONTEXT)
@pass_rt
@click.pass_context
def metrics_verify(ctx: click.Context, rt: Runtime) -> None:
    """Check the hash chain: report any edited or deleted event (exit 1 if any).

    \b
    Example:
      cortex metrics verify
    """
    report = rt.services.metrics.verify()
    rt.emit(
        {"ok": report.ok, "checked": report.checked, "problems": report.problems},
        f"ok: {report.checked} events verified"
        if report.ok
        else "TAMPERED:\n" + "\n".join(f"  {p}" for p in report.problems),
    )
    if not report.ok:
        ctx.exit(1)


@click.command(context_settings=CONTEXT)
@click.option("--older-than-days", default=30, show_default=True, type=click.IntRange(1, 36500))
@pass_rt
def archive(rt: Runtime, older_than_days: int) -> None:
    """Move sessions ended more than N days ago to {sessions_dir}/archive/YYYY-MM/.

    \b
    Example:
      cortex archive --older-than-days 30
    """
    report = rt.sessions.archive(older_than_days)
    rt.emit(
        {"archived": report.archived, "paths": list(report.paths)},
        f"archived {report.archived} session(s) to {rt.config.sessions_dir / 'archive'}",
    )


@click.group("config", context_settings=CONTEXT)
def config_group() -> None:
    """Settings and where they come from.

    \b
    Example:
      cortex --set lookback_days=3 config show
    """


@config_group.command("show", context_settings=CONTEXT)
@pass_rt
def config_show(rt: Runtime) -> None:
    """Show every setting's value, default, range and environment variable.

    \b
    Example:
      cortex --set lookback_days=3 config show
    """
    values = rt.config.as_dict()
    rt.emit(
        values,
        "\n".join(
            [f"home = {values['home']}"]
            + [
                f"{s.name} = {values[s.name]}    (default {s.default}, {s.range_text()}, "
                f"{s.env_var})"
                for s in SETTINGS
            ]
        ),
    )


@click.group(context_settings=CONTEXT)
def db() -> None:
    """The database: migrations, and handing free space back to the disk.

    \b
    Example:
      cortex db migrate --list
    """


@db.command("migrate", context_settings=CONTEXT)
@click.option("--list", "show_list", is_flag=True, help="List migrations and when they ran.")
@pass_rt
def db_migrate(rt: Runtime, show_list: bool) -> None:
    """Apply pending migrations (opening the store does too) and list them.

    Some migrations rewrite a whole table (seconds at a few hundred MB): the steps about to
    run, and then the time they took, go to stderr. A hook that finds migrations pending on a
    database over hook_migrate_max_mb starts this work in the background itself.

    \b
    Example:
      cortex db migrate --list
    """
    if not rt.config.server_url:  # (client mode: the server migrates its own database)
        _migrate_showing_steps(rt)
    applied = rt.services.applied_migrations()
    data = [{"name": name, "applied_at": at} for name, at in applied]
    rt.emit(
        data,
        "\n".join(f"{name}  {at}" for name, at in applied)
        if show_list
        else f"database {rt.config.db_path} is at {applied[-1][0]}",
    )


def _migrate_showing_steps(rt: Runtime) -> None:
    """Apply the pending migrations, saying on stderr which before and how long after."""
    import time

    from cortex.adapters.hooks.upgrade import running, wait_for
    from cortex.services.app import Services

    if running(rt.config.home):
        click.echo("waiting for the background migration a hook started", err=True)
        wait_for(rt.config.home)
    with Services.open(rt.config, rt.clock, migrate=False) as services:
        pending = services.pending_migrations()
        if not pending:
            return
        click.echo(f"migrating {services.store.url}: {', '.join(pending)}", err=True)
        started = time.monotonic()
        services.migrate()
        click.echo(f"migrated in {time.monotonic() - started:.1f} s", err=True)


@db.command("vacuum", context_settings=CONTEXT)
@pass_rt
def db_vacuum(rt: Runtime) -> None:
    """Hand the SQLite file's free pages back to the disk (VACUUM) and merge the search index.

    Sessions moved out by `cortex archive`, and migrations that move a table (m025 moved the
    embeddings extra's vectors), leave free pages in the file. Later writes reuse them; this
    returns them now. First it merges the full-text index into one segment (ingest leaves a
    dozen or more, and a search reads each): at 1,000,000 memories, searches then took a
    fifth less time. It rewrites the whole file (seconds for a few hundred MB), waiting for
    other processes' transactions to end, and needs about the file's size again in free disk
    space while it runs. PostgreSQL needs none of it (autovacuum).

    \b
    Example:
      cortex db vacuum
      cortex --json db vacuum     # bytes and search index segments, before and after
    """
    services = rt.services
    store = services.store
    # (in client mode there is no local index to count: the vacuum itself refuses, in one line)
    segments = 0 if services.config.server_url else store.search_index_segments()
    before, after = services.vacuum()
    merged = store.search_index_segments()
    data = {
        "database": store.url,
        "bytes_before": before,
        "bytes_after": after,
        "bytes_freed": before - after,
        "search_index_segments_before": segments,
        "search_index_segments_after": merged,
    }
    rt.emit(
        data,
        f"database {data['database']}: {megabytes(before)} -> {megabytes(after)} "
        f"({megabytes(before - after)} handed back to the disk)"
        + (f"; search index merged, {segments} segments -> {merged}" if segments > merged else ""),
    )


@click.command(context_settings=CONTEXT)
@click.option(
    "--home",
    "demo_home",
    type=click.Path(file_okay=False),
    help="Keep the demo's home here (default: a temporary directory).",
)
@pass_rt
def demo(rt: Runtime, demo_home: str | None) -> None:
    """Tell a three-day story: pins, tasks, a crash, a restore, a manual continue.

    \b
    Example:
      cortex demo
    """
    from cortex.adapters.cli.demo import run_demo

    if rt.as_json:
        raise ValidationError("the demo is a story for people; run it without --json")
    if demo_home is not None and not demo_home.strip():  # (an unset variable: not this folder)
        raise UsageLine("--home is empty; omit it for a temporary directory or give a new one")
    # os.path.isdir: False, not OSError, for a path the system refuses (a name too long),
    # which the demo then fails to create, in one line.
    if demo_home is not None and os.path.isdir(demo_home) and any(Path(demo_home).iterdir()):
        raise ValidationError(  # the story starts cold, and would mix into a real home
            f"{demo_home} is not empty; give the demo a new or empty directory"
        )
    run_demo(click.echo, demo_home)


def register(group: click.Group) -> None:
    for command in (task, metrics, archive, config_group, db, demo):
        group.add_command(command)
