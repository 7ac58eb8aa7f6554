"""Observability: compaction loss, idle closes and consolidation runs on the tamper-evident
metrics chain, summed per day by ``metrics lifecycle`` (service and CLI)."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import cortex, ok
from cortex.clock import FixedClock
from cortex.core.lifecycle_metrics import lifecycle_report
from cortex.core.models import MetricEvent
from cortex.services.app import Services


def test_compaction_records_what_the_checkpoint_kept_and_lost(services: Services) -> None:
    sid = services.sessions.on_session_start(project="api").session_id
    for n in range(7):  # the checkpoint keeps the latest five transcript decisions
        services.events.append(sid, f"We decided to use library number {n} for step {n}",
                               role="assistant")  # fmt: skip
    services.sessions.add_pin("db", "postgres 16", sid)
    run = services.compaction.run(sid, force=True)
    (event,) = services.metrics.list(event="compaction_loss")
    p = event.payload
    assert event.session_id == sid and p["trigger_type"] == "manual"
    assert p["tokens_before"] == run.decision.tokens > 0
    assert p["checkpoint_tokens"] > 0 and 0 < p["kept_ratio"] <= 1
    assert (p["pins"], p["decisions_seen"], p["decisions_kept"], p["decisions_lost"]) == (
        1, 7, 5, 2,
    )  # fmt: skip
    services.compaction.post_compact(sid, "summary of the work")  # completes, no new event
    assert len(services.metrics.list(event="compaction_loss")) == 1
    assert services.metrics.verify().ok


def test_lifecycle_report_per_day_with_contradiction_trend(
    services: Services, clock: FixedClock
) -> None:
    sid = services.sessions.on_session_start(project="api").session_id
    services.events.append(sid, "hello")
    services.compaction.run(sid, force=True)
    services.sessions.on_session_end(sid)
    services.memory.add("Production database is postgres 15")
    clock.advance(hours=24)
    services.memory.add("Production database is postgres 16")
    services.memory.add("user prefers tabs")
    services.memory.add("User prefers tabs!")
    services.consolidation.run(dry_run=True, extract=False)
    services.consolidation.run(extract=False)
    report = services.metrics.lifecycle(days=7)
    day1, day2 = report["days"]
    assert (day1["sessions"], day1["compactions"], day1["consolidation_runs"]) == (1, 1, 0)
    assert (day2["shadow_runs"], day2["consolidation_runs"], day2["merged"],
            day2["conflicted"]) == (1, 1, 1, 1)  # fmt: skip
    assert report["contradiction_trend"] == [{"day": day2["day"], "conflicts_per_run": 1.0}]
    assert report["totals"]["sessions"] == 1 and report["open_conflicts"] == 1
    clock.advance(hours=24 * 30)
    assert services.metrics.lifecycle(days=7)["days"] == []


def test_lifecycle_report_ignores_other_events_and_old_ones() -> None:
    def ev(seq: int, name: str, at: str, **payload: object) -> MetricEvent:
        return MetricEvent(seq, name, None, dict(payload), at, "", "")

    report = lifecycle_report(
        [
            ev(1, "session_captured", "2026-01-01T00:00:00Z"),
            ev(2, "session_restored", "2026-02-01T00:00:00Z"),
            ev(3, "session_captured", "2026-02-01T01:00:00Z", crash_recovered=True),
            ev(4, "compaction_loss", "2026-02-01T02:00:00Z", kept_ratio=0.25),
            ev(5, "compaction_loss", "2026-02-01T03:00:00Z", kept_ratio=0.75, decisions_lost=2),
        ],
        since="2026-02-01T00:00:00Z",
    )
    (day,) = report["days"]
    assert (day["sessions"], day["crash_recovered"], day["compactions"]) == (1, 1, 2)
    assert (day["mean_kept_ratio"], day["decisions_lost"]) == (0.5, 2)
    assert report["contradiction_trend"] == []


def test_cli_metrics_lifecycle(home: Path) -> None:
    ok(cortex(home, "memory", "add", "User prefers tabs"))
    ok(cortex(home, "memory", "add", "user prefers tabs."))
    ok(cortex(home, "consolidate", "run"))
    report = json.loads(ok(cortex(home, "--json", "metrics", "lifecycle", "--days", "1")))
    assert report["totals"]["merged"] == 1 and report["open_conflicts"] == 0
    text = ok(cortex(home, "metrics", "lifecycle"))
    assert text.splitlines()[0].split() == ["day", "sess", "idle", "comp", "kept", "lost",
                                            "runs", "merged", "supers", "confl"]  # fmt: skip
    assert text.splitlines()[-1] == "open conflicts: 0"
    assert ok(cortex(home, "metrics", "verify")).startswith("ok")
    bad = cortex(home, "metrics", "lifecycle", "--days", "0")
    assert bad.returncode == 2
