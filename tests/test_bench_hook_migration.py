"""bench/hook_migration.py: a hook on a database with m025 pending, inline and in the background."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "hook_migration.py"


def test_both_modes_migrate_and_the_background_one_leaves_its_first_event(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--memories", "300", "--max-mb", "0", "--json",
         "--results", str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    report = json.loads(result.stdout)
    assert report["memories"] == 300 and report["max_mb"] == 0 and report["floor_ms"] > 0
    inline, background = report["inline"], report["background"]
    assert inline["first_recorded"] and inline["second_recorded"]
    assert not inline["in_background"]  # the hook applied the step itself
    assert background["in_background"] and background["second_recorded"]
    assert (tmp_path / "memory-300-before-m025.db").exists()
