"""Whole-process timing of ``cortex hook claude-code`` against a home with 10,000 sessions.

Run: ``.venv/bin/python bench/hooks.py`` (``--runs N``, ``--sessions N``). Each sample is one
real process of the command ``cortex install`` writes (the venv's interpreter running the hook
client by absolute path), with the event's JSON on stdin, interpreter start included, timed
from spawn to exit; peak RSS comes from GNU time.
Two modes: through the hook server (the default for users: started by the first hook, then
warm) and in-process (``CORTEX_HOOK_SERVER=0``: every process imports the engine). With
``--versus-script``, also the floor, the installed command and the ``cortex`` script, one after
another per sample, through the server. Prints a table and writes bench/results/hooks.json.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import cortex
from compare import floor_ratios, floor_sample, p95  # bench/compare.py: the floor
from core import NOW, populate  # bench/core.py: the same realistic sessions
from cortex.adapters.hooks.install_hosts import hook_program
from cortex.adapters.hooks.server import server_pid, socket_path
from cortex.services.project import project_identity

RESULTS = Path(__file__).parent / "results"
CORTEX = Path(sys.executable).parent / "cortex"
GNU_TIME = "/usr/bin/time"
Row = dict[str, float | int | None]
Events = dict[str, Callable[[int], dict[str, object]]]


def make_repo(root: Path) -> str:
    """A real git repository with a remote and a commit; returns its working tree."""
    repo = root / "radio-control"
    (repo / "src").mkdir(parents=True)
    git = ["git", "-C", str(repo)]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "remote", "add", "origin", "git@github.com:lbf/radio-control.git"])
    who = ["-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    subprocess.run([*git, *who, "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    return str(repo)


def hook_command() -> list[str]:
    """What ``cortex install claude-code`` writes for this checkout, as words: this
    interpreter running the hook client by path (the console script where install uses it)."""
    return [*shlex.split(hook_program({}, str(CORTEX))), "hook", "claude-code"]


def _hook(
    prefix: list[str],
    payload: dict[str, object],
    env: dict[str, str],
    cwd: str,
    command: list[str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """One installed hook process (after ``prefix``; ``command`` instead of the installed one)
    with ``payload`` on stdin."""
    return subprocess.run(
        [*prefix, *(command or hook_command())],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=env,
        cwd=cwd,
        check=True,
    )


def run_once(
    payload: dict[str, object], env: dict[str, str], cwd: str, command: list[str] | None = None
) -> tuple[float, str]:
    """(milliseconds, stdout) of one whole hook process."""
    started = time.perf_counter()
    result = _hook([], payload, env, cwd, command)
    return (time.perf_counter() - started) * 1000, result.stdout.decode()


def versus_script(events: Events, env: dict[str, str], cwd: str, runs: int) -> dict[str, Row]:
    """Per sample, one after another: the floor (``python -c "import sqlite3"``), the installed
    command and the ``cortex hook claude-code`` script; medians and medians of the per-sample
    ratios to the floor, so that a busy host's swings hit all three alike."""
    floor = [sys.executable, "-c", "import sqlite3"]
    script = [str(CORTEX), "hook", "claude-code"]
    results: dict[str, Row] = {}
    for name, make in events.items():
        samples: dict[str, list[float]] = {"floor": [], "installed": [], "script": []}
        for i in range(runs):
            started = time.perf_counter()
            subprocess.run(floor, check=True)
            samples["floor"].append((time.perf_counter() - started) * 1000)
            samples["installed"].append(run_once(make(2 * i), env, cwd)[0])
            samples["script"].append(run_once(make(2 * i + 1), env, cwd, script)[0])
        row: Row = {"runs": runs}
        for label, values in samples.items():
            row[f"{label}_ms"] = round(statistics.median(values), 1)
            ratios = [v / f for v, f in zip(values, samples["floor"], strict=True)]
            row[f"{label}_x_floor"] = round(statistics.median(ratios), 2)
        results[name] = row
    return results


def peak_rss_mib(payload: dict[str, object], env: dict[str, str], cwd: str) -> float | None:
    """Peak RSS of one hook process, via GNU time (a forked Python parent would inflate it)."""
    if not Path(GNU_TIME).exists():
        return None
    result = _hook([GNU_TIME, "-f", "%M"], payload, env, cwd)
    return round(int(result.stderr.decode().split()[-1]) / 1024, 1)


def measure(
    events: Events, env: dict[str, str], cwd: str, runs: int, floor: bool = False
) -> dict[str, Row]:
    """Median and p95 of ``runs`` hook processes per event; with ``floor``, a floor process
    (``python -c "import sqlite3"``) before each sample too: its median (``floor_ms``) and the
    median and p95 of the per-sample ratios (``x_floor``, ``x_floor_p95``)."""
    results: dict[str, Row] = {}
    for name, make in events.items():
        samples, floors = [], []
        for i in range(runs):
            if floor:
                floors.append(floor_sample())
            ms, out = run_once(make(i), env, cwd)
            if name == "SessionStart" and "SESSION CONTINUITY" not in out:
                raise SystemExit(f"SessionStart restored nothing: {out!r}")
            samples.append(ms)
        row: Row = {
            "median_ms": round(statistics.median(samples), 1),
            "p95_ms": round(p95(samples), 1),
            "peak_rss_mib": peak_rss_mib(make(runs), env, cwd),
            "runs": runs,
        }
        if floors:
            row.update(floor_ratios(samples, floors))
        results[name] = row
    return results


def hook_events(cwd: str) -> Events:
    """Event makers: a fresh session per SessionStart; prompts and tools to one live session."""
    base = {"transcript_path": "/tmp/t.jsonl", "cwd": cwd}

    def start(i: int) -> dict[str, object]:
        sid = f"bench-start-{time.time_ns()}-{i}"
        return {**base, "hook_event_name": "SessionStart", "source": "startup", "session_id": sid}

    def prompt(i: int) -> dict[str, object]:
        text = f"tune the ft991a cat control, attempt {i}"
        return {**base, "hook_event_name": "UserPromptSubmit", "session_id": "live", "prompt": text}

    def tool(i: int) -> dict[str, object]:
        tool_input = {"file_path": f"{cwd}/src/cat_{i}.py", "old_string": "a", "new_string": "b"}
        return {
            **base,
            "hook_event_name": "PostToolUse",
            "session_id": "live",
            "tool_name": "Edit",
            "tool_input": tool_input,
        }

    return {"SessionStart": start, "UserPromptSubmit": prompt, "PostToolUse": tool}


def child_env(home: Path, server: bool) -> dict[str, str]:
    """The hosts' environment: ours minus Cortex/Claude variables and the no-bytecode switch
    (installed packages have their bytecode compiled; a hook never compiles on each run)."""
    drop = ("CORTEX_", "CLAUDE_", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(
        CORTEX_HOME=str(home),
        CORTEX_NOW=NOW,
        CORTEX_HOOK_SERVER="1" if server else "0",
        CORTEX_HOOK_SERVER_IDLE="300",
    )
    return env


def stored_sessions(home: Path, cwd: str, sessions: int) -> None:
    """``home``'s database with ``sessions`` realistic sessions, 50 of them of ``cwd``'s project
    in its restore window (the rest older or of other projects)."""
    populate(
        home / "brain.db",
        sessions,
        50,
        project_identity(cwd, home / "cache").id,
        other="git:example.com/p{}",
        channel="claude-code",
        lead_topics=("radio-control", "ft991a"),
    )


def bench_mode(
    root: Path,
    cwd: str,
    mode: str,
    sessions: int,
    runs: int,
    only: tuple[str, ...] = (),
    versus: dict[str, Row] | None = None,
    floor: bool = False,
) -> dict[str, Row]:
    """One mode (``server`` or ``in-process``) on a new home of ``sessions`` stored sessions;
    every event, or the ``only`` ones (``floor``: interleaved with the floor, see
    ``measure``). With ``versus`` (server mode), ``versus_script``'s rows go into it too."""
    home = root / f"home-{mode}"
    stored_sessions(home, cwd, sessions)
    env = child_env(home, mode == "server")
    events = hook_events(cwd)
    run_once(events["SessionStart"](0), env, cwd)  # starts the server in server mode
    deadline = time.monotonic() + 30
    while mode == "server" and not Path(socket_path(home)).exists():
        if time.monotonic() > deadline:
            raise SystemExit("the hook server did not start")
        time.sleep(0.1)
    live: dict[str, object] = {
        "hook_event_name": "SessionStart",
        "source": "startup",
        "session_id": "live",
        "cwd": cwd,
    }
    run_once(live, env, cwd)
    try:
        chosen = {k: v for k, v in events.items() if not only or k in only}
        rows = measure(chosen, env, cwd, runs, floor)
        if versus is not None and mode == "server":
            versus.update(versus_script(chosen, env, cwd, runs))
        return rows
    finally:
        pid = server_pid(home)
        if pid:
            os.kill(pid, signal.SIGTERM)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument(
        "--versus-script",
        action="store_true",
        help="also time, per sample, the floor, the installed command and the `cortex` script",
    )
    args = parser.parse_args()
    compileall.compile_dir(Path(cortex.__file__).parent, quiet=1)
    report: dict[str, object] = {"sessions": args.sessions, "command": shlex.join(hook_command())}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cwd = make_repo(root)
        versus: dict[str, Row] | None = {} if args.versus_script else None
        for mode in ("server", "in-process"):
            report[mode] = bench_mode(root, cwd, mode, args.sessions, args.runs, versus=versus)
        if versus:
            report["server, versus the cortex script"] = versus
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "hooks.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"{args.sessions} stored sessions, {args.runs} runs per row: {report['command']}")
    print(f"{'mode':<11} {'event':<17} {'median ms':>9} {'p95 ms':>7} {'peak RSS MiB':>12}")
    for mode in ("server", "in-process"):
        rows = report[mode]
        assert isinstance(rows, dict)
        for name, row in rows.items():
            print(
                f"{mode:<11} {name:<17} {row['median_ms']:>9} {row['p95_ms']:>7} "
                f"{row['peak_rss_mib'] or '-':>12}"
            )
    if versus:
        print("\nhook server, per sample: floor / installed command / `cortex` script (x floor)")
        for name, row in versus.items():
            print(
                f"{name:<17} {row['floor_ms']:>6} ms / {row['installed_ms']:>6} ms "
                f"({row['installed_x_floor']:.2f}x) / {row['script_ms']:>6} ms "
                f"({row['script_x_floor']:.2f}x)"
            )


if __name__ == "__main__":
    main()
