"""What a ``MemoryFilter`` sees, as SQL: one builder for every backend; and the memories
next to others in their sessions, whose query is the same on both but for the tenant.

The backends differ only in their placeholder (``?`` or ``%s``) and in the name of the
function that finds a substring (SQLite's ``instr``, PostgreSQL's ``strpos``; both take the
text first, then what to find).
"""

from __future__ import annotations

from cortex.core.memory_models import GLOBAL, MemoryFilter

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

LIKE_SCAN_ROWS = 10_000
"""A substring search (the fallback when the full-text index finds nothing) reads at most the
newest this many memories: a full scan of a million rows would cost half a second."""


def memory_filter_sql(
    flt: MemoryFilter, now: str, *, mark: str, find: str
) -> tuple[str, list[Any]]:
    """The WHERE clause (over alias ``m``) of the memories ``flt`` sees at ``now``, and its
    parameters; ``mark`` is the placeholder, ``find`` the substring function."""

    def marks(n: int) -> str:
        return ", ".join(mark for _ in range(n))

    clauses = ["m.deleted_at IS NULL"]
    params: list[Any] = []
    if not flt.include_history:
        clauses += ["m.superseded_at IS NULL", f"(m.expires_at IS NULL OR m.expires_at > {mark})"]
        params.append(now)
    # No layers sees nothing (PostgreSQL has no empty IN list; SQLite's is false too).
    clauses.append(f"m.memory_layer IN ({marks(len(flt.layers))})" if flt.layers else "1 = 0")
    params += list(flt.layers)
    if not flt.all_projects:
        if flt.project is None:
            clauses.append(f"m.scope = {mark}")
            params.append(GLOBAL)
        elif flt.own_project:
            clauses.append(f"m.project_id = {mark}")
            params.append(flt.project)
        else:
            clauses.append(f"(m.scope = {mark} OR m.project_id = {mark})")
            params += [GLOBAL, flt.project]
    if flt.user_id is not None:
        clauses.append(f"(m.user_id IS NULL OR m.user_id = {mark})")
        params.append(flt.user_id)
    if flt.types:
        clauses.append(f"m.type IN ({marks(len(flt.types))})")
        params += list(flt.types)
    for tag in flt.tags:  # tags are stored as ",a,b,": ",a," finds one tag exactly
        clauses.append(f"{find}(m.tags, {mark}) > 0")
        params.append(f",{tag},")
    if flt.session_id is not None:
        clauses.append(f"m.source_session_id = {mark}")
        params.append(flt.session_id)
    return " AND ".join(clauses), params


def adjacent_sql(columns: str, seeds: str, where: str, tenant: str | None = None) -> str:
    """The query of the memories captured just before and just after each seed in its
    session (by ``seq``) that ``where`` (a filter over alias ``m``) sees: rows of
    ``columns`` (over ``m``) then the seed's id.

    ``seeds`` picks the seeds over alias ``s`` (``s.id IN (...)``); ``tenant`` is the
    tenant condition's placeholder (PostgreSQL: ``%s``, once before ``seeds`` and once
    before ``where``), or None. Each side is one step in the session's index, each
    neighbour one row by its unique ``seq``.
    """
    own = f"m.tenant_id = {tenant} AND " if tenant else ""

    def side(op: str, order: str) -> str:
        same = "n.tenant_id = s.tenant_id AND " if tenant else ""
        return (
            f"(SELECT n.seq FROM memories n WHERE {same}n.source_session_id = "
            f"s.source_session_id AND n.seq {op} s.seq ORDER BY n.seq {order} LIMIT 1)"
        )

    return (
        f"WITH adj(seed, before, after) AS (SELECT s.id, {side('<', 'DESC')}, "
        f"{side('>', 'ASC')} FROM memories s WHERE {own.replace('m.', 's.')}{seeds} "
        f"AND s.source_session_id IS NOT NULL) SELECT {columns}, adj.seed FROM adj "
        f"JOIN memories m ON {own}m.seq IN (adj.before, adj.after) WHERE {where}"
    )
