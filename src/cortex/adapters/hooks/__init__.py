"""``cortex hook <host>``: one agent event in on stdin, at most one JSON object out, exit 0.

Hosts (Claude Code, Codex CLI, Gemini CLI, Cursor) run this once per event, so this module
imports only the standard library and loads the engine only when it handles the event itself.
It never fails its host: whatever the input (empty, not JSON, a hostile session id, 8 MB, an
unwritable home), it exits 0, prints nothing but the host's JSON shape, and writes one line to
``$CORTEX_HOME/logs/hooks.log`` when something was wrong. ``events.py`` maps each host's
fields; ``dispatch.py`` says what each event records and answers, and states the project rule
every reader shares: a session's ``project`` is ``project_identity(dir).id``
(``cortex.services.project``).

Speed: a fresh interpreter that imports the engine costs ~100 ms on a slow machine, more than a
hook's budget. So the first hook that finds no hook server handles its event in-process and then
starts one (``server.py``) in the background; later hooks hand their raw input to it over a Unix
socket in the home and print its answer. Installed hooks run ``client.py`` by path (``python -S
-I -X frozen_modules=on``), whose ``wire.py`` does that without importing this package at all
and comes here only when no server takes the event; ``cortex hook HOST`` does the same through
the console script. ``CORTEX_HOOK_SERVER=0`` turns the server off; the in-process path is
always the fallback.
"""

from __future__ import annotations

import os
import sys

from cortex.adapters import HOSTS
from cortex.adapters.hooks.wire import (
    MAX_INPUT_BYTES,
    OWNER_VAR,
    STDIN_TIMEOUT_SECONDS,
    EmptyHome,
    check_home,
    current_dir,
    event_env,
    home_dir,
    read_stdin,
    refuse,
    request,
    server_enabled,
    write,
)

__all__ = ["MAX_INPUT_BYTES", "OWNER_VAR", "STDIN_TIMEOUT_SECONDS", "USAGE", "main"]

USAGE = """Usage: cortex hook HOST < event.json

  Handle one agent hook event (JSON on stdin) for HOST: claude-code, codex, gemini or cursor.
  Installed by `cortex install HOST`; always exits 0; problems go to $CORTEX_HOME/logs/hooks.log.

Example:
  echo '{"hook_event_name":"SessionStart","session_id":"s1","cwd":"."}' | cortex hook claude-code
"""


def main(argv: list[str], read: tuple[bytes, str | None] | None = None) -> int:
    """Run one hook; always returns 0 (the exit code hosts see).

    ``read`` is the input (or why it was ignored) when the hook client already read stdin and
    asked the hook server, which did not take the event.
    """
    try:
        _run(argv, read)
    except EmptyHome as exc:
        refuse(str(exc))
    except BaseException as exc:  # noqa: BLE001 - a hook never fails its host
        if os.environ.get("CORTEX_RAISE_ERRORS") == "1" and isinstance(exc, Exception):
            raise
        try:
            _log(f"hook failed: {type(exc).__name__}: {exc}")
        except Exception:  # noqa: BLE001 - not even a failing log may change the exit code
            pass
    return 0


def _run(argv: list[str], read: tuple[bytes, str | None] | None) -> None:
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return
    check_home(os.environ.get("CORTEX_HOME"))
    host = argv[0]
    if host not in HOSTS:
        _log(f"unknown host {host[:40]!r}; use one of {', '.join(HOSTS)}")
        return
    raw, problem = read if read is not None else read_stdin(MAX_INPUT_BYTES, STDIN_TIMEOUT_SECONDS)
    if problem:
        _log(f"{host}: {problem}")
        return
    env, cwd = event_env(), current_dir()
    use_server = server_enabled(env)
    if use_server and read is None:  # (the client asked already)
        output = request(home_dir(env), host, raw, env, cwd)
        if output is not None:
            write(output)
            return
    from cortex.adapters.hooks.dispatch import handle

    write(handle(host, raw, env, cwd))
    if use_server:  # no server took the event: start one for the next events
        from cortex.adapters.hooks.server import spawn

        spawn(home_dir(env), env)


def _log(message: str) -> None:
    from pathlib import Path

    from cortex.adapters.hooks.state import log_line

    log_line(Path(home_dir(dict(os.environ))), message)
