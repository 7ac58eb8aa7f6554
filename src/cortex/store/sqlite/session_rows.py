"""``session_states`` rows to and from ``SessionState``: the columns, the SELECTs, the decoding.

Reading is forgiving: a corrupt JSON column reads as empty and a corrupt list item is dropped,
so the rest of the row survives; only a row that still does not parse is skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from cortex.core.models import ConfidenceUpdate, PendingTask, Pin, SessionState, SOPInteraction
from cortex.store.sqlite.db import dumps, loads, one_line

log = logging.getLogger("cortex.store")

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
COLUMNS = (
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
    return "SELECT {} FROM session_states".format(", ".join(replaced.get(c, c) for c in COLUMNS))


SELECT = _select({})
# Restoration reads many rows and never uses these columns: skip decoding them.
_NOT_FOR_RESTORE = {
    "topic_state": "'{}'",
    "recent_learnings": "'[]'",
    "confidence_updates": "'[]'",
    "sop_interactions": "'[]'",
}
SELECT_FOR_RESTORE = _select(_NOT_FOR_RESTORE)
# Pins are most of a row's decoding; only sessions holding a CRITICAL pin need theirs here.
SELECT_FOR_RESTORE_LIGHT = _select(
    _NOT_FOR_RESTORE
    | {
        "working_memory": "CASE WHEN instr(working_memory, '\"CRITICAL\"') > 0 "
        "THEN working_memory ELSE '[]' END"
    }
)
UPSERT = (
    f"INSERT INTO session_states ({', '.join(COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in COLUMNS)}) ON CONFLICT(id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in COLUMNS[1:])
)


def session_row(state: SessionState) -> tuple[Any, ...]:
    """``state`` as the values of ``COLUMNS``."""
    data = state.to_dict()
    data["id"] = data.pop("session_id")
    for name in (*_JSON_LISTS, "topic_state"):
        data[name] = dumps(data[name])
    data["crash_recovered"] = 1 if state.crash_recovered else 0
    return tuple(data[c] for c in COLUMNS)


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


def session_from_row(row: tuple[Any, ...]) -> SessionState | None:
    """A row as a ``SessionState``; corrupt JSON reads as empty, an unreadable row as None."""
    data = dict(zip(COLUMNS, row, strict=True))
    data["session_id"] = sid = data.pop("id")
    for name in _JSON_LISTS:
        data[name] = loads(data[name], list, f"session {sid} column {name}")
    data["topic_state"] = loads(data["topic_state"], dict, f"session {sid} column topic_state")
    try:
        return SessionState.from_dict(data)
    except (AttributeError, KeyError, TypeError, ValueError):
        pass
    try:
        return SessionState.from_dict(_salvage(data))
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        log.warning("session %s is unreadable (%s); skipped", sid, one_line(exc))
        return None


def sessions_from(rows: list[tuple[Any, ...]]) -> list[SessionState]:
    """The readable sessions of ``rows``, in order."""
    states = (session_from_row(row) for row in rows)
    return [s for s in states if s is not None]
