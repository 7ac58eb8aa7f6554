"""One hook event's unit of work: the ``Hook`` (its session row, read once and passed along;
its hook-state file; start and ensure-open) and the services it runs on.

``ServicesCache`` keeps the database open between events in the hook server, each event
getting the services under its own settings and clock. A home this process cannot write (a
read-only folder, file or mount: ``read_only``) gets the services of ``copy_services``: an
in-memory copy of its database that writes nowhere, which a start answers from.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from cortex.adapters.hooks.events import HookEvent
from cortex.adapters.hooks.state import read_small_json, session_state_path, write_small_json
from cortex.clock import Clock
from cortex.config import Config
from cortex.core.models import RestoredSessionContext, SessionState
from cortex.errors import (
    ConflictError,
    CortexError,
    MigrationDeferredError,
    StorageError,
    UnavailableError,
)
from cortex.services.app import Services
from cortex.services.project import ProjectIdentity

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

    from cortex.services.sessions.manager import SessionPersistenceManager

_UNREAD: Any = object()
"""The session row not read yet in this event (None means read, and there is none)."""


def run_now(step: Callable[[], object]) -> None:
    """Run a bookkeeping step at once (what a hook without a server does with each)."""
    step()


@dataclass
class Hook:
    """One event being handled: the event, its session and project, and the open services."""

    event: HookEvent
    session_id: str
    identity: ProjectIdentity
    cwd: str
    home: Path
    services: Services
    _state: dict[str, Any] | None = field(default=None, repr=False)
    _row: SessionState | None = field(default=_UNREAD, repr=False)
    offline: bool = False
    """The Cortex server (client mode) could not be asked about the session in this event."""
    unconfirmed: bool = False
    """The session's row is only assumed open (``_assumed``): the server may have closed it."""
    owner_pid: int | None = None
    """The harness process that ran the hook (its session's owner), when the hook could tell."""
    defer: Callable[[Callable[[], object]], None] = run_now
    """How bookkeeping the answer does not wait for runs: at once, or after it (a server's)."""

    @property
    def sessions(self) -> SessionPersistenceManager:
        return self.services.sessions

    @property
    def hook_state(self) -> dict[str, Any]:
        """What earlier hook processes noted about this session (``hooks/sessions/<id>.json``)."""
        if self._state is None:
            self._state = read_small_json(session_state_path(self.home, self.session_id))
        return self._state

    def save_hook_state(self, **changes: Any) -> None:
        state = self.hook_state
        if any(state.get(k) != v for k, v in changes.items()):
            state.update(changes)
            path = session_state_path(self.home, self.session_id)
            self.defer(partial(write_small_json, path, dict(state)))

    def session(self) -> SessionState | None:
        """The session's row, read once per event (a start, which rewrites it, reads it anew)."""
        if self._row is _UNREAD:
            try:
                self._row = self.sessions.get_session(self.session_id)
            except UnavailableError:
                self.offline = True
                self._row = self._assumed()
        return self._row

    def _assumed(self) -> SessionState | None:
        """The session while the server cannot be asked: open when a start went out from
        this home (``unconfirmed``: ``ensure_open`` journals its reopen), else unknown (the
        event starts it)."""
        if not self.hook_state:
            return None
        self.unconfirmed = True
        now = self.sessions.now_iso()
        return SessionState(session_id=self.session_id, start_time=now, last_activity=now)

    def record(self, **signals: Any) -> None:
        """Capture this turn's signals into the open session, passing along the row read."""
        self._row = self.sessions.capture.record(self.session_id, current=self.session(), **signals)

    def start(
        self, extra_keywords: tuple[str, ...] = (), *, keep_ended: bool = False
    ) -> RestoredSessionContext:
        """``on_session_start`` for this session (a new one, or reopening this id; with
        ``keep_ended``, not one that ended normally)."""
        restored = self.sessions.on_session_start(
            self.session_id,
            self.event.host,
            project=self.identity.id,
            project_name=self.identity.name,
            keywords=[*_keywords(self.identity), *extra_keywords],
            workdir=self.cwd,
            owner_pid=self.owner_pid,
            keep_ended=keep_ended,
        )
        self._row, self.unconfirmed = _UNREAD, False
        return restored

    def ensure_open(self, *, reopen_ended: bool = False) -> bool:
        """Whether the session is open to record into, opening it first when needed.

        A session no start reached us for is opened, and one closed by crash recovery (its
        lease lapsed while it was idle) is reopened. One that ended normally stays ended
        unless ``reopen_ended``: hosts deliver async events (a last Stop or tool) after
        SessionEnd, and those must not revive it.

        A session the server could not be asked about (``offline``), only assumed open or
        unknown, is started, the start going to the journal ahead of this event's writes:
        the server may have closed it meanwhile, and the start decides there what this
        method decides online, before the writes that follow arrive. Without
        ``reopen_ended`` it is a start with ``keep_ended``: it opens a session the server
        does not have, continues one crash recovery closed, and leaves one that ended
        normally (elsewhere: another home's ``cortex session end``) ended, refused with the
        writes after it (409), as online. One such start a stretch: another adds nothing
        while it waits in the journal. A prompt's (``reopen_ended``) reopens whatever the
        server holds, as online, and then the session reads as open.
        """
        state = self.session()
        if state is not None and state.is_open and not self.unconfirmed:
            return True
        if state is not None and state.ended_normally and not reopen_ended:
            return False
        keep_ended = self.offline and not reopen_ended
        try:
            self.start(keep_ended=keep_ended)
        except ConflictError:
            if not keep_ended:
                raise
            return False  # (the server answered meanwhile: it ended normally, as online)
        return True


class ServicesCache:
    """The services of the home's database, kept open between events when ``keep`` is set.

    Each event gets them under its own settings and clock. A database file that was moved,
    replaced or deleted since it was opened is opened anew, so writes never go to a file
    nobody reads. A kept store's commits make no checkpoint of the write-ahead log (one took
    ~5 ms of the answer of every ~40th start): ``after_answer`` makes it every
    ``CHECKPOINT_EVENTS`` events.
    """

    CHECKPOINT_EVENTS = 25
    """A start adds ~22 pages to the log: a checkpoint before SQLite's own (1,000 pages)."""

    def __init__(self, keep: bool = True, busy_timeout_ms: int | None = None) -> None:
        self.keep = keep
        self.busy_timeout_ms = busy_timeout_ms
        """How long a write waits for another process's (None: the store's default)."""
        self._path: Path | None = None
        self._inode: tuple[int, int] | None = None
        self._services: Services | None = None
        self._events = 0

    def open(self, config: Config, clock: Clock) -> Services:
        path = config.db_path
        if self._services is not None and (self._path != path or _inode(path) != self._inode):
            self.close()
        if self._services is None:
            self._services = _open(config, clock, self.busy_timeout_ms)
            self._path, self._inode = path, _inode(path)
            if self.keep and not config.server_url:  # (client mode has no local store)
                self._services.store.manual_checkpoints()
            return self._services
        return self._services.rebind(config, clock)

    def after_answer(self) -> None:
        """Count an event; every ``CHECKPOINT_EVENTS`` the log's checkpoint (the hook server
        runs this once the answer is sent)."""
        self._events += 1
        services = self._services
        if self._events < self.CHECKPOINT_EVENTS or services is None or not self.keep:
            return
        self._events = 0
        if not services.config.server_url:
            try:
                services.store.checkpoint()
            except CortexError:
                pass  # (a full disk, say) the next count tries again

    def before_stop(self) -> None:
        """What the hook server does when it stops for idleness, before the store closes:
        merge the search index if it holds ``MERGE_SEGMENTS`` segments or more. No event has
        come for a long while, so holding the write lock for the second a large store's
        merge takes delays nobody's hook."""
        services = self._services
        if services is None or services.config.server_url or self._path is None:
            return
        if _inode(self._path) != self._inode:  # (moved or replaced: not the home's file now)
            return
        try:
            services.merge_search_index()
        except CortexError:
            pass  # (another writer past the busy timeout, a full disk) the next stop tries

    def release(self) -> None:
        if not self.keep:
            self.close()

    def close(self) -> None:
        if self._services is not None:
            services, self._services = self._services, None
            services.close()


def _open(config: Config, clock: Clock, busy_timeout_ms: int | None) -> Services:
    """The services over the home's database, which a hook migrates itself only when it is
    small: a larger one with migrations pending is migrated in the background (``upgrade``)."""
    opener = partial(
        Services.open,
        config,
        clock,
        migrate_max_bytes=int(config.hook_migrate_max_mb * 2**20),
        busy_timeout_ms=busy_timeout_ms,
    )
    try:
        return opener()
    except MigrationDeferredError:
        from cortex.adapters.hooks.upgrade import open_after_migration

        return open_after_migration(config.home, opener)


class ReadOnlyHome(StorageError):
    """An event in a home this process cannot write, of which nothing was stored; ``answer``
    is what a start answered from a copy of the home's database (None: nothing)."""

    def __init__(self, message: str, answer: str | None = None) -> None:
        super().__init__(message)
        self.answer = answer


def read_only(config: Config) -> str | None:
    """Which of the home this process cannot write, when the home holds a database it can
    read (a read-only folder, file or mount: ``os.access`` asks the system, which also knows
    a process that may write whatever the modes say); else None (the store's own error says
    what is wrong with a home with no readable database)."""
    home, db = config.home, config.db_path
    if os.access(db, os.W_OK) and os.access(home, os.W_OK):
        return None
    if not (os.path.isfile(db) and os.access(db, os.R_OK)):
        return None
    return f"the home {home}" if not os.access(home, os.W_OK) else str(db)


def copy_services(config: Config, clock: Clock) -> Services:
    """The services over an in-memory copy of the home's database that write nothing
    (``Services.open_copy``), for a home this process cannot write. A database larger than
    ``hook_migrate_max_mb`` is not copied (StorageError): a hook's host waits seconds, not
    what a large copy takes, and the hook would hold it all in memory."""
    db = config.db_path
    size, limit = db.stat().st_size, config.hook_migrate_max_mb * 2**20
    if size > limit:
        raise StorageError(
            f"database {db} is {size / 2**20:,.0f} MB, more than a hook copies into memory "
            f"(hook_migrate_max_mb = {config.hook_migrate_max_mb:g})"
        )
    return Services.open_copy(config, clock)


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _keywords(identity: ProjectIdentity) -> list[str]:
    """Context words a harness knows at start: the project's name and the git branch."""
    words = [identity.name]
    if identity.branch:
        words.append(identity.branch.replace("/", " "))
    return words
