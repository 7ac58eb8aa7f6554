"""The hook server: one warm process per Cortex home that handles hook events for clients.

A hook process is short-lived, and importing the engine is most of its cost. The server has
it imported already: a client (``cortex hook``) connects to ``$CORTEX_HOME/run/hook.sock``,
sends its host, working directory, environment and raw stdin, and prints the reply. The
server runs the same ``dispatch.handle`` with the client's environment (so ``CORTEX_NOW``,
``CORTEX_*`` settings and ``CLAUDE_PROJECT_DIR`` mean the same thing), one event at a time,
and keeps no state between events: every event is committed before its reply is sent; the
bookkeeping the reply does not depend on (the hook's status, latency and per-session files, the
metrics chain's head file) is written after it, before the next event is taken.

Lifecycle: the first client that finds no server handles its event itself and then starts
one (``spawn``: a detached ``python -P -m cortex.adapters.hooks.server HOME``). One server per
home, held by a lock file. It exits after ``CORTEX_HOOK_SERVER_IDLE`` seconds without a
request (default 1800), when its socket file is removed or replaced, and when Cortex's code
on disk changed (it then refuses the request, so the client handles it in-process and starts
a fresh server).

Wire format (version 1): the request is ``CXH1``, a 4-byte big-endian header length, the
header (host, cwd and ``NAME=VALUE`` environment entries joined by NUL bytes) and the raw
input up to end of stream; the reply is ``0`` and the stdout text, or ``S`` when refused (an
upgrade, or a host the server does not know: the client then runs the in-process path).
The socket is 0600 in the 0700 home, so only its owner can talk to it.

The client half (``client.py`` and ``wire.py``, which this module shares the wire format with)
imports only modules built into the interpreter: it runs in every hook.
"""

from __future__ import annotations

import os
import sys
import time

from cortex.adapters import HOSTS
from cortex.adapters.hooks.wire import (
    CLIENT_TIMEOUT_SECONDS,
    MAGIC,
    MAX_REQUEST_BYTES,
    OWNER_VAR,
    REFUSED,
    SERVED,
    receive,
    socket_path,
    usable,
)

TYPE_CHECKING = False  # mypy treats this name as true; importing typing costs ~8 ms
if TYPE_CHECKING:
    import socket
    from collections.abc import Callable, Mapping
    from pathlib import Path

    from cortex.adapters.hooks.hook import ServicesCache

    Handler = Callable[[str, bytes, dict[str, str], str, list[Callable[[], None]]], str]

IDLE_SECONDS = 1800.0
CHECK_SECONDS = 5.0
SPAWN_GRACE_SECONDS = 10.0
STAMP_CHECK_SECONDS = 1.0
"""How often, at most, the server looks for changed code (an upgrade); see ``_loop``."""


# -- starting one --------------------------------------------------------------------------------
def spawn(home: str, env: Mapping[str, str]) -> None:
    """Start a server for ``home`` in the background, unless one was started moments ago,
    with the hook's environment ``env`` (without its harness's pid: the server outlives it) and
    the caches off from its first import (see ``main``). Not for a home whose database this
    process cannot write: its hooks store nothing there, the server's files neither."""
    if not usable(socket_path(home)):
        return
    database = os.path.join(home, "brain.db")
    if os.path.exists(database) and not os.access(database, os.W_OK):
        return
    detach(
        home,
        "hook.spawned",
        "cortex.adapters.hooks.server",
        {**{k: v for k, v in env.items() if k != OWNER_VAR}, "CORTEX_CODECACHE": "0"},
    )


def detach(home: str, marker: str, module: str, env: Mapping[str, str] | None) -> bool:
    """Run ``python -m module HOME`` in the background, detached from the hook, unless
    ``home``'s ``run/marker`` says it was started less than ``SPAWN_GRACE_SECONDS`` ago; True
    if started. ``env`` is the process's environment (None: the hook's). HOME is made
    absolute here: the child leaves this directory (``leave_directory``), and ``-P`` keeps
    this directory off its ``sys.path`` (a project's ``cortex`` folder shadows nothing)."""
    home = os.path.abspath(home)
    run_dir = os.path.join(home, "run")
    marker_path = os.path.join(run_dir, marker)
    try:
        if time.time() - os.stat(marker_path).st_mtime < SPAWN_GRACE_SECONDS:
            return False
    except OSError:
        pass
    try:
        os.makedirs(home, mode=0o700, exist_ok=True)
        os.makedirs(run_dir, mode=0o700, exist_ok=True)
        os.close(os.open(marker_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
        os.utime(marker_path)
    except OSError:
        return False  # an unwritable home: the process could not run there either
    try:
        start_detached([sys.executable, "-P", "-m", module, home], env)
    except OSError:
        return False
    return True


def start_detached(argv: list[str], env: Mapping[str, str] | None) -> None:
    """Run ``argv`` in a session of its own, its standard streams on /dev/null and no other
    descriptor of this process open in it: the host waits for the hook's stdout to close,
    so a child that outlives the hook must hold none of the host's pipes. ``env`` is the
    child's environment; None: this process's, inherited as it is (the one read of it
    outside an entry point: ``posix_spawn`` takes it as a mapping).

    ``os.posix_spawn`` where it can do that (Linux, macOS): a hook that starts a server
    paid 5 ms of CPU for importing ``subprocess`` (with ``signal``, ``threading`` and
    ``selectors``) before it could exit. It cannot change the child's directory, so the
    child starts in this one and leaves it itself (``leave_directory``). ``subprocess``
    elsewhere, or where this process's descriptors cannot be listed."""
    actions = _detached_descriptors() if hasattr(os, "posix_spawn") else None
    if actions is not None:
        inherited = os.environ if env is None else env
        try:
            os.posix_spawn(argv[0], argv, inherited, file_actions=actions, setsid=True)
            return
        except NotImplementedError:  # no setsid in this platform's posix_spawn
            pass
    import subprocess

    subprocess.Popen(
        argv,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=True,
        start_new_session=True,
        cwd=os.sep,
    )


def _detached_descriptors() -> list[tuple[object, ...]] | None:
    """``posix_spawn``'s file actions for a detached child: /dev/null as its standard
    streams, and every other inheritable descriptor of this process closed (the host's pipes
    among them; the others close at ``exec``). None when the descriptors cannot be listed."""
    listed = None
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            listed = os.listdir(folder)
            break
        except OSError:
            continue
    if listed is None:
        return None
    streams = ((0, os.O_RDONLY), (1, os.O_WRONLY), (2, os.O_WRONLY))
    actions: list[tuple[object, ...]] = [
        (os.POSIX_SPAWN_OPEN, fd, os.devnull, flags, 0) for fd, flags in streams
    ]
    for name in listed:
        fd = int(name) if name.isdigit() else -1
        try:
            if fd > 2 and os.get_inheritable(fd):
                actions.append((os.POSIX_SPAWN_CLOSE, fd))
        except OSError:  # not open any more (the listing's own descriptor)
            continue
    return actions


def leave_directory() -> None:
    """What a detached child does first: work from ``/``, so that it holds no project's
    directory (one being deleted or unmounted) for as long as it runs."""
    try:
        os.chdir(os.sep)
    except OSError:
        pass


# -- server --------------------------------------------------------------------------------------
def serve(home: Path, idle_seconds: float = IDLE_SECONDS) -> int:
    """Serve hook events for ``home`` until idle; 0 also when another server already runs."""
    from cortex.files import atomic_write_text, ensure_dir  # the server half may import cortex

    run_dir = ensure_dir(home / "run")  # the home and run/ both 0700
    lock = _lock(run_dir / "hook.lock")
    if lock is None:
        return 0
    try:
        import signal

        # SIGTERM (an uninstall, a test, a shutdown) unwinds through the cleanup below.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

        from cortex.adapters.hooks.hook import ServicesCache

        cache = ServicesCache()
        try:
            listener, inode = _listen(socket_path(home))
        except OSError as exc:  # (a directory where the socket goes, say): hooks run alone
            from cortex.adapters.hooks.state import log_line

            where = socket_path(home)
            log_line(
                home,
                f"the hook server cannot listen at {where} ({exc.strerror or exc}); move away "
                "what is there and the next hook starts it (until then each hook runs alone)",
            )
            return 1
        atomic_write_text(run_dir / "hook.pid", f"{os.getpid()}\n", durable=False)
        try:
            handler = _handler(cache, home)
            _loop(listener, inode, code_stamp(), idle_seconds, handler, cache.before_stop)
        finally:
            cache.close()
            listener.close()
            if _same_file(socket_path(home), inode):
                for leftover in (socket_path(home), str(run_dir / "hook.pid")):
                    _unlink(leftover)
    finally:
        os.close(lock)
    return 0


def _handler(cache: ServicesCache, home: Path) -> Handler:
    """Events handled in ``home`` whatever the client's ``CORTEX_HOME`` says: it reached
    this home's socket, and a relative home would be resolved against ``/`` here."""
    from cortex.adapters.hooks.dispatch import handle  # warm: what clients skip

    def serve_event(
        host: str, raw: bytes, env: dict[str, str], cwd: str, later: list[Callable[[], None]]
    ) -> str:
        env["CORTEX_HOME"] = str(home)
        answer = handle(host, raw, env, cwd, cache=cache, later=later)
        later.append(cache.after_answer)
        return answer

    return serve_event


def _listen(path: str) -> tuple[socket.socket, int]:
    import socket

    _unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(64)
    listener.settimeout(CHECK_SECONDS)
    return listener, os.stat(path).st_ino


def _loop(
    listener: socket.socket,
    inode: int,
    stamp: str,
    idle_seconds: float,
    handle: Handler,
    on_idle: Callable[[], None],
) -> None:
    """Serve one connection at a time. What an answer does not wait for (``handle``'s
    ``later`` steps) runs after its connection is closed and before the next one is taken, so
    that the next event sees all of it. After ``idle_seconds`` without a connection it closes
    the listener, runs ``on_idle`` (a failure there is the server's own business) and returns.

    Changed code (an upgrade) is looked for at most every ``STAMP_CHECK_SECONDS`` (walking the
    package costs ~0.5 ms): after an answer once half of that has passed, so that events in
    a row never wait for it, else before the next request; the request after the change is
    refused (the client handles it with the new code and starts a fresh server).
    """
    path = listener.getsockname()
    last = checked = time.monotonic()
    upgraded = False
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            if not _same_file(path, inode):  # another server took the socket's place
                return
            if time.monotonic() - last > idle_seconds:
                # Taking no more events first: one that came while ``on_idle`` ran (a second
                # or more) would wait in the queue for an answer that never comes. A client
                # refused now handles its event itself.
                listener.close()
                try:
                    on_idle()
                except Exception:  # noqa: BLE001, S110 - stopping matters more than tidying
                    pass
                return
            continue
        if time.monotonic() - checked > STAMP_CHECK_SECONDS:
            upgraded, checked = code_stamp() != stamp, time.monotonic()
        later: list[Callable[[], None]] = []
        with conn:
            _serve_one(conn, handle, later, refuse=upgraded)
        if upgraded:
            return
        for step in later:
            try:
                step()
            except Exception:  # noqa: BLE001, S112 - the server outlives any one event
                continue
        last = time.monotonic()
        if last - checked > STAMP_CHECK_SECONDS / 2:
            upgraded, checked = code_stamp() != stamp, last


def _serve_one(
    conn: socket.socket, handle: Handler, later: list[Callable[[], None]], *, refuse: bool
) -> None:
    """Read one request, handle it, reply (``refuse``: refuse it); a broken request gets an
    empty answer. The request is read whole first: closing a connection with unread input
    resets it, and the client could lose the reply."""
    output = ""
    try:
        conn.settimeout(CLIENT_TIMEOUT_SECONDS)
        host, cwd, env, raw = _parse(receive(conn, MAX_REQUEST_BYTES))
        if refuse or host not in HOSTS:  # the client's in-process path handles (or logs) it
            _send(conn, REFUSED)
            return
        output = handle(host, raw, env, cwd, later)
    except Exception:  # noqa: BLE001 - the server outlives any one bad request
        output = ""
    _send(conn, SERVED + output.encode("utf-8", "replace"))


def _parse(message: bytes) -> tuple[str, str, dict[str, str], bytes]:
    if message[:4] != MAGIC or len(message) < 8:
        raise ValueError("not a hook request")
    size = int.from_bytes(message[4:8], "big")
    header = message[8 : 8 + size].decode("utf-8", "surrogateescape").split("\0")
    if len(header) < 2:
        raise ValueError("truncated hook request")
    env = dict(item.partition("=")[::2] for item in header[2:])
    return header[0], header[1], env, message[8 + size :]


def _lock(lock_path: Path) -> int | None:
    """An fd holding ``lock_path`` exclusively, or None when another server holds it."""
    import fcntl

    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + 2.0  # a refused (stale) server may still be shutting down
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError:
            if time.monotonic() > deadline:
                os.close(fd)
                return None
            time.sleep(0.05)


def _send(conn: socket.socket, data: bytes) -> None:
    try:
        conn.sendall(data)
    except OSError:
        pass  # the client gave up; nothing to tell it


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _same_file(path: str, inode: int) -> bool:
    try:
        return os.stat(path).st_ino == inode
    except OSError:
        return False


def code_stamp() -> str:
    """Changes when any of Cortex's modules on disk changes (an upgrade, an edit)."""
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    newest = 0
    for directory, subdirs, files in os.walk(package):
        subdirs[:] = [d for d in subdirs if d != "__pycache__"]
        for name in files:
            if name.endswith(".py"):
                try:
                    newest = max(newest, os.stat(os.path.join(directory, name)).st_mtime_ns)
                except OSError:
                    continue
    return str(newest)


def server_pid(home: Path) -> int | None:
    """The pid of the live server of ``home``, or None."""
    try:
        pid = int((home / "run" / "hook.pid").read_text(encoding="utf-8").strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def stop_server(home: Path) -> int | None:
    """Stop the hook server of ``home`` (SIGTERM); return its pid, or None if none runs.

    Only a process holding the server's lock is signalled, so a stale pid file never makes
    an unrelated process that reused the pid a target.
    """
    pid = server_pid(home)
    if pid is None:
        return None
    import fcntl
    import signal

    try:
        fd = os.open(home / "run" / "hook.lock", os.O_RDWR)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return None  # nobody holds the lock: no server, whatever the pid file says
    except OSError:
        pass  # held: the server runs
    finally:
        os.close(fd)

    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return None
    return pid


def idle_seconds(env: Mapping[str, str]) -> float:
    """``CORTEX_HOOK_SERVER_IDLE`` in ``env``, at least 1 s (default 1800)."""
    try:
        return max(1.0, float(env.get("CORTEX_HOOK_SERVER_IDLE", IDLE_SECONDS)))
    except ValueError:
        return IDLE_SECONDS


def main(argv: list[str]) -> int:
    """``python -m cortex.adapters.hooks.server HOME``: serve until idle."""
    from pathlib import Path

    if len(argv) != 1:
        return 2
    home = Path(os.path.abspath(argv[0]))  # before leaving the directory it is relative to
    leave_directory()
    # Compile dataclass methods and import modules as usual: a long-lived process pays for
    # that once, and the caches' texts, code and file would stay in its memory for its life.
    os.environ["CORTEX_CODECACHE"] = "0"
    from cortex import bytecode

    bytecode.uninstall()  # (started some other way than by ``spawn``: by hand, a test)
    return serve(home, idle_seconds(os.environ))


if __name__ == "__main__":  # pragma: no cover - started by spawn()
    sys.exit(main(sys.argv[1:]))
