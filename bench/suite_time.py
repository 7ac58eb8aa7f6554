"""How long the test suite takes: wall time and CPU time of a pytest command, beside a floor
timed in the same run and the load average before and after.

Run: ``.venv/bin/python bench/suite_time.py`` (the ``make test`` command: ``pytest -n auto
--dist loadgroup``), or ``-- ARGS...`` for other pytest arguments (``-- -p no:xdist`` for one
process). ``--durations N`` prints the slowest tests. The floor is a whole
``python -c "import sqlite3"`` process of this virtualenv (median of 7, before the suite); CPU
time is the suite's and its waited-for children's (``getrusage``), so a server a test leaves
behind is not counted. Appends one JSON line to bench/results/suite_time.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "suite_time.jsonl"
MAKE_TEST = ["-n", "auto", "--dist", "loadgroup"]
sys.path.insert(0, str(ROOT / "bench"))

from compare import floor_ms  # noqa: E402 - bench/compare.py, the shared floor


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--durations", type=int, default=0, help="print the N slowest tests")
    parser.add_argument("pytest_args", nargs="*", help="pytest arguments (default: make test's)")
    args = parser.parse_args()
    pytest_args = args.pytest_args or MAKE_TEST
    if args.durations:
        pytest_args = [*pytest_args, f"--durations={args.durations}"]
    floor = floor_ms(7) / 1000
    load_before = os.getloadavg()
    cpu_before = children_cpu()
    start = time.perf_counter()
    # As `make test` runs it: bytecode caches written even where PYTHONDONTWRITEBYTECODE is set.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *pytest_args]
    done = subprocess.run(command, env=env)
    wall = time.perf_counter() - start
    cpu = children_cpu() - cpu_before
    load_after = os.getloadavg()
    result = {
        "pytest_args": pytest_args,
        "exit_code": done.returncode,
        "floor_s": round(floor, 4),
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "wall_per_floor": round(wall / floor),
        "cpu_per_floor": round(cpu / floor),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in load_after],
        "cores": os.cpu_count(),
    }
    print(json.dumps(result))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as out:
        out.write(json.dumps(result) + "\n")
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
