"""The replay harness (``bench/replay.py``): the golden set passes the compaction and
consolidation gates, and a lost critical fact is reported (so the gate can fail)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from cortex.clock import FixedClock
from cortex.config import Config
from cortex.services.app import Services

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from replay import GOLDEN, load_records, records_from_db, replay  # noqa: E402


def test_golden_set_keeps_every_critical_fact_and_one_truth(tmp_path: Path) -> None:
    report = replay(load_records(GOLDEN), tmp_path / "home", turn_budget=5)
    totals = report["totals"]
    assert totals["critical"] == 7 and totals["critical_lost"] == []
    assert totals["compactions"] > len(report["sessions"])  # long sessions compact repeatedly
    assert 0 < totals["kept_ratio"] < 1
    (prefs,) = report["memories"]
    assert prefs["expected_live_ok"] is True and prefs["shadow_matches_applied"] is True
    assert (prefs["merged_count"], prefs["superseded_count"], prefs["conflicted_count"]) == (
        2, 1, 1,
    )  # fmt: skip
    assert report["metrics_chain_ok"] is True


def test_a_decision_pushed_out_of_the_checkpoint_is_reported_lost(tmp_path: Path) -> None:
    decisions = [f"We decided to use library {n} for part {n}" for n in range(7)]
    record = {
        "session_id": "lossy",
        "project": "x",
        "critical": [decisions[0], decisions[6]],
        "events": [{"role": "assistant", "content": d} for d in decisions],
    }
    totals = replay([record], tmp_path / "home", turn_budget=100)["totals"]
    assert totals["critical_lost"] == [decisions[0]]  # only the latest five are carried
    assert (totals["decisions_seen"], totals["decisions_lost"]) == (7, 2)


def test_records_from_a_cortex_database(
    make_config: Callable[..., Config], clock: FixedClock
) -> None:
    with Services.open(make_config(), clock) as app:
        sid = app.sessions.on_session_start(project="api").session_id
        app.events.append(sid, "hello there")
        db = app.config.db_path
    (record,) = records_from_db(db)
    assert (record["session_id"], record["project"]) == (sid, "api")
    assert record["events"] == [{"role": "user", "content": "hello there"}]
