"""Before and after, sample by sample: the first hook of the day, when the hook server is on
but none runs yet, on an older commit and on this tree, interleaved with the floor.

    .venv/bin/python bench/hook_first_compare.py --rev HEAD~1 --rounds 20

Such a hook does what a hook with the server off does (the engine imported, the event handled
in-process) and then starts the server for the events after it. The host waits for the whole
process. Each round times, one after another: the floor (``python -c "import sqlite3"``),
then for the old tree and for this one (the old one first in even rounds) a SessionStart hook
as installed (``python -S -I -X frozen_modules=on .../client.py hook claude-code``, 10,000
stored sessions) with the server on and none running, and the same with the server off
(``CORTEX_HOOK_SERVER=0``: the speed table's row). After each first hook the server it started
is waited for and stopped, untimed, so that it takes no CPU from the next sample; its start
marker is removed, so that the next first hook starts one again. Each tree has its own home.
Per process: wall time (median), its ratio to the floor (the median and p95 of each round's
ratio), and the hook's CPU time (user + system; the server it starts is not its child and is not
counted). The old tree is ``git archive REV`` (``bench/compare.py``), run by the same
interpreter with its ``src`` first on ``PYTHONPATH`` and its bytecode compiled.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from cortex.adapters.hooks.server import server_pid, socket_path  # noqa: E402
from hook_served_compare import (  # noqa: E402
    FLOOR_ENV,
    hook_parser,
    hook_trees,
    print_samples,
    stop_servers,
    timed_start,
    wait_for_server,
)
from process_compare import timed  # noqa: E402

PY = sys.executable
WAIT_SECONDS = 30.0


def stop_server(home: Path, started: bool) -> None:
    """With ``started``, wait for the server the last hook started and stop it; then wait
    until none runs and remove the start marker (the next first hook starts one again)."""
    if started:
        wait_for_server(home, WAIT_SECONDS)
    deadline = time.monotonic() + WAIT_SECONDS
    pid = server_pid(home)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
    while server_pid(home) is not None or Path(socket_path(home)).exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"the hook server of {home} did not stop")
        time.sleep(0.02)
    (home / "run" / "hook.spawned").unlink(missing_ok=True)


def main() -> None:
    args = hook_parser(__doc__, rounds=20).parse_args()
    with tempfile.TemporaryDirectory(prefix="cortex-first-compare-") as tmp:
        cwd, envs, commands = hook_trees(args.rev, Path(tmp), args.sessions)
        samples: dict[str, list[tuple[float, float]]] = {}
        try:
            for i in range(args.rounds):
                samples.setdefault("floor", []).append(
                    timed([PY, "-c", "import sqlite3"], FLOOR_ENV)[:2]
                )
                for label in list(envs) if i % 2 == 0 else list(envs)[::-1]:
                    env, home = envs[label], Path(envs[label]["CORTEX_HOME"])
                    for name, server in (("server on, none running", "1"), ("server off", "0")):
                        stop_server(home, started=False)
                        hook_env = {**env, "CORTEX_HOOK_SERVER": server}
                        done = timed_start(commands[label], hook_env, cwd, label, i)
                        samples.setdefault(f"hook, {name}, {label}", []).append(done)
                        if server == "1":
                            stop_server(home, started=True)
        finally:
            stop_servers(envs)
    print(f"rev {args.rev}, {args.rounds} rounds; load average {os.getloadavg()}")
    print_samples(samples)


if __name__ == "__main__":
    main()
