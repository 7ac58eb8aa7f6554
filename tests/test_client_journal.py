"""The client journal under crashes and concurrency: killed writers and drainers lose nothing
acknowledged, and after a final drain the server has applied each exactly once, in order."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from cortex.services.remote.journal import Journal, Rejected
from fake_server import serve

SRC = str(Path(__file__).resolve().parents[1] / "src")
TESTS = str(Path(__file__).resolve().parent)

# A writer prints each id once its append returned (acknowledged), then goes on.
WRITER = """
import sys
from pathlib import Path
from cortex.services.remote.journal import Journal
journal = Journal(Path(sys.argv[1]))
for n in range(int(sys.argv[3])):
    rid = f"{sys.argv[2]}-{n:05d}"
    journal.append("POST", "/v1/sessions/s/turns", {"request_id": rid, "text": "x" * 300}, "t")
    print(rid, flush=True)
"""
# A drainer delivers the journal to the double's URL with the real client.
DRAINER = """
import sys
from pathlib import Path
from cortex.clock import SystemClock
from cortex.config import load_config
from cortex.services.remote.client import RemoteClient
config = load_config(Path(sys.argv[1]), {"CORTEX_SERVER": sys.argv[2]})
import faulthandler; faulthandler.dump_traceback_later(15, exit=True)
print(RemoteClient(config, SystemClock()).sync(), flush=True)
"""


def spawn(code: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, TESTS])}
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True, env=env
    )


def acknowledged(process: subprocess.Popen[str]) -> list[str]:
    out, _ = process.communicate(timeout=30)
    return [line for line in out.splitlines() if line.count("-") == 1]


def test_entries_come_back_in_order_and_a_rejection_moves_aside(home: Path) -> None:
    journal = Journal(home)
    for n in range(5):
        journal.append("POST", f"/p/{n}", {"request_id": str(n)}, "t")
    seen: list[str] = []

    def send(entry: dict[str, object]) -> None:
        if entry["path"] == "/p/1":
            raise Rejected("bad input")
        if entry["path"] == "/p/3" and "/p/3" not in seen:
            seen.append("/p/3")
            raise OSError("down")
        seen.append(str(entry["path"]))

    first = journal.drain(send)
    assert (first.sent, first.left, first.rejected) == (2, 2, 1)
    second = journal.drain(send)
    assert (second.sent, second.left, second.rejected) == (2, 0, 0)
    assert seen == ["/p/0", "/p/2", "/p/3", "/p/3", "/p/4"]
    assert journal.pending() == 0 and journal.path.stat().st_size == 0
    assert "bad input" in (journal.dir / "rejected.jsonl").read_text()


def test_a_torn_line_never_merges_with_the_next_entry(home: Path) -> None:
    journal = Journal(home)
    journal.append("POST", "/a", {"request_id": "a"}, "t")
    with journal.path.open("ab") as f:
        f.write(b'{"method": "POST", "pa')  # a writer killed mid-line
    journal.append("POST", "/b", {"request_id": "b"}, "t")
    assert [e["path"] for e in journal.entries()] == ["/a", "/b"]
    report = journal.drain(lambda entry: None)
    assert (report.sent, report.rejected) == (2, 1)


def test_two_processes_appending_at_once_lose_nothing(home: Path) -> None:
    writers = [spawn(WRITER, str(home), name, "200") for name in ("a", "b")]
    acks = [acknowledged(w) for w in writers]
    lines = [json.loads(line) for line in Journal(home).path.read_text().splitlines()]
    ids = [line["body"]["request_id"] for line in lines]
    assert sorted(ids) == sorted(acks[0] + acks[1]) and len(ids) == 400
    for ack in acks:  # each writer's entries keep their order
        assert [i for i in ids if i[0] == ack[0][0]] == ack


def test_killed_writers_and_drainers_lose_and_duplicate_nothing(home: Path) -> None:
    rng = random.Random(7)
    acked: list[str] = []
    with serve() as (url, peer):
        for round_ in range(12):
            writer = spawn(WRITER, str(home), f"w{round_}", "300")
            drainer = spawn(DRAINER, str(home), url)
            assert writer.stdout is not None
            # Kill mid-work, not mid-start: on a loaded machine an interpreter can take longer
            # to start than the whole random delay, so wait for the writer's first append.
            first = writer.stdout.readline().strip()
            time.sleep(rng.uniform(0.05, 0.4))
            for process in (writer, drainer):
                process.send_signal(signal.SIGKILL)
            acked += [first, *acknowledged(writer)] if first else acknowledged(writer)
            drainer.communicate(timeout=30)
        final = spawn(DRAINER, str(home), url)
        final.communicate(timeout=60)
        assert final.returncode == 0
        delivered = list(peer.applied)
    assert len(acked) > 100  # the test did kill writers mid-run, with work acknowledged
    assert set(acked) <= set(delivered)  # every acknowledged entry reached the server
    assert len(delivered) == len(set(delivered))  # applied once each (replays deduped)
    position = {rid: n for n, rid in enumerate(delivered)}
    assert [position[r] for r in acked] == sorted(position[r] for r in acked)  # in order
    assert Journal(home).pending() == 0
