"""The team server's CPU per request: a ``cortex serve`` process on a scratch PostgreSQL
database, its CPU time (read from ``/proc``) before and after many session starts (restores)
and captured turns, divided by their number; with ``--rev``, an older tree's server beside
this checkout's, round by round, so both meet the same host in the same minutes.

CPU time, not wall time: a shared machine's other work delays a request but adds nothing to
the server's own CPU, so the figure holds on a busy host. Each round a client makes
``--sessions`` sessions the way the load test's agents do (start with a fresh ``request_id``,
``--turns`` captured turns, end), phase by phase across the round's sessions so that each
phase's CPU is its own: every start, then the turns (one to each session in turn, as agents
take turns), then every end. ``--agents`` requests are sent at once (1: one at a time, so
each captured turn is a batch of its own; more: batches grow as under load). A last pass
runs a few sessions through a counting proxy in front of PostgreSQL: the statements and
round trips of a start, a turn and an end. The CPU of the server's event-loop threads (each
process's main thread, where uvicorn parses, answers and hands work to the other threads) is
read apart as well: its share of the server's.

    .venv/bin/python bench/server_cpu.py
    .venv/bin/python bench/server_cpu.py --rev main --rounds 5 --json
    .venv/bin/python bench/server_cpu.py --agents 10 --sessions 100

Needs PostgreSQL at ``CORTEX_TEST_POSTGRES_URL`` (or 127.0.0.1:5432, a role that may create
databases); the scratch databases are dropped at the end. The figures are medians over the
rounds; the ratio after/before of each round's pair, then their median.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from compare import extract, parser
from server_load import (
    ADMIN,
    SECRET,
    Connection,
    cpu_seconds,
    free_port,
    group_pids,
    log,
    spent,
    wait_ready,
)

KEYS = """
import sys, tempfile
from pathlib import Path
from cortex.services.hosting import ServiceHost
url, agents, secret = sys.argv[1], int(sys.argv[2]), sys.argv[3]
host = ServiceHost(url, Path(tempfile.mkdtemp()), pool_size=2, secret=secret)
with host.registry() as app:
    names = [f"bench-{i}" for i in range(min(agents, 10))]
    for name in names:
        app.tenants.create_tenant(name)
    for i in range(agents):
        print(app.tenants.create_key(names[i % len(names)], "write")[1])
host.close()
"""
"""Made by the tree under test (its own migrations), one key per agent over 10 tenants."""
KINDS = ("start", "turn", "end")
FIGURES = (
    *KINDS, *(f"{kind}_postgres" for kind in KINDS), *(f"{kind}_loop" for kind in KINDS)
)  # fmt: skip
"""Each round's figures: the server's CPU ms per request of each kind, then PostgreSQL's,
then the server's event-loop threads' (part of the server's)."""


@dataclass
class Server:
    """One tree's ``cortex serve`` on a scratch database of its own."""

    name: str
    src: Path | None
    database: str
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    keys: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return ADMIN.rsplit("/", 1)[0] + f"/{self.database}"

    def env(self) -> dict[str, str]:
        env = dict(os.environ) | {"CORTEX_HOME": tempfile.mkdtemp(), "CORTEX_SERVER_SECRET": SECRET}
        if self.src is not None:
            env["PYTHONPATH"] = str(self.src)
        return env

    def start(self, workers: int, url: str | None = None) -> None:
        """Serve (on ``url``, the scratch database's by default) once it answers ``/readyz``."""
        self.port = free_port()
        cortex = Path(sys.executable).parent / "cortex"
        args = [str(cortex), "serve", "--db", url or self.url, "--port", str(self.port)]
        args += ["--workers", str(workers), "--rate", "1000000", "--burst", "1000000"]
        quiet = subprocess.DEVNULL
        self.proc = subprocess.Popen(
            args, env=self.env(), start_new_session=True, stdout=quiet, stderr=quiet
        )
        wait_ready(self.port, workers)

    def stop(self) -> None:
        if self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(30)
            self.proc = None

    def cpu(self) -> tuple[dict[int, float], dict[int, float], dict[int, float]]:
        """CPU seconds so far of the server's processes, of the PostgreSQL backends serving
        its database, and of the server's main threads (by process id; ``spent`` tells the
        time between two)."""
        assert self.proc is not None
        with psycopg.connect(self.url, autocommit=True) as conn:
            backends = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid()"
            ).fetchall()
        pids, serving = group_pids(self.proc.pid), [pid for (pid,) in backends]
        return cpu_seconds(pids), cpu_seconds(serving), cpu_seconds(pids, main_thread=True)


START: dict[str, Any] = {"project": "api", "keywords": ["auth"]}
"""A session start's body, as the load test's agents send it."""


def _turn(n: int) -> dict[str, Any]:
    """The body of a session's turn ``n``, as the load test's agents send it."""
    return {"text": f"auth refactor turn {n}: rotate tokens", "categories": ["code"]}


async def _post(conn: Connection, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """The answer to ``body`` (with a fresh ``request_id``); an error stops the benchmark:
    its figures would be of something else."""
    status, answer = await conn.post(path, body | {"request_id": secrets.token_hex(16)})
    if status != 200:
        raise SystemExit(f"{path} answered {status}: {answer}")
    return answer


async def _each(
    conns: list[Connection], calls: list[tuple[int, str, dict[str, Any]]]
) -> list[dict[str, Any]]:
    """The answers to ``calls`` (agent, path, body), in order: each agent sends its own in
    order, one at a time, all agents at once."""
    answers: list[dict[str, Any]] = [{} for _ in calls]

    async def run(agent: int) -> None:
        for i, (owner, path, body) in enumerate(calls):
            if owner == agent:
                answers[i] = await _post(conns[agent], path, body)

    await asyncio.gather(*(run(a) for a in range(len(conns))))
    return answers


async def _round(server: Server, agents: int, sessions: int, turns: int) -> dict[str, float]:
    """One round of ``sessions`` sessions: the server's CPU ms per start, turn and end."""
    conns = [Connection("127.0.0.1", server.port, server.keys[a]) for a in range(agents)]
    owner = [n % agents for n in range(sessions)]

    figures: dict[str, float] = {}

    async def phase(kind: str, calls: list[tuple[int, str, dict[str, Any]]]) -> list[Any]:
        before = server.cpu()
        answers = await _each(conns, calls)
        after = server.cpu()
        figures[kind] = 1000 * spent(before[0], after[0]) / len(calls)
        figures[f"{kind}_postgres"] = 1000 * spent(before[1], after[1]) / len(calls)
        figures[f"{kind}_loop"] = 1000 * spent(before[2], after[2]) / len(calls)
        return answers

    started = await phase(
        "start", [(owner[n], "/v1/sessions/start", START) for n in range(sessions)]
    )
    ids = [answer["session_id"] for answer in started]
    await phase("turn", [
        (owner[n], f"/v1/sessions/{ids[n]}/turns", _turn(t))
        for t in range(turns)
        for n in range(sessions)
    ])  # fmt: skip
    await phase(
        "end", [(owner[n], "/v1/sessions/end", {"session_id": ids[n]}) for n in range(sessions)]
    )
    for conn in conns:
        await conn.close()
    return figures


@dataclass
class Counts:
    """What a proxy saw the server send PostgreSQL: statements (each ``Execute`` or simple
    ``Query``), round trips (each ``Sync`` or simple ``Query``: where the sender waits for
    the answer; a pipeline of statements is one) and the statements by their SQL's first
    words."""

    statements: int = 0
    trips: int = 0
    by_sql: dict[str, int] = field(default_factory=dict)

    def statement(self, sql: str) -> None:
        self.statements += 1
        words = " ".join(sql.split())[:70]
        self.by_sql[words] = self.by_sql.get(words, 0) + 1


class Proxy:
    """A TCP proxy in front of PostgreSQL that counts the frontend's messages (protocol 3)."""

    SPECIAL = (80877103, 80877104)  # SSLRequest, GSSENCRequest: a startup message follows

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.counts = Counts()
        self.port = free_port()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Proxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)

        async def down() -> None:
            while data := await up_reader.read(65536):
                writer.write(data)
                await writer.drain()
            writer.close()

        task = asyncio.create_task(down())
        try:
            await self._up(reader, up_writer)
        finally:
            up_writer.close()
            await asyncio.gather(task, return_exceptions=True)

    async def _up(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        buffer, started = b"", False
        statements: dict[bytes, str] = {}  # prepared statement name -> SQL
        bound = ""
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
            buffer += data
            while True:
                if not started:  # untyped: length, then a code
                    if len(buffer) < 8 or len(buffer) < struct.unpack("!I", buffer[:4])[0]:
                        break
                    size, code = struct.unpack("!II", buffer[:8])
                    buffer, started = buffer[size:], code not in self.SPECIAL
                    continue
                if len(buffer) < 5 or len(buffer) < 1 + struct.unpack("!I", buffer[1:5])[0]:
                    break
                size = struct.unpack("!I", buffer[1:5])[0]
                kind, body, buffer = buffer[:1], buffer[5 : 1 + size], buffer[1 + size :]
                self._count(kind, body, statements)
                if kind == b"B":  # Bind: portal, statement name
                    bound = statements.get(body.split(b"\0", 2)[1], "?")
                elif kind == b"E":
                    self.counts.statement(bound)

    def _count(self, kind: bytes, body: bytes, statements: dict[bytes, str]) -> None:
        if kind == b"P":  # Parse: name, SQL
            name, sql = body.split(b"\0", 2)[:2]
            statements[name] = sql.decode(errors="replace")
        elif kind == b"Q":
            self.counts.trips += 1
            self.counts.statement(body.rstrip(b"\0").decode(errors="replace"))
        elif kind == b"S":
            self.counts.trips += 1


async def _statements(server: Server, workers: int, sessions: int, turns: int) -> dict[str, Any]:
    """Statements and round trips per start, turn and end, through a counting proxy, one
    request at a time (each turn a batch of its own)."""
    host, _, rest = server.url.split("@", 1)[1].partition(":")
    port = int(rest.split("/", 1)[0]) if rest else 5432
    async with Proxy(host, port) as proxy:
        url = f"{server.url.split('@', 1)[0]}@127.0.0.1:{proxy.port}/{server.database}"
        await asyncio.to_thread(server.start, workers, url + "?sslmode=disable")
        try:
            await _round(server, 1, sessions, turns)  # warm: connections, prepared statements
            found: dict[str, Any] = {}

            def take(kind: str, calls: int) -> None:
                counts, proxy.counts = proxy.counts, Counts()
                found[kind] = {
                    "statements": counts.statements / calls,
                    "round_trips": counts.trips / calls,
                    "by_sql": {sql: n / calls for sql, n in sorted(counts.by_sql.items())},
                }

            conn = Connection("127.0.0.1", server.port, server.keys[0])
            proxy.counts = Counts()
            ids = [
                (await _post(conn, "/v1/sessions/start", START))["session_id"]
                for _ in range(sessions)
            ]
            take("start", sessions)
            for sid in ids:
                for t in range(turns):
                    await _post(conn, f"/v1/sessions/{sid}/turns", _turn(t))
            take("turn", sessions * turns)
            for sid in ids:
                await _post(conn, "/v1/sessions/end", {"session_id": sid})
            take("end", sessions)
            await conn.close()
        finally:
            await asyncio.to_thread(server.stop)
    return found


def _keys(server: Server, agents: int) -> list[str]:
    """API keys made by ``server``'s tree on its scratch database (migrating it)."""
    made = subprocess.run(
        [sys.executable, "-c", KEYS, server.url, str(agents), SECRET],
        env=server.env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    return made.stdout.split()


@contextlib.contextmanager
def _databases(servers: list[Server]) -> Iterator[None]:
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        for server in servers:
            conn.execute(f'CREATE DATABASE "{server.database}"')
    try:
        yield
    finally:
        for server in servers:
            server.stop()
        with psycopg.connect(ADMIN, autocommit=True) as conn:
            for server in servers:
                conn.execute(f'DROP DATABASE IF EXISTS "{server.database}" WITH (FORCE)')


def measure(servers: list[Server], opts: Any) -> dict[str, Any]:
    """Every round's CPU per request of each server (and their statements), as a report."""
    rounds: dict[str, list[dict[str, float]]] = {server.name: [] for server in servers}
    with _databases(servers):
        for server in servers:
            server.keys = _keys(server, opts.agents)
            server.start(opts.workers)
            asyncio.run(_round(server, opts.agents, opts.sessions, opts.turns))  # warm
        for n in range(opts.rounds):
            for server in servers if n % 2 == 0 else servers[::-1]:
                rounds[server.name].append(
                    asyncio.run(_round(server, opts.agents, opts.sessions, opts.turns))
                )
            log(f"round {n + 1}: " + "; ".join(
                f"{name}: " + ", ".join(f"{k} {v:.3f}" for k, v in found[-1].items())
                for name, found in rounds.items()
            ))  # fmt: skip
        for server in servers:
            server.stop()
        statements = {
            server.name: asyncio.run(_statements(server, opts.workers, 5, opts.turns))
            for server in ([] if opts.no_statements else servers)
        }
    report: dict[str, Any] = {
        "agents": opts.agents,
        "sessions_per_round": opts.sessions,
        "turns_per_session": opts.turns,
        "workers": opts.workers,
        "rounds": opts.rounds,
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "cpu_ms_per_request": {
            name: {kind: round(statistics.median(r[kind] for r in found), 3) for kind in FIGURES}
            for name, found in rounds.items()
        },
        "samples": rounds,
        "statements": statements,
    }
    if len(servers) == 2:
        before, after = (rounds[server.name] for server in servers)
        report["ratio_after_before"] = {
            kind: _ratio([(a[kind], b[kind]) for a, b in zip(after, before, strict=True)])
            for kind in FIGURES
        }
    return report


def _ratio(pairs: list[tuple[float, float]]) -> float:
    """The median of after / before over the rounds whose before took a clock tick at all (a
    short phase's event-loop CPU can read 0)."""
    found = [after / before for after, before in pairs if before > 0]
    return round(statistics.median(found), 3) if found else float("nan")


def show(report: dict[str, Any]) -> None:
    print(f"server CPU ms per request (median of {report['rounds']} rounds of "
          f"{report['sessions_per_round']} sessions x {report['turns_per_session']} turns, "
          f"{report['agents']} at once, {report['workers']} worker(s); "
          f"load {report['loadavg']})")  # fmt: skip
    print(f"{'':<28}" + "".join(f"{kind:>10}" for kind in KINDS) + "   PostgreSQL's: "
          + "".join(f"{kind:>10}" for kind in KINDS))  # fmt: skip
    rows = list(report["cpu_ms_per_request"].items())
    if "ratio_after_before" in report:
        rows.append(("after / before", report["ratio_after_before"]))
    for name, figures in rows:
        unit = "x" if name == "after / before" else ""
        print(f"{name:<28}" + "".join(f"{figures[k]:>9.3f}{unit:<1}" for k in KINDS) + " " * 15
              + "".join(f"{figures[k + '_postgres']:>9.3f}{unit:<1}" for k in KINDS))  # fmt: skip
    print("of the server's, its event-loop threads':")
    for name, figures in rows:
        unit = "x" if name == "after / before" else ""
        print(f"{name:<28}" + "".join(f"{figures[k + '_loop']:>9.3f}{unit:<1}" for k in KINDS))
    for name, kinds in report["statements"].items():
        print(f"PostgreSQL, {name}:")
        for kind, found in kinds.items():
            print(f"  {kind}: {found['statements']:g} statements, "
                  f"{found['round_trips']:g} round trips")  # fmt: skip
            for sql, count in found["by_sql"].items():
                print(f"    {count:g} x {sql}")


def main() -> None:
    made = parser(__doc__)
    made.add_argument("--rev", help="an older commit, measured beside this checkout")
    made.add_argument("--rounds", type=int, default=5, help="rounds of samples (default 5)")
    made.add_argument("--sessions", type=int, default=100, help="sessions a round (default 100)")
    made.add_argument("--turns", type=int, default=10, help="turns a session (default 10)")
    made.add_argument("--agents", type=int, default=1, help="requests at once (default 1)")
    made.add_argument("--workers", type=int, default=1, help="server processes (default 1)")
    made.add_argument("--no-statements", action="store_true", help="skip counting the statements")
    made.add_argument("--json", action="store_true", help="print the report as JSON")
    opts = made.parse_args()
    tag = secrets.token_hex(4)
    with tempfile.TemporaryDirectory() as tmp:
        servers = [Server("after (this checkout)", None, f"cortex_bench_{tag}_after")]
        if opts.rev:
            old = extract(opts.rev, Path(tmp)) / "src"
            servers.insert(0, Server(f"before ({opts.rev})", old, f"cortex_bench_{tag}_before"))
        report = measure(servers, opts)
    if opts.json:
        print(json.dumps(report, indent=2))
    else:
        show(report)


if __name__ == "__main__":
    main()
