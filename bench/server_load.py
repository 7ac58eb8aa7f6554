"""Load on the team server: `cortex serve` with 1, 2 and 4 worker processes on a scratch
PostgreSQL database, 100 simulated agents (one API key, one keep-alive connection and one
session at a time each, 10 tenants) doing start -> N turns -> end, every mutation with a
fresh ``request_id`` as the real client sends it.

The agents are asyncio tasks in one process speaking HTTP/1.1 over raw streams, so the load
generator costs little of the CPU it shares with the server and PostgreSQL; the report says
how much each took (CPU seconds of the generator, the server's processes, PostgreSQL's
processes, and the whole machine, other users included).

Run: ``.venv/bin/python bench/server_load.py`` (``--agents``, ``--turns``, ``--workers 1,2,4``,
``--seconds`` (load time per process count; sessions under way then finish), ``--rate N``
(pace the agents to N captured turns/s in all: the restore times at that load rather than at
saturation; the agents' sessions begin spread over a cycle, with ``--aligned`` all in one
slot), ``--no-request-ids``, ``--json``). Progress goes to stderr. Loopback only; the scratch
database is dropped at the end. Reports captured turns/s (over the whole run, and steady:
from one cycle in to the deadline), restore (start) p50/p95, errors, the interpreter floor
(``python -c "import sqlite3"``) and the load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from compare import floor_ms  # bench/compare.py, the shared floor
from cortex.services.hosting import ServiceHost

ADMIN = os.environ.get("CORTEX_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
CORTEX = Path(sys.executable).parent / "cortex"
SECRET = "bench-secret-0123456789abcdefghijkl"
TICK = os.sysconf("SC_CLK_TCK")


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


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


def cpu_seconds(pids: list[int], main_thread: bool = False) -> dict[int, float]:
    """User + system CPU of each of these processes so far (those gone are left out); with
    ``main_thread``, of each one's main thread alone (a server's event loop)."""
    found = {}
    for pid in pids:
        where = f"/proc/{pid}/task/{pid}/stat" if main_thread else f"/proc/{pid}/stat"
        try:
            fields = Path(where).read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[pid] = (int(fields[11]) + int(fields[12])) / TICK  # utime, stime
    return found


def spent(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds between two readings; a process born in between counts from zero."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


def group_pids(pgid: int) -> list[int]:
    """The processes of process group ``pgid`` (the server: uvicorn's parent and workers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid:
                found.append(int(entry.name))
    return found


def postgres_pids() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "postgres":
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def machine_busy_seconds() -> float:
    """CPU seconds every core spent on anything but idle and iowait since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(values) - values[3] - values[4]) / TICK


def self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Results:
    starts: list[float] = field(default_factory=list)
    turns: int = 0
    requests: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    messages: Counter[str] = field(default_factory=Counter)
    """The errors' messages, by the last part of the request's path."""
    steady: float = 0.0
    """Captured turns/s from one session's cycle after the start to the deadline: once every
    paced agent has begun, and before sessions under way at the deadline wind down."""


class Connection:
    """One agent's keep-alive HTTP/1.1 connection (reopened when the server closes it)."""

    def __init__(self, host: str, port: int, key: str) -> None:
        self.host, self.port = host, port
        self.head = f"Host: {host}:{port}\r\nAuthorization: Bearer {key}\r\n"
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def post(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if self.streams is None:
            self.streams = await asyncio.open_connection(self.host, self.port)
        reader, writer = self.streams
        data = json.dumps(body).encode()
        writer.write(
            f"POST {path} HTTP/1.1\r\n{self.head}Content-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n".encode()
            + data
        )
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status, length, close = int(head[0].split(" ", 2)[1]), 0, False
        for line in head[1:]:
            name, _, value = line.partition(":")
            name = name.lower()
            if name == "content-length":
                length = int(value)
            elif name == "connection" and value.strip().lower() == "close":
                close = True
        answer = json.loads(await reader.readexactly(length)) if length else {}
        if close:
            await self.close()
        return status, answer

    async def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()
            self.streams = None


@dataclass(frozen=True)
class Plan:
    """What each agent does: ``turns`` per session for ``seconds``; with a ``rate`` (captured
    turns/s of all agents together) each agent is paced, else it sends as fast as answered."""

    agents: int
    turns: int
    seconds: float
    request_ids: bool
    rate: float | None
    server_log: str | None = None
    aligned: bool = False
    """Paced agents all begin a session in the same request slot (the old pacing): their
    starts then arrive together, every agent's within one ``interval`` of each cycle."""

    @property
    def interval(self) -> float:
        """Seconds between one agent's requests (0: no pacing)."""
        if not self.rate:
            return 0.0
        return self.agents / (self.rate * (self.turns + 2) / self.turns)

    @property
    def cycle(self) -> float:
        """Seconds of one paced session (start, turns, end); 0 unpaced."""
        return self.interval * (self.turns + 2)

    def first_delay(self) -> float:
        """When a paced agent sends its first request, in seconds from the load's start.

        Spread over a whole session's cycle (start, turns, end), so that the agents' starts
        arrive evenly, as independent agents' do; drawn within one ``interval`` (``aligned``),
        every agent's session begins in the same slot and 100 starts arrive at once every
        cycle (at 500 turns/s, 100 starts in 0.17 s every 2 s): a burst, not the rate.
        """
        return random.uniform(0, self.interval if self.aligned else self.cycle)


async def agent(conn: Connection, plan: Plan, deadline: float, out: Results) -> None:
    """start -> turns -> end until ``deadline``, paced as ``plan`` says."""
    turns, request_ids, interval = plan.turns, plan.request_ids, plan.interval
    due = time.monotonic() + plan.first_delay()

    async def call(path: str, fields: dict[str, Any]) -> tuple[dict[str, Any] | None, float]:
        """The answer (None on an error, counted) and its time in ms from being sent."""
        nonlocal due
        if interval:
            now = time.monotonic()
            if due > now:
                await asyncio.sleep(due - now)
            due = max(due, now) + interval
        if request_ids:
            fields = fields | {"request_id": secrets.token_hex(16)}
        out.requests += 1
        sent = time.perf_counter()
        try:
            status, answer = await conn.post(path, fields)
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            out.errors[type(exc).__name__] += 1
            await conn.close()
            return None, 0.0
        if status >= 300:
            error = answer.get("error", {})
            out.errors[f"http {status} {error.get('code', '')}"] += 1
            out.messages[f"{path.rsplit('/', 1)[-1]}: {error.get('message', '')}"] += 1
            return None, 0.0
        return answer, (time.perf_counter() - sent) * 1000

    while time.monotonic() < deadline:
        started, ms = await call("/v1/sessions/start", {"project": "api", "keywords": ["auth"]})
        if started is None:
            await asyncio.sleep(0.1)
            continue
        out.starts.append(ms)
        sid = started["session_id"]
        for n in range(turns):
            text = {"text": f"auth refactor turn {n}: rotate tokens", "categories": ["code"]}
            if (await call(f"/v1/sessions/{sid}/turns", text))[0] is not None:
                out.turns += 1
        await call("/v1/sessions/end", {"session_id": sid})
    await conn.close()


async def load(port: int, workers: int, keys: list[str], plan: Plan) -> tuple[Results, float]:
    out = Results()
    started = time.monotonic()
    deadline = started + plan.seconds
    conns = [Connection("127.0.0.1", port, key) for key in keys]
    tasks = [asyncio.create_task(agent(c, plan, deadline, out)) for c in conns]

    async def progress() -> None:
        while True:
            await asyncio.sleep(5)
            log(f"  workers={workers}: {out.turns} turns so far")

    async def steady() -> None:
        await asyncio.sleep(min(plan.cycle, plan.seconds / 2))
        turns, since = out.turns, time.monotonic()
        await asyncio.sleep(max(0.0, deadline - since))
        out.steady = (out.turns - turns) / max(1e-9, time.monotonic() - since)

    ticker, window = asyncio.create_task(progress()), asyncio.create_task(steady())
    await asyncio.gather(*tasks)
    await window
    ticker.cancel()
    return out, time.monotonic() - started


def wait_ready(port: int, workers: int) -> None:
    for _ in range(150):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
                sock.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                if sock.recv(64).startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"cortex serve --workers {workers} did not become ready; see its log")


def run_one(url: str, workers: int, keys: list[str], plan: Plan) -> dict[str, Any]:
    port, home = free_port(), tempfile.mkdtemp()
    env = dict(os.environ) | {"CORTEX_HOME": home, "CORTEX_SERVER_SECRET": SECRET}
    args = ["serve", "--db", url, "--port", str(port), "--workers", str(workers)]
    logged = open(plan.server_log, "ab") if plan.server_log else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen([str(CORTEX), *args], env=env, start_new_session=True,
                            stdout=logged, stderr=logged)  # fmt: skip
    try:
        wait_ready(port, workers)
        server, database = cpu_seconds(group_pids(proc.pid)), cpu_seconds(postgres_pids())
        mine, machine = self_cpu(), machine_busy_seconds()
        out, elapsed = asyncio.run(load(port, workers, keys, plan))
        cpu = [
            self_cpu() - mine,
            spent(server, cpu_seconds(group_pids(proc.pid))),
            spent(database, cpu_seconds(postgres_pids())),
            machine_busy_seconds() - machine,
        ]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
        if not isinstance(logged, int):
            logged.close()
    return {
        "workers": workers,
        "seconds": round(elapsed, 2),
        "turns": out.turns,
        "turns_per_s": round(out.turns / elapsed, 1),
        "steady_turns_per_s": round(out.steady, 1),
        "starts": len(out.starts),
        "restore_p50_ms": round(percentile(out.starts, 0.50), 1),
        "restore_p95_ms": round(percentile(out.starts, 0.95), 1),
        "requests": out.requests,
        "errors": sum(out.errors.values()),
        "error_kinds": dict(out.errors),
        "error_messages": dict(out.messages),
        "server_cpu_ms_per_request": round(1000 * cpu[1] / max(1, out.requests), 2),
        "postgres_cpu_ms_per_request": round(1000 * cpu[2] / max(1, out.requests), 2),
        "cpu_s": {
            name: round(value, 1)
            for name, value in zip(("generator", "server", "postgres", "machine"), cpu, strict=True)
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--turns", type=int, default=10, help="turns per session")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--seconds", type=float, default=20.0, help="load time per run")
    parser.add_argument(
        "--no-request-ids", action="store_true", help="send mutations without a request_id"
    )
    parser.add_argument(
        "--rate",
        type=float,
        help="pace the agents to this many captured turns/s in all (default: as fast as "
        "answered); the restore times then show the latency at that load, not the queue",
    )
    parser.add_argument(
        "--aligned",
        action="store_true",
        help="with --rate: begin every agent's session in the same slot, so that the starts "
        "arrive in one burst each cycle (the pacing before starts were spread)",
    )
    parser.add_argument("--server-log", help="append the server's output to this file")
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    plan = Plan(
        opts.agents,
        opts.turns,
        opts.seconds,
        not opts.no_request_ids,
        opts.rate,
        opts.server_log,
        opts.aligned,
    )
    name = f"cortex_bench_{secrets.token_hex(4)}"
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = ADMIN.rsplit("/", 1)[0] + f"/{name}"
    try:
        keys = make_keys(url, opts.agents, opts.tenants)
        runs = []
        for workers in (int(w) for w in opts.workers.split(",")):
            log(f"workers={workers}: {plan.agents} agents for {plan.seconds:g}s")
            runs.append(run_one(url, workers, keys, plan))
            log(f"  {runs[-1]}")
    finally:
        with psycopg.connect(ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    report = {
        "agents": opts.agents,
        "tenants": opts.tenants,
        "turns_per_session": opts.turns,
        "request_ids": plan.request_ids,
        "paced_turns_per_s": plan.rate,
        "cpus": os.cpu_count(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "floor_python_import_sqlite3_ms": round(floor_ms(5), 1),
        "runs": runs,
    }
    if opts.json:
        print(json.dumps(report, indent=2))
        return
    floor = report["floor_python_import_sqlite3_ms"]
    paced = f"paced to {plan.rate:g} turns/s" if plan.rate else "unpaced"
    print(f"{opts.agents} agents ({paced}), {opts.turns} turns/session, {report['cpus']} CPUs, "
          f"load {report['loadavg']}, floor {floor} ms")  # fmt: skip
    print("workers  turns/s  (steady)  restore p50  restore p95  errors  "
          "CPU s generator/server/postgres/machine  server, postgres CPU ms/request")  # fmt: skip
    for r in runs:
        c = r["cpu_s"]
        print(f"{r['workers']:>7}  {r['turns_per_s']:>7}  {r['steady_turns_per_s']:>8}  "
              f"{r['restore_p50_ms']:>8} ms  "
              f"{r['restore_p95_ms']:>8} ms  {r['errors']:>6}  "
              f"{c['generator']}/{c['server']}/{c['postgres']}/{c['machine']:<20}  "
              f"{r['server_cpu_ms_per_request']}, {r['postgres_cpu_ms_per_request']}")  # fmt: skip
        if r["error_kinds"]:
            print(f"         errors: {r['error_kinds']}")
            print(f"         messages: {r['error_messages']}")


if __name__ == "__main__":
    main()
