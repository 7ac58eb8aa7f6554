"""``memories`` rows to and from ``Memory``, and a ``MemoryFilter`` as a WHERE clause."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cortex.core.memory_models import GLOBAL, Memory, MemoryFilter

_MEMORY_COLUMNS = (
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
COLUMNS = ", ".join(f"m.{c}" for c in _MEMORY_COLUMNS)
"""Every memory column over alias ``m``, in the order ``memory_from_row`` reads."""
INSERT = (
    f"INSERT INTO memories ({', '.join(_MEMORY_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in _MEMORY_COLUMNS)})"
)
CONFLICT = "memory write conflicts with a live memory ({}); edit that memory instead"


def tags_text(tags: Sequence[str]) -> str:
    """Tags as ``,a,b,``: FTS tokenizes it, and ``LIKE '%,a,%'`` matches one tag exactly."""
    return f",{','.join(tags)}," if tags else ""


def memory_row(m: Memory) -> tuple[Any, ...]:
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


def memory_from_row(row: Sequence[Any]) -> Memory:
    """The first ``COLUMNS`` of ``row`` as a ``Memory`` (extra trailing values are ignored)."""
    data = dict(zip(_MEMORY_COLUMNS, row[: len(_MEMORY_COLUMNS)], strict=True))
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


def filter_sql(flt: MemoryFilter, now: str) -> tuple[str, list[Any]]:
    """The WHERE clause (over alias ``m``) of what ``flt`` may see at ``now``."""
    clauses = ["m.deleted_at IS NULL"]
    params: list[Any] = []
    if not flt.include_history:
        clauses += ["m.superseded_at IS NULL", "(m.expires_at IS NULL OR m.expires_at > ?)"]
        params.append(now)
    clauses.append(f"m.memory_layer IN ({', '.join('?' for _ in flt.layers)})")
    params += list(flt.layers)
    if not flt.all_projects:
        if flt.project is None:
            clauses.append("m.scope = ?")
            params.append(GLOBAL)
        else:
            clauses.append("(m.scope = ? OR m.project_id = ?)")
            params += [GLOBAL, flt.project]
    if flt.user_id is not None:
        clauses.append("(m.user_id IS NULL OR m.user_id = ?)")
        params.append(flt.user_id)
    if flt.types:
        clauses.append(f"m.type IN ({', '.join('?' for _ in flt.types)})")
        params += list(flt.types)
    for tag in flt.tags:
        clauses.append("instr(m.tags, ?) > 0")
        params.append(f",{tag},")
    if flt.session_id is not None:
        clauses.append("m.source_session_id = ?")
        params.append(flt.session_id)
    return " AND ".join(clauses), params


def marks(values: Sequence[Any]) -> str:
    """``?, ?, ?``: one placeholder per value."""
    return ", ".join("?" for _ in values)


def memories_from(rows: list[tuple[Any, ...]]) -> list[Memory]:
    """Rows that start with ``COLUMNS`` as memories, in order."""
    return [memory_from_row(r) for r in rows]
