"""Timing of the session-continuity protocol: the CLI rituals as whole processes, and the
orphan sweep and checkpoint verify in-process.

Run: ``.venv/bin/python bench/protocol.py`` (``--runs N``, ``--orphans N``, ``--checkpoints N``).
Processes are timed from spawn to exit and reported as ratios to a floor timed in the same run
(``python -c "import sqlite3"``), so the numbers compare across machines. The in-process parts
report milliseconds per session swept and per checkpoint verified. Prints a table and writes
bench/results/protocol.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cortex.clock import FixedClock
from cortex.config import load_config
from cortex.services.app import Services
from cortex.services.protocol.rituals import start_task

RESULTS = Path(__file__).parent / "results"
CORTEX = Path(sys.executable).parent / "cortex"
NOW = "2026-02-16T09:00:00Z"


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - started


def processes(root: Path, runs: int) -> dict[str, float]:
    """Median seconds of each ritual command, and of the floor."""
    repo = root / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEX_")}
    env.update(CORTEX_HOME=str(root / "home"), CORTEX_NOW=NOW)
    samples: dict[str, list[float]] = {"floor": [], "start": [], "checkpoint": [], "end": []}
    for i in range(runs):
        slug = f"task-{i}"
        subprocess.run(
            [str(CORTEX), "task", "init", slug], env=env, cwd=repo, check=True, capture_output=True
        )
        samples["floor"].append(timed([sys.executable, "-c", "import sqlite3"], env, repo))
        samples["start"].append(timed([str(CORTEX), "task", "start", slug], env, repo))
        samples["checkpoint"].append(
            timed(
                [str(CORTEX), "checkpoint", "create", "--task", slug, "--summary", "x"], env, repo
            )
        )
        samples["end"].append(
            timed([str(CORTEX), "task", "end", slug, "--outcome", "success"], env, repo)
        )
    return {name: statistics.median(values) for name, values in samples.items()}


def in_process(root: Path, orphans: int, checkpoints: int) -> dict[str, float]:
    """Milliseconds per orphan swept and per checkpoint verified."""
    clock = FixedClock(NOW)
    config = load_config(root / "home2", {}, {"tasks_root": str(root / "tasks")})
    with Services.open(config, clock) as app:
        for i in range(orphans):
            app.sessions.on_session_start(f"orphan-{i}", project="bench")
        clock.advance(seconds=config.lease_seconds + 1)
        started = time.perf_counter()
        swept = app.protocol.sweep_orphans()
        sweep_ms = (time.perf_counter() - started) * 1000 / max(1, swept.suspended)
        app.protocol.init_task("verify")
        start_task(app.protocol, "verify", project="bench", workdir=root)
        for i in range(checkpoints):
            app.protocol.create_checkpoint("verify", summary=f"step {i}")
        started = time.perf_counter()
        report = app.protocol.verify("verify")
        verify_ms = (time.perf_counter() - started) * 1000 / checkpoints
        assert report.ok, report.problems
    return {"sweep_ms_per_session": sweep_ms, "verify_ms_per_checkpoint": verify_ms}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--orphans", type=int, default=200)
    parser.add_argument("--checkpoints", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        medians = processes(Path(tmp), args.runs)
        inner = in_process(Path(tmp), args.orphans, args.checkpoints)
    floor = medians["floor"]
    print(f"floor (python -c 'import sqlite3'): {floor * 1000:.1f} ms median of {args.runs}")
    for name in ("start", "checkpoint", "end"):
        print(
            f"cortex {name:<11} {medians[name] * 1000:7.1f} ms  = "
            f"{medians[name] / floor:5.1f}x floor"
        )
    print(f"orphan sweep      {inner['sweep_ms_per_session']:7.2f} ms per session ({args.orphans})")
    print(
        f"checkpoint verify {inner['verify_ms_per_checkpoint']:7.3f} ms per checkpoint "
        f"({args.checkpoints})"
    )
    RESULTS.mkdir(exist_ok=True)
    ratios = {f"{k}_ratio": medians[k] / floor for k in ("start", "checkpoint", "end")}
    (RESULTS / "protocol.json").write_text(json.dumps({**medians, **ratios, **inner}, indent=2))


if __name__ == "__main__":
    main()
