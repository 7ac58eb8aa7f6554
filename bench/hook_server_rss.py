"""Resident memory of the hook server: idle, then after N events (default 1,000).

Run: ``.venv/bin/python bench/hook_server_rss.py [--events 1000] [--json]``, or
``... --rev d20ce8b [--rounds 6]`` for an older commit's server and this checkout's, interleaved
(the older tree from ``git archive``, as ``bench/compare.py`` extracts it; the order alternating
by round), with each tree's median and range.

A real hook server (``python -m cortex.adapters.hooks.server HOME``) on a throwaway home gets
Claude Code events over its Unix socket, as hook processes send them: sessions of one start,
98 prompts and one end. Its ``VmRSS`` is read from ``/proc`` (Linux). The floor is the RSS of
``python -c "import sqlite3"`` held open in the same run: what any Python process costs.

The home's database exists before the server starts (a home is migrated once, by its first
command or hook; a hook server starts many times over its life). With ``--fresh-home`` the
server's first event creates it, and the server carries the migration steps' code too
(about 0.6 MiB).
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

from cortex.adapters.hooks.wire import request, socket_path


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def floor_mib() -> float:
    code = "import sqlite3, sys; sys.stdout.write('ready\\n'); sys.stdout.flush(); sys.stdin.read()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    try:
        return rss_mib(proc.pid)
    finally:
        proc.communicate("")


def measure(events: int, progress: bool = True, fresh_home: bool = False) -> dict[str, float | int]:
    """RSS of a hook server idle and after ``events`` events, and the floor's, in MiB."""
    home = tempfile.mkdtemp(prefix="cortex-rss-")
    env = {**os.environ, "CORTEX_HOME": home, "CORTEX_HOOK_IDLE_SECONDS": "600"}
    if not fresh_home:  # migrated, as a home in use is, by the code that serves it (an older
        # tree's server refuses a file a newer tree migrated, and answers every event with that)
        make = "import sys; from cortex.store.sqlite.store import SQLiteStore as S; "
        make += "S(sys.argv[1]).close()"
        subprocess.run(
            [sys.executable, "-c", make, str(Path(home) / "brain.db")], env=env, check=True
        )
    env["CORTEX_CODECACHE"] = "0"  # as ``spawn`` starts it: no cache, from its first import
    server = subprocess.Popen([sys.executable, "-m", "cortex.adapters.hooks.server", home], env=env)
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(socket_path(home)):
            if time.monotonic() > deadline:
                raise SystemExit("the hook server did not start")
            time.sleep(0.05)
        idle = rss_mib(server.pid)
        sent = 0
        while sent < events:
            sid = f"s{sent}"
            session = [{"hook_event_name": "SessionStart", "source": "startup"}]
            session += [
                {"hook_event_name": "UserPromptSubmit", "prompt": f"turn {i} on the ft991a cat"}
                for i in range(98)
            ]
            session.append({"hook_event_name": "SessionEnd"})
            for event in session[: events - sent]:
                raw = json.dumps({**event, "session_id": sid, "cwd": home}).encode()
                request(home, "claude-code", raw, {"CORTEX_HOME": home}, home)
                sent += 1
            if progress:
                print(f"\r{sent}/{events} events", end="", file=sys.stderr, flush=True)
        if progress:
            print(file=sys.stderr)
        after = rss_mib(server.pid)
    finally:
        server.terminate()
        server.wait(10)
    floor = floor_mib()
    return {
        "events": sent,
        "floor_mib": round(floor, 2),
        "idle_mib": round(idle, 2),
        "after_mib": round(after, 2),
        "after_ratio_to_floor": round(after / floor, 2),
        "load": os.getloadavg()[0],
    }


def measure_tree(tree: Path, events: int) -> dict[str, float | int]:
    """``measure`` with a server running ``tree``'s code (``PYTHONPATH`` at its ``src``)."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(tree / "src")
    try:
        return measure(events, progress=False)
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


def compare(rev: str, rounds: int, events: int) -> dict[str, list[float]]:
    """RSS after ``events`` of ``rev``'s server and this checkout's, interleaved, in MiB."""
    import compileall

    from compare import ROOT, extract

    after: dict[str, list[float]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory(prefix="cortex-rss-compare-") as tmp:
        trees = {"before": extract(rev, Path(tmp)), "after": ROOT}
        for tree in trees.values():
            compileall.compile_dir(str(tree / "src"), quiet=1)  # servers start from bytecode
        for n in range(rounds):
            for label in list(trees) if n % 2 == 0 else reversed(list(trees)):
                result = measure_tree(trees[label], events)
                after[label].append(float(result["after_mib"]))
                print(
                    f"round {n + 1} {label}: {result['after_mib']:.2f} MiB after {events:,} "
                    f"events (floor {result['floor_mib']:.2f} MiB), load {result['load']:.1f}",
                    flush=True,
                )
    return after


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--fresh-home",
        action="store_true",
        help="no database yet: the server's first event migrates",
    )
    parser.add_argument("--rev", help="also measure this older commit's server, interleaved")
    parser.add_argument("--rounds", type=int, default=6, help="with --rev: rounds of both")
    args = parser.parse_args()
    if args.rev:
        runs = compare(args.rev, args.rounds, args.events)
        if args.json:
            print(json.dumps({"rev": args.rev, **runs}))
        for label, values in runs.items():
            print(
                f"{label}: median {statistics.median(values):.2f} MiB "
                f"(range {min(values):.2f}-{max(values):.2f}, {len(values)} runs)"
            )
        print("load average at the end: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
        return 0
    result = measure(args.events, fresh_home=args.fresh_home)
    sent, idle, after, floor = (
        result["events"],
        result["idle_mib"],
        result["after_mib"],
        result["floor_mib"],
    )
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"hook server RSS: idle {idle:.1f} MiB, after {sent:,} events {after:.1f} MiB "
            f"({after / floor:.2f}x the floor, python + sqlite3: {floor:.1f} MiB); "
            f"load {result['load']:.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
