"""Memory hygiene around context and review: the session summary of get_context, the feature
flags, stale listings and the review queue with its verdicts (service and CLI)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from cli_helpers import cortex, ok
from cortex.clock import FixedClock
from cortex.config import Config, load_config
from cortex.errors import ValidationError
from cortex.services.app import Services


def test_context_session_summary_lists_snapshot_headers_and_checkpoint(
    services: Services,
) -> None:
    sid = services.sessions.on_session_start(project="api").session_id
    services.events.append(sid, "refactor the auth middleware")
    services.compaction.checkpoint(sid, summary="middleware half done")
    services.events.snapshot(sid, "manual")
    plain = services.memory.get_context("auth", session_id=sid)
    assert plain.summary is None and plain.session is not None
    result = services.memory.get_context("auth", session_id=sid, include_session_summary=True)
    summary = result.to_dict()["sessionSummary"]
    assert summary["latestCheckpointSummary"] == "middleware half done"
    (snap,) = summary["snapshots"]
    assert snap["sourceTrigger"] == "manual" and snap["messageCount"] >= 1
    assert "transcript" not in json.dumps(summary)  # headers only, never the transcript


def test_session_flag_off_leaves_out_the_session_block_and_summary(
    make_config: Callable[..., Config], clock: FixedClock
) -> None:
    with Services.open(make_config(memory_session_enabled=False), clock) as app:
        sid = app.sessions.on_session_start(project="api").session_id
        app.memory.add("api uses postgres", project="api")
        result = app.memory.get_context(session_id=sid, include_session_summary=True)
        assert result.session is None and result.summary is None
        assert [m.memory.content for m in result.memories] == ["api uses postgres"]


def test_compaction_flag_off_never_reports_compaction_due(
    make_config: Callable[..., Config], clock: FixedClock
) -> None:
    for enabled, due in ((True, True), (False, False)):
        config = make_config(memory_compaction_enabled=enabled, compaction_turn_budget=1)
        with Services.open(config, clock) as app:
            sid = app.sessions.on_session_start(project=f"p{enabled}").session_id
            for n in range(3):
                app.events.append(sid, f"turn {n}")
            status = app.compaction.status(sid)
            assert status.decision.due is due
            assert app.compaction.run(sid).event is None if not due else True
            assert status.decision.turns == 3  # the counts are kept either way


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("MEMORY_CONSOLIDATION_ENABLED", "false", False),
        ("CORTEX_MEMORY_CONSOLIDATION_ENABLED", "0", False),
        ("MEMORY_PROCEDURAL_ENABLED", "no", False),
        ("MEMORY_OPENCLAW_FILE_MODE_ENABLED", "true", True),
    ],
)
def test_rfc_flag_variables_are_read(home: Path, variable: str, value: str, expected: bool) -> None:
    config = load_config(home, {variable: value})
    name = variable.removeprefix("CORTEX_").lower()
    # File mode's flag is the file_mode_enabled setting (it also reads the RFC's name).
    name = {"memory_openclaw_file_mode_enabled": "file_mode_enabled"}.get(name, name)
    assert getattr(config, name) is expected


def test_stale_and_review_queue_and_verdicts(services: Services, clock: FixedClock) -> None:
    old = services.memory.add("CI runs on Jenkins").memory
    clock.advance(hours=1)  # stale ones come least recently confirmed first
    a = services.memory.add("Production database is postgres 15").memory
    clock.advance(hours=24 * 100)
    b = services.memory.add("Production database is postgres 16").memory
    services.consolidation.run(extract=False)  # links a and b as a conflict
    assert [m.id for m in services.review.stale()] == [old.id, a.id]
    assert services.review.stale(days=200) == []
    queue = services.review.queue()
    assert [(x.id, y.id) for x, y in queue.conflicts] == [(b.id, a.id)]
    assert [m.id for m in queue.stale] == [old.id, a.id]
    services.review.keep(old.id)
    assert [m.id for m in services.review.stale()] == [a.id]
    services.review.prefer(b.id, a.id)
    assert services.review.queue().conflicts == ()
    clock.advance(hours=1)
    assert a.id not in {m.id for m in services.review.stale(days=0)}
    assert a.id in {m.id for m in services.review.stale(days=0, superseded=True)}
    with pytest.raises(ValidationError, match="superseded"):
        services.review.prefer(a.id, b.id)
    with pytest.raises(ValidationError, match="itself"):
        services.review.prefer(b.id, b.id)


def test_review_shows_pending_shadow_proposals(services: Services) -> None:
    services.memory.add("User prefers tabs")
    services.memory.add("user prefers tabs!")
    run = services.consolidation.run(dry_run=True, extract=False).run
    queue = services.review.queue()
    assert queue.shadow_run_id == run.id and [p["kind"] for p in queue.proposals] == ["merge"]
    services.consolidation.run(extract=False)
    assert services.review.queue().proposals == ()


def test_cli_stale_and_review(home: Path) -> None:
    def run(*args: str, now: str = "2026-02-16T09:00:00Z") -> str:
        return ok(cortex(home, *args, now=now))

    first = json.loads(run("--json", "memory", "add", "Editor color theme is dark"))["id"]
    later = "2026-06-01T09:00:00Z"
    second = json.loads(run("--json", "memory", "add", "Editor color theme is light", now=later))
    run("consolidate", "run", now=later)
    stale = json.loads(run("--json", "memory", "stale", now=later))
    assert [m["id"] for m in stale] == [first]
    text = run("memory", "review", now=later)
    assert text.startswith("CONFLICTS (keep one with --prefer WINNER LOSER):\n")
    assert "STALE (confirm with --keep ID, forget with --drop ID):" in text
    done = json.loads(run("--json", "memory", "review", "--prefer", second["id"], first, now=later))
    assert done == [{"preferred": second["id"], "over": first}]
    assert run("memory", "review", now=later) == "nothing to review\n"
    missing = cortex(home, "memory", "review", "--keep", "nope", now=later)
    assert missing.returncode == 1
    assert missing.stderr == "error: no memory 'nope'; see `cortex memory list`\n"
    bad = cortex(home, "memory", "stale", "--days", "-1")
    assert bad.returncode == 2
