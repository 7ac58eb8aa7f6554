"""The counting proxy of ``bench/server_cpu.py``: the statements a client sends PostgreSQL
and the round trips it waits for, counted from the frontend's messages."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from pg_helpers import server_url  # noqa: E402

pytestmark = pytest.mark.usefixtures("pg_url")


def test_the_proxy_counts_statements_and_round_trips() -> None:
    psycopg = pytest.importorskip("psycopg")
    from server_cpu import Proxy

    target = urlsplit(server_url())

    def client(port: int) -> None:
        url = target._replace(netloc=f"{target.username}@127.0.0.1:{port}").geturl()
        with psycopg.connect(url + "?sslmode=disable", autocommit=True) as conn:
            conn.execute("SELECT 1").fetchall()  # one round trip
            with conn.pipeline():  # three statements, one round trip
                for n in range(3):
                    conn.execute("SELECT %s::int", (n,))

    async def main() -> tuple[int, int, dict[str, int]]:
        async with Proxy(target.hostname or "127.0.0.1", target.port or 5432) as proxy:
            await asyncio.to_thread(client, proxy.port)
            counts = proxy.counts
        return counts.statements, counts.trips, counts.by_sql

    statements, trips, by_sql = asyncio.run(main())
    assert statements == 4 and by_sql == {"SELECT 1": 1, "SELECT $1::int": 3}
    assert trips == 2
