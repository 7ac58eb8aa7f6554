"""Restore CPU and hook server memory, before and after, interleaved in one run.

Run: ``.venv/bin/python bench/restore_compare.py --rev 3f3e176`` (``--rounds N``, ``--runs N``).
The older commit is extracted with ``git archive`` (``bench/compare.py``'s ``extract``); each
round runs, for the older tree and for this checkout in turn (the order alternating by round),
a process that restores ``--runs`` times in-process on a copy of the same home of 10,000
stored sessions (50 in the window, ``bench/table.py``'s cached one), with ``PYTHONPATH`` at
that tree's ``src``, and a hook server of that tree through 1,000 events
(``bench/hook_server_rss.py``). Each restore figure is divided by a floor timed just before
it (a whole ``python -c "import sqlite3"`` process, median of 10); the memory by the floor
process's RSS. Prints a table and writes bench/results/restore_compare.json.

With ``--instructions`` it also counts, under valgrind (callgrind), the user-space instructions
of one restore of each tree: a process of 20 restores minus one of none, divided by 20. The
count does not depend on the machine's load (system calls' kernel time is not in it).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import hook_server_rss
import table
from compare import RESULTS, ROOT, extract, floor_ms, for_tree

WORKER = """
import json, sys
sys.path.insert(0, sys.argv[2])
import core
from pathlib import Path
manager = core.open_manager(Path(sys.argv[1]))
for i in range(20):  # warm: the first starts fill the process's caches
    manager.on_session_start(f"warm{i}", project=core.PROJECT, keywords=["topic3 topic4"])
runs = int(sys.argv[3])
print(json.dumps(core.restore(manager, runs) if runs else {}))
"""


def run_worker(tree: Path, home: Path, runs: int, prefix: tuple[str, ...] = ()) -> str:
    """Run the restore worker on ``tree``'s code (under ``prefix``); its output streams."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(tree / "src"), PYTHONHASHSEED="0")
    out = subprocess.run(
        [*prefix, sys.executable, "-c", WORKER, str(home), str(ROOT / "bench"), str(runs)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout + out.stderr


def restore_cpu(tree: Path, home: Path, runs: int) -> float:
    """Median CPU ms of ``runs`` restores in a process running ``tree``'s code."""
    out = run_worker(tree, home, runs)
    return float(json.loads(out.splitlines()[0])["cpu_median_ms"])


def restore_instructions(tree: Path, cached: Path, root: Path, runs: int = 20) -> float:
    """Millions of user-space instructions of one restore of ``tree`` (callgrind)."""
    counts = []
    for n in (0, runs):
        home = root / f"instructions-{tree.name}-{n}"
        home.mkdir()
        shutil.copyfile(cached, home / "brain.db")
        for_tree(home / "brain.db", tree)
        valgrind = ("valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null")
        found = re.search(r"Collected : (\d+)", run_worker(tree, home, n, valgrind))
        if found is None:
            raise SystemExit("valgrind printed no instruction count")
        counts.append(int(found.group(1)))
    return (counts[1] - counts[0]) / runs / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rev", required=True, help="the older commit, e.g. main")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--runs", type=int, default=150, help="restores per process")
    parser.add_argument("--instructions", action="store_true", help="also count (valgrind)")
    args = parser.parse_args()
    samples: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="cortex-restore-compare-") as tmp:
        root = Path(tmp)
        trees = {"before": extract(args.rev, root), "after": ROOT}
        for tree in trees.values():
            compileall.compile_dir(str(tree / "src"), quiet=1)  # servers start from bytecode
        cached = table.sessions_home(root, 10_000) / "brain.db"
        for n in range(args.rounds):
            order = list(trees) if n % 2 == 0 else list(reversed(trees))
            for label in order:
                home = root / f"{label}-{n}"
                home.mkdir()
                shutil.copyfile(cached, home / "brain.db")
                for_tree(home / "brain.db", trees[label])
                floor = floor_ms(10)
                cpu = restore_cpu(trees[label], home, args.runs)
                rss = hook_server_rss.measure_tree(trees[label], 1000)
                row = samples.setdefault(label, {})
                for key, value in (
                    ("floor_ms", floor),
                    ("restore_cpu_ms", cpu),
                    ("restore_x_floor", cpu / floor),
                    ("rss_after_mib", float(rss["after_mib"])),
                    ("rss_x_floor", float(rss["after_ratio_to_floor"])),
                ):
                    row.setdefault(key, []).append(value)
                print(
                    f"round {n + 1} {label}: restore {cpu:.3f} ms CPU, floor {floor:.1f} ms "
                    f"({cpu / floor:.4f}x); server {rss['after_mib']} MiB after 1,000 events",
                    flush=True,
                )
        if args.instructions:
            for label, tree in trees.items():
                count = restore_instructions(tree, cached, root)
                samples[label]["restore_minstructions"] = [count]
                print(f"{label}: {count:.2f} M instructions per restore", flush=True)
    medians = {
        label: {key: round(statistics.median(values), 4) for key, values in row.items()}
        for label, row in samples.items()
    }
    report = {"rev": args.rev, "rounds": args.rounds, "loadavg": os.getloadavg(), **medians}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "restore_compare.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nbefore = {args.rev}, after = this checkout; medians of {args.rounds} rounds")
    for label, medians_of in medians.items():
        print(f"{label}: " + ", ".join(f"{k} {v}" for k, v in medians_of.items()))
    print("load average at the end: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
