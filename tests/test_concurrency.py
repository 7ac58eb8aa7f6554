"""Real processes writing one home at once, and killed at random: nothing acknowledged is lost.

The writers are ``tests/concurrency_worker.py`` processes; each prints what the services
acknowledged, and the test reads the home back afterwards.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cortex.config import load_config
from cortex.services.app import Services

WORKER = str(Path(__file__).with_name("concurrency_worker.py"))


def spawn(home: Path, *args: object) -> subprocess.Popen[str]:
    env = dict(os.environ, CORTEX_HOME=str(home))
    return subprocess.Popen(
        [sys.executable, WORKER, *map(str, args)], env=env, stdout=subprocess.PIPE, text=True
    )


def replies(proc: subprocess.Popen[str], timeout: float = 120) -> list[dict[str, Any]]:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0
    return [json.loads(line) for line in out.splitlines()]


def open_home(home: Path) -> Services:
    return Services.open(load_config(home, {}, {}))


def test_pins_racing_session_end_are_never_lost_or_reverted(home: Path) -> None:
    trials = 60
    pinner, ender = spawn(home, "race", trials), spawn(home, "end", trials)
    acked = replies(pinner)
    assert replies(ender) == []
    last: dict[str, dict[str, str]] = {}
    for reply in acked:
        last.setdefault(reply["session"], {})[reply["label"]] = reply["content"]
    with open_home(home) as app:
        for i in range(trials):
            state = app.sessions.get_session(f"trial-{i:04d}")
            assert state is not None and not state.is_open
            stored = {p.label: p.content for p in state.working_memory}
            assert stored == last.get(state.session_id, {}), state.session_id


def test_eight_writers_see_no_lock_and_lose_nothing(home: Path) -> None:
    with open_home(home) as app:
        app.sessions.on_session_start("shared", project="race")
        long_pipeline = [
            {"task_id": f"seed-{i:04d}", "title": "x" * 200, "current_stage": "build"}
            for i in range(1000)
        ]
        path = app.config.pipeline_state_path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"active_tasks": long_pipeline}))
    n = 30
    roles = [("record", "shared"), ("pin", "shared"), ("task",), ("memory",)]
    procs = {
        f"{role[0]}{w}": spawn(home, *role, n, f"{role[0]}{w}") for role in roles for w in (1, 2)
    }
    done = {name: replies(proc) for name, proc in procs.items()}
    errors = [r["error"] for rs in done.values() for r in rs if "error" in r]
    assert errors == []
    assert all(len(rs) == n for rs in done.values())
    with open_home(home) as app:
        pins = {p.label: p.content for p in app.sessions.list_pins("shared")}
        last = {r["label"]: r["content"] for w in ("pin1", "pin2") for r in done[w]}
        assert pins == last
        turns = {e.content for e in app.events.events("shared")}
        assert turns == {r["turn"] for w in ("record1", "record2") for r in done[w]}
        tasks = json.loads(app.config.pipeline_state_path.read_text())["active_tasks"]
        assert {t["task_id"] for t in tasks} >= {
            r["task"] for w in ("task1", "task2") for r in done[w]
        }
        contents = {m.content for m in app.memory.list(limit=1000)}
        assert contents >= {r["memory"] for w in ("memory1", "memory2") for r in done[w]}


def test_a_turn_recorder_killed_at_random_points_keeps_every_acknowledged_turn(
    home: Path,
) -> None:
    with open_home(home) as app:
        app.sessions.on_session_start("victim", project="radio")
    rng = random.Random(20260216)
    acked: list[str] = []
    for run in range(12):
        proc = spawn(home, "turns", "victim", run)
        first = ""
        if run % 4:  # mostly mid-turn: after the first acknowledged turn, however slow the start
            assert proc.stdout is not None
            first = proc.stdout.readline()
            assert first.endswith("}\n"), first  # the kill lands between turns, not at start-up
        time.sleep(rng.uniform(0.0, 0.3))  # otherwise still starting
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        lines = (first + out).splitlines()
        acked += [json.loads(line)["turn"] for line in lines if line.endswith("}")]
    assert len(acked) >= 9  # at least the first turn of each of the nine runs killed mid-turn
    with open_home(home) as app:
        assert app.health().damage == ()
        store = app.store
        assert store.connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"  # type: ignore[attr-defined]
        stored = [e.content for e in app.events.events("victim")]
        assert len(set(acked)) == len(acked) and set(acked) <= set(stored)
        state = app.sessions.get_session("victim")
        assert state is not None and state.is_open
