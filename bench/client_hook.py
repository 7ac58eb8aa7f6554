"""The client-mode hook against the local hook: whole ``cortex hook claude-code`` processes.

Run: ``.venv/bin/python bench/client_hook.py`` (``--runs N``, ``--sessions N``, ``--modes
server,in-process``). A local home holds ``--sessions`` realistic sessions; the same file is
imported (``cortex server import``) into a tenant of a scratch PostgreSQL database served by a
real ``cortex serve`` process on a loopback port, and a second home is that tenant's client
(``CORTEX_SERVER`` + ``CORTEX_API_KEY``). The same events (SessionStart of a fresh session,
UserPromptSubmit and PostToolUse of a live one) go to both homes, interleaved with a floor
process (``python -c "import sqlite3"`` of this virtualenv) and in a rotating order, so that
all three see the same load. ``server`` mode uses each home's hook server (what users run:
the client's keeps its keep-alive connection to the team server); ``in-process`` turns it
off. Prints medians, each as a ratio to the floor, and client/local; writes
bench/results/client_hook.json. The scratch database is dropped at the end.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

import core  # bench/core.py: the same realistic sessions
import cortex
from cortex.adapters.hooks.server import server_pid, socket_path
from cortex.clock import SystemClock, to_iso
from cortex.services.hosting import ServiceHost
from cortex.services.project import project_identity
from cortex.services.transfer import import_file
from hooks import CORTEX, hook_events, make_repo, run_once  # bench/hooks.py
from server_load import ADMIN, free_port

RESULTS = Path(__file__).parent / "results"
SECRET = "bench-secret-0123456789abcdefghijkl"
EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse")


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def floor_once() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import sqlite3"], check=True)
    return (time.perf_counter() - started) * 1000


@contextmanager
def scratch_database() -> Iterator[str]:
    name = f"cortex_bench_{secrets.token_hex(4)}"
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield ADMIN.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def tenant_with(url: str, root: Path, db: Path) -> str:
    """A tenant holding ``db``'s sessions (imported); its write key."""
    host = ServiceHost(url, root / "import", pool_size=2, secret=SECRET)
    try:
        with host.registry() as app:
            app.tenants.create_tenant("bench")
            key = app.tenants.create_key("bench", "read,write")[1]
        import_file(db, host, "bench")
        return key
    finally:
        host.close()


@contextmanager
def serving(url: str, home: Path) -> Iterator[str]:
    """A real ``cortex serve`` process (one worker) on a loopback port."""
    port = free_port()
    env = dict(os.environ) | {"CORTEX_HOME": str(home), "CORTEX_SERVER_SECRET": SECRET}
    proc = subprocess.Popen(
        [str(CORTEX), "serve", "--db", url, "--port", str(port), "--workers", "1"],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(150):
            try:
                with urllib.request.urlopen(base + "/readyz", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            time.sleep(0.2)
        else:
            raise SystemExit("cortex serve did not become ready")
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def home_env(home: Path, hook_server: bool, **extra: str) -> dict[str, str]:
    """The hosts' environment (no Cortex/Claude variables) for ``home``; real time."""
    drop = ("CORTEX_", "CLAUDE_", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(CORTEX_HOME=str(home), CORTEX_HOOK_SERVER="1" if hook_server else "0",
               CORTEX_HOOK_SERVER_IDLE="300", **extra)  # fmt: skip
    return env


def warm(home: Path, env: dict[str, str], cwd: str, hook_server: bool) -> None:
    """Start the home's hook server (when on) and open the live session the events use."""
    run_once(hook_events(cwd)["SessionStart"](0), env, cwd)
    deadline = time.monotonic() + 30
    while hook_server and not Path(socket_path(home)).exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"the hook server of {home} did not start")
        time.sleep(0.1)
    live = {"hook_event_name": "SessionStart", "source": "startup", "session_id": "live"}
    run_once({**live, "cwd": cwd}, env, cwd)


def measure(homes: dict[str, dict[str, str]], cwd: str, runs: int) -> dict[str, dict[str, float]]:
    """Per event: median and p95 ms of the floor and of each home, interleaved."""
    events = hook_events(cwd)
    samples: dict[str, dict[str, list[float]]] = {
        e: {k: [] for k in ("floor", *homes)} for e in EVENTS
    }
    kinds = ["floor", *homes]
    for i in range(runs):
        for event in EVENTS:
            for kind in kinds[i % 3 :] + kinds[: i % 3]:  # rotate who goes first
                if kind == "floor":
                    samples[event][kind].append(floor_once())
                    continue
                ms, out = run_once(events[event](i + 1), homes[kind], cwd)
                if event == "SessionStart" and "SESSION CONTINUITY" not in out:
                    raise SystemExit(f"{kind} SessionStart restored nothing: {out!r}")
                samples[event][kind].append(ms)
    return {event: summary(by_kind) for event, by_kind in samples.items()}


def summary(by_kind: dict[str, list[float]]) -> dict[str, float]:
    """``<kind>_median_ms`` and ``<kind>_p95_ms`` of each kind's samples."""
    row = {}
    for kind, values in by_kind.items():
        ordered = sorted(values)
        row[f"{kind}_median_ms"] = round(statistics.median(ordered), 1)
        row[f"{kind}_p95_ms"] = round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 1)
    return row


def with_ratios(rows: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    for row in rows.values():
        floor = row["floor_median_ms"]
        row["local_x_floor"] = round(row["local_median_ms"] / floor, 2)
        row["client_x_floor"] = round(row["client_median_ms"] / floor, 2)
        row["client_x_local"] = round(row["client_median_ms"] / row["local_median_ms"], 2)
    return rows


def stop_hook_servers(*homes: Path) -> None:
    for home in homes:
        pid = server_pid(home)
        if pid:
            os.kill(pid, signal.SIGTERM)


def bench(root: Path, url: str, modes: list[str], sessions: int, runs: int) -> dict[str, object]:
    cwd = make_repo(root)
    local_home = root / "local"
    core.NOW = to_iso(SystemClock().now())  # both homes run on the real clock (the server's)
    core.populate(local_home / "brain.db", sessions, 50, project_identity(cwd, root / "cache").id,
                  other="git:example.com/p{}", channel="claude-code",
                  lead_topics=("radio-control", "ft991a"))  # fmt: skip
    log(f"importing {sessions} sessions into the tenant")
    key = tenant_with(url, root, local_home / "brain.db")
    report: dict[str, object] = {}
    with serving(url, root / "server-home") as base:
        for mode in modes:
            on = mode == "server"
            client_home = root / f"client-{mode}"
            homes = {
                "local": home_env(local_home, on),
                "client": home_env(client_home, on, CORTEX_SERVER=base, CORTEX_API_KEY=key),
            }
            try:
                warm(local_home, homes["local"], cwd, on)
                warm(client_home, homes["client"], cwd, on)
                log(f"{mode}: {runs} rounds of {', '.join(EVENTS)}")
                report[mode] = with_ratios(measure(homes, cwd, runs))
            finally:
                stop_hook_servers(local_home, client_home)
            if (client_home / "brain.db").exists():
                raise SystemExit("the client home captured locally: it did not reach the server")
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--modes", default="server,in-process")
    args = parser.parse_args()
    compileall.compile_dir(Path(cortex.__file__).parent, quiet=1)
    load_before = [round(x, 2) for x in os.getloadavg()]
    with scratch_database() as url, tempfile.TemporaryDirectory() as tmp:
        modes = [m.strip() for m in args.modes.split(",") if m.strip()]
        rows = bench(Path(tmp), url, modes, args.sessions, args.runs)
    report = {
        "command": f"{CORTEX} hook claude-code",
        "sessions": args.sessions,
        "runs": args.runs,
        "cpus": os.cpu_count(),
        "loadavg_before": load_before,
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        **rows,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "client_hook.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"{args.sessions} sessions, {args.runs} interleaved rounds, load "
          f"{load_before} -> {report['loadavg_after']}")  # fmt: skip
    print(f"{'mode':<11} {'event':<17} {'floor ms':>8} {'local ms':>8} {'client ms':>9} "
          f"{'local/floor':>11} {'client/floor':>12} {'client/local':>12}")  # fmt: skip
    for mode, table in rows.items():
        assert isinstance(table, dict)
        for event, r in table.items():
            print(f"{mode:<11} {event:<17} {r['floor_median_ms']:>8} {r['local_median_ms']:>8} "
                  f"{r['client_median_ms']:>9} {r['local_x_floor']:>11} "
                  f"{r['client_x_floor']:>12} {r['client_x_local']:>12}")  # fmt: skip


if __name__ == "__main__":
    main()
