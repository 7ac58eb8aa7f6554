"""Before and after, sample by sample: the three process rows of the speed table on an older
commit and on this tree, interleaved with the floor.

    .venv/bin/python bench/process_compare.py --rev 3f3e176 --rounds 20

Each round times, one after another: the floor (``python -c "import sqlite3"``), then for the
old tree and for this one a SessionStart hook with the hook server disabled (the installed
command: ``python -S -I -X frozen_modules=on .../client.py hook claude-code``, 10,000 stored
sessions, the previous start left open as the table's runs leave it), a ``cortex session
start`` (10,000 stored sessions) and a ``cortex memory search`` (100,000 memories). The old tree
is ``git archive REV`` in a temporary directory, run by the same interpreter with its ``src``
first on ``PYTHONPATH`` and its bytecode compiled; its console script is this venv's wrapper
text run by path. Wall time and the child's CPU time (user + system) are both reported as
medians and as ratios to the floor's: on a shared, loaded machine the CPU ratio moves less.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import core  # noqa: E402 - the bench modules next to this file
import hooks  # noqa: E402
import memory  # noqa: E402
from compare import extract  # noqa: E402
from cortex.services.project import project_identity  # noqa: E402

ROOT = BENCH.parent
PY = sys.executable


def old_tree(rev: str, into: Path) -> Path:
    """``git archive rev`` unpacked under ``into``; returns its ``src``."""
    return extract(rev, into) / "src"


def timed(cmd: list[str], env: dict[str, str], stdin: bytes | None = None, cwd: str | None = None):
    """(wall ms, child CPU ms, stdout) of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, input=stdin, capture_output=True, cwd=cwd)
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{cmd[:4]} failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
    return wall, cpu, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rev", required=True, help="the older commit, e.g. HEAD~5")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--memories", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cortex-process-compare-") as tmp:
        root = Path(tmp)
        old_src = old_tree(args.rev, root)
        new_src = ROOT / "src"
        for src in (old_src, new_src):
            compileall.compile_dir(str(src), quiet=1)
        script = root / "cortex-old"
        script.write_text(Path(PY).with_name("cortex").read_text())
        cwd = hooks.make_repo(root)
        hook_db = root / "hook.db"
        core.populate(
            hook_db,
            args.sessions,
            50,
            project_identity(cwd, root / "cache").id,
            other="git:example.com/p{}",
            channel="claude-code",
            lead_topics=("radio-control", "ft991a"),
        )
        corpus, _ = memory.corpus(args.memories)
        service = memory.open_service(corpus)
        query, project, _ = memory.queries(service, 1, random.Random(memory.SEED + 2))[0]
        service.store.close()
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("CORTEX_", "PYTHONDONTWRITEBYTECODE", "PYTHONPATH"))
        }
        base["CORTEX_NOW"] = core.NOW
        trees = {
            "before": ({**base, "PYTHONPATH": str(old_src)}, old_src, [PY, str(script)]),
            "after": (base, new_src, [str(Path(PY).with_name("cortex"))]),
        }
        homes: dict[tuple[str, str], Path] = {}
        for label in trees:
            for kind, source in (("hook", hook_db), ("start", hook_db), ("search", corpus)):
                home = root / f"{label}-{kind}"
                home.mkdir()
                shutil.copyfile(source, home / "brain.db")
                homes[label, kind] = home
        samples: dict[str, list[tuple[float, float]]] = {}
        for i in range(args.rounds):
            wall, cpu, _ = timed([PY, "-c", "import sqlite3"], base)
            samples.setdefault("floor", []).append((wall, cpu))
            for label, (env, src, cortex) in trees.items():
                client = str(src / "cortex" / "adapters" / "hooks" / "client.py")
                event = {
                    "hook_event_name": "SessionStart",
                    "source": "startup",
                    "session_id": f"compare-{label}-{i}",
                    "transcript_path": "/tmp/t.jsonl",
                    "cwd": cwd,
                }
                hook_env = {**env, "CORTEX_HOME": str(homes[label, "hook"])}
                hook_env["CORTEX_HOOK_SERVER"] = "0"
                command = [PY, "-S", "-I", "-X", "frozen_modules=on", client, "hook", "claude-code"]
                wall, cpu, out = timed(command, hook_env, json.dumps(event).encode(), cwd)
                if b"SESSION CONTINUITY" not in out:
                    raise SystemExit(f"the {label} hook restored nothing: {out[:200]!r}")
                samples.setdefault(f"hook, no server, {label}", []).append((wall, cpu))
                start = [*cortex, "session", "start", "--project", core.PROJECT]
                start_env = {**env, "CORTEX_HOME": str(homes[label, "start"])}
                wall, cpu, _ = timed([*start, "--session-id", f"w{i}"], start_env)
                samples.setdefault(f"cortex session start, {label}", []).append((wall, cpu))
                search = [*cortex, "memory", "search", query, "--project", project]
                search_env = {**env, "CORTEX_HOME": str(homes[label, "search"])}
                wall, cpu, _ = timed(search, search_env)
                samples.setdefault(f"cortex memory search, {label}", []).append((wall, cpu))
    floor_wall = statistics.median(w for w, _ in samples["floor"])
    floor_cpu = statistics.median(c for _, c in samples["floor"])
    print(f"rev {args.rev}, {args.rounds} rounds; load average {os.getloadavg()}")
    print("| figure | wall ms | x floor | CPU ms | x floor CPU |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, values in samples.items():
        wall = statistics.median(w for w, _ in values)
        cpu = statistics.median(c for _, c in values)
        ratios = f"{wall / floor_wall:.2f} | {cpu:.1f} | {cpu / floor_cpu:.2f}"
        print(f"| {name} | {wall:.1f} | {ratios} |")


if __name__ == "__main__":
    main()
