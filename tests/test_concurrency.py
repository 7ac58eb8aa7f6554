"""Real processes writing one home at once, and killed at random: nothing acknowledged is lost.

The writers are ``tests/concurrency_worker.py`` processes; each prints what the services
acknowledged, and the test reads the home back afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
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

