"""Before and after, sample by sample: the hook through a warm hook server, on an older commit
and on this tree, interleaved with the floor.

    .venv/bin/python bench/hook_served_compare.py --rev 6b3bee6 --rounds 60

Each round times, one after another: the floor (``python -c "import sqlite3"``), a bare
``python -S -I -c pass`` (the interpreter alone), then for the old tree and for this one the
installed command (``python -S -I -X frozen_modules=on .../client.py hook claude-code``) with a
new session's SessionStart, answered by that tree's hook server over 10,000 stored sessions
(started by a first hook, as for users). Each tree has its own home. Per process: wall time as
the median and p95 of the per-round ratios to that round's floor (a busy machine's swings hit
both), and the child's CPU time (user + system: the client's own cost). Per tree also the
server's time from input to answer, as the server records it in ``hooks/latency.jsonl``. The
old tree is ``git archive REV`` (``bench/compare.py``), run by the same interpreter with its
``src`` first on ``PYTHONPATH`` (for its server) and its bytecode compiled.
"""

from __future__ import annotations

import compileall
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import hooks  # noqa: E402 - the bench modules next to this file
from compare import compare_parser, extract, for_tree  # noqa: E402
from cortex.adapters.hooks.server import server_pid, socket_path  # noqa: E402
from process_compare import timed  # noqa: E402

ROOT = BENCH.parent
PY = sys.executable


def start_event(cwd: str, label: str, i: int) -> bytes:
    sid = f"served-{label}-{i}-{time.time_ns()}"
    payload = {"hook_event_name": "SessionStart", "source": "startup", "session_id": sid}
    return json.dumps({**payload, "transcript_path": "/tmp/t.jsonl", "cwd": cwd}).encode()


def main() -> None:
    parser = compare_parser(__doc__, rounds=60)
    parser.add_argument("--sessions", type=int, default=10_000, help="sessions stored in the home")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cortex-served-compare-") as tmp:
        root = Path(tmp)
        trees = {"before": extract(args.rev, root) / "src", "after": ROOT / "src"}
        for src in trees.values():
            compileall.compile_dir(str(src), quiet=1)
        cwd = hooks.make_repo(root)
        envs: dict[str, dict[str, str]] = {}
        for label, src in trees.items():
            home = root / f"home-{label}"
            hooks.stored_sessions(home, cwd, args.sessions)
            for_tree(home / "brain.db", src.parent)
            envs[label] = {**hooks.child_env(home, server=True), "PYTHONPATH": str(src)}
        commands = {
            label: [PY, "-S", "-I", "-X", "frozen_modules=on"]
            + [str(src / "cortex" / "adapters" / "hooks" / "client.py"), "hook", "claude-code"]
            for label, src in trees.items()
        }
        base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        try:
            for label in trees:  # the first hook starts the tree's server
                timed(commands[label], envs[label], start_event(cwd, label, -1), cwd)
                home = Path(envs[label]["CORTEX_HOME"])
                deadline = time.monotonic() + 30
                while server_pid(home) is None or not Path(socket_path(home)).exists():
                    if time.monotonic() > deadline:
                        raise SystemExit(f"the {label} hook server did not start")
                    time.sleep(0.1)
            samples: dict[str, list[tuple[float, float]]] = {}
            for i in range(args.rounds):
                samples.setdefault("floor", []).append(
                    timed([PY, "-c", "import sqlite3"], base)[:2]
                )
                samples.setdefault("python -S -I -c pass", []).append(
                    timed([PY, "-S", "-I", "-c", "pass"], base)[:2]
                )
                for label in trees:
                    wall, cpu, out, _ = timed(
                        commands[label], envs[label], start_event(cwd, label, i), cwd
                    )
                    if b"SESSION CONTINUITY" not in out:
                        raise SystemExit(f"the {label} hook restored nothing: {out[:200]!r}")
                    samples.setdefault(f"hook, server up, {label}", []).append((wall, cpu))
            served = {
                label: [
                    json.loads(line)["ms"]
                    for line in (Path(envs[label]["CORTEX_HOME"]) / "hooks" / "latency.jsonl")
                    .read_text()
                    .splitlines()[-args.rounds :]
                ]
                for label in trees
            }
        finally:
            for env in envs.values():
                pid = server_pid(Path(env["CORTEX_HOME"]))
                if pid:
                    os.kill(pid, signal.SIGTERM)
    floors = [w for w, _ in samples["floor"]]
    print(f"rev {args.rev}, {args.rounds} rounds; load average {os.getloadavg()}")
    print("| process | wall ms | x floor (median) | x floor (p95) | CPU ms |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, values in samples.items():
        ratios = [w / f for (w, _), f in zip(values, floors, strict=True)]
        wall = statistics.median(w for w, _ in values)
        cpu = statistics.median(c for _, c in values)
        print(
            f"| {name} | {wall:.1f} | {statistics.median(ratios):.2f} | {hooks.p95(ratios):.2f} "
            f"| {cpu:.1f} |"
        )
    for label, ms in served.items():
        print(f"server, input to answer, {label}: median {statistics.median(ms):.2f} ms, "
              f"p95 {hooks.p95(ms):.2f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
