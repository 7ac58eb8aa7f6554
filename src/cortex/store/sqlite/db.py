"""The one SQLite connection a ``SQLiteStore`` shares between its repositories.

Connections are autocommit (``isolation_level=None``); ``transaction()`` issues an explicit
``BEGIN IMMEDIATE`` so that a writer takes the write lock up front and waits (busy timeout)
instead of failing half way. Every ``sqlite3`` failure a user can cause (read-only directory,
lock held too long, a file that is not a database) becomes a one-line ``StorageError``; a
broken uniqueness rule becomes a ``ConflictError`` where the caller names one.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from cortex.clock import SystemClock, to_iso
from cortex.core.plaintext import unstorable
from cortex.errors import ConflictError, MigrationDeferredError, StorageError, ValidationError
from cortex.files import ensure_dir, file_uri
from cortex.logs import getLogger
from cortex.store.migrations import (
    MIGRATION_NAMES,
    MIGRATIONS_TABLE,
    NOTHING_ON_SQLITE,
    refuse_unknown,
)
from cortex.store.records import one_line

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

    from cortex.store.sqlite.checkpointer import Checkpointer
    from cortex.store.sqlite.migrations import Migration

    Params = Sequence[Any]

MEMORY = ":memory:"
MIGRATION_WAIT_SECONDS = 900.0
"""How long a process that must migrate waits for another process's migration step before it
gives up: a step that rewrites a million vectors took 48-80 s here, longer than any ordinary
write holds the lock (the busy timeout, 5 s)."""

log = getLogger("cortex.store")


def connect(path: str, *, busy_timeout_ms: int = 5000) -> sqlite3.Connection:
    """Open ``path`` with Cortex's connection settings, autocommit (transactions are explicit)."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=busy_timeout_ms / 1000)
    try:
        # Hook processes of concurrent sessions wait for the write lock rather than fail.
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        # WAL: readers don't block the writer and the writer doesn't block readers.
        _enable_wal(conn, busy_timeout_ms / 1000)
        # With WAL, NORMAL survives a crash of any process intact (committed is kept); a power
        # loss or an OS crash may roll back the commits made since the last checkpoint.
        conn.execute("PRAGMA synchronous = NORMAL")
        # Later tables reference sessions; SQLite enforces foreign keys only when asked.
        conn.execute("PRAGMA foreign_keys = ON")
    except BaseException:
        conn.close()
        raise
    return conn


def _enable_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Switch to WAL, retrying: SQLite skips the busy handler for this switch, so processes
    racing to create the same new file would otherwise fail with "database is locked"."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.002)


def storage_error(exc: sqlite3.Error, url: str) -> StorageError:
    """A one-line ``StorageError`` for ``exc`` that names the next step."""
    text = str(exc).lower()
    where = str(Path(url).parent) if url != MEMORY else "the database"
    if "readonly" in text or "read-only" in text:
        msg = f"database {url} is read-only; check permissions on {where} or set CORTEX_HOME"
    elif "locked" in text or "busy" in text:
        msg = (
            f"database {url} is locked by another process; retry, or stop the process that holds it"
        )
    elif "not a database" in text or "malformed" in text:
        msg = (
            f"{url} is not a Cortex database or is damaged; move it aside (a new one is "
            "created) or restore a backup"
        )
    elif "unable to open" in text and Path(url).is_dir():
        msg = f"{url} is a directory; give the path of a database file"
    elif "unable to open" in text:
        msg = (
            f"cannot open database {url}; check that {where} exists and is writable, "
            "or set CORTEX_HOME"
        )
    elif "no such table" in text or "no such column" in text:
        msg = f"database {url} is not migrated ({one_line(exc)}); run `cortex db migrate`"
    elif "full" in text or "i/o" in text:
        msg = f"cannot write database {url} ({one_line(exc)}); free disk space and retry"
    else:
        msg = f"database {url} failed ({one_line(exc)}); check the file and {where}"
    return StorageError(msg)


def copy_read_only(path: Path, target: sqlite3.Connection) -> None:
    """Copy the database at ``path`` into ``target`` (an in-memory one) without writing a byte
    beside it: what a home this process cannot write (a read-only folder, file or mount) can
    still be read for.

    A file whose write-ahead log holds commits is read as SQLite reads a read-only file
    (``mode=ro``), through the log and its shared-memory file; where those cannot be read
    (the log is there, the shared-memory file is not and cannot be made) it is a
    StorageError: what the file alone holds is stale. A file with no log or an empty one
    (every commit checkpointed into it, as a clean close leaves it) is read as a file
    nothing writes (``immutable=1``): ``mode=ro`` would create the log files in a folder it
    can write. It is taken only if it is unchanged after the copy and still has an empty log
    at most: a writer that came meanwhile would have written its log.
    """
    if _wal_bytes(path):
        try:
            _backup(f"{file_uri(path)}?mode=ro", target)
        except sqlite3.DatabaseError as exc:
            raise StorageError(
                f"database {path} cannot be read here: its write-ahead log holds commits that "
                f"only a process that can write {path.parent} can read ({one_line(exc)}); "
                "make it writable, or run a cortex command there as its owner"
            ) from exc
        return
    before = _identity(path)
    try:
        _backup(f"{file_uri(path)}?immutable=1", target)
    except sqlite3.DatabaseError as exc:
        raise storage_error(exc, str(path)) from exc
    if _wal_bytes(path) or _identity(path) != before:
        raise StorageError(f"database {path} changed while it was read; retry")


def _backup(uri: str, target: sqlite3.Connection) -> None:
    source = sqlite3.connect(uri, uri=True)
    try:
        source.execute("SELECT count(*) FROM sqlite_master").fetchone()  # opens it: fails here
        source.backup(target)
    finally:
        source.close()


def _wal_bytes(path: Path) -> int:
    try:
        return os.stat(f"{path}-wal").st_size
    except OSError:
        return 0


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


def _prepare_file(path: Path) -> None:
    """Create the parent directory (0700) and the database file (0600) if they are missing."""
    ensure_dir(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    except PermissionError as exc:
        raise StorageError(
            f"database {path} is read-only; check permissions on {path.parent} or set CORTEX_HOME"
        ) from exc
    except OSError as exc:
        raise StorageError(
            f"cannot create database {path} ({exc.strerror}); check {path.parent} "
            "or set CORTEX_HOME"
        ) from exc
    os.close(fd)


class Database:
    """One connection (a file path or ``:memory:``), its transactions and its error translation.

    ``conflict`` arguments are messages for ``ConflictError`` with ``{}`` where the SQLite
    error goes; without one, an integrity error is a programming error and passes through.
    """

    def __init__(self, path: str | Path, *, busy_timeout_ms: int = 5000) -> None:
        self.url = str(path)
        self._depth = 0
        self._checkpointer: Checkpointer | None = None
        self._checkpoint_at_commit = False
        self._manual_checkpoints = False
        self._after: list[Callable[[], object]] = []
        if self.url != MEMORY:
            _prepare_file(Path(path))
        with self.translated():
            self.connection = connect(self.url, busy_timeout_ms=busy_timeout_ms)

    @contextlib.contextmanager
    def translated(self, conflict: str | None = None) -> Iterator[None]:
        """Turn environment failures into ``StorageError`` (and, with ``conflict``, integrity
        errors into ``ConflictError``); programming errors pass through."""
        try:
            yield
        except sqlite3.IntegrityError as exc:
            if conflict is None:
                raise
            raise ConflictError(conflict.format(one_line(exc))) from exc
        except sqlite3.ProgrammingError as exc:
            raise _misuse(exc, self.url) from exc
        except sqlite3.DatabaseError as exc:
            if type(exc) is sqlite3.DatabaseError or isinstance(exc, sqlite3.OperationalError):
                raise storage_error(exc, self.url) from exc
            raise
        except OverflowError as exc:  # a number past SQLite's 64-bit integers, bound as a value
            raise ValidationError(
                f"SQLite cannot store this value ({one_line(exc)}); fix the input"
            ) from exc
        except UnicodeEncodeError as exc:  # a lone surrogate in a value: not text UTF-8 encodes
            raise unstorable() from exc
        except UnicodeDecodeError as exc:  # SQLite's own message quoted garbage: a damaged file
            raise StorageError(
                f"{self.url} is damaged (SQLite reports unreadable text: {exc.reason}); "
                "move it aside (a new one is created) or restore a backup"
            ) from exc

    def run(self, sql: str, params: Params = (), *, conflict: str | None = None) -> sqlite3.Cursor:
        with self.translated(conflict):
            return self.connection.execute(sql, tuple(params))

    def run_many(self, sql: str, rows: Iterable[Params], *, conflict: str | None = None) -> None:
        with self.translated(conflict):
            self.connection.executemany(sql, rows)

    def rows(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        with self.translated():
            return self.connection.execute(sql, tuple(params)).fetchall()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One ``BEGIN IMMEDIATE`` transaction; nested calls join it; an exception rolls back."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self.run("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield
            self.run("COMMIT")
        except BaseException:
            self._rollback()
            raise
        finally:
            self._depth = 0
            checkpoint, self._checkpoint_at_commit = self._checkpoint_at_commit, False
            after, self._after = self._after, []
        if checkpoint:
            self._checkpoint_in_background()
        for step in after:  # reached only once COMMIT returned
            step()

    def after_commit(self, step: Callable[[], object]) -> None:
        """Run ``step`` once the transaction open now commits (at once when none is open); a
        rollback drops it. What mirrors a commit outside the database (a file) goes here, so
        that a failure or a kill before the commit leaves no mirror of a change never made."""
        if self._depth:
            self._after.append(step)
        else:
            step()

    def checkpoint_after_commit(self) -> None:
        """Once the transaction open now commits, move the log into the database from a thread
        of its own (``checkpointer.py``), not in a later commit: what a bulk write asks. Not
        where checkpoints are manual (``manual_checkpoints``) or there is no log (memory)."""
        if self.url != MEMORY and not self._manual_checkpoints:
            self._checkpoint_at_commit = True

    def _checkpoint_in_background(self) -> None:
        if self._checkpointer is None:
            from cortex.store.sqlite.checkpointer import Checkpointer

            try:
                self._checkpointer = Checkpointer(self.url)
            except RuntimeError:  # no thread to be had: the commits' own checkpoints do it
                return
        self._checkpointer.request()

    def _rollback(self) -> None:
        # SQLite has already rolled back after some errors (BUSY, FULL); don't fail on that.
        if self.connection.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self.connection.execute("ROLLBACK")

    def manual_checkpoints(self) -> None:
        """No automatic checkpoint in this connection's commits (``PRAGMA wal_autocheckpoint``
        is per connection; other processes' commits still make theirs), nor in the
        background."""
        self.run("PRAGMA wal_autocheckpoint = 0")
        self._manual_checkpoints = True

    def checkpoint(self) -> None:
        """A PASSIVE checkpoint: the WAL's pages no reader still needs, into the database
        (synced as ``synchronous = NORMAL`` syncs checkpoints), after the background one, if
        one runs, is done."""
        self._stop_checkpointer()
        self.rows("PRAGMA wal_checkpoint(PASSIVE)")

    def grow_cache(self, kib: int) -> None:
        """Let this connection's page cache hold ``kib`` KiB (``PRAGMA cache_size``), when it
        holds less. SQLite's default, 2 MB, is smaller than what one batch of a thousand
        memories dirties in a large database (~2,000 pages of 4 KiB at 1,000,000 stored): past
        it, the transaction writes pages to the log before its commit (and again when they are
        changed after that) and reads back the index pages it evicted. The cache takes memory
        only as pages enter it, and it stays grown for the connection's later batches."""
        current = int(self.rows("PRAGMA cache_size")[0][0])  # negative: KiB; else pages
        if current >= 0:
            current = -current * int(self.rows("PRAGMA page_size")[0][0]) // 1024
        if -current < kib:
            self.run(f"PRAGMA cache_size = -{int(kib)}")

    def grow_log(self, kib: int) -> None:
        """Let this connection's commits leave up to ``kib`` KiB in the write-ahead log before
        one of them moves it into the database (``PRAGMA wal_autocheckpoint``, in pages), when
        they leave less; a connection whose checkpoints are manual (0) is left so.

        SQLite checkpoints a commit that leaves more than 1,000 pages (4 MiB), so a writer of
        batches that each dirty more than that pays a checkpoint per batch: every page written
        again into the database at random, and two syncs. Pages that consecutive batches both
        change (the tail of the table and of its indexes, the full-text index's segments) then
        go into the database once per batch; with the log holding two batches, once per two.
        Nothing committed is less safe from a process crash; a power loss may roll back the
        commits made since the last checkpoint, as with any log of this mode."""
        current = int(self.rows("PRAGMA wal_autocheckpoint")[0][0])
        pages = kib * 1024 // int(self.rows("PRAGMA page_size")[0][0])
        if 0 < current < pages:
            self.run(f"PRAGMA wal_autocheckpoint = {int(pages)}")

    def vacuum(self) -> tuple[int, int]:
        """Rewrite the file without its free pages (``VACUUM``), then move the write-ahead log
        into it and empty the log: the database's size in bytes before and after. Another
        connection's open transaction makes it wait (the busy timeout), then fail."""
        if self.connection.in_transaction:
            raise RuntimeError("vacuum() needs a connection outside any transaction")
        self._stop_checkpointer()  # (its checkpoint would make VACUUM wait)
        with self.translated():
            before = self._size()
            self.connection.execute("VACUUM")
            self.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            return before, self._size()

    def free_bytes(self) -> int:
        """The bytes of the file's free pages (what ``vacuum`` would hand back)."""
        with self.translated():
            return self._size("freelist_count")

    def _size(self, pages: str = "page_count") -> int:
        count = int(self.connection.execute(f"PRAGMA {pages}").fetchone()[0])
        return count * int(self.connection.execute("PRAGMA page_size").fetchone()[0])

    def check_integrity(self) -> list[str]:
        """What ``PRAGMA quick_check`` reports; empty when it says ``ok``."""
        found = [str(row[0]) for row in self.rows("PRAGMA quick_check")]
        if found == ["ok"]:
            return []
        # A report row may span lines under a "*** in database main ***" header: one a line.
        lines = (" ".join(line.split()) for row in found for line in row.splitlines())
        return [line for line in lines if line and not line.startswith("***")]

    def close(self) -> None:
        self._stop_checkpointer()  # (its connection closed before this last one)
        self.connection.close()

    def _stop_checkpointer(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
            self._checkpointer = None

    # -- migrations ------------------------------------------------------------------------
    def applied_migrations(self) -> list[tuple[str, str]]:
        """(name, applied_at) of each applied step in order; empty on a database Cortex
        never saw."""
        with self.translated():
            try:
                rows = self.connection.execute(
                    f"SELECT name, applied_at FROM {MIGRATIONS_TABLE} ORDER BY rowid"
                ).fetchall()
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):
                    return []
                raise
        return [(str(name), str(at)) for name, at in rows]

    def migrate(self, max_bytes: int | None = None) -> list[str]:
        """Apply pending steps in order; return the names applied now.

        Checking what is pending is one small query, so opening a migrated file stays cheap;
        the steps themselves (their SQL is most of the store's code) load only when one is due.
        With ``max_bytes``, a file larger than that with steps pending is left as it is
        (``MigrationDeferredError``): a step may rewrite a table, seconds at a few hundred
        megabytes, longer than a hook's host waits.
        """
        if self.connection.in_transaction:
            raise RuntimeError("migrate() needs a connection outside any transaction")
        done = {name for name, _ in self.applied_migrations()}
        refuse_unknown(done, MIGRATION_NAMES, f"database {self.url}")
        if done.issuperset(MIGRATION_NAMES):
            return []
        pending = [name for name in MIGRATION_NAMES if name not in done]
        if (
            max_bytes is not None
            and self.url != MEMORY
            and not NOTHING_ON_SQLITE.issuperset(pending)
        ):
            self._refuse_large(max_bytes, pending)
        from cortex.store.sqlite.migrations import MIGRATIONS

        with self.translated():
            return [m.name for m in MIGRATIONS if m.name not in done and self._apply(m)]

    def _refuse_large(self, max_bytes: int, pending: list[str]) -> None:
        try:
            size = os.stat(self.url).st_size
        except OSError:
            return  # (a file another process just moved: migrating it is what fails, if any)
        if size > max_bytes:
            steps = f"{len(pending)} migration{'s' if len(pending) > 1 else ''}"
            raise MigrationDeferredError(
                f"database {self.url} ({size / 2**20:,.0f} MB) has {steps} pending "
                f"({', '.join(pending)}); run `cortex db migrate`"
            )

    def _apply(self, migration: Migration) -> bool:
        """Apply one step in its own transaction unless another process just did; True if
        applied."""
        conn = self.connection
        self._begin_step(migration.name)
        try:
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} "
                "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
            )
            already = conn.execute(
                f"SELECT 1 FROM {MIGRATIONS_TABLE} WHERE name = ?", (migration.name,)
            ).fetchone()
            if already is None:
                migration.apply(conn)
                conn.execute(
                    f"INSERT INTO {MIGRATIONS_TABLE} (name, applied_at) VALUES (?, ?)",
                    # When a step ran is bookkeeping about this file, not session data: the
                    # real clock.
                    (migration.name, to_iso(SystemClock().now())),
                )
        except BaseException:
            self._rollback()
            raise
        conn.execute("COMMIT")
        return already is None

    def _begin_step(self, name: str) -> None:
        """``BEGIN IMMEDIATE`` for one migration step. When the write lock stays taken past the
        busy timeout, another process is most likely applying this step (a hook's background
        migration, say): say so, and wait up to ``MIGRATION_WAIT_SECONDS`` for it instead of
        failing, so that a command run meanwhile opens the database once the step is in."""
        conn = self.connection
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise
        log.warning("waiting for another process to finish migrating %s (%s)", self.url, name)
        (previous,) = conn.execute("PRAGMA busy_timeout").fetchone()
        conn.execute(f"PRAGMA busy_timeout = {int(MIGRATION_WAIT_SECONDS * 1000)}")
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise
            raise StorageError(
                f"database {self.url} is still being migrated by another process after "
                f"{MIGRATION_WAIT_SECONDS:g} s ({name}); retry once it is done, or stop it"
            ) from exc
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(previous)}")


def _misuse(exc: sqlite3.ProgrammingError, url: str) -> Exception:
    """A connection used after ``close()`` or from another thread, as a one-line
    ``StorageError``; any other programming error as it is."""
    text = str(exc)
    if "closed database" in text:
        return StorageError(f"the store {url} is closed; open a new one (Services.open(config))")
    if "same thread" in text:
        return StorageError(
            f"the store {url} was opened in another thread and belongs to it; "
            "open one in each thread (Services.open(config))"
        )
    return exc
