"""``SQLiteStore``: the embedded default ``Store``, one ``brain.db`` file, stdlib ``sqlite3`` only.

Connections are autocommit (``isolation_level=None``); ``transaction()`` issues an explicit
``BEGIN IMMEDIATE`` so that a writer takes the write lock up front and waits (busy timeout)
instead of failing half way. Every ``sqlite3`` failure a user can cause (read-only directory,
lock held too long, a file that is not a database) becomes a one-line ``StorageError``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from cortex.core.models import (
    AuditEntry,
    ConfidenceUpdate,
    MetricEvent,
    PendingTask,
    Pin,
    SessionState,
    SOPInteraction,
)
from cortex.errors import StorageError
from cortex.files import ensure_dir
from cortex.store import migrations
from cortex.store.sqlite.events import SQLiteEventsMixin

log = logging.getLogger("cortex.store")

MEMORY = ":memory:"

# Item parsers of the JSON list columns whose items are records; a corrupt item is dropped.
_ITEM_PARSERS: dict[str, Callable[[dict[str, Any]], object]] = {
    "working_memory": Pin.from_dict,
    "pending_tasks": PendingTask.from_dict,
    "confidence_updates": ConfidenceUpdate.from_dict,
    "sop_interactions": SOPInteraction.from_dict,
}
_JSON_LISTS = (
    "working_memory",
    "hot_topics",
    "active_projects",
    "pending_tasks",
    "recent_learnings",
    "confidence_updates",
    "sop_interactions",
)
# Named, not SELECT *: a legacy brain.db may carry extra columns in another order.
_COLUMNS = (
    "id",
    "start_time",
    "end_time",
    "channel",
    *_JSON_LISTS,
    "previous_session_id",
    "continued_by",
    "crash_recovered",
    "schema_version",
    "created_at",
    "updated_at",
    "state",
    "scope",
    "project",
    "user_id",
    "agent_id",
    "task_slug",
    "last_activity",
    "topic_state",
    "checkpoint_count",
    "parent_session",
    "owner_pid",
    "owner_host",
)


def _select(replaced: dict[str, str]) -> str:
    """SELECT of every session column, with some replaced by SQL expressions."""
    return "SELECT {} FROM session_states".format(", ".join(replaced.get(c, c) for c in _COLUMNS))


_SELECT = _select({})
# Restoration reads many rows and never uses these columns: skip decoding them.
_NOT_FOR_RESTORE = {
    "topic_state": "'{}'",
    "recent_learnings": "'[]'",
    "confidence_updates": "'[]'",
    "sop_interactions": "'[]'",
}
_SELECT_FOR_RESTORE = _select(_NOT_FOR_RESTORE)
# Pins are most of a row's decoding; only sessions holding a CRITICAL pin need theirs here.
_SELECT_FOR_RESTORE_LIGHT = _select(
    _NOT_FOR_RESTORE
    | {
        "working_memory": "CASE WHEN instr(working_memory, '\"CRITICAL\"') > 0 "
        "THEN working_memory ELSE '[]' END"
    }
)
_UPSERT = (
    f"INSERT INTO session_states ({', '.join(_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in _COLUMNS)}) ON CONFLICT(id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:])
)
_METRIC_COLUMNS = "seq, event, session_id, payload, created_at, prev_hash, hash"
_PAGE = 500


def connect(path: str, *, busy_timeout_ms: int = 5000) -> sqlite3.Connection:
    """Open ``path`` with Cortex's connection settings, autocommit (transactions are explicit)."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=busy_timeout_ms / 1000)
    try:
        # Hook processes of concurrent sessions wait for the write lock rather than fail.
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        # WAL: readers don't block the writer and the writer doesn't block readers.
        _enable_wal(conn, busy_timeout_ms / 1000)
        # With WAL, NORMAL is crash-safe for the file; a power loss may drop only the last commit.
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


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


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
    elif "unable to open" in text:
        msg = (
            f"cannot open database {url}; check that {where} exists and is writable, "
            "or set CORTEX_HOME"
        )
    elif "no such table" in text or "no such column" in text:
        msg = f"database {url} is not migrated ({_one_line(exc)}); run `cortex db migrate`"
    elif "full" in text or "i/o" in text:
        msg = f"cannot write database {url} ({_one_line(exc)}); free disk space and retry"
    else:
        msg = f"database {url} failed ({_one_line(exc)}); check the file and {where}"
    return StorageError(msg)


@contextlib.contextmanager
def _translated(url: str) -> Iterator[None]:
    """Turn environment failures into ``StorageError``; programming errors pass through."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        if type(exc) is sqlite3.DatabaseError or isinstance(exc, sqlite3.OperationalError):
            raise storage_error(exc, url) from exc
        raise


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


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _loads(text: Any, kind: type, where: str) -> Any:
    """Decode one JSON column; a corrupt value reads as empty so the rest of the row survives."""
    if text is None or text == "[]" or text == "{}":  # the common empty case, no parse
        return kind()
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        log.warning("%s is not valid JSON; read as empty", where)
        return kind()
    if not isinstance(value, kind):
        log.warning("%s is not a JSON %s; read as empty", where, kind.__name__)
        return kind()
    return value


def _session_row(state: SessionState) -> tuple[Any, ...]:
    """``state`` as the values of ``_COLUMNS``."""
    data = state.to_dict()
    data["id"] = data.pop("session_id")
    for name in (*_JSON_LISTS, "topic_state"):
        data[name] = _dumps(data[name])
    data["crash_recovered"] = 1 if state.crash_recovered else 0
    return tuple(data[c] for c in _COLUMNS)


def _salvage(data: dict[str, Any]) -> dict[str, Any]:
    """Drop list items and scalars that do not parse, keeping everything that does."""
    for name, parse in _ITEM_PARSERS.items():
        kept = []
        for item in data[name]:
            try:
                parse(item)
            except (AttributeError, KeyError, TypeError, ValueError):
                log.warning("session %s: dropped a corrupt %s item", data["session_id"], name)
                continue
            kept.append(item)
        data[name] = kept
    for name in ("schema_version", "checkpoint_count", "owner_pid"):
        try:
            data[name] = None if data[name] is None else int(data[name])
        except (TypeError, ValueError):
            data[name] = None
    return data


def _session_from_row(row: tuple[Any, ...]) -> SessionState | None:
    """A row as a ``SessionState``; corrupt JSON reads as empty, an unreadable row as None."""
    data = dict(zip(_COLUMNS, row, strict=True))
    data["session_id"] = sid = data.pop("id")
    for name in _JSON_LISTS:
        data[name] = _loads(data[name], list, f"session {sid} column {name}")
    data["topic_state"] = _loads(data["topic_state"], dict, f"session {sid} column topic_state")
    try:
        return SessionState.from_dict(data)
    except (AttributeError, KeyError, TypeError, ValueError):
        pass
    try:
        return SessionState.from_dict(_salvage(data))
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        log.warning("session %s is unreadable (%s); skipped", sid, _one_line(exc))
        return None


def _metric_from_row(row: tuple[Any, ...]) -> MetricEvent:
    seq, event, session_id, payload, created_at, prev_hash, hash_ = row
    return MetricEvent(
        seq=int(seq),
        event=str(event),
        session_id=session_id,
        payload=_loads(payload, dict, f"metrics event {seq} payload"),
        created_at=str(created_at),
        prev_hash=str(prev_hash),
        hash=str(hash_),
    )


class SQLiteStore(SQLiteEventsMixin):
    """The ``Store`` protocol over one SQLite file (or ``:memory:``); the memory and
    session-history methods come from the mixins in ``sqlite_memory``/``sqlite_events``."""

    def __init__(
        self, path: str | Path = MEMORY, *, migrate: bool = True, busy_timeout_ms: int = 5000
    ) -> None:
        self.url = str(path)
        self._depth = 0
        if self.url != MEMORY:
            _prepare_file(Path(path))
        with _translated(self.url):
            self._conn = connect(self.url, busy_timeout_ms=busy_timeout_ms)
        if migrate:
            try:
                self.migrate()
            except BaseException:
                self._conn.close()
                raise

    @property
    def connection(self) -> sqlite3.Connection:
        """The underlying connection, for SQLite-only tooling (backup, ``PRAGMA`` checks)."""
        return self._conn

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- plumbing ----------------------------------------------------------------------------
    def _run(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        with _translated(self.url):
            return self._conn.execute(sql, params)

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with _translated(self.url):
            return self._conn.execute(sql, params).fetchall()

    def _sessions(self, sql: str, params: tuple[Any, ...] = ()) -> list[SessionState]:
        states = (_session_from_row(row) for row in self._rows(sql, params))
        return [s for s in states if s is not None]

    def _rollback(self) -> None:
        # SQLite has already rolled back after some errors (BUSY, FULL); don't fail on that.
        if self._conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")

    # -- lifecycle ---------------------------------------------------------------------------
    def migrate(self) -> list[str]:
        """Apply pending migrations in order; return the names applied now."""
        self._fts = None  # a migration may have just created the full-text index
        with _translated(self.url):
            return migrations.migrate(self._conn)

    def applied_migrations(self) -> list[tuple[str, str]]:
        """(name, applied_at) of every applied migration, in order."""
        with _translated(self.url):
            return migrations.applied_migrations(self._conn)

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
        self._run("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield
            self._run("COMMIT")
        except BaseException:
            self._rollback()
            raise
        finally:
            self._depth = 0

    def close(self) -> None:
        self._conn.close()

    # -- sessions ----------------------------------------------------------------------------
    def save_session(self, state: SessionState) -> None:
        """Insert or replace the whole row of ``state.session_id`` (UPSERT)."""
        self._run(_UPSERT, _session_row(state))

    def get_session(self, session_id: str) -> SessionState | None:
        found = self._sessions(f"{_SELECT} WHERE id = ?", (session_id,))
        return found[0] if found else None

    def completed_sessions_since(
        self,
        since: str,
        project: str | None,
        *,
        limit: int,
        exclude_id: str | None = None,
        all_pins: bool = True,
    ) -> list[SessionState]:
        """Sessions of ``project`` with ``end_time >= since``, newest ``end_time`` first."""
        select = _SELECT_FOR_RESTORE if all_pins else _SELECT_FOR_RESTORE_LIGHT
        # Served by idx_session_project_end: a range scan read backwards, stopped by LIMIT.
        return self._sessions(
            f"{select} WHERE project IS ? AND end_time >= ? AND id IS NOT ? "
            "ORDER BY end_time DESC LIMIT ?",
            (project, since, exclude_id, limit),
        )

    def open_sessions(
        self, *, exclude_id: str | None = None, idle_before: str | None = None
    ) -> list[SessionState]:
        """Sessions with no ``end_time`` (live or crashed), any project, oldest first.

        With ``idle_before``, only those idle since before it or with a recorded owner process
        (the caller checks whether that process is alive).
        """
        where = "end_time IS NULL AND id IS NOT ?"
        params: tuple[Any, ...] = (exclude_id,)
        if idle_before is not None:
            where += (
                " AND (COALESCE(last_activity, updated_at, start_time) < ?"
                " OR owner_pid IS NOT NULL)"
            )
            params += (idle_before,)
        return self._sessions(f"{_SELECT} WHERE {where} ORDER BY start_time, id", params)

    def latest_open_session(
        self, project: str | None = None, *, any_project: bool = False
    ) -> SessionState | None:
        """The open session with the newest ``last_activity`` (of ``project`` unless
        ``any_project``)."""
        where = "end_time IS NULL" + ("" if any_project else " AND project IS ?")
        params: tuple[Any, ...] = () if any_project else (project,)
        found = self._sessions(
            f"{_SELECT} WHERE {where} ORDER BY last_activity DESC LIMIT 1", params
        )
        return found[0] if found else None

    def latest_session(self, project: str | None) -> SessionState | None:
        """The session of ``project`` that started last, open or not."""
        found = self._sessions(
            f"{_SELECT} WHERE project IS ? ORDER BY start_time DESC LIMIT 1", (project,)
        )
        return found[0] if found else None

    def list_sessions(
        self,
        *,
        limit: int = 50,
        offset: int = 0,
        project: str | None = None,
        any_project: bool = True,
    ) -> list[SessionState]:
        """Sessions newest ``start_time`` first (all projects unless ``any_project`` is False)."""
        where = "" if any_project else " WHERE project IS ?"
        params: tuple[Any, ...] = () if any_project else (project,)
        return self._sessions(
            f"{_SELECT}{where} ORDER BY start_time DESC LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )

    def count_sessions(self) -> int:
        return int(self._rows("SELECT count(*) FROM session_states")[0][0])

    def mark_continued(self, session_ids: list[str], next_id: str, at: str) -> None:
        """Set ``continued_by = next_id`` and ``updated_at = at`` on each of ``session_ids``."""
        with self.transaction():
            for sid in session_ids:
                self._run(
                    "UPDATE session_states SET continued_by = ?, updated_at = ? WHERE id = ?",
                    (next_id, at, sid),
                )

    def sessions_ended_before(self, before: str, *, limit: int) -> list[SessionState]:
        """Completed sessions with ``end_time < before``, oldest first (for archiving)."""
        return self._sessions(
            f"{_SELECT} WHERE end_time < ? ORDER BY end_time LIMIT ?", (before, limit)
        )

    def delete_sessions(self, session_ids: list[str]) -> int:
        """Delete these rows; return how many were deleted."""
        deleted = 0
        with self.transaction():
            for start in range(0, len(session_ids), _PAGE):
                chunk = tuple(session_ids[start : start + _PAGE])
                marks = ", ".join("?" for _ in chunk)
                cursor = self._run(f"DELETE FROM session_states WHERE id IN ({marks})", chunk)
                deleted += cursor.rowcount
        return deleted

    # -- metrics -----------------------------------------------------------------------------
    def last_metric(self) -> MetricEvent | None:
        rows = self._rows(f"SELECT {_METRIC_COLUMNS} FROM metrics ORDER BY seq DESC LIMIT 1")
        return _metric_from_row(rows[0]) if rows else None

    def append_metric(
        self,
        event: str,
        session_id: str | None,
        payload: dict[str, Any],
        created_at: str,
        prev_hash: str,
        hash: str,
    ) -> int:
        """Append one event; return its ``seq`` (1, 2, 3... with no reuse)."""
        cursor = self._run(
            "INSERT INTO metrics (event, session_id, payload, created_at, prev_hash, hash) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (event, session_id, _dumps(payload), created_at, prev_hash, hash),
        )
        assert cursor.lastrowid is not None  # an INSERT into a rowid table always sets it
        return cursor.lastrowid

    def list_metrics(
        self, *, event: str | None = None, limit: int | None = None, after_seq: int = 0
    ) -> list[MetricEvent]:
        """Events in ``seq`` order, optionally of one ``event`` name."""
        where = "seq > ?" + ("" if event is None else " AND event = ?")
        params: tuple[Any, ...] = (after_seq,) if event is None else (after_seq, event)
        # LIMIT -1 is SQLite's "no limit".
        rows = self._rows(
            f"SELECT {_METRIC_COLUMNS} FROM metrics WHERE {where} ORDER BY seq LIMIT ?",
            (*params, -1 if limit is None else limit),
        )
        return [_metric_from_row(row) for row in rows]

    def iter_metrics(self) -> Iterator[MetricEvent]:
        """Every event in ``seq`` order, streamed (for ``metrics verify``)."""
        # Pages by seq rather than one open cursor, so writes on this connection stay possible.
        after = 0
        while page := self.list_metrics(limit=_PAGE, after_seq=after):
            yield from page
            after = page[-1].seq

    # -- audit log ---------------------------------------------------------------------------
    def append_audit(
        self, action: str, actor: str, target: str | None, detail: dict[str, Any], at: str
    ) -> int:
        cursor = self._run(
            "INSERT INTO audit_log (action, actor, target, detail, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (action, actor, target, _dumps(detail), at),
        )
        assert cursor.lastrowid is not None  # an INSERT into a rowid table always sets it
        return cursor.lastrowid

    def list_audit(self, *, limit: int = 100) -> list[AuditEntry]:
        """Newest first."""
        rows = self._rows(
            "SELECT id, action, actor, target, detail, created_at FROM audit_log "
            "ORDER BY id DESC LIMIT ?",
            (limit,),
        )
        return [
            AuditEntry(
                id=int(id_),
                action=str(action),
                actor=str(actor),
                target=target,
                detail=_loads(detail, dict, f"audit entry {id_} detail"),
                created_at=str(created_at),
            )
            for id_, action, actor, target, detail, created_at in rows
        ]
