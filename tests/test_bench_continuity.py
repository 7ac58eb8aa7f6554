"""The continuity benchmark's plumbing: a tiny scenario through the real hook processes, and
a leak planted through the engine (a task every project sees) is caught by the metrics."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "bench" / "continuity"
sys.path.insert(0, str(HERE))

from generate import Item, Step, generate  # noqa: E402
from score import Truth, aggregate, recency_text, wilson  # noqa: E402

# bench/retrieval has a run.py too: load this one under its own name
_spec = importlib.util.spec_from_file_location("continuity_run", HERE / "run.py")
assert _spec is not None and _spec.loader is not None
continuity_run = sys.modules["continuity_run"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(continuity_run)
replay = continuity_run.replay

SEED = 25  # two sessions of one project over two days, one credential pasted in a prompt


def test_a_tiny_scenario_scores_clean_and_a_planted_leak_and_secret_are_caught(
    tmp_path: Path,
) -> None:
    scenario = generate(1, SEED, days=(2, 2))[0]
    truth = Truth(scenario)
    starts = replay(scenario, tmp_path / "clean")
    scores = [truth.score(s.text, s.project, datetime.fromisoformat(s.at)) for s in starts]
    assert len(scores) == 2
    assert all(s.leaks == 0 and s.secrets == 0 and s.superseded == 0 for s in scores)
    assert sum(s.tokens for s in scores) > 0  # the second start was warm

    # The same stream plus one task of another project added for every project: a leak.
    first = scenario.steps[0]
    other = (first.project + 1) % len(scenario.projects)
    at = first.at - timedelta(days=1)
    planted = Item("refleakme", other, "task", "wire the leak", at)
    step = Step(at, other, first.session, "cli", ("task", "add", "task-999", "wire the leak "
                "(refleakme)", "--any-project"))  # fmt: skip
    leaky = replace(scenario, steps=[step, *scenario.steps], items=[planted, *scenario.items])
    starts = replay(leaky, tmp_path / "leaky")
    leaked = [Truth(leaky).score(s.text, s.project, datetime.fromisoformat(s.at)) for s in starts]
    assert [s.leaks for s in leaked] == [0, 1]

    # A credential in the text is counted; the recency baseline keeps the pasted one.
    warm = starts[1]
    when, secret = scenario.secrets[0]
    with_secret = truth.score(warm.text + f"\nkey: {secret}", warm.project, when + timedelta(1))
    assert with_secret.secrets == 1
    baseline = recency_text(scenario, when + timedelta(days=1), 50)
    assert truth.score(baseline, warm.project, when + timedelta(days=1)).secrets == 1


def test_aggregates_pool_counts_with_wilson_intervals() -> None:
    share, low, high = wilson(9, 10)
    assert (round(share, 1), round(low, 1), round(high, 1)) == (90.0, 59.6, 98.2)
    scenario = generate(1, SEED, days=(2, 2))[0]
    truth = Truth(scenario)
    end = scenario.steps[-1].at + timedelta(hours=1)
    row = aggregate([truth.score("", 0, end), truth.score(recency_text(scenario, end, 3), 0, end)])
    assert row["tokens_mean"][0] > 0 and row["superseded_injected"][0] == 0
