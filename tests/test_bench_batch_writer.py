"""``bench/batch_writer.py``: the turn batch writer driven alone, one turn a batch, on the
real PostgreSQL."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))


def test_each_pass_writes_its_turns_and_reports_the_threads_cpu_a_turn(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from batch_writer import measure

    spent = measure(pg_url, 3, 2, 5)  # a turn whose write fails raises its error
    assert len(spent) == 2 and all(figure > 0 for figure in spent)
    assert "write_batch" in capsys.readouterr().out  # the profile's top lines
