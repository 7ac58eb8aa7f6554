"""A writer process for the concurrency and kill tests: ``python concurrency_worker.py ROLE ...``.

Each role writes through the services of ``CORTEX_HOME`` in a loop and prints one JSON line
per operation the services acknowledged (``{"ack": ...}``) or refused (``{"error": ...}``), so
the test can check that everything acknowledged is stored and that no caller saw a failure.

Roles (``SESSION`` is an open session, ``N`` the number of operations, ``W`` a writer tag):
  record SESSION N W   turns: ``record`` plus the turn's event, in one transaction
  pin SESSION N W      pins: four labels per writer, each rewritten with a new version
  task N W             pipeline tasks: a new task each time (the file grows)
  memory N W           memories
  race N               pins into sessions ``trial-0000``... until ``session end`` closes them
  end N                ends ``trial-0000``... each after a short random pause
  turns SESSION W      turns forever (the kill test), acknowledging each after its commit
"""

from __future__ import annotations

import itertools
import json
import random
import sys
import time
from collections.abc import Callable
from typing import Any

from cortex.config import load_config
from cortex.errors import ConflictError, CortexError
from cortex.services.app import Services
from cortex.services.pipeline import upsert_task


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def attempt(ack: dict[str, Any], op: Callable[..., Any], *args: Any) -> None:
    try:
        op(*args)
    except CortexError as exc:
        say(error=str(exc), **ack)
    else:
        say(ack=True, **ack)


def turn(app: Services, sid: str, text: str) -> None:
    with app.sessions.transaction():
        app.sessions.record(sid, text=text)
        app.events.append(sid, text)


def run(app: Services, role: str, args: list[str]) -> None:
    m = app.sessions
    if role == "record":
        sid, n, w = args[0], int(args[1]), args[2]
        for i in range(n):
            text = f"turn {w}-{i} about serial timeouts"
            attempt({"turn": text}, turn, app, sid, text)
    elif role == "pin":
        sid, n, w = args[0], int(args[1]), args[2]
        for i in range(n):
            label, content = f"{w}-{i % 4}", f"version {i} of {w}-{i % 4}"
            attempt({"label": label, "content": content}, m.add_pin, label, content, sid)
    elif role == "task":
        n, w = int(args[0]), args[1]
        path = app.config.pipeline_state_path
        for i in range(n):
            tid = f"task-{w}-{i:03d}"
            title = f"Pipeline task {tid} " + "x" * 200
            attempt({"task": tid}, upsert_task, path, tid, title, "build", m.now_iso())
    elif role == "memory":
        n, w = int(args[0]), args[1]
        for i in range(n):
            content = f"memory {w}-{i}: deploys go through the staging cluster first"
            attempt({"memory": content}, app.memory.add, content)
    elif role == "race":
        race(app, int(args[0]))
    elif role == "end":
        for i in range(int(args[0])):
            sid = f"trial-{i:04d}"
            while m.get_session(sid) is None:
                time.sleep(0.001)
            time.sleep(random.random() * 0.02)
            m.on_session_end(sid)
    elif role == "turns":
        for i in itertools.count():
            text = f"turn {args[1]}-{i} of the killed process"
            turn(app, args[0], text)
            say(ack=True, turn=text)


def race(app: Services, trials: int) -> None:
    """Start ``trial-NNNN`` and pin into it until the racing ``end`` process closes it."""
    m = app.sessions
    for i in range(trials):
        sid = f"trial-{i:04d}"
        m.on_session_start(sid, project=f"race-{i}")
        for k in range(12):
            label, content = f"pin{k % 6}", f"version {k} in {sid}"
            try:
                m.add_pin(label, content, sid)
            except ConflictError:
                break  # the session ended: this pin was refused, not acknowledged
            say(ack=True, session=sid, label=label, content=content)


def main() -> None:
    with Services.open(load_config()) as app:
        run(app, sys.argv[1], sys.argv[2:])


if __name__ == "__main__":
    main()
