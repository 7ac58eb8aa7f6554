"""The pool, one tenant's runner over it, and psycopg errors as one-line Cortex errors.

A ``Runner`` holds no connection between calls: a call outside a transaction checks one out
of the pool, runs in autocommit and gives it back; ``transaction()`` keeps one checked out
until it commits or rolls back, and every call inside it (nested transactions included) uses
that one. So any number of stores, one per request, share a process's pool.
"""

from __future__ import annotations

import contextlib
import re
import weakref
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg import pq
from psycopg_pool import ConnectionPool, PoolTimeout

from cortex.core.plaintext import unstorable
from cortex.errors import (
    BusyError,
    ConflictError,
    ContentionError,
    CortexError,
    StorageError,
    ValidationError,
)
from cortex.store.records import one_line

if TYPE_CHECKING:
    import logging

Pool = ConnectionPool[psycopg.Connection[Any]]
Row = tuple[Any, ...]
Connection = psycopg.Connection[Any]
Cursor = psycopg.Cursor[Any]
T = TypeVar("T")
Reader = Callable[[Cursor], T]
Statement = tuple[str, Sequence[Any]]
Settle = Callable[["Cursor"], None]
_BEGIN = "BEGIN"
_CONTROL = frozenset((_BEGIN, "COMMIT", "ROLLBACK"))
TUPLES_OK = pq.ExecStatus.TUPLES_OK
IDLE = pq.TransactionStatus.IDLE
INERROR = pq.TransactionStatus.INERROR
PIPELINES = psycopg.Pipeline.is_supported()
"""Whether this libpq sends several statements before reading their results."""

CONNECT_TIMEOUT_S = 10
"""How long opening a store waits for the server before it gives up."""

# Advisory lock classes (the first key of pg_advisory_xact_lock): what a lock serializes.
LOCK_MIGRATIONS = 1
LOCK_METRICS_CHAIN = 2
LOCK_UPSERT_KEY = 3

_PASSWORD = re.compile(r"(://[^:/@?#]*:)[^@/?#]*@|(password\s*=\s*)(?:'[^']*'|[^\s&]+)", re.I)


def redacted(url: str) -> str:
    """``url`` with its password hidden, fit for messages and ``Store.url``."""
    return _PASSWORD.sub(lambda m: f"{m[1]}***@" if m[1] else f"{m[2]}***", url)


def _message(exc: psycopg.Error) -> str:
    """The server's one-line primary message (no DETAIL, no query excerpt) or the client's."""
    diag = getattr(exc, "diag", None)
    primary = diag.message_primary if diag is not None else None
    return one_line(primary or exc)


def cortex_error(exc: psycopg.Error, url: str) -> CortexError:
    """A one-line Cortex error for ``exc`` that names the next step.

    By SQLSTATE where psycopg's classes do not follow the standard's classes (a deadlock is
    not a ``TransactionRollback`` there).
    """
    text, state = _message(exc), exc.sqlstate or ""
    if isinstance(exc, PoolTimeout):
        return StorageError(
            f"database {url} is busy: no free connection ({text}); retry, or give the pool more"
        )
    if isinstance(exc, psycopg.IntegrityError):
        return ConflictError(f"write conflicts with a stored record ({text}); change that one")
    if isinstance(exc, psycopg.DataError):
        return ValidationError(f"PostgreSQL cannot store this value ({text}); fix the input")
    if state in ("42P01", "42703"):  # undefined table, undefined column
        return StorageError(f"database {url} is not migrated ({text}); run `cortex db migrate`")
    if state == "42501":  # insufficient privilege
        return StorageError(f"database {url} refused access ({text}); grant the role its rights")
    if state in ("40001", "40P01"):  # serialization failure, deadlock: worth running again
        return ContentionError(f"database {url} is busy ({text}); retry")
    if state == "55P03":  # lock not available: another transaction held it past lock_timeout
        return BusyError(
            f"what this request needs is held by another transaction ({text}); retry shortly"
        )
    if state.startswith("40") or state == "57014":  # rollback, canceled
        return StorageError(f"database {url} is busy ({text}); retry")
    if state.startswith("53"):  # insufficient resources: disk full, out of memory
        return StorageError(f"cannot write database {url} ({text}); free space and retry")
    if isinstance(exc, psycopg.OperationalError):
        return StorageError(
            f"cannot reach PostgreSQL at {url} ({text}); check that the server runs and the "
            "URL is right"
        )
    return StorageError(  # a client is told UNAVAILABLE; this line goes to the server's log
        f"database {url} failed ({text}); retry, and if it fails again see PostgreSQL's log for "
        "the statement and its cause"
    )


@contextlib.contextmanager
def translated(url: str) -> Iterator[None]:
    """Turn every psycopg error into its one-line Cortex error."""
    try:
        yield
    except psycopg.Error as exc:
        raise cortex_error(exc, url) from exc
    except UnicodeEncodeError as exc:  # a lone surrogate in a value: not text UTF-8 encodes
        raise unstorable() from exc


def open_pool(
    url: str,
    *,
    max_size: int = 10,
    timeout: float = CONNECT_TIMEOUT_S,
    lock_timeout: float | None = None,
) -> Pool:
    """A connection pool on ``url`` (autocommit connections), open and tried once.

    ``lock_timeout``: seconds a statement of these connections waits for a lock (a session's
    row another transaction holds) before it fails with ``BusyError``; None waits as long
    as it takes. Set once per connection, when the pool opens it.

    Raises:
        StorageError: the server cannot be reached or refuses the connection.
    """
    import logging  # (psycopg_pool imports it anyway)

    logging.getLogger("psycopg.pool").addFilter(_not_closed_here)  # once: a filter is a set
    shown = redacted(url)
    settings: dict[str, Any] = {"autocommit": True, "application_name": "cortex"}
    with translated(shown):
        # One direct try first: its error names the cause (refused, no such database,
        # password), where a pool that cannot fill itself only says it timed out.
        psycopg.connect(url, connect_timeout=max(1, round(timeout)), **settings).close()
        pool: Pool = ConnectionPool(
            url,
            kwargs=settings,
            min_size=1,
            max_size=max_size,
            open=False,
            timeout=timeout,
            name="cortex",
            configure=None if lock_timeout is None else _lock_timeout(lock_timeout),
        )
        try:
            pool.open(wait=True, timeout=timeout)
        except BaseException:
            pool.close()
            raise
    return pool


def _lock_timeout(seconds: float) -> Callable[[Connection], None]:
    """What sets ``lock_timeout`` on each new connection of a pool (for the session)."""
    setting = f"{max(1, round(seconds * 1000))}ms"

    def configure(conn: Connection) -> None:
        conn.execute("SELECT set_config('lock_timeout', %s, false)", (setting,))

    return configure


def roll_back(conn: Connection) -> None:
    """End the open transaction of ``conn`` after an exception (never raises: the first error
    is the one to see), and close the connection, for the pool to replace, when the server
    failed it.

    psycopg (3.3) prepares a statement on its sixth run; when that run is pipelined behind a
    statement that fails, the server never parses it, yet psycopg records it as prepared, and
    its ``ROLLBACK`` forgets that only the first time the connection runs one. Every later run
    of the statement on that connection would then fail ("prepared statement ... does not
    exist"): a new connection costs less than finding out which statements are affected.
    """
    status = conn.info.transaction_status
    if status != IDLE:
        with contextlib.suppress(psycopg.Error):
            _execute(conn, "ROLLBACK", ())
    if status == INERROR:
        _closed_here.add(conn)
        conn.close()


_closed_here: weakref.WeakSet[Connection] = weakref.WeakSet()
"""Connections ``roll_back`` closed on purpose: the pool's warning as it discards one (on
every lapsed lock wait, a 503 or a session the worker passes over) would say nothing new."""


def _not_closed_here(record: logging.LogRecord) -> bool:
    """False for the pool's "discarding closed connection" of a connection closed on purpose."""
    args = record.args if isinstance(record.args, tuple) else ()
    said = str(record.msg).startswith("discarding closed")
    return not (said and args and args[0] in _closed_here)


def lock_key(text: str) -> int:
    """A stable signed 32-bit key for ``text`` (Python's ``hash`` changes every run); two
    texts sharing a key only make their writers wait for each other, never corrupt anything."""
    value = zlib.crc32(text.encode("utf-8"))
    return value - (1 << 32) if value >= 1 << 31 else value


class Runner:
    """One tenant's access to the pool: runs statements and owns the open transaction.

    Every statement run through ``rows``/``execute``/``executemany`` must filter by
    ``tenant_id``: a statement that does not name it is refused, so a repository cannot
    forget the tenant by accident. One runner serves one thread at a time.
    """

    def __init__(self, pool: Pool, tenant: str, url: str) -> None:
        self.pool = pool
        self.tenant = tenant
        self.url = url
        self._conn: psycopg.Connection[Any] | None = None
        self._queued: list[tuple[str, Sequence[Any]]] = []
        self._checks: dict[int, Settle] = {}
        self._begun = False
        self._depth = 0
        self._locks: set[tuple[int, int]] = set()
        self._serial = 0
        self._ahead: dict[tuple[str, tuple[Any, ...]], list[Row]] = {}
        self._after: list[Callable[[], object]] = []
        self._failed: CortexError | None = None
        """The error a statement of the open transaction met: that transaction commits nothing,
        whoever caught the error (see ``_statements``)."""

    @property
    def in_transaction(self) -> bool:
        return self._conn is not None

    @property
    def transaction_serial(self) -> int | None:
        """A number of the open (outermost) transaction, new for each; None outside one.
        What a repository learned under a lock of one transaction is good for that one only."""
        return self._serial if self._conn is not None else None

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """The open transaction's connection, or one checked out for this call only."""
        self._ahead.clear()  # what the caller runs on it may change what was read ahead
        if self._conn is not None:
            with self._statements():
                self._send_queued(self._conn)
                yield self._conn
            return
        with translated(self.url), self.pool.connection() as conn:
            yield conn

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction; nested calls join it; an exception rolls it back.

        Its ``BEGIN`` (and an advisory lock, see ``lock``, and a write of ``execute_later``)
        waits for the next statement and goes with it in one round trip (a pipeline; the
        server runs them in order), so a transaction that runs no statement sends nothing.
        """
        if self._conn is not None:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        with translated(self.url), self.pool.connection() as conn:
            self._conn, self._queued, self._begun = conn, [(_BEGIN, ())], False
            self._serial += 1
            try:
                yield
                if self._failed is not None:  # caught and passed over: nothing of it commits
                    raise self._failed
                if self._checks:  # settled before anything commits with it
                    self._send_queued(conn)
                if self._begun or len(self._queued) > 1:  # more than BEGIN waits
                    self._send(conn, "COMMIT", (), _rowcount)  # a write that waited may fail
            except BaseException:
                roll_back(conn)
                raise
            finally:
                self._conn, self._queued, self._failed = None, [], None
                self._checks.clear()
                self._locks.clear()
                self._ahead.clear()
                after, self._after = self._after, []
        for step in after:  # reached only once COMMIT returned
            step()

    def after_commit(self, step: Callable[[], object]) -> None:
        """Run ``step`` once the transaction open now commits (at once when none is open); a
        rollback drops it."""
        if self._conn is not None:
            self._after.append(step)
        else:
            step()

    @contextlib.contextmanager
    def _statements(self) -> Iterator[None]:
        """``translated``, and the error of a statement of the open transaction kept for its
        end. A statement that fails ends a PostgreSQL transaction: the server ignores what
        follows it (its ``COMMIT`` rolls back), and the writes waiting to go with it were never
        sent. So one who catches the error (a metrics write is best effort) must not see the
        rest commit as if only that statement were lost: the transaction raises it again."""
        try:
            yield
        except (psycopg.Error, UnicodeEncodeError) as exc:  # (the latter: a lone surrogate)
            error = cortex_error(exc, self.url) if isinstance(exc, psycopg.Error) else unstorable()
            if self._conn is not None and self._failed is None:
                self._failed = error
            raise error from exc

    def _send(self, conn: Connection, sql: str, params: Sequence[Any], read: Reader[T]) -> T:
        """``read`` of the cursor that ran ``sql`` after the statements waiting to be sent."""
        return read(self._sent(conn, [(sql, params)])[0])

    def _sent(self, conn: Connection, statements: Sequence[Statement]) -> list[Cursor]:
        """The cursors of ``statements``, run after the statements waiting to be sent, all in
        one round trip where libpq pipelines."""
        queued, self._queued = self._queued, []
        checks, self._checks = self._checks, {}
        self._begun = self._begun or bool(queued)
        everything = [*queued, *statements]
        if len(everything) == 1 or not PIPELINES:
            cursors = [_execute(conn, sql, params) for sql, params in everything]
        else:
            with conn.pipeline():
                cursors = [_execute(conn, sql, params) for sql, params in everything]
        for index, settle in checks.items():  # before the caller sees any result
            settle(cursors[index])
        return cursors[len(queued) :]

    def read_ahead(self, reads: Sequence[Statement]) -> None:
        """Run these SELECTs now, in one round trip with whatever waits to be sent, and keep
        their rows: the same statement with the same parameters later in this transaction is
        answered from them (once) without a round trip, unless a write came between (then it
        reads again). Outside a transaction it does nothing: each read would take its own
        connection anyway."""
        if self._conn is None or not reads:
            return
        for sql, _ in reads:
            _check_tenant(sql)
        with self._statements():
            cursors = self._sent(self._conn, reads)
            for (sql, params), cursor in zip(reads, cursors, strict=True):
                self._ahead[(sql, tuple(params))] = _fetched(cursor)

    def _read_before(self, sql: str, params: Sequence[Any]) -> list[Row] | None:
        """The rows of ``sql`` read ahead, if it was; any other statement but a SELECT drops
        what was read ahead (it may change those rows)."""
        try:
            found = self._ahead.pop((sql, tuple(params)), None)
        except TypeError:  # a parameter that cannot be a key (a list): not read ahead
            found = None
        if found is None and not sql.lstrip()[:6].upper() == "SELECT":
            self._ahead.clear()
        return found

    def _send_queued(self, conn: Connection) -> None:
        if self._queued:
            sql, params = self._queued.pop()
            self._send(conn, sql, params, _rowcount)

    def _run(self, sql: str, params: Sequence[Any], read: Reader[T]) -> T:
        """``read`` of the cursor that ran ``sql``, in the open transaction or on a connection
        checked out for this call."""
        with self._statements():
            if self._conn is not None:
                return self._send(self._conn, sql, params, read)
            with self.pool.connection() as conn:
                return read(conn.execute(sql, params))

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """The rows ``sql`` returns (empty for a statement that returns none)."""
        _check_tenant(sql)
        found = self._read_before(sql, params) if self._ahead else None
        return found if found is not None else self._run(sql, params, _fetched)

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        """The first row ``sql`` returns, or None."""
        found = self.rows(sql, params)
        return found[0] if found else None

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run ``sql``; return how many rows it changed."""
        _check_tenant(sql)
        self._ahead.clear()
        return self._run(sql, params, _rowcount)

    def execute_later(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run ``sql``, a write whose row count nobody reads: inside a transaction it goes
        with the next statement or the commit (no round trip of its own; an error it meets
        rolls the transaction back from there), outside one it runs now."""
        _check_tenant(sql)
        self._ahead.clear()
        if self._conn is None:
            self._run(sql, params, _rowcount)
        else:
            self._queued.append((sql, params))

    def execute_checked(
        self, sql: str, params: Sequence[Any], check: Callable[[int], None]
    ) -> None:
        """Run ``sql``, a write whose row count decides whether the transaction goes on: inside
        a transaction it goes with the next statement (no round trip of its own), and ``check``
        gets its row count as soon as that round trip returns, before the caller sees anything
        else of it; ``check`` raises to end the transaction (rolled back, whatever went with
        it). Before a ``COMMIT`` it is sent on its own, so nothing commits with it unchecked.
        Outside a transaction it runs now."""
        self._checked(sql, params, lambda cursor: check(_rowcount(cursor)))

    def read_checked(
        self, sql: str, params: Sequence[Any], check: Callable[[list[Row]], None]
    ) -> None:
        """As ``execute_checked``, for a SELECT whose rows ``check`` gets."""
        self._checked(sql, params, lambda cursor: check(_fetched(cursor)))

    def _checked(self, sql: str, params: Sequence[Any], settle: Settle) -> None:
        _check_tenant(sql)
        self._ahead.clear()
        if self._conn is None:
            self._run(sql, params, settle)
        else:
            self._checks[len(self._queued)] = settle
            self._queued.append((sql, params))

    def executemany(self, sql: str, params: Iterable[Sequence[Any]]) -> None:
        """Run ``sql`` once per parameter row, all in one transaction."""
        _check_tenant(sql)
        self._ahead.clear()
        with self.transaction(), self.connection() as conn, conn.cursor() as cursor:
            cursor.executemany(sql, params)

    def lock(self, kind: int, name: str) -> None:
        """Hold advisory lock (``kind``, ``name``) until the open transaction ends."""
        if self._conn is None:
            raise RuntimeError("an advisory lock needs an open transaction")
        key = (kind, lock_key(name))
        if key not in self._locks:
            # Sent with the next statement (which the server runs once it holds the lock).
            self._queued.append(("SELECT pg_advisory_xact_lock(%s, %s)", key))
            self._locks.add(key)


def _execute(conn: Connection, sql: str, params: Sequence[Any]) -> Cursor:
    """``sql`` run on ``conn`` (prepared once it has run often, but never BEGIN or COMMIT)."""
    return conn.execute(sql, params, prepare=False if sql in _CONTROL else None)


def _fetched(cursor: Cursor) -> list[Row]:
    # The result's status, not ``cursor.description``: that builds a column object per
    # column (a tenth of a captured turn's CPU went to it).
    result = cursor.pgresult
    return cursor.fetchall() if result is not None and result.status == TUPLES_OK else []


def _rowcount(cursor: Cursor) -> int:
    return cursor.rowcount


def _check_tenant(sql: str) -> None:
    if "tenant_id" not in sql:
        raise RuntimeError(f"statement without a tenant filter refused: {sql[:80]}")
