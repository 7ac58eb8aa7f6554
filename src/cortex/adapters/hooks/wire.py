"""The hook client's work: reading the event, asking the hook server, the fallback to the full
hook, the global options and ending the process.

``client.py`` (what an installed hook runs by path) imports this module, from its cached
bytecode, under the name ``wire``; ``cortex.adapters.hooks``, ``server.py`` and
``cortex.entry`` import it as ``cortex.adapters.hooks.wire`` and share its reading, wire format
and option parsing.

A host starts one process per event, so this module imports only modules built into the
interpreter: ``posix`` (what ``os`` wraps; ``os`` and its kin cost a hook ~1 ms), ``_socket``
(not ``socket``, whose enums cost ~4 ms), ``_signal`` and ``sys``. It hands the raw stdin bytes
(unparsed) with its host, working directory and environment to the home's hook server
(``server.py``) and prints the answer.

When no server takes the event (none runs, ``CORTEX_HOOK_SERVER=0``, the server was upgraded
meanwhile, no Unix sockets) it falls back to the full in-process path with the input it
already read: it puts the directory holding the ``cortex`` package (known from this file's
own location) on ``sys.path`` after the standard library's folders (as ``site`` orders them:
nothing there shadows a standard module, and each standard import the engine makes looks in
one folder fewer) and calls ``cortex.adapters.hooks.main``, which handles the event and starts
a server for the next ones. ``site`` (~3 ms: site-packages, ``.pth`` files)
runs only if Cortex's code imports something that is not found without it (a store's
optional driver: ``SiteOnDemand``); a SQLite store needs the standard library alone.
"""

# No ``from __future__ import annotations``: it imports the ``__future__`` module. Annotations
# naming what is not imported here are strings.
import posix
import sys

TYPE_CHECKING = False  # mypy treats this name as true; importing typing costs ~8 ms
if TYPE_CHECKING:
    import _socket
    import signal as _signal  # what mypy knows the built-in ``_signal`` by
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from os import PathLike
    from types import FrameType, ModuleType
else:
    import _signal  # not ``signal``, which builds its enums at import

MAX_INPUT_BYTES = 8 * 1024 * 1024
"""Larger input is not parsed (a 5 MB prompt is fine; it is cut to 20,000 characters)."""
STDIN_TIMEOUT_SECONDS = 5.0
"""A host closes stdin at once; a hook left reading a terminal gives up after this."""
OWNER_VAR = "CORTEX_HOOK_OWNER_PID"
"""Where the hook passes its harness's pid on (to the hook server too): the session's owner,
so that crash recovery closes a session whose harness is gone without waiting for its lease."""
SHELLS = frozenset(
    {b"sh", b"bash", b"dash", b"zsh", b"ksh", b"mksh", b"ash", b"fish", b"busybox", b"tcsh"}
)
"""Interpreters that wrap a hook's command (``sh -c``, a wrapper script): never its owner."""
VALUE_OPTIONS = ("--home", "--now", "--set")
"""Global options that may come before ``hook`` (as for every ``cortex`` command)."""

MAGIC = b"CXH1"
SERVED = b"0"
REFUSED = b"S"
CLIENT_TIMEOUT_SECONDS = 10.0
SHORT_TIMEOUT_SECONDS = 1.2
"""The wait for a SessionEnd's answer: its host gives it little time (Claude Code 1.5 s for
all SessionEnd hooks) and the answer is empty; the event is sent whole before the wait, so a
server that answers late still records it."""
SHORT_WAIT_EVENTS = (b':"SessionEnd"', b':"sessionEnd"')
MAX_REQUEST_BYTES = 16 * 1024 * 1024
MAX_SOCKET_PATH = 100
"""``sun_path`` holds 104 bytes on macOS, 108 on Linux; a longer home gets no server."""
QUICK_GC_THRESHOLD = 100_000
"""Allocations between two collections of the youngest generation in a process that ends in
milliseconds (``quick_gc``; the interpreter's default is 700)."""

_ENCODING = sys.getfilesystemencoding()
_ERRORS = sys.getfilesystemencodeerrors()  # as ``os.fsdecode``, which ``os.environ`` uses


def main(argv: list[str]) -> int:
    """Run one hook from the command line; always returns 0 (the exit code hosts see)."""
    read: tuple[bytes, str | None] | None = None
    try:
        args = hook_args(argv)
        if args and not args[0].startswith("-"):
            check_home(posix.environ.get(b"CORTEX_HOME"))
            read = read_stdin(MAX_INPUT_BYTES, STDIN_TIMEOUT_SECONDS)
            env = event_env()
            if read[1] is None and server_enabled(env):
                output = _ask(args[0], read[0], env)
                if output is not None:
                    write(output)
                    return 0
        return _in_process(args if args is not None else [], read)
    except EmptyHome as exc:
        refuse(str(exc))
        return 0
    except BaseException as exc:  # noqa: BLE001 - a hook never fails its host
        if posix.environ.get(b"CORTEX_RAISE_ERRORS") == b"1" and isinstance(exc, Exception):
            raise
        return 0


def _ask(host: str, raw: bytes, env: dict[str, str]) -> str | None:
    """The server's answer; None (handle it in-process) also when asking failed unexpectedly
    (no socket could be made, say), so that the event is recorded and the failure logged."""
    try:
        return request(home_dir(env), host, raw, env, current_dir())
    except Exception:  # noqa: BLE001 - the in-process path handles and logs what it can
        return None


def _in_process(args: list[str], read: tuple[bytes, str | None] | None) -> int:
    """The full hook (``cortex.adapters.hooks.main``) with the input this client read, in a
    process that collects garbage less often (``quick_gc``)."""
    _find_cortex()
    quick_gc()
    from cortex.adapters.hooks import main as hook_main

    return hook_main(args, read)


def _find_cortex() -> None:
    """Make the ``cortex`` package this file is part of importable (``client.py`` imports this
    module without it)."""
    import os

    root = os.path.abspath(__file__)
    for _ in range(4):  # .../cortex/adapters/hooks/wire.py -> the folder holding cortex
        root = os.path.dirname(root)
    if root not in sys.path:
        sys.path.append(root)
    if sys.flags.no_site and "site" not in sys.modules:
        sys.meta_path.append(SiteOnDemand)


class SiteOnDemand:
    """The last import finder of an in-process hook started without ``site`` (``-S``): when
    Cortex's own code imports a module that nothing found, it runs ``site`` once (adding
    site-packages, where the optional drivers are) and looks for the module again."""

    @staticmethod
    def find_spec(
        name: str, path: "Sequence[str] | None" = None, target: "ModuleType | None" = None
    ) -> "ModuleSpec | None":
        if path is not None or "site" in sys.modules or name.startswith("_"):
            # A submodule is looked for in its package's path; site ran already; a private
            # module is a probe for an interpreter's own (``_sha2``), never a driver.
            return None
        frame: FrameType | None = sys._getframe(1)
        while frame is not None and (
            frame.f_code.co_filename.startswith("<frozen importlib")
            or frame.f_globals.get("__name__") == "importlib"
        ):
            frame = frame.f_back
        importer = frame.f_globals.get("__name__") if frame is not None else None
        if not isinstance(importer, str) or not (
            importer == "cortex" or importer.startswith("cortex.")
        ):
            return None  # the standard library's probes (``org.python.core``, ``_sha2``)
        if SiteOnDemand in sys.meta_path:
            sys.meta_path.remove(SiteOnDemand)
        import site

        site.main()
        for finder in list(sys.meta_path):  # (``.pth`` files may have added finders)
            find_spec = getattr(finder, "find_spec", None)
            spec = find_spec(name, None, target) if find_spec is not None else None
            if spec is not None:
                return spec  # type: ignore[no-any-return]
        return None


def hook_args(args: list[str]) -> list[str] | None:
    """The arguments after ``hook`` when the command is ``[global options] hook ...``.

    Applies the global options to the environment on the way (``--home`` is ``CORTEX_HOME``,
    ``--now`` is ``CORTEX_NOW``, ``--set NAME=VALUE`` is ``CORTEX_NAME``); None for any other
    command. A hook given an empty ``--home`` (``--home "$UNSET"``) is ``EmptyHome``: not the
    default home, where its events would go unasked, as the command line refuses it too.
    """
    env: dict[str, str] = {}
    index = 0
    while index < len(args):
        arg = args[index]
        name, eq, inline = arg.partition("=")
        if name in VALUE_OPTIONS:
            value = inline if eq else (args[index + 1] if index + 1 < len(args) else None)
            if value is None:
                return None
            _apply(name, value, env)
            index += 1 if eq else 2
        elif arg == "--json":
            index += 1
        elif arg == "hook":
            if not env.get("CORTEX_HOME", "-").strip():
                raise EmptyHome(EMPTY_HOME.format("--home"))
            for key, setting in env.items():  # as ``os.environ[key] = setting`` does
                posix.putenv(key, setting)
                posix.environ[_encode(key)] = _encode(setting)  # what os.environ reads
            return args[index + 1 :]
        else:
            return None
    return None


EMPTY_HOME = "{} is empty; omit it for the default home or give a directory (nothing recorded)"


class EmptyHome(ValueError):
    """A hook's home given as an empty or blank text: no home, so nothing is recorded (nor
    logged but on stderr: ``refuse``)."""


def check_home(raw: "bytes | str | None") -> None:
    """``EmptyHome`` for a ``CORTEX_HOME`` of spaces alone, which the command line refuses
    and the hook would take for a folder of that name in the project. An empty one is unset,
    for the hook as for the command line: the default home."""
    if raw and not raw.strip():
        raise EmptyHome(EMPTY_HOME.format("CORTEX_HOME"))


def refuse(problem: str) -> None:
    """Say ``problem`` in one line on stderr: a hook with no home has no log."""
    try:
        sys.stderr.write(f"cortex hook: {problem}\n")
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):  # (None: started with no stderr)
        pass


def _apply(option: str, value: str, env: dict[str, str]) -> None:
    if option == "--home":
        env["CORTEX_HOME"] = value
    elif option == "--now":
        env["CORTEX_NOW"] = value
    else:
        name, sep, setting = value.partition("=")
        if sep and name.strip():
            env["CORTEX_" + name.strip().upper()] = setting.strip()


def _encode(text: str) -> bytes:
    return text.encode(_ENCODING, _ERRORS)


def _decode(data: bytes) -> str:
    return data.decode(_ENCODING, _ERRORS)


# -- the event's input and surroundings ----------------------------------------------------------
class _Expired(Exception):
    """Raised by the SIGALRM handler that bounds ``read_stdin``'s wait."""


def _expired(signum: int, frame: object) -> None:
    raise _Expired


def read_stdin(limit: int, timeout: float) -> tuple[bytes, str | None]:
    """All of stdin, or (b"", why) when it is larger than ``limit`` or stays open too long.

    A one-shot SIGALRM timer bounds the wait (``select`` would be one more module to load);
    outside the main thread, where no signal handler can be set, the read has no bound.
    """
    chunks: list[bytes] = []
    size = 0
    try:
        previous = _signal.signal(_signal.SIGALRM, _expired)
    except ValueError:
        previous = None
    try:
        try:
            if previous is not None:
                _signal.setitimer(_signal.ITIMER_REAL, timeout)
            while True:
                try:
                    chunk = posix.read(0, 1 << 20)
                except OSError:
                    break  # no usable stdin: the same as an empty one
                if not chunk:
                    break
                size += len(chunk)
                if size > limit:
                    return b"", f"input is larger than {limit} bytes; ignored"
                chunks.append(chunk)
        finally:
            if previous is not None:
                _signal.setitimer(_signal.ITIMER_REAL, 0)
    except _Expired:  # (also when it fired as the read ended: it took that long)
        return b"", f"stdin was not closed within {timeout:g} s; input ignored"
    finally:
        if previous is not None:
            _signal.signal(_signal.SIGALRM, previous)
    return b"".join(chunks), None


def event_env() -> dict[str, str]:
    """The environment an event is handled with: this process's, its ``CORTEX_HOME`` made
    absolute (the hook server works from ``/``, so a relative home would name another
    folder there), plus its harness's pid."""
    env = {_decode(k): _decode(v) for k, v in posix.environ.items()}  # as ``os.environ``
    home = env.get("CORTEX_HOME")
    if home and home[0] not in "/~":
        env["CORTEX_HOME"] = current_dir().rstrip("/") + "/" + home
    owner = harness_pid()
    if owner is not None:
        env.setdefault(OWNER_VAR, str(owner))
    return env


def harness_pid(proc: str = "/proc") -> int | None:
    """The harness that ran this hook: the parent process, or the shell's parent when a shell
    wraps the command (``sh -c``, or a wrapper script, whose process is named after the
    script: its executable tells). None when it cannot be told (no ``/proc``) or the parent
    is init."""
    pid = posix.getppid()
    for _ in range(3):
        try:
            fd = posix.open(f"{proc}/{pid}/stat", posix.O_RDONLY)
            try:
                data = posix.read(fd, 4096)
            finally:
                posix.close(fd)
            comm = data[data.index(b"(") + 1 : data.rindex(b")")]
            fields = data[data.rindex(b")") + 2 :].split()
            parent = int(fields[1])
        except (OSError, ValueError, IndexError):
            return None
        if comm not in SHELLS and _executable(proc, pid) not in SHELLS:
            return pid if pid > 1 else None
        pid = parent
    return None


def _executable(proc: str, pid: int) -> bytes:
    """The file name of the program ``pid`` runs (``/proc/PID/exe``); b"" when unreadable."""
    try:
        target = posix.readlink(_encode(f"{proc}/{pid}/exe"))
    except OSError:
        return b""
    return target.rpartition(b"/")[2].removesuffix(b" (deleted)")


def server_enabled(env: dict[str, str]) -> bool:
    return env.get("CORTEX_HOOK_SERVER", "1").strip().lower() not in ("0", "false", "off", "no")


def home_dir(env: dict[str, str]) -> str:
    """``CORTEX_HOME`` or ``~/.cortex`` (as ``cortex.config.default_home``), without pathlib."""
    raw = env.get("CORTEX_HOME")
    return _expand_user(raw, env) if raw else _expand_user("~", env) + "/.cortex"


def _expand_user(path: str, env: dict[str, str]) -> str:
    """``os.path.expanduser``: ``~`` and ``~/...`` from ``HOME`` here, the rest by it."""
    if not path.startswith("~"):
        return path
    home = env.get("HOME")
    if home is None or path[1:2] not in ("", "/"):
        import os.path  # ``~user``, or no HOME (the password database): rare

        return os.path.expanduser(path)
    return home.rstrip("/") + path[1:] or "/"


def current_dir() -> str:
    try:
        return posix.getcwd()
    except OSError:
        return "/"


def write(text: str) -> None:
    if not text or sys.stdout is None:  # (None: started with no stdout at all, fd 1 closed)
        return
    try:
        sys.stdout.buffer.write(text.encode("utf-8", "replace"))
        sys.stdout.flush()
    except (OSError, ValueError):
        # The host stopped reading. Point stdout at /dev/null so that the interpreter's final
        # flush does not fail too (that would make the exit code 120).
        try:
            posix.dup2(posix.open("/dev/null", posix.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass


# -- talking to the hook server ------------------------------------------------------------------
def socket_path(home: "str | PathLike[str]") -> str:
    return posix.fspath(home).rstrip("/") + "/run/hook.sock"


def usable(path: str) -> bool:
    """True when ``path`` fits a Unix socket address and this system has Unix sockets."""
    # Imported here, not at the top: a hook with the server off, ``cortex memory search`` and
    # ``cortex session start`` (which import this module) need no sockets.
    import _socket  # not ``socket``: its enums cost a hook client ~4 ms, and it needs none

    return len(_encode(path)) <= MAX_SOCKET_PATH and hasattr(_socket, "AF_UNIX")


def request(home: str, host: str, raw: bytes, env: dict[str, str], cwd: str) -> str | None:
    """The server's answer to one event; None when no server took it (handle it in-process)."""
    path = socket_path(home)
    if not usable(path):
        return None
    import _socket  # (imported by ``usable``)

    header = "\0".join([host, cwd, *(f"{k}={v}" for k, v in env.items())])
    payload = header.encode("utf-8", "surrogateescape")
    client = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        wait = client_timeout(raw)
        client.settimeout(wait)
        try:
            client.connect(path)
        except OSError:
            return None
        try:
            client.sendall(MAGIC + len(payload).to_bytes(4, "big") + payload + raw)
            client.shutdown(_socket.SHUT_WR)
            reply = receive(client, MAX_REQUEST_BYTES)
        except TimeoutError:  # the server has the event (or its start): it records it
            _log_wire(
                home,
                f"{host}: the hook server did not answer within {wait:g} s (it records the"
                f" event when it gets to it); if this repeats, stop it (kill the pid in {home}/"
                "run/hook.pid) and the next hook starts a fresh one",
            )
            return ""
        except OSError:  # (reset) the server went away with the event unanswered
            reply = b""
    finally:
        client.close()
    if not reply:
        # It stopped (killed, idle, upgraded) before answering, so it committed nothing of
        # the event (an answer follows the commit at once): record it here instead.
        _log_wire(
            home,
            f"{host}: the hook server closed the connection without answering (it stopped or"
            " was killed); the event was handled in-process",
        )
        return None
    if reply[:1] == REFUSED:
        return None
    return reply[1:].decode("utf-8", "replace")


def client_timeout(raw: bytes) -> float:
    """How long to wait for the answer to the event ``raw`` (its first 4 KB are looked at)."""
    at = raw.find(b'"hook_event_name"', 0, 4096)
    if at >= 0 and b"".join(raw[at + 17 : at + 48].split()).startswith(SHORT_WAIT_EVENTS):
        return SHORT_TIMEOUT_SECONDS
    return CLIENT_TIMEOUT_SECONDS


def _log_wire(home: str, message: str) -> None:
    """One hooks.log line about talking to the server, written by the engine's logger
    (loaded as the fallback path loads it: what went wrong cost far more)."""
    try:
        _find_cortex()
        from pathlib import Path

        from cortex.adapters.hooks.state import log_line

        log_line(Path(home), message)
    except Exception:  # noqa: BLE001, S110 - a hook never fails its host
        pass


def receive(conn: "_socket.socket", limit: int) -> bytes:
    """Everything ``conn`` sends until it shuts down; OSError past ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = conn.recv(1 << 20)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise OSError("message too large")
        chunks.append(chunk)


def quick_gc() -> tuple[int, ...]:
    """Collect cyclic garbage less often in this process (``QUICK_GC_THRESHOLD``); return the
    thresholds it had.

    A hook or a quick command with the engine in-process allocates most of its objects while
    importing the engine, objects that live until the process ends, and the collector went
    through them all about fifteen times (two of them full middle-generation passes): 1.5 to
    2 ms of such a process's ~30. What it runs is short and bounded, and what little cyclic
    garbage it makes is still collected, every 100,000 allocations.
    """
    import gc

    previous = gc.get_threshold()
    gc.set_threshold(QUICK_GC_THRESHOLD, *previous[1:])
    return previous


def finish(code: int) -> None:
    """End this process with ``code`` as ``sys.exit(code)`` would, but without the interpreter's
    teardown: freeing every module and object of the engine cost a no-server hook about 5 ms
    of CPU (a tenth of it) after its answer was written, and the OS reclaims it all at once.

    What an exit must still do is done first: the ``atexit`` functions (the dataclass method
    cache, ``logging``'s flush), then stdout and stderr are flushed. The engine writes its files
    with ``with`` blocks and closes its database, so nothing else is pending. Where anything
    is unusual (another thread still running, a stream that cannot be flushed, no
    ``atexit._run_exitfuncs``) it exits the ordinary way.
    """
    import atexit

    threading = sys.modules.get("threading")
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if run_exitfuncs is None or (threading is not None and threading.active_count() > 1):
        sys.exit(code)
    run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        sys.exit(code)  # as an ordinary exit reports it (a closed pipe, say)
    posix._exit(code)
