"""The speed table (``bench/table.py``): one run with tiny sizes gives every row, each with
its ratio to the floor computed from the values; no timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "bench" / "table.py"
ROWS = (
    "hook-server",
    "hook-no-server",
    "session-start",
    "memory-search-process",
    "restore-cpu",
    "restore-stored",
    "memory-search-1m",
    "ingest",
    "ingest-1m",
    "ingest-replacing",
    "ingest-replacing-1m",
    "server-rss",
)
TINY = {
    "sessions": 60,
    "restore_stored": 80,
    "search_memories": 300,
    "memories": 300,
    "queries": 10,
    "batches": 1,
    "runs": 2,
    "restore_runs": 3,
    "events": 20,
    "floor_runs": 2,
}


def table(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TABLE), "--quick", "--results", str(tmp_path / "results"),
         "--sizes", json.dumps(TINY), *args],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc for the RSS row")
def test_one_run_reports_every_row_against_the_floor(tmp_path: Path) -> None:
    out = tmp_path / "table.json"
    result = table(tmp_path, "--json", "--out", str(out))
    report = json.loads(result.stdout)
    assert json.loads(out.read_text()) == report
    assert [row["key"] for row in report["rows"]] == list(ROWS)
    assert set(report["machine"]) >= {"cpus", "cpu_model", "python", "sqlite"}
    assert len(report["loadavg_before"]) == len(report["loadavg_after"]) == 3
    floor = report["floor"]
    assert floor["median_ms"] > 0 and floor["rss_mib"] > 0
    # start, one per step (hooks 2, sessions 2, restore, search process, ingest 2, memory, rss),
    # end
    assert len(floor["samples_ms"]) == 12
    for row in report["rows"]:
        value = row["value"]
        assert value > 0, row
        if row["key"] == "server-rss":
            expected = value / floor["rss_mib"]
        elif row["key"].startswith("ingest"):
            expected = 1000 / value * 1000 / row["figures"]["floor_ms"]
        else:
            expected = value / row["figures"]["floor_ms"]
        assert row["x_floor"] == pytest.approx(expected, rel=0.02, abs=0.002), row
        assert isinstance(row["met"], bool) and row["goal"]
        if row["goal"].endswith("x"):
            assert row["met"] == (row["x_floor"] <= float(row["goal"].strip("<= x"))), row
    # progress went to stderr, one plain line a step (not a terminal), the last one last
    steps = [line for line in result.stderr.splitlines() if line.startswith("[")]
    assert steps[0].startswith("[1/12] floor") and steps[-1].startswith("[12/12] floor again")
    assert len(steps) == 12


def test_skip_leaves_rows_out_and_prints_a_markdown_table(tmp_path: Path) -> None:
    skip = [arg for key in ROWS if key != "restore-cpu" for arg in ("--skip", key)]
    lines = table(tmp_path, *skip).stdout.splitlines()
    assert "| path | value | floor | x floor | goal | met |" in lines
    rows = [line for line in lines if line.startswith("| ")]
    assert len(rows) == 4  # the header and its rule, the floor, the one row left
    assert rows[-1].startswith("| restore in-process, 50 sessions in the window, 60 stored")
