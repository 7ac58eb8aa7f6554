"""Migrations a hook leaves to a background process.

After an upgrade the first process to open the database applies the new migrations. Some
rewrite a whole table: moving 100,000 vectors took 5 s, and a million 48 s or more. A hook
that did that inline would outlive its host's timeout (Claude Code gives its ``SessionEnd``
hooks 2 s as ``cortex install`` sets it); the host kills it, its transaction rolls back, and
the next hook starts over: no event would be recorded again until someone ran ``cortex db
migrate``.

So a hook migrates in place only a database of at most ``hook_migrate_max_mb`` (32 MB by
default: the slowest step, at its 8.5 ms a megabyte, then takes under 0.3 s). On a larger
file with steps pending it starts ``python -m cortex.adapters.hooks.upgrade HOME``, detached,
and waits up to ``WAIT_SECONDS`` for it: steps that only add a table or an index are done by
then, and the event goes on as usual. Otherwise the event is left unrecorded (a one-line
``MigrationDeferredError`` in ``logs/hooks.log``; the hook still exits 0 with its host's empty
answer), as are the events that come while the migration runs; the migration's own line in
``hooks.log`` says when it is done. Only one migration runs at a time (``run/migrate.lock``); a
hook that finds one running starts no other.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from cortex.errors import CortexError, MigrationDeferredError

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    Opened = TypeVar("Opened")

WAIT_SECONDS = 1.0
"""How long a hook waits for the background migration before leaving its event unrecorded."""
POLL_SECONDS = 0.05


def open_after_migration(
    home: Path, open_store: Callable[[], Opened], wait: float = WAIT_SECONDS
) -> Opened:
    """``open_store()`` (which raises ``MigrationDeferredError`` while migrations are pending
    on a large file) once a background migration of ``home``'s database has applied them,
    waiting up to ``wait`` seconds; the error, saying the migration runs, when it has not
    finished by then."""
    start(home)
    deadline = time.monotonic() + wait
    while True:
        time.sleep(POLL_SECONDS)
        try:
            return open_store()
        except MigrationDeferredError as exc:
            if time.monotonic() >= deadline:
                raise MigrationDeferredError(
                    f"{exc} (started in the background: logs/hooks.log says when it is done); "
                    "this event was not recorded"
                ) from None


def start(home: Path) -> bool:
    """Start the background migration of ``home``'s database unless one started moments ago
    (``server.SPAWN_GRACE_SECONDS``); True if started."""
    from cortex.adapters.hooks.server import detach

    return detach(str(home), "migrate.spawned", [sys.executable, "-m", __name__, str(home)], None)


def migrate(home: Path) -> str:
    """Apply every pending migration to ``home``'s database unless another process is doing
    it; the line it logs to ``logs/hooks.log`` (empty when it left the work to that one)."""
    from cortex.adapters.hooks.state import log_line

    lock = _lock(home / "run" / "migrate.lock")
    if lock is None:
        return ""  # another migration of this home runs: it logs its own line
    try:
        line = _migrate(home)
    finally:
        os.close(lock)
    log_line(home, line)
    return line


def _migrate(home: Path) -> str:
    from cortex.config import load_config
    from cortex.services.app import Services

    config = load_config(home, {})
    started = time.monotonic()
    try:
        with Services.open(config, migrate=False) as services:
            applied = services.migrate()
    except CortexError as exc:
        return f"background migration of {config.db_path} failed: {exc}"
    seconds = time.monotonic() - started
    if not applied:
        return f"background migration of {config.db_path}: nothing was pending"
    what = ", ".join(applied)
    return f"background migration of {config.db_path}: applied {what} in {seconds:.1f} s"


def running(home: Path) -> bool:
    """Whether a background migration of ``home``'s database runs now."""
    if not (home / "run" / "migrate.lock").exists():
        return False
    lock = _lock(home / "run" / "migrate.lock")
    if lock is None:
        return True
    os.close(lock)
    return False


def wait_for(home: Path) -> None:
    """Return once no background migration of ``home``'s database runs."""
    lock = _lock(home / "run" / "migrate.lock", wait=True)
    if lock is not None:
        os.close(lock)


def _lock(path: Path, wait: bool = False) -> int | None:
    """An fd holding ``path`` exclusively (``wait``: once the holder lets it go); None when
    another process holds it. Where there is no ``fcntl`` (Windows) an fd without a lock: the
    migrations' own transactions still apply each step once."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return None
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


if __name__ == "__main__":  # pragma: no cover - run as a detached process by ``start``
    migrate(Path(sys.argv[1]))
