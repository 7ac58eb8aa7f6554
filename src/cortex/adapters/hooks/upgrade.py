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

import contextlib
import sys
import time
from pathlib import Path

from cortex.errors import CortexError, MigrationDeferredError, StorageError
from cortex.files import file_lock

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

    return detach(str(home), "migrate.spawned", __name__, None)


def migrate(home: Path) -> str:
    """Apply every pending migration to ``home``'s database unless another process is doing
    it; the line it logs to ``logs/hooks.log`` (empty when it left the work to that one, or
    could not lock in the home)."""
    from cortex.adapters.hooks.state import log_line

    try:
        with file_lock(_lock_target(home), wait=False):
            line = _migrate(home)
    except (BlockingIOError, StorageError):
        return ""  # another migration of this home runs (it logs its own line), or no home
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
    target = _lock_target(home)
    if not target.with_name(target.name + ".lock").exists():
        return False  # (no migration ever ran: nothing to create in a home that is read)
    try:
        with file_lock(target, wait=False):
            return False
    except BlockingIOError:
        return True
    except StorageError:
        return False


def wait_for(home: Path) -> None:
    """Return once no background migration of ``home``'s database runs."""
    with contextlib.suppress(StorageError), file_lock(_lock_target(home)):
        pass


def _lock_target(home: Path) -> Path:
    """What ``file_lock`` locks for the home's migration: ``run/migrate.lock``."""
    return home / "run" / "migrate"


if __name__ == "__main__":  # pragma: no cover - run as a detached process by ``start``
    from cortex.adapters.hooks.server import leave_directory

    leave_directory()
    migrate(Path(sys.argv[1]))
