"""Load on the team server: `cortex serve` with 1, 2 and 4 worker processes on a scratch
PostgreSQL database, 100 simulated agents (threads, one httpx client and one API key each,
10 tenants) doing start -> N turns -> end.

Run: ``.venv/bin/python bench/server_load.py`` (``--agents``, ``--turns``, ``--workers 1,2,4``,
``--seconds`` (a bound per process count), ``--json``). Loopback only; the scratch database
is dropped at the end. Reports sustained captured turns/s, restore (start) p50/p95, the
interpreter floor (``python -c "import sqlite3"``) and the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psycopg

from cortex.services.hosting import ServiceHost

ADMIN = os.environ.get("CORTEX_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
CORTEX = Path(sys.executable).parent / "cortex"
SECRET = "bench-secret"


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def floor_ms() -> float:
    """Wall time of the cheapest Python process: what any process-per-call design pays."""
    runs = []
    for _ in range(5):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import sqlite3"], check=True)
        runs.append((time.perf_counter() - t) * 1000)
    return statistics.median(runs)


def make_keys(url: str, agents: int, tenants: int) -> list[str]:
    host = ServiceHost(url, Path(tempfile.mkdtemp()), pool_size=2, secret=SECRET)
    try:
        with host.registry() as app:
            names = [f"bench-{i}" for i in range(tenants)]
            for name in names:
                app.tenants.create_tenant(name)
            return [app.tenants.create_key(names[i % tenants], "write")[1] for i in range(agents)]
    finally:
        host.close()


def agent(base: str, key: str, turns: int, deadline: float, out: dict[str, list[float]]) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        while time.monotonic() < deadline:
            t = time.perf_counter()
            r = client.post("/v1/sessions/start", json={"project": "api", "keywords": ["auth"]})
            r.raise_for_status()
            out["start"].append((time.perf_counter() - t) * 1000)
            sid = r.json()["session_id"]
            for n in range(turns):
                body = {"text": f"auth refactor turn {n}: rotate tokens", "categories": ["code"]}
                client.post(f"/v1/sessions/{sid}/turns", json=body).raise_for_status()
                out["turn"].append(time.monotonic())
            client.post("/v1/sessions/end", json={"session_id": sid}).raise_for_status()


def run_one(url: str, workers: int, keys: list[str], turns: int, seconds: float) -> dict[str, Any]:
    port, home = free_port(), tempfile.mkdtemp()
    env = dict(os.environ) | {"CORTEX_HOME": home, "CORTEX_SERVER_SECRET": SECRET}
    args = ["serve", "--db", url, "--port", str(port), "--workers", str(workers)]
    proc = subprocess.Popen([str(CORTEX), *args], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(150):
            try:
                if httpx.get(base + "/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        else:
            raise SystemExit(f"cortex serve --workers {workers} did not become ready")
        results: dict[str, list[float]] = {"start": [], "turn": []}
        started = time.monotonic()
        deadline = started + seconds
        with ThreadPoolExecutor(len(keys)) as pool:
            done = [pool.submit(agent, base, k, turns, deadline, results) for k in keys]
            ticker = threading.Event()

            def progress() -> None:
                while not ticker.wait(5):
                    log(f"  workers={workers}: {len(results['turn'])} turns so far")

            threading.Thread(target=progress, daemon=True).start()
            for future in done:
                future.result()
            ticker.set()
        elapsed = time.monotonic() - started
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    return {
        "workers": workers,
        "seconds": round(elapsed, 2),
        "turns": len(results["turn"]),
        "turns_per_s": round(len(results["turn"]) / elapsed, 1),
        "starts": len(results["start"]),
        "restore_p50_ms": round(percentile(results["start"], 0.50), 1),
        "restore_p95_ms": round(percentile(results["start"], 0.95), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--turns", type=int, default=10, help="turns per session")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--seconds", type=float, default=20.0, help="load time per run")
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    name = f"cortex_bench_{secrets.token_hex(4)}"
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = ADMIN.rsplit("/", 1)[0] + f"/{name}"
    try:
        keys = make_keys(url, opts.agents, opts.tenants)
        runs = []
        for workers in (int(w) for w in opts.workers.split(",")):
            log(f"workers={workers}: {opts.agents} agents for {opts.seconds:g}s")
            runs.append(run_one(url, workers, keys, opts.turns, opts.seconds))
            log(f"  {runs[-1]}")
    finally:
        with psycopg.connect(ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    report = {
        "agents": opts.agents,
        "tenants": opts.tenants,
        "turns_per_session": opts.turns,
        "cpus": os.cpu_count(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "floor_python_import_sqlite3_ms": round(floor_ms(), 1),
        "runs": runs,
    }
    if opts.json:
        print(json.dumps(report, indent=2))
        return
    floor = report["floor_python_import_sqlite3_ms"]
    print(f"{opts.agents} agents, {opts.turns} turns/session, {report['cpus']} CPUs, "
          f"load {report['loadavg']}, floor {floor} ms")  # fmt: skip
    print("workers  turns/s  restore p50  restore p95")
    for r in runs:
        print(f"{r['workers']:>7}  {r['turns_per_s']:>7}  {r['restore_p50_ms']:>8} ms  "
              f"{r['restore_p95_ms']:>8} ms")  # fmt: skip


if __name__ == "__main__":
    main()
