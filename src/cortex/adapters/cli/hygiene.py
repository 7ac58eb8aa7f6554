"""CLI commands of memory hygiene: ``consolidate run|list``, ``worker`` and ``procedure``."""

from __future__ import annotations

import click

from cortex.adapters.cli.runtime import CONTEXT, Runtime, clean, pass_rt
from cortex.core.hygiene import ConsolidationRun


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
@click.option("--project", help="Only this project's memories plus global ones.")
@click.option("--user", "user_id", help="Only this user's memories plus shared ones.")
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


def register(group: click.Group) -> None:
    """Add ``consolidate`` to the CLI."""
    group.add_command(consolidate)
