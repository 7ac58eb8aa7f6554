"""Core engine benchmarks: the five original budgets and the project's goals (docs/benchmarks.md).

Run: ``.venv/bin/python bench/core.py`` (``--quick`` for a smaller store). Prints a table and
writes bench/results/core.json. Every figure is a median (and p95) over repeated runs on a
real SQLite file on disk; nothing is mocked.
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
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from compare import floor_ratios, floor_sample, p95  # bench/compare.py: the floor
from cortex.clock import FixedClock, to_iso
from cortex.config import load_config
from cortex.core.decay import apply_decay
from cortex.core.models import PendingTask, Pin, SessionState
from cortex.core.scoring import score_all
from cortex.services.sessions.manager import SessionPersistenceManager
from cortex.store import open_store

NOW = "2026-03-01T09:00:00Z"
PROJECT = "bench-project"
RESULTS = Path(__file__).parent / "results"


def make_session(
    i: int, end: str, project: str, *, channel: str = "cli", lead_topics: tuple[str, ...] = ()
) -> SessionState:
    """A realistic, fully populated session record (5 pins, 20 hot topics, 2 tasks)."""
    pins = tuple(
        Pin(f"pin {k}", f"note {k} of session {i}: " + "detail " * 20, end) for k in range(5)
    )
    tasks = tuple(PendingTask(f"task-{i}-{k}", f"Task {k}", "build") for k in range(2))
    topics = (*lead_topics, *(f"topic{(i + k) % 300}" for k in range(20 - len(lead_topics))))
    return SessionState(
        session_id=f"s{i:07d}",
        start_time=end,
        end_time=end,
        channel=channel,
        working_memory=pins,
        hot_topics=topics,
        active_projects=(lead_topics[0] if lead_topics else project,),
        pending_tasks=tasks,
        created_at=end,
        updated_at=end,
        state="COMPLETE",
        project=project,
        last_activity=end,
    )


def populate(
    db: Path,
    total: int,
    recent: int,
    project: str = PROJECT,
    other: str = "p{}",
    **session: Any,
) -> None:
    """``recent`` sessions of ``project`` in the last 7 days; the rest older or of other
    projects (``other`` formatted with ``i % 50``). ``session`` goes to ``make_session``."""
    now = FixedClock(NOW).now()
    store = open_store(db)
    with store.transaction():
        for i in range(total):
            if i < recent:
                end, owner = now - timedelta(hours=1 + i * 3), project
            else:
                end, owner = now - timedelta(hours=1 + (i % 2000) * 1.1), other.format(i % 50)
            store.save_session(make_session(i, to_iso(end), owner, **session))
    store.close()


def timed(fn: Callable[[], object], runs: int) -> dict[str, float]:
    """Median and p95 wall time of ``runs`` calls, and the median CPU time of this process
    (``cpu_median_ms``: what a busy machine inflates least)."""
    samples, cpu = [], []
    for _ in range(runs):
        started, cpu_started = time.perf_counter(), time.process_time()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - cpu_started) * 1000)
    return {
        "median_ms": statistics.median(samples),
        "p95_ms": p95(samples),
        "cpu_median_ms": statistics.median(cpu),
        "runs": runs,
    }


def restore(manager: SessionPersistenceManager, runs: int) -> dict[str, float]:
    """``on_session_start`` of a new session of ``PROJECT`` (the restore), ``runs`` times."""
    counter = iter(range(10**9))
    return timed(
        lambda: manager.on_session_start(
            f"r{next(counter)}", project=PROJECT, keywords=["topic3 topic4"]
        ),
        runs,
    )


def open_manager(home: Path) -> SessionPersistenceManager:
    return SessionPersistenceManager.open(load_config(home, {}), FixedClock(NOW))


def in_process(home: Path, runs: int) -> dict[str, dict[str, float]]:
    """Restore, capture, lookback, scoring and decay, in one process."""
    manager = open_manager(home)
    clock = manager.clock
    out: dict[str, dict[str, float]] = {}
    out["restore (on_session_start)"] = restore(manager, runs)
    sid = manager.on_session_start("capture", project=PROJECT).session_id
    out["turn capture (record)"] = timed(
        lambda: manager.record(
            sid,
            text="refactor the token middleware for the api",
            workdir="/home/u/Projects/api",
            tool_name="Edit",
            files=["/home/u/Projects/api/auth.py"],
        ),
        runs,
    )
    ends = iter(range(10**9))

    def capture_end() -> None:
        s = manager.on_session_start(f"e{next(ends)}", project="end-bench")
        manager.add_pin("note", "something to keep", s.session_id)
        manager.on_session_end(s.session_id)

    out["start+pin+end cycle"] = timed(capture_end, max(10, runs // 4))
    since = to_iso(clock.now() - timedelta(days=7))
    out["lookback query (7 days, limit 50)"] = timed(
        lambda: manager.store.completed_sessions_since(since, PROJECT, limit=50), runs
    )
    window = manager.store.completed_sessions_since(since, PROJECT, limit=50)
    out["score_all (50 sessions)"] = timed(
        lambda: score_all(window, ["topic3", "topic4"], clock.now(), 0.25, 3), runs
    )
    out["apply_decay x1000"] = timed(lambda: [apply_decay(0.9, h) for h in range(1000)], runs)
    manager.store.close()
    return out


def whole_process(
    home: Path,
    runs: int,
    command: Callable[[int], list[str]] | None = None,
    *,
    floor: bool = False,
) -> dict[str, float]:
    """A whole ``cortex`` process, interpreter start included: ``command(i)`` gives the
    arguments of run ``i`` (default: ``session start`` of a new session of ``PROJECT``).

    With ``floor``, a floor process is timed before each sample too (``compare.floor_ratios``:
    ``floor_ms``, ``x_floor``, ``x_floor_p95``)."""
    exe = str(Path(sys.executable).with_name("cortex"))
    # An installed package has its bytecode compiled; this environment may forbid writing it
    # (PYTHONDONTWRITEBYTECODE), which would make every process recompile Cortex.
    import compileall

    import cortex

    compileall.compile_dir(str(Path(cortex.__file__).parent), quiet=1)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(CORTEX_HOME=str(home), CORTEX_NOW=NOW)
    counter = iter(range(runs))
    make = command or (
        lambda i: ["session", "start", "--project", PROJECT, "--session-id", f"w{i}"]
    )
    if not floor:
        return timed(
            lambda: subprocess.run(
                [exe, *make(next(counter))], env=env, check=True, capture_output=True
            ),
            runs,
        )
    samples, floors = [], []
    for i in range(runs):
        floors.append(floor_sample())
        started = time.perf_counter()
        subprocess.run([exe, *make(i)], env=env, check=True, capture_output=True)
        samples.append((time.perf_counter() - started) * 1000)
    return {
        "median_ms": statistics.median(samples),
        "p95_ms": p95(samples),
        "runs": runs,
        **floor_ratios(samples, floors),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10,000 stored sessions, fewer runs")
    args = parser.parse_args()
    total, runs = (10_000, 50) if args.quick else (100_000, 200)
    results: dict[str, object] = {"stored_sessions": total, "sessions_in_window": 50}
    with tempfile.TemporaryDirectory(prefix="cortex-bench-") as tmp:
        for label, count in (("50 stored", 50), (f"{total:,} stored", total)):
            home = Path(tmp) / label.replace(" ", "_").replace(",", "")
            started = time.perf_counter()
            populate(home / "brain.db", count, 50)
            build = time.perf_counter() - started
            print(f"\n## {label} (50 in the 7-day window; built in {build:.1f}s)")
            rows = in_process(home, runs)
            rows["whole `cortex session start` process"] = whole_process(home, max(20, runs // 10))
            for name, r in rows.items():
                cpu = f"   CPU {r['cpu_median_ms']:8.3f} ms" if "cpu_median_ms" in r else ""
                print(
                    f"{name:<40} median {r['median_ms']:8.3f} ms   p95 {r['p95_ms']:8.3f} ms{cpu}"
                )
            results[label] = rows
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "core.json").write_text(json.dumps(results, indent=2))
    print(f"\nwrote {RESULTS / 'core.json'}")


if __name__ == "__main__":
    main()
