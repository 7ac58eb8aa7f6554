"""``supersedes`` links kept on the memories rows, for both backends (migration ``m024``).

A supersede marks the old row (``superseded_by``, ``superseded_at``) and writes the new row's
``supersedes`` column with it, so the link costs no write of its own: a link row put an
entry at a random place of three B-trees keyed by random ids, about three random page writes
per replaced memory. The link "new supersedes old, at t" is there when the new row names the
old one and the old row names the new one back, ``t`` being the old row's ``superseded_at``:
either end is found from its own row by id, in either direction, with no index on the
columns. A ``supersedes`` link that the rows cannot hold exactly (a memory that supersedes a
second one, a time other than the old row's) stays a ``memory_links`` row; readers take both.

Each function returns SQL text over alias-free table names; ``tenant`` is the placeholder of
the tenant (PostgreSQL) or empty (SQLite: one file, one person).
"""

from __future__ import annotations

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from typing import Any

_AS_LINK = "n.id AS from_id, o.id AS to_id, 'supersedes' AS kind, o.superseded_at AS created_at"
"""A link held by the new row ``n`` and the old row ``o``, in a link row's columns."""


def _same_tenant(tenant: str, a: str, b: str) -> str:
    """`` AND a.tenant_id = b.tenant_id`` on PostgreSQL, nothing on SQLite."""
    return f" AND {a}.tenant_id = {b}.tenant_id" if tenant else ""


def _of_tenant(tenant: str, alias: str) -> str:
    """``alias.tenant_id = <mark> AND `` on PostgreSQL, nothing on SQLite."""
    return f"{alias}.tenant_id = {tenant} AND " if tenant else ""


def supersedes_from(where: str, tenant: str = "") -> str:
    """The row-held links from the memories ``n`` that ``where`` picks (by ``n.id``), as
    link rows: ``from_id, to_id, kind, created_at``."""
    return (
        f"SELECT {_AS_LINK} FROM memories n JOIN memories o "
        f"ON o.id = n.supersedes{_same_tenant(tenant, 'o', 'n')} AND o.superseded_by = n.id "
        f"WHERE {_of_tenant(tenant, 'n')}{where}"
    )


def supersedes_to(where: str, tenant: str = "") -> str:
    """The row-held links to the memories ``o`` that ``where`` picks (by ``o.id``), as link
    rows."""
    return (
        f"SELECT {_AS_LINK} FROM memories o JOIN memories n "
        f"ON n.id = o.superseded_by{_same_tenant(tenant, 'n', 'o')} AND n.supersedes = o.id "
        f"WHERE {_of_tenant(tenant, 'o')}{where}"
    )


def held_by_rows(mark: str, tenant: str = "") -> str:
    """``SELECT 1`` if the rows already hold the link (from, to, created_at) given as three
    ``mark`` placeholders after the tenant's."""
    return (
        f"SELECT 1 FROM memories n JOIN memories o ON o.id = n.supersedes"
        f"{_same_tenant(tenant, 'o', 'n')} WHERE {_of_tenant(tenant, 'n')}n.id = {mark} "
        f"AND n.supersedes = {mark} AND o.superseded_by = n.id AND o.superseded_at = {mark}"
    )


def fold_supersedes(tenant: str = "", *, tenants: bool = False) -> tuple[str, str]:
    """The two statements that move the ``supersedes`` link rows the memories rows can hold
    exactly into them (the new row's ``supersedes``, when empty), then delete those link
    rows: after ``m024``'s new column, and after an import that brought link rows.

    ``tenant`` limits both to one tenant (its placeholder, given once to each statement);
    ``tenants`` says the table has a tenant column, matched between the rows (PostgreSQL)."""
    on = " AND o.tenant_id = l.tenant_id" if tenants else ""
    held = (
        f"FROM memory_links l JOIN memories o ON o.id = l.to_id{on} WHERE l.kind = 'supersedes' "
        "AND o.superseded_by = l.from_id AND o.superseded_at = l.created_at"
    )
    of_l = " AND l.tenant_id = memories.tenant_id" if tenants else ""
    key, ends = ("(tenant_id, id)", "l.tenant_id, l.from_id") if tenants else ("id", "l.from_id")
    only = f"tenant_id = {tenant} AND " if tenant else ""
    # The least of several candidates; the others stay link rows.
    update = (
        f"UPDATE memories SET supersedes = (SELECT min(l.to_id) {held} "
        f"AND l.from_id = memories.id{of_l}) "
        f"WHERE {only}supersedes IS NULL AND {key} IN (SELECT {ends} {held})"
    )
    of_row = "n.tenant_id = memory_links.tenant_id AND " if tenants else ""
    on_n = " AND o.tenant_id = n.tenant_id" if tenants else ""
    delete = (
        f"DELETE FROM memory_links WHERE {only}kind = 'supersedes' AND EXISTS ("
        f"SELECT 1 FROM memories n JOIN memories o ON o.id = n.supersedes{on_n} "
        f"WHERE {of_row}n.id = memory_links.from_id AND n.supersedes = memory_links.to_id "
        "AND o.superseded_by = n.id AND o.superseded_at = memory_links.created_at)"
    )
    return update, delete


LINK_COLUMNS = ("from_id", "to_id", "kind", "created_at")
"""A ``memory_links`` row's columns, as an export writes them."""


def held_links(
    rows: Callable[[str, Sequence[Any]], Sequence[Sequence[Any]]],
    mark: str,
    tenant: tuple[Any, ...] = (),
    *,
    page: int = 500,
) -> Iterator[dict[str, Any]]:
    """The links the memories rows hold, as ``memory_links`` rows, by the new memory's id,
    ``page`` at a time (for an export). ``rows`` runs SQL with its parameters; ``mark`` is
    the placeholder; ``tenant`` the tenant's parameter (PostgreSQL) or nothing (SQLite)."""
    where = supersedes_from(f"n.id > {mark}", mark if tenant else "")
    after = ""
    while True:
        found = rows(f"{where} ORDER BY n.id LIMIT {mark}", (*tenant, after, page))
        for link in found:
            yield dict(zip(LINK_COLUMNS, link, strict=True))
            after = str(link[0])
        if len(found) < page:
            return


def is_held(
    rows: Callable[[str, Sequence[Any]], Sequence[Sequence[Any]]],
    mark: str,
    link: Mapping[str, Any],
    tenant: tuple[Any, ...] = (),
) -> bool:
    """Whether ``link`` (a ``memory_links`` row to import) is a ``supersedes`` link the
    memories rows hold already; ``rows``, ``mark`` and ``tenant`` as for ``held_links``."""
    if link.get("kind") != "supersedes":
        return False
    sql = held_by_rows(mark, mark if tenant else "")
    return bool(rows(sql, (*tenant, link["from_id"], link["to_id"], link["created_at"])))
