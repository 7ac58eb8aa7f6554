"""Rows and records: the column lists and row mappings every backend shares (sessions and
memories here; the append-only tables' in ``cortex.store.log_records``).

A backend selects these columns in this order and hands each row to a ``*_from_row``
function; it writes the values ``session_values``/``memory_values`` give. JSON columns may
come back as text (SQLite) or already decoded (PostgreSQL JSONB): ``json_value`` takes both.
A corrupt JSON value reads as empty and a corrupt list item is dropped, so one bad column never
hides the rest of a session.
"""

from __future__ import annotations

import _thread
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache

from cortex.core.jsontext import compact_encoder
from cortex.logs import getLogger

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

    from cortex.core.memory_models import Memory, MemoryFilter
    from cortex.core.models import SessionState

# The session models (``cortex.core.models``) and the memory records
# (``cortex.core.memory_models``) are imported by the functions that make them: a process that
# reads only memories (``cortex memory search``) need not build the session classes, nor one
# that reads only sessions (``cortex session start``) the memory classes.

log = getLogger("cortex.store")

# -- sessions --------------------------------------------------------------------------------
SESSION_JSON_LISTS = (
    "working_memory",
    "hot_topics",
    "active_projects",
    "pending_tasks",
    "recent_learnings",
    "confidence_updates",
    "sop_interactions",
)
SESSION_COLUMNS = (
    "id",
    "start_time",
    "end_time",
    "channel",
    *SESSION_JSON_LISTS,
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
"""Named, never ``SELECT *``: a legacy SQLite file may carry extra columns in another order."""
SESSION_JSON_COLUMNS = frozenset((*SESSION_JSON_LISTS, "topic_state"))


@cache
def _item_parsers() -> dict[str, Callable[[dict[str, Any]], object]]:
    """Item parsers of the JSON list columns whose items are records (a corrupt item is
    dropped)."""
    from cortex.core.models import ConfidenceUpdate, PendingTask, Pin, SOPInteraction

    return {
        "working_memory": Pin.from_dict,
        "pending_tasks": PendingTask.from_dict,
        "confidence_updates": ConfidenceUpdate.from_dict,
        "sop_interactions": SOPInteraction.from_dict,
    }


_PARSE_ERRORS = (AttributeError, KeyError, TypeError, ValueError)


def one_line(exc: BaseException) -> str:
    """The text of ``exc`` with its white space (newlines included) folded."""
    return " ".join(str(exc).split())


def json_value(value: Any, kind: type, where: str) -> Any:
    """A JSON column as ``kind`` (list or dict): text is parsed, a wrong shape reads as empty."""
    if value is None or value == "[]" or value == "{}":  # the common empty case, no parse
        return kind()
    if isinstance(value, str | bytes):
        try:
            value = json.loads(value)
        except ValueError:
            log.warning("%s is not valid JSON; read as empty", where)
            return kind()
    if not isinstance(value, kind):
        log.warning("%s is not a JSON %s; read as empty", where, kind.__name__)
        return kind()
    return value


def session_selects(
    empty_json: str, critical_pins_only: str, json_column: str = "{}"
) -> tuple[str, str, str]:
    """The three SELECTs of ``session_states`` every backend runs, in its own SQL: every
    column; for restoration, without the columns it never reads (``empty_json`` formats an
    empty JSON literal, e.g. ``"'{}'"``, or is ``NULL``: both read as empty); and the same
    with only CRITICAL pins decoded (``critical_pins_only`` is the backend's expression for
    ``working_memory``; SQLite's selects it whole and tests it in Python). ``json_column``
    formats a JSON column selected whole (PostgreSQL's casts it to text)."""

    def select(replaced: dict[str, str]) -> str:
        columns = ", ".join(
            replaced.get(c) or session_column(c, json_column) for c in SESSION_COLUMNS
        )
        return f"SELECT {columns} FROM session_states"

    # Restoration reads many rows and never uses these columns: skip sending and decoding them.
    skipped = {
        "topic_state": empty_json.format("{}"),
        "recent_learnings": empty_json.format("[]"),
        "confidence_updates": empty_json.format("[]"),
        "sop_interactions": empty_json.format("[]"),
    }
    # Pins are most of a row's decoding; only sessions holding a CRITICAL pin need theirs.
    light = skipped | {"working_memory": critical_pins_only}
    return select({}), select(skipped), select(light)


def session_column(name: str, json_column: str = "{}", table: str = "") -> str:
    """Column ``name`` of ``SESSION_COLUMNS`` as a SELECT lists it (``table``: a prefix such
    as ``"s."``): a JSON column formatted by ``json_column`` (e.g. ``"{}::text"``)."""
    return json_column.format(table + name) if name in SESSION_JSON_COLUMNS else table + name


@dataclass(frozen=True)
class SessionNarrowing:
    """What a session list may be narrowed to: one ``state``, crash-recovered or not,
    started in [since, until); None leaves that part open."""

    state: str | None = None
    crashed: bool | None = None
    since: str | None = None
    until: str | None = None


def session_filter(mark: str, narrow: SessionNarrowing) -> tuple[list[str], list[Any]]:
    """WHERE clauses (``mark``: the backend's placeholder) and their parameters for
    ``narrow``."""
    clauses: list[str] = []
    params: list[Any] = []
    for clause, value in (
        (f"state = {mark}", narrow.state),
        (f"start_time >= {mark}", narrow.since),
        (f"start_time < {mark}", narrow.until),
    ):
        if value is not None:
            clauses.append(clause)
            params.append(value)
    if narrow.crashed is not None:
        clauses.append("crash_recovered" if narrow.crashed else "NOT crash_recovered")
    return clauses, params


def session_values(state: SessionState) -> dict[str, Any]:
    """``state`` by column name; JSON columns hold Python values for the backend to encode."""
    data = state.to_dict()
    data["id"] = data.pop("session_id")
    return data


def _salvage(data: dict[str, Any]) -> dict[str, Any]:
    """Drop list items and scalars that do not parse, keeping everything that does."""
    for name, parse in _item_parsers().items():
        kept = []
        for item in data[name]:
            try:
                parse(item)
            except _PARSE_ERRORS:
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


DECODED_SESSIONS = 128
"""How many decoded session rows a process keeps (``session_from_row``): a restore reads the
same ~50 completed sessions at every start, and decoding them was a quarter of its CPU."""
DECODED_CHARS = 4_000_000
"""How much text those rows may hold in all (their decoded states take about as much again):
a record may hold up to 50 KB."""
VERSIONS_PER_SESSION = 2
"""How many of those rows may be of one session: a restore reads a candidate's row without
its standard pins and then with them; an open session's older rows (one per event that
changed it) are never read again, and a long-lived hook server would keep them all."""
SERVER_DECODED_SESSIONS = 4096
SERVER_DECODED_CHARS = 16_000_000
"""What a team server process keeps (``keep_decoded_sessions``): the restore candidates of
the tenants it serves, 50 each, would push one another out of ``DECODED_SESSIONS``."""
_decoded: dict[tuple[Any, ...], SessionState] = {}
_versions: dict[Any, list[tuple[Any, ...]]] = {}
_limits = [DECODED_SESSIONS, DECODED_CHARS]
_kept_chars = 0
_lock = _thread.allocate_lock()
"""(``_thread``'s lock, which ``threading`` wraps: a hook process imports no ``threading``.)"""
_CONTINUED_BY = SESSION_COLUMNS.index("continued_by")
_UPDATED_AT = SESSION_COLUMNS.index("updated_at")
_FIRST, _SECOND = sorted((_CONTINUED_BY, _UPDATED_AT))


def keep_decoded_sessions(rows: int, chars: int) -> None:
    """Keep up to ``rows`` decoded session rows holding ``chars`` of text in all, in this
    process (from the next row kept on)."""
    _limits[:] = [rows, chars]


def session_from_row(row: Sequence[Any], *, keep: bool = True) -> SessionState | None:
    """A row of ``SESSION_COLUMNS`` as a ``SessionState``; None if it cannot be read at all.

    Decoding is a pure function of the row, so a row seen before (every value equal) gives
    back the same frozen state; nobody mutates a decoded state (``topic_state`` is only read).
    A row that differs from one seen before only in ``continued_by`` and ``updated_at`` (what
    a restore changes in each session it continues) is that state with those two values.
    Rows with unhashable values (JSON decoded by the driver) are decoded each time, and so are
    rows read with ``keep=False`` (a row about to be changed, never read again).
    """
    row = tuple(row)
    key = row[:_FIRST] + row[_FIRST + 1 : _SECOND] + row[_SECOND + 1 :]
    try:
        hash(key)  # (``pop`` on an empty dict would not find out)
    except TypeError:
        return _decode_session(row)
    with _lock:
        state = _decoded.pop(key, None)
        if state is not None:
            if state.continued_by != row[_CONTINUED_BY] or state.updated_at != row[_UPDATED_AT]:
                from cortex.core.models import evolve

                state = evolve(state, continued_by=row[_CONTINUED_BY], updated_at=row[_UPDATED_AT])
            _decoded[key] = state  # again, the most recently used
            return state
    state = _decode_session(row)
    if state is not None and keep:
        with _lock:
            if key not in _decoded:
                _make_room(key)
                _decoded[key] = state
    return state


def _make_room(key: tuple[Any, ...]) -> None:
    """Before keeping the new row ``key`` (under ``_lock``): drop its session's oldest kept row
    beyond ``VERSIONS_PER_SESSION``, and the least recently used rows while the cache is
    full (``_limits``: rows, and their text)."""
    global _kept_chars
    size = _chars(key)
    rows, chars = _limits
    if not _decoded:
        _kept_chars = 0  # (emptied behind the lock, by a test)
    try:
        versions = _versions.setdefault(key[0], [])  # key[0]: the session id
        versions.append(key)
        if len(versions) > VERSIONS_PER_SESSION:
            _drop(versions.pop(0))
        while _decoded and (len(_decoded) >= rows or _kept_chars + size > chars):
            oldest = next(iter(_decoded))
            _drop(oldest)
            kept = _versions[oldest[0]]
            kept.remove(oldest)
            if not kept:
                del _versions[oldest[0]]
    except (KeyError, ValueError, RuntimeError, StopIteration):
        _decoded.clear()  # changed behind the lock (a test's clear): start over
        _versions.clear()
        _versions[key[0]] = [key]
        _kept_chars = 0
    _kept_chars += size


def _drop(key: tuple[Any, ...]) -> None:
    global _kept_chars
    if _decoded.pop(key, None) is not None:
        _kept_chars -= _chars(key)


def _chars(key: tuple[Any, ...]) -> int:
    """The text a kept row holds (its JSON columns most of it)."""
    return sum(len(value) for value in key if isinstance(value, str))


def _decode_session(row: Sequence[Any]) -> SessionState | None:
    from cortex.core.models import SessionState

    data = dict(zip(SESSION_COLUMNS, row, strict=True))
    data["session_id"] = sid = data.pop("id")
    for name in SESSION_JSON_LISTS:
        data[name] = json_value(data[name], list, f"session {sid} column {name}")
    data["topic_state"] = json_value(data["topic_state"], dict, f"session {sid} column topic_state")
    try:
        return SessionState.from_dict(data)
    except _PARSE_ERRORS:
        pass
    try:
        return SessionState.from_dict(_salvage(data))
    except _PARSE_ERRORS as exc:
        log.warning("session %s is unreadable (%s); skipped", sid, one_line(exc))
        return None


def sessions_from_rows(rows: Iterable[Sequence[Any]]) -> list[SessionState]:
    """The readable sessions among ``rows``, in order (an unreadable one is logged and skipped)."""
    states = (session_from_row(row) for row in rows)
    return [s for s in states if s is not None]


def in_order(states: Iterable[SessionState], session_ids: Sequence[str]) -> list[SessionState]:
    """``states`` in the order of ``session_ids`` (as a read of each would give them)."""
    by_id = {s.session_id: s for s in states}
    return [by_id[sid] for sid in session_ids if sid in by_id]


# -- memories --------------------------------------------------------------------------------
MEMORY_COLUMNS = (
    "id",
    "content",
    "type",
    "memory_layer",
    "scope",
    "project_id",
    "user_id",
    "tags",
    "upsert_key",
    "source_session_id",
    "remember_intent",
    "confidence",
    "expires_at",
    "superseded_by",
    "superseded_at",
    "last_confirmed_at",
    "created_at",
    "updated_at",
    "deleted_at",
)


def tags_text(tags: Sequence[str]) -> str:
    """Tags as ``,a,b,``: full text tokenizes it, and ``,a,`` finds one tag exactly."""
    return f",{','.join(tags)}," if tags else ""


def memory_values(m: Memory) -> tuple[Any, ...]:
    """``m`` as the values of ``MEMORY_COLUMNS``."""
    return (
        m.id,
        m.content,
        m.type,
        m.layer,
        m.scope,
        m.project,
        m.user_id,
        tags_text(m.tags),
        m.upsert_key,
        m.source_session_id,
        m.remember_intent,
        m.confidence,
        m.expires_at,
        m.superseded_by,
        m.superseded_at,
        m.last_confirmed_at,
        m.created_at,
        m.updated_at,
        m.deleted_at,
    )


MEMORY_EDITABLE = (
    "content",
    "type",
    "memory_layer",
    "tags",
    "upsert_key",
    "remember_intent",
    "confidence",
    "expires_at",
    "last_confirmed_at",
    "updated_at",
)
"""The columns an edit rewrites; the rest (identity, scope, lineage) never change in place."""


def memory_edit_values(m: Memory) -> tuple[Any, ...]:
    """``m`` as the values of ``MEMORY_EDITABLE``."""
    values = dict(zip(MEMORY_COLUMNS, memory_values(m), strict=True))
    return tuple(values[c] for c in MEMORY_EDITABLE)


def memory_from_row(row: Sequence[Any]) -> Memory:
    """The first ``len(MEMORY_COLUMNS)`` values of ``row`` as a ``Memory``."""
    from cortex.core.memory_models import Memory

    data = dict(zip(MEMORY_COLUMNS, row[: len(MEMORY_COLUMNS)], strict=True))
    return Memory(
        id=str(data["id"]),
        content=str(data["content"]),
        layer=str(data["memory_layer"]),
        type=str(data["type"]),
        scope=str(data["scope"]),
        project=data["project_id"],
        user_id=data["user_id"],
        tags=tuple(t for t in str(data["tags"] or "").split(",") if t),
        upsert_key=data["upsert_key"],
        source_session_id=data["source_session_id"],
        remember_intent=str(data["remember_intent"]),
        confidence=float(data["confidence"]),
        expires_at=data["expires_at"],
        superseded_by=data["superseded_by"],
        superseded_at=data["superseded_at"],
        last_confirmed_at=data["last_confirmed_at"],
        created_at=str(data["created_at"]),
        updated_at=str(data["updated_at"]),
        deleted_at=data["deleted_at"],
    )


def memories_from_rows(rows: Iterable[Sequence[Any]]) -> list[Memory]:
    """Rows that start with ``MEMORY_COLUMNS`` as memories, in order."""
    return [memory_from_row(r) for r in rows]


def dumps(value: Any) -> str:
    """Compact JSON, non-ASCII kept as is: the text JSON columns hold."""
    return _COMPACT(value)


_COMPACT = compact_encoder()


def session_projects_query(tenant_clause: str = "") -> str:
    """The distinct projects of the sessions, latest start first; parameters: (tenant,) limit."""
    return (
        f"SELECT project FROM session_states WHERE {tenant_clause}project IS NOT NULL "
        "GROUP BY project ORDER BY MAX(start_time) DESC LIMIT %s"
    )


ID_TABLES = {
    "session": "session_states",
    "memory": "memories",
    "snapshot": "session_snapshots",
    "procedure": "procedures",
    "checkpoint": "checkpoints",
}
"""The tables whose ids a person types back (``Store.ids_with_prefix``), by kind."""


def prefix_query(kind: str, tenant_clause: str = "") -> str:
    """``SELECT id`` of the ``kind`` rows whose id starts with a prefix, as a range on the id
    index (``id >= prefix AND id < prefix-with-its-last-character-bumped``), ids in order.

    Parameters: (tenant when ``tenant_clause`` names it,) lower bound, upper bound, limit.
    """
    if kind not in ID_TABLES:
        raise ValueError(f"unknown id kind {kind!r}; use one of {', '.join(ID_TABLES)}")
    return (
        f"SELECT id FROM {ID_TABLES[kind]} WHERE {tenant_clause}id >= %s AND id < %s "
        "ORDER BY id LIMIT %s"
    )


def project_known_query(tenant_clause: str = "") -> str:
    """One row when a session or a project memory is recorded under a project, none else;
    each probe is an index's (sessions by project, memories by layer, scope and project).

    Parameters: (tenant,) project, (tenant,) project.
    """
    return (
        f"SELECT 1 WHERE EXISTS (SELECT 1 FROM session_states WHERE {tenant_clause}project = %s)"
        f" OR EXISTS (SELECT 1 FROM memories WHERE {tenant_clause}memory_layer IN "
        "('rule', 'working', 'long_term') AND scope = 'project' AND project_id = %s)"
    )


def prefix_bounds(prefix: str) -> tuple[str, str]:
    """The half-open range of ids that start with ``prefix`` (a binary / "C" collation)."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


@dataclass(frozen=True)
class StartReads:
    """The reads a session start makes, with the arguments it makes them with."""

    session_id: str
    resumed: bool
    """The start names its session: ``get_session(session_id)``; else the project's
    ``latest_session_id(project)`` (the new session's predecessor)."""
    project: str | None
    idle_before: str
    """``open_sessions(exclude_id=session_id, idle_before=...)``: crash recovery's candidates."""
    since: str
    limit: int
    """``completed_sessions_since(since, project, limit=limit, exclude_id=session_id,
    all_pins=False)``: the restore's candidates."""
    tasks: bool
    """``list_tasks()``: every task of the tenant (a server's task source)."""
    before: str | None = None
    """``completed_sessions_since(before, project, limit=1, exclude_id=session_id,
    all_pins=False)``: the last session however old, read by a start with no candidates
    (None: not read ahead)."""


@dataclass(frozen=True)
class EndReads:
    """The reads a session end makes, with the arguments it makes them with."""

    session_id: str
    """``get_session(session_id)``: the session, read locked in a transaction."""
    learned: MemoryFilter
    now: str
    limit: int
    """``list_memories(learned, now, limit=limit, offset=0)``: the memories it added."""
    pending_tasks: bool
    """``list_tasks(stages=PENDING_STAGES)``: the tenant's pending tasks (a server's task
    source)."""
