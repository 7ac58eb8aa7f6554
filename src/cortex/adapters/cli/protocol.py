"""CLI commands of the session-continuity protocol: ``task init|start|end|status|sweep|fail|
pass|budget|safety|gates``, ``checkpoint create|list|show|verify`` and ``session
timeline|state``, over ``ProtocolService``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from cortex.adapters.cli.runtime import (
    CONTEXT,
    Runtime,
    Share,
    UsageLine,
    clean,
    filled,
    pass_rt,
    project_option,
    session_option,
)
from cortex.core.checkpoint_schema import CHECKPOINT_TYPES
from cortex.core.retries import FAILURE_TYPES

TASK_OPTION = click.option("--task", "slug", required=True, help="The task's slug.")
SESSION_OPTION = session_option("Session (default: the task's live session).")


def _project(rt: Runtime, project: str | None) -> str:
    """The project a task session belongs to: given, else the working directory's identity
    (what the harness's hooks use, so a live harness session is found)."""
    if project:
        return clean(project) or project
    from cortex.services.project import project_identity

    return project_identity(os.getcwd(), rt.config.home / "cache", rt.env).id


def _json_object(text: str | None, option: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UsageLine(
            f"{option} is not JSON ({exc}); e.g. {option} '{{\"tests\": {{}}}}'"
        ) from exc
    if not isinstance(data, dict):
        raise UsageLine(f"{option} must be a JSON object, e.g. {option} '{{\"interfaces\": []}}'")
    return data


# -- task ----------------------------------------------------------------------------------------
@click.command("init", context_settings=CONTEXT)
@click.argument("slug")
@click.option("--title", default="", help="A readable title (default: the slug).")
@pass_rt
def task_init(rt: Runtime, slug: str, title: str) -> None:
    """Create the task folder SLUG under tasks_root (status, log, checkpoints, index).

    \b
    Example:
      cortex task init feat-user-auth --title "User authentication"
    """
    out = rt.services.protocol.init_task(slug, clean(title) or "")
    verb = "created" if out["created"] else "already exists:"
    rt.emit(out, f"task {slug} {verb} {out['path']}")


@click.command("start", context_settings=CONTEXT)
@click.argument("slug")
@click.option(
    "--from-gate", help="Resume at this gate, G0..G10 (default: the task's current gate)."
)
@click.option("--goal", default="", help="This session's goal (logged).")
@session_option("Run the task in this session (default: the live one).")
@project_option(
    "Project (default: the working directory's, as the hooks name it).",
    "this directory's project",
)
@click.option("--agent-id", help="The agent working on the task.")
@pass_rt
@click.pass_context
def task_start(
    ctx: click.Context,
    rt: Runtime,
    slug: str,
    from_gate: str | None,
    goal: str,
    session_id: str | None,
    project: str | None,
    agent_id: str | None,
) -> None:
    """The startup ritual: recall, read log and status, git history, smoke test, goal.

    Exits 1 when the health check fails: fix the regression before any new work.

    \b
    Example:
      cortex task start feat-user-auth --from-gate G4 --goal "refresh tokens"
    """
    from cortex.services.protocol.rituals import start_task

    report = start_task(
        rt.services.protocol,
        slug,
        session_id=session_id,
        from_gate=from_gate,
        goal=clean(goal) or "",
        project=_project(rt, project),
        agent_id=clean(agent_id),
        workdir=Path(os.getcwd()),
    )
    rt.emit(report.to_dict(), report.text)
    if not report.healthy:
        click.echo(
            f"error: health check failed ({report.health.get('detail')}); fix it, then "
            f"rerun `cortex task start {slug}`",
            err=True,
        )
        ctx.exit(1)


@click.command("end", context_settings=CONTEXT)
@click.argument("slug")
@click.option("--outcome", required=True, type=click.Choice(["success", "partial", "failed"]))
@click.option("--completed", default="", help="What was done.")
@click.option("--blocked", default="", help="Any blockers.")
@click.option("--next-step", "next_steps", multiple=True, help="A next step (repeatable).")
@click.option("--decision", "decisions", multiple=True, help="A decision to memorize (repeatable).")
@click.option("--goal", default="", help="What was attempted (default: the start's goal).")
@click.option(
    "--status",
    type=click.Choice(["in-progress", "complete", "blocked"]),
    help="Task status (default: from the outcome).",
)
@click.option("--resume", default="", help="Resume instructions for the next session.")
@SESSION_OPTION
@pass_rt
def task_end(
    rt: Runtime,
    slug: str,
    outcome: str,
    completed: str,
    blocked: str,
    next_steps: tuple[str, ...],
    decisions: tuple[str, ...],
    goal: str,
    status: str | None,
    resume: str,
    session_id: str | None,
) -> None:
    """The shutdown ritual: log entry, session-end checkpoint, decisions, status, event.

    \b
    Example:
      cortex task end feat-user-auth --outcome partial --completed "JWT issue" \\
        --next-step "refresh tokens" --decision "Use JWT for session tokens"
    """
    from cortex.services.protocol.rituals import end_task

    out = end_task(
        rt.services.protocol,
        slug,
        outcome=outcome,
        goal=clean(goal) or "",
        completed=clean(completed) or "",
        blocked=clean(blocked) or "",
        next_steps=[clean(s) or "" for s in next_steps],
        decisions=[clean(d) or "" for d in decisions],
        status=status,
        resume_instructions=clean(resume) or "",
        session_id=session_id,
    )
    failed = [
        f"{d['target']} delivery failed: {d['error']}" for d in out["deliveries"] if not d["ok"]
    ]
    rt.emit(
        out,
        "\n".join(
            [
                out["log_line"],
                f"checkpoint {out['checkpoint']['checkpoint_id']}, task {out['status']}",
                *failed,
            ]
        ),
    )


@click.command("status", context_settings=CONTEXT)
@click.argument("slug")
@pass_rt
def task_status(rt: Runtime, slug: str) -> None:
    """Show a task's status file, live session and latest checkpoint.

    \b
    Example:
      cortex task status feat-user-auth
    """
    out = rt.services.protocol.status(slug)
    st, latest = out["status"], out["latest_checkpoint"]
    rt.emit(
        out,
        f"task {slug}: {st.get('status')} at gate {st.get('current_gate')}, "
        f"{out['sessions']} session(s), live: {out['live_session'] or '-'}, latest "
        f"checkpoint: {latest['checkpoint_id'] if latest else '-'}",
    )


@click.command("sweep", context_settings=CONTEXT)
@pass_rt
def task_sweep(rt: Runtime) -> None:
    """Suspend sessions whose lease lapsed: interrupted checkpoint and incident for each.

    \b
    Example:
      cortex task sweep
    """
    report = rt.services.protocol.sweep_orphans()
    rt.emit(report.to_dict(), f"suspended {report.suspended} orphaned session(s)")


@click.command("fail", context_settings=CONTEXT)
@click.argument("slug")
@click.option("--step", required=True, help="The step that failed, e.g. G4-3.")
@click.option("--type", "failure_type", required=True, type=click.Choice(FAILURE_TYPES))
@click.option("--detail", default="", help="What went wrong.")
@pass_rt
def task_fail(rt: Runtime, slug: str, step: str, failure_type: str, detail: str) -> None:
    """Record a failure of a step; print the retry strategy, a fixer hint or an escalation.

    \b
    Example:
      cortex task fail feat-user-auth --step G4-3 --type test_failure --detail "2 failing"
    """
    advice = rt.services.protocol.record_failure(
        slug, clean(step) or "", failure_type, clean(detail) or ""
    )
    text = (
        f"step {advice.step}: attempt {advice.attempts}, {advice.consecutive} in a row; "
        f"{advice.strategy}"
    )
    if advice.fixer:
        text += (
            f"\nfixer: {advice.fixer['trigger']}; {advice.fixer['scope']}, read-only, 10 minutes"
        )
    rt.emit(advice.to_dict(), text + ("\nESCALATED to human review" if advice.escalate else ""))


@click.command("pass", context_settings=CONTEXT)
@click.argument("slug")
@click.option("--step", required=True, help="The step that passed.")
@pass_rt
def task_pass(rt: Runtime, slug: str, step: str) -> None:
    """Record that a step passed (its consecutive failures reset).

    \b
    Example:
      cortex task pass feat-user-auth --step G4-3
    """
    status = rt.services.protocol.record_success(slug, clean(step) or "")
    rt.emit(status.get("retries"), f"step {step} passed")


@click.command("budget", context_settings=CONTEXT)
@click.argument("slug")
@click.option("--tokens", default=0, type=click.IntRange(0, 10**9), help="Context tokens to add.")
@SESSION_OPTION
@pass_rt
def task_budget(rt: Runtime, slug: str, tokens: int, session_id: str | None) -> None:
    """Add context tokens to the task's session; refresh every 50K, fork at the soft cap.

    \b
    Example:
      cortex task budget feat-user-auth --tokens 12000
    """
    out = rt.services.protocol.budget(slug, tokens, session_id)
    b = out["budget"]
    lines = [f"context {b['context_tokens']:,} of cap {b['cap_tokens']:,} tokens", *out["actions"]]
    if out["fork"]:
        lines.append(f"forked to session {out['fork']['session_id']}")
    rt.emit(out, "\n".join(lines))


@click.command("safety", context_settings=CONTEXT)
@click.argument("slug")
@click.option("--window", type=Share(), required=True, help="Refusal rate now.")
@click.option("--baseline", type=Share(), required=True, help="Baseline rate.")
@click.option(
    "--severity", default="none", type=click.Choice(["none", "low", "medium", "high", "critical"])
)
@SESSION_OPTION
@pass_rt
def task_safety(
    rt: Runtime, slug: str, window: float, baseline: float, severity: str, session_id: str | None
) -> None:
    """Record a safety probe's result in a checkpoint; degrade to sandbox when it says so.

    \b
    Example:
      cortex task safety feat-user-auth --window 0.38 --baseline 0.08
    """
    checkpoint = rt.services.protocol.record_safety(slug, window, baseline, severity, session_id)
    metrics = checkpoint.state["safety_metrics"]
    rt.emit(
        checkpoint.to_dict(),
        f"checkpoint {checkpoint.checkpoint_id}: delta {metrics['delta']}, {metrics['action']}",
    )


@click.command("gates", context_settings=CONTEXT)
@pass_rt
def task_gates(rt: Runtime) -> None:
    """List the gates G0..G10 and what each gate's checkpoint carries.

    \b
    Example:
      cortex task gates
    """
    gates = rt.services.protocol.gates()
    rt.emit(gates, "\n".join(f"{g['gate']:<4} {g['name']:<15} {g['content']}" for g in gates))


# -- checkpoint ----------------------------------------------------------------------------------
@click.group(context_settings=CONTEXT)
def checkpoint() -> None:
    """A task's checkpoints: create, list, show and verify (files, index and store agree).

    \b
    Example:
      cortex checkpoint create --task feat-user-auth --summary "issue/verify done"
    """


@checkpoint.command("create", context_settings=CONTEXT)
@TASK_OPTION
@click.option(
    "--type", "kind", default="manual", show_default=True, type=click.Choice(CHECKPOINT_TYPES)
)
@click.option("--summary", default="", help="What was done.")
@click.option(
    "--gate",
    help="Gate G0..G10 (a gate_transition moves the task there).",
    callback=filled("no gate", "a gate G0..G10"),
)
@click.option("--step", type=click.IntRange(0, None), help="Step within the gate.")
@click.option("--next-step", "next_steps", multiple=True, help="A next step (repeatable).")
@click.option("--resume", default="", help="Resume instructions.")
@click.option("--state-json", help="More of the checkpoint's state, as a JSON object.")
@click.option("--no-resume", is_flag=True, help="Mark the checkpoint as not resumable.")
@SESSION_OPTION
@pass_rt
def checkpoint_create(
    rt: Runtime,
    slug: str,
    kind: str,
    summary: str,
    gate: str | None,
    step: int | None,
    next_steps: tuple[str, ...],
    resume: str,
    state_json: str | None,
    no_resume: bool,
    session_id: str | None,
) -> None:
    """Write a checkpoint of the task's session (store, task folder, index, memory).

    \b
    Example:
      cortex checkpoint create --task feat-user-auth --type gate_transition --gate G4 \\
        --summary "unit tests done" --state-json '{"tests": {"passing": 12, "failing": 0,
        "pending": 2}, "decisions": []}'
    """
    made, warnings = rt.services.protocol.create_checkpoint(
        slug,
        type=kind,
        summary=clean(summary) or "",
        gate=gate,
        step=step,
        next_steps=[clean(s) or "" for s in next_steps],
        resume_instructions=clean(resume) or "",
        state=_json_object(clean(state_json), "--state-json"),
        can_resume=not no_resume,
        session_id=session_id,
    )
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    rt.emit(
        made.to_dict(), f"checkpoint {made.checkpoint_id} ({made.type}, gate {made.gate or '-'})"
    )


@checkpoint.command("list", context_settings=CONTEXT)
@TASK_OPTION
@pass_rt
def checkpoint_list(rt: Runtime, slug: str) -> None:
    """List a task's checkpoints, oldest first.

    \b
    Example:
      cortex checkpoint list --task feat-user-auth
    """
    found = rt.services.protocol.list_checkpoints(slug)
    rt.emit(
        [c.to_dict() for c in found],
        "\n".join(
            f"{c.checkpoint_id}  {c.timestamp[:19]}  {c.type:<15} {c.gate or '-':<4} "
            f"{c.summary[:60]}"
            for c in found
        )
        or "no checkpoints",
    )


@checkpoint.command("show", context_settings=CONTEXT)
@click.argument("checkpoint_id")
@pass_rt
def checkpoint_show(rt: Runtime, checkpoint_id: str) -> None:
    """Show one checkpoint in the protocol's schema.

    \b
    Example:
      cortex checkpoint show ckpt-2026-02-18-1a2b3c4d
    """
    found = rt.services.protocol.show_checkpoint(checkpoint_id)
    rt.emit(found.to_dict(), json.dumps(found.to_dict(), indent=2, ensure_ascii=False))


@checkpoint.command("verify", context_settings=CONTEXT)
@TASK_OPTION
@click.option(
    "--repair",
    is_flag=True,
    help="First make the folder agree with the store: write missing or differing files from "
    "it, rebuild the index, move files it does not hold aside, give the status the gate its "
    "unfinished checkpoints moved it to, retitle the pending task with the status's gate and "
    "log their missing lines.",
)
@pass_rt
@click.pass_context
def checkpoint_verify(ctx: click.Context, rt: Runtime, slug: str, repair: bool) -> None:
    """Check that files, index, store, status, log and pending title agree (exit 1 if not).

    \b
    Example:
      cortex checkpoint verify --task feat-user-auth
      cortex checkpoint verify --task feat-user-auth --repair
    """
    report = rt.services.protocol.verify(slug, repair=repair)
    lines = [f"repaired: {r}" for r in report.repaired]
    if report.ok:
        lines.append(f"ok: {report.stored} checkpoints agree")
    else:
        lines += ["MISMATCH:", *(f"  {p}" for p in report.problems)]
        lines.append(
            f"the store is authoritative: `cortex checkpoint verify --task {slug} --repair` "
            "rewrites the folder from it (what it replaces is moved aside)"
        )
    rt.emit(report.to_dict(), "\n".join(lines))
    if not report.ok:
        ctx.exit(1)


# -- session timeline and state ------------------------------------------------------------------
@click.command("timeline", context_settings=CONTEXT)
@TASK_OPTION
@pass_rt
def session_timeline(rt: Runtime, slug: str) -> None:
    """Show a task's sessions and checkpoints in time order.

    \b
    Example:
      cortex session timeline --task feat-user-auth
    """
    rows = rt.services.protocol.timeline(slug)
    rt.emit(
        rows,
        "\n".join(f"{r['at'][:19]}  {r['what']:<26} {r['session_id']}  {r['detail']}" for r in rows)
        or f"no sessions of task {slug}",
    )


@click.command("state", context_settings=CONTEXT)
@click.argument("session_id")
@click.argument(
    "state",
    type=click.Choice(["ACTIVE", "COMPLETE", "SUSPENDED", "TERMINATED"], case_sensitive=False),
)
@pass_rt
def session_state(rt: Runtime, session_id: str, state: str) -> None:
    """Move a session along its lifecycle (INIT > ACTIVE > COMPLETE; SUSPENDED > TERMINATED).

    \b
    Example:
      cortex session state 3f2a9c1e-... TERMINATED
    """
    changed = rt.services.protocol.set_state(session_id, state)
    rt.emit(changed.to_dict(), f"session {changed.session_id}: {changed.state}")


def register(group: click.Group) -> None:
    """Add ``checkpoint`` to the CLI, the task commands to ``task``, two to ``session``."""
    from cortex.adapters.cli.admin import task
    from cortex.adapters.cli.sessions import session

    group.add_command(checkpoint)
    for command in (
        task_init,
        task_start,
        task_end,
        task_status,
        task_sweep,
        task_fail,
        task_pass,
        task_budget,
        task_safety,
        task_gates,
    ):
        task.add_command(command)
    for command in (session_timeline, session_state):
        session.add_command(command)
