"""``cortex hook <host>``: one agent event in on stdin, at most one JSON object out, exit 0.

Hosts (Claude Code, Codex CLI, Gemini CLI, Cursor) run this once per event, so this module
imports only the standard library and loads the engine only when it handles the event itself.
It never fails its host: whatever the input (empty, not JSON, a hostile session id, 8 MB, an
unwritable home), it exits 0, prints nothing but the host's JSON shape, and writes one line to
``$CORTEX_HOME/logs/hooks.log`` when something was wrong. ``events.py`` maps each host's
fields; ``dispatch.py`` says what each event records and answers, and states the project rule
every reader shares: a session's ``project`` is ``project_identity(dir).id``
(``cortex.services.project``).

Speed: a fresh interpreter that imports the engine costs ~100 ms on a slow machine, more than
a hook's budget. So the first hook that finds no hook server handles its event in-process and
then starts one (``server.py``) in the background; later hooks hand their raw input to it over
a Unix socket in the home and print its answer (~20 ms a process). ``CORTEX_HOOK_SERVER=0``
turns the server off; the in-process path is always the fallback.
"""

from __future__ import annotations

import os
import sys
import time

from cortex.adapters import HOSTS

MAX_INPUT_BYTES = 8 * 1024 * 1024
"""Larger input is not parsed (a 5 MB prompt is fine; it is cut to 20,000 characters)."""
STDIN_TIMEOUT_SECONDS = 5.0
"""A host closes stdin at once; a hook left reading a terminal gives up after this."""
OWNER_VAR = "CORTEX_HOOK_OWNER_PID"
"""Where the hook passes its harness's pid on (to the hook server too): the session's owner,
so that crash recovery closes a session whose harness is gone without waiting for its lease."""
SHELLS = frozenset({b"sh", b"bash", b"dash", b"zsh", b"ksh", b"fish", b"busybox"})
USAGE = """Usage: cortex hook HOST < event.json

  Handle one agent hook event (JSON on stdin) for HOST: claude-code, codex, gemini or cursor.
  Installed by `cortex install HOST`; always exits 0; problems go to $CORTEX_HOME/logs/hooks.log.

Example:
  echo '{"hook_event_name":"SessionStart","session_id":"s1","cwd":"."}' | cortex hook claude-code
"""


def main(argv: list[str]) -> int:
    """Run one hook; always returns 0 (the exit code hosts see)."""
    try:
        _run(argv)
    except BaseException as exc:  # noqa: BLE001 - a hook never fails its host
        if os.environ.get("CORTEX_RAISE_ERRORS") == "1" and isinstance(exc, Exception):
            raise
        try:
            _log(f"hook failed: {type(exc).__name__}: {exc}")
        except Exception:  # noqa: BLE001 - not even a failing log may change the exit code
            pass
    return 0


def _run(argv: list[str]) -> None:
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return
    host = argv[0]
    if host not in HOSTS:
        _log(f"unknown host {host[:40]!r}; use one of {', '.join(HOSTS)}")
        return
    raw, problem = read_stdin(MAX_INPUT_BYTES, STDIN_TIMEOUT_SECONDS)
    if problem:
        _log(f"{host}: {problem}")
        return
    env, cwd = dict(os.environ), _cwd()
    owner = harness_pid()
    if owner is not None:
        env.setdefault(OWNER_VAR, str(owner))
    use_server = server_enabled(env)
    if use_server:
        from cortex.adapters.hooks.server import request

        output = request(_home(env), host, raw, env, cwd)
        if output is not None:
            _write(output)
            return
    from cortex.adapters.hooks.dispatch import handle

    _write(handle(host, raw, env, cwd))
    if use_server:  # no server took the event: start one for the next events
        from cortex.adapters.hooks.server import spawn

        spawn(_home(env))


def read_stdin(limit: int, timeout: float) -> tuple[bytes, str | None]:
    """All of stdin, or (b"", why) when it is larger than ``limit`` or stays open too long."""
    import select

    chunks: list[bytes] = []
    size = 0
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return b"", f"stdin was not closed within {timeout:g} s; input ignored"
        try:
            ready, _, _ = select.select([0], [], [], remaining)
            chunk = os.read(0, 1 << 20) if ready else None
        except (OSError, ValueError):
            break  # no usable stdin: the same as an empty one
        if chunk is None:
            continue
        if not chunk:
            break
        size += len(chunk)
        if size > limit:
            return b"", f"input is larger than {limit} bytes; ignored"
        chunks.append(chunk)
    return b"".join(chunks), None


def harness_pid(proc: str = "/proc") -> int | None:
    """The harness that ran this hook: the parent process, or the shell's parent when a shell
    wraps the command. None when it cannot be told (no ``/proc``) or the parent is init."""
    pid = os.getppid()
    for _ in range(3):
        try:
            with open(f"{proc}/{pid}/stat", "rb") as stat:
                data = stat.read()
            comm = data[data.index(b"(") + 1 : data.rindex(b")")]
            fields = data[data.rindex(b")") + 2 :].split()
            parent = int(fields[1])
        except (OSError, ValueError, IndexError):
            return None
        if comm not in SHELLS:
            return pid if pid > 1 else None
        pid = parent
    return None


def server_enabled(env: dict[str, str]) -> bool:
    return env.get("CORTEX_HOOK_SERVER", "1").strip().lower() not in ("0", "false", "off", "no")


def _home(env: dict[str, str]) -> str:
    """``CORTEX_HOME`` or ``~/.cortex`` (as ``cortex.config.default_home``), without pathlib."""
    raw = env.get("CORTEX_HOME")
    return os.path.expanduser(raw) if raw else os.path.join(os.path.expanduser("~"), ".cortex")


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:
        return os.sep


def _write(text: str) -> None:
    if not text:
        return
    try:
        sys.stdout.buffer.write(text.encode("utf-8", "replace"))
        sys.stdout.flush()
    except (OSError, ValueError):
        # The host stopped reading. Point stdout at /dev/null so that the interpreter's final
        # flush does not fail too (that would make the exit code 120).
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass


def _log(message: str) -> None:
    from pathlib import Path

    from cortex.adapters.hooks.state import log_line

    log_line(Path(_home(dict(os.environ))), message)
