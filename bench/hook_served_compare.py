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

import argparse
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


def hook_parser(doc: str | None, rounds: int) -> argparse.ArgumentParser:
    """``compare_parser`` with ``--sessions``, the stored sessions of each tree's home."""
    parser = compare_parser(doc, rounds)
    parser.add_argument("--sessions", type=int, default=10_000, help="sessions stored in the home")
    return parser


FLOOR_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""The floor process's environment (it reads bytecode as the hooks do)."""


def wait_for_server(home: Path, seconds: float = 30.0) -> None:
    """Until ``home``'s hook server has written its pid file and made its socket."""
    deadline = time.monotonic() + seconds
    while server_pid(home) is None or not Path(socket_path(home)).exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"no hook server started for {home}")
        time.sleep(0.02)


def timed_start(
    command: list[str], env: dict[str, str], cwd: str, label: str, i: int
) -> tuple[float, float]:
    """(wall ms, CPU ms) of the SessionStart hook of a new session in ``cwd`` (``start_event``
    of ``label`` and ``i``); the benchmark stops if the hook restored nothing."""
    wall, cpu, out, _ = timed(command, env, start_event(cwd, label, i), cwd)
    if b"SESSION CONTINUITY" not in out:
        raise SystemExit(f"the {label} hook restored nothing: {out[:200]!r}")
    return wall, cpu


def hook_trees(
    rev: str, root: Path, sessions: int
) -> tuple[str, dict[str, dict[str, str]], dict[str, list[str]]]:
    """The old tree (``rev``) and this one under ``root``, each with a home of ``sessions``
    stored sessions: the repository the hooks run in, each tree's hook environment (the
    server on, its ``src`` on ``PYTHONPATH``) and its installed hook command."""
    trees = {"before": extract(rev, root) / "src", "after": ROOT / "src"}
    for src in trees.values():
        compileall.compile_dir(str(src), quiet=1)
    cwd = hooks.make_repo(root)
    envs: dict[str, dict[str, str]] = {}
    for label, src in trees.items():
        home = root / f"home-{label}"
        hooks.stored_sessions(home, cwd, sessions)
        for_tree(home / "brain.db", src.parent)
        envs[label] = {**hooks.child_env(home, server=True), "PYTHONPATH": str(src)}
    commands = {
        label: [PY, "-S", "-I", "-X", "frozen_modules=on"]
        + [str(src / "cortex" / "adapters" / "hooks" / "client.py"), "hook", "claude-code"]
        for label, src in trees.items()
    }
    return cwd, envs, commands


def stop_servers(envs: dict[str, dict[str, str]]) -> None:
    """Stop the hook server of each tree's home, if one runs."""
    for env in envs.values():
        pid = server_pid(Path(env["CORTEX_HOME"]))
        if pid:
            os.kill(pid, signal.SIGTERM)


def print_samples(samples: dict[str, list[tuple[float, float]]]) -> None:
    """The table of ``samples`` ((wall, CPU) ms per round, a "floor" among them): wall time,
    its ratio to the floor (the median and p95 of each round's ratio) and CPU time."""
    floors = [w for w, _ in samples["floor"]]
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


def main() -> None:
    args = hook_parser(__doc__, rounds=60).parse_args()
    with tempfile.TemporaryDirectory(prefix="cortex-served-compare-") as tmp:
        cwd, envs, commands = hook_trees(args.rev, Path(tmp), args.sessions)
        try:
            for label in envs:  # the first hook starts the tree's server
                timed(commands[label], envs[label], start_event(cwd, label, -1), cwd)
                wait_for_server(Path(envs[label]["CORTEX_HOME"]))
            samples: dict[str, list[tuple[float, float]]] = {}
            for i in range(args.rounds):
                samples.setdefault("floor", []).append(
                    timed([PY, "-c", "import sqlite3"], FLOOR_ENV)[:2]
                )
                samples.setdefault("python -S -I -c pass", []).append(
                    timed([PY, "-S", "-I", "-c", "pass"], FLOOR_ENV)[:2]
                )
                for label in envs:
                    done = timed_start(commands[label], envs[label], cwd, label, i)
                    samples.setdefault(f"hook, server up, {label}", []).append(done)
            served = {
                label: [
                    json.loads(line)["ms"]
                    for line in (Path(envs[label]["CORTEX_HOME"]) / "hooks" / "latency.jsonl")
                    .read_text()
                    .splitlines()[-args.rounds :]
                ]
                for label in envs
            }
        finally:
            stop_servers(envs)
    print(f"rev {args.rev}, {args.rounds} rounds; load average {os.getloadavg()}")
    print_samples(samples)
    for label, ms in served.items():
        print(f"server, input to answer, {label}: median {statistics.median(ms):.2f} ms, "
              f"p95 {hooks.p95(ms):.2f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
