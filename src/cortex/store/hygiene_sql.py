"""The memory-hygiene part of the ``Store`` for both backends: one repository, two dialects.

Consolidation reads, supersession and links, stale and conflict listings, consolidation
runs, procedures and the worker's job leases are the same SQL on SQLite and PostgreSQL but
for the placeholder, the tenant column, how JSON is written and the row lock: a ``Dialect``
says which. On PostgreSQL a consolidation inside a transaction locks the rows it reads
(``FOR UPDATE SKIP LOCKED``), so a second server consolidating at the same time skips them
instead of acting on them twice; on SQLite the transaction's ``BEGIN IMMEDIATE`` already
serializes writers. Supersession only ever applies to a row that is still live, so a lost
race changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from cortex.core.hygiene import ConsolidationRun, JobState, Procedure
from cortex.core.memory_models import GLOBAL, Memory, MemoryFilter, MemoryLink
from cortex.store.filters import memory_filter_sql
from cortex.store.hygiene_records import (
    JOB_COLUMNS,
    PROCEDURE_COLUMNS,
    RUN_COLUMNS,
    job_from_row,
    procedure_from_row,
    procedure_values,
    run_from_row,
    run_values,
)
from cortex.store.records import MEMORY_COLUMNS, dumps, memories_from_rows, memory_from_row

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

    Rows = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
    Execute = Callable[[str, Sequence[Any]], int]

_MEMORY = ", ".join(f"m.{c}" for c in MEMORY_COLUMNS)


@dataclass(frozen=True)
class Dialect:
    """How one backend spells what the hygiene SQL needs."""

    mark: str
    """The placeholder: ``?`` or ``%s``."""
    find: str
    """The substring function (``instr`` or ``strpos``)."""
    tenant: str | None = None
    """The tenant every row belongs to (PostgreSQL), or None (SQLite: one file, one person)."""
    lock: str = ""
    """What a locking read appends (PostgreSQL: ``FOR UPDATE OF m SKIP LOCKED``)."""
    to_json: Callable[[Any], Any] = dumps
    """How a JSON column's value is written."""


class HygieneRepository:
    """Consolidation, stale/review, procedures and job leases over ``rows``/``execute``."""

    def __init__(
        self, dialect: Dialect, rows: Rows, execute: Execute, in_transaction: Callable[[], bool]
    ) -> None:
        self.d = dialect
        self._rows = rows
        self._execute = execute
        self._in_transaction = in_transaction

    # -- helpers -----------------------------------------------------------------------------
    def _t(self, alias: str = "") -> tuple[str, list[Any]]:
        """The tenant condition (with a trailing AND) and its parameter, or nothing."""
        if self.d.tenant is None:
            return "", []
        prefix = f"{alias}." if alias else ""
        return f"{prefix}tenant_id = {self.d.mark} AND ", [self.d.tenant]

    def _insert(self, table: str, columns: Sequence[str], values: Sequence[Any]) -> None:
        names, vals = list(columns), list(values)
        if self.d.tenant is not None:
            names, vals = ["tenant_id", *names], [self.d.tenant, *vals]
        marks = ", ".join(self.d.mark for _ in names)
        self._execute(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})", vals)

    def _where(self, flt: MemoryFilter, now: str) -> tuple[str, list[Any]]:
        tenant, tparams = self._t("m")
        where, params = memory_filter_sql(flt, now, mark=self.d.mark, find=self.d.find)
        return tenant + where, tparams + params

    # -- consolidation -------------------------------------------------------------------------
    def consolidation_candidates(self, flt: MemoryFilter, now: str, *, limit: int) -> list[Memory]:
        """Live memories ``flt`` sees, newest first; locked (and locked ones skipped) inside a
        PostgreSQL transaction."""
        where, params = self._where(flt, now)
        lock = f" {self.d.lock}" if self.d.lock and self._in_transaction() else ""
        sql = (
            f"SELECT {_MEMORY} FROM memories m WHERE {where} "
            f"ORDER BY m.seq DESC LIMIT {self.d.mark}{lock}"
        )
        return memories_from_rows(self._rows(sql, [*params, limit]))

    def supersede_memory(self, old_id: str, new_id: str, at: str) -> bool:
        """``old_id`` superseded by ``new_id`` if still live, with a ``supersedes`` link: held
        by the two rows (``new_id``'s ``supersedes``), or a link row if ``new_id`` already
        supersedes another memory."""
        m, (tenant, tparams) = self.d.mark, self._t()
        changed = self._execute(
            f"UPDATE memories SET superseded_by = {m}, superseded_at = {m}, updated_at = {m} "
            f"WHERE {tenant}id = {m} AND deleted_at IS NULL AND superseded_at IS NULL",
            [new_id, at, at, *tparams, old_id],
        )
        if not changed:
            return False
        held = self._execute(
            f"UPDATE memories SET supersedes = {m} WHERE {tenant}id = {m} AND supersedes IS NULL",
            [old_id, *tparams, new_id],
        )
        if not held:
            self.add_memory_link(MemoryLink(new_id, old_id, "supersedes", at))
        return True

    def add_memory_link(self, link: MemoryLink) -> None:
        """Store a link; storing the same one twice keeps one."""
        names = ["from_id", "to_id", "kind", "created_at"]
        vals: list[Any] = [link.from_id, link.to_id, link.kind, link.created_at]
        if self.d.tenant is not None:
            names, vals = ["tenant_id", *names], [self.d.tenant, *vals]
        marks = ", ".join(self.d.mark for _ in names)
        self._execute(
            f"INSERT INTO memory_links ({', '.join(names)}) VALUES ({marks}) "
            "ON CONFLICT DO NOTHING",
            vals,
        )

    def memory_conflicts(
        self, flt: MemoryFilter, now: str, *, limit: int
    ) -> list[tuple[Memory, Memory]]:
        """Pairs linked as ``conflicts`` whose two ends ``flt`` sees at ``now``, newest first.

        From the links (few, by their kind index) to their two ends by id: never a scan of
        the memories."""
        where, params = self._where(flt, now)
        tenant, tparams = self._t("l")
        # The filter names alias m; each end gets its own copy (its tenant condition too).
        rows = self._rows(
            f"SELECT {_MEMORY.replace('m.', 'a.')}, {_MEMORY.replace('m.', 'b.')} "
            "FROM memory_links l JOIN memories a ON a.id = l.from_id "
            "JOIN memories b ON b.id = l.to_id "
            f"WHERE {tenant}l.kind = 'conflicts' AND {where.replace('m.', 'a.')} "
            f"AND {where.replace('m.', 'b.')} "
            f"ORDER BY l.created_at DESC, l.from_id LIMIT {self.d.mark}",
            [*tparams, *params, *params, limit],
        )
        width = len(MEMORY_COLUMNS)
        return [(memory_from_row(r[:width]), memory_from_row(r[width:])) for r in rows]

    def _by_ids(self, ids: Sequence[str]) -> list[Memory]:
        if not ids:
            return []
        tenant, tparams = self._t("m")
        marks = ", ".join(self.d.mark for _ in ids)
        rows = self._rows(
            f"SELECT {_MEMORY} FROM memories m WHERE {tenant}m.id IN ({marks})", [*tparams, *ids]
        )
        return memories_from_rows(rows)

    def stale_memories(
        self, flt: MemoryFilter, now: str, before: str, *, limit: int
    ) -> list[Memory]:
        """Memories ``flt`` sees, last confirmed (or changed) before ``before``, oldest first."""
        where, params = self._where(flt, now)
        confirmed = "COALESCE(m.last_confirmed_at, m.updated_at)"
        rows = self._rows(
            f"SELECT {_MEMORY} FROM memories m WHERE {where} AND {confirmed} < {self.d.mark} "
            f"ORDER BY {confirmed}, m.id LIMIT {self.d.mark}",
            [*params, before, limit],
        )
        return memories_from_rows(rows)

    def save_consolidation_run(self, run: ConsolidationRun) -> None:
        values = list(run_values(run))
        values[-1] = self.d.to_json(run.metadata)
        self._insert("consolidation_runs", RUN_COLUMNS, values)

    def list_consolidation_runs(self, *, limit: int = 20) -> list[ConsolidationRun]:
        """Runs newest first."""
        tenant, tparams = self._t()
        rows = self._rows(
            f"SELECT {', '.join(RUN_COLUMNS)} FROM consolidation_runs WHERE {tenant}1 = 1 "
            f"ORDER BY seq DESC LIMIT {self.d.mark}",
            [*tparams, limit],
        )
        return [run_from_row(r) for r in rows]

    # -- procedures ----------------------------------------------------------------------------
    def save_procedure(self, p: Procedure) -> Procedure:
        """Insert ``p``, or rewrite the live procedure of the same key and owner (its usage
        and identity kept); return what is stored."""
        m, (tenant, tparams) = self.d.mark, self._t()
        found = self._rows(
            f"SELECT {', '.join(PROCEDURE_COLUMNS)} FROM procedures WHERE {tenant}scope = {m} "
            f"AND COALESCE(project_id, '') = COALESCE({m}, '') AND COALESCE(user_id, '') = "
            f"COALESCE({m}, '') AND procedure_key = {m} AND deleted_at IS NULL",
            [*tparams, p.scope, p.project, p.user_id, p.procedure_key],
        )
        if not found:
            values = list(procedure_values(p))
            values[3] = self.d.to_json(list(p.steps))
            self._insert("procedures", PROCEDURE_COLUMNS, values)
            return p
        old = procedure_from_row(found[0])
        self._execute(
            f"UPDATE procedures SET title = {m}, steps = {m}, updated_at = {m} "
            f"WHERE {tenant}id = {m}",
            [p.title, self.d.to_json(list(p.steps)), p.updated_at, *tparams, old.id],
        )
        return replace(old, title=p.title, steps=p.steps, updated_at=p.updated_at)

    def get_procedure(self, procedure_id: str) -> Procedure | None:
        tenant, tparams = self._t()
        columns = ", ".join(PROCEDURE_COLUMNS)
        rows = self._rows(
            f"SELECT {columns} FROM procedures WHERE {tenant}id = {self.d.mark}",
            [*tparams, procedure_id],
        )
        return procedure_from_row(rows[0]) if rows else None

    def list_procedures(
        self, project: str | None, user_id: str | None, *, limit: int = 50
    ) -> list[Procedure]:
        """Live procedures of ``project`` plus global ones (of ``user_id`` plus shared ones),
        most used first, then most recently updated."""
        m, (tenant, tparams) = self.d.mark, self._t()
        clauses, params = ["deleted_at IS NULL"], list(tparams)
        if project is None:
            clauses.append(f"scope = {m}")
            params.append(GLOBAL)
        else:
            clauses.append(f"(scope = {m} OR project_id = {m})")
            params += [GLOBAL, project]
        if user_id is not None:
            clauses.append(f"(user_id IS NULL OR user_id = {m})")
            params.append(user_id)
        rows = self._rows(
            f"SELECT {', '.join(PROCEDURE_COLUMNS)} FROM procedures WHERE {tenant}"
            f"{' AND '.join(clauses)} ORDER BY usage_count DESC, updated_at DESC, id LIMIT {m}",
            [*params, limit],
        )
        return [procedure_from_row(r) for r in rows]

    def record_procedure_use(self, procedure_id: str, at: str) -> bool:
        """One more use of a live procedure, now; False if there is none."""
        return self._update_live_procedure(
            "usage_count = usage_count + 1, last_used_at = {m}", [at], procedure_id
        )

    def delete_procedure(self, procedure_id: str, at: str) -> bool:
        """Soft delete; False if there is no such live procedure."""
        return self._update_live_procedure(
            "deleted_at = {m}, updated_at = {m}", [at, at], procedure_id
        )

    def _update_live_procedure(self, assignments: str, values: list[Any], pid: str) -> bool:
        m, (tenant, tparams) = self.d.mark, self._t()
        sql = (
            f"UPDATE procedures SET {assignments.format(m=m)} "
            f"WHERE {tenant}id = {m} AND deleted_at IS NULL"
        )
        return self._execute(sql, [*values, *tparams, pid]) > 0

    # -- worker job leases ---------------------------------------------------------------------
    def claim_job(self, name: str, owner: str, now: str, until: str) -> bool:
        """Take ``name``'s lease until ``until`` unless another owner holds it past ``now``."""
        m, (tenant, tparams) = self.d.mark, self._t()
        names = ["name", "last_detail"] if self.d.tenant is None else ["tenant_id", "name",
                                                                       "last_detail"]  # fmt: skip
        vals = [name, "{}"] if self.d.tenant is None else [self.d.tenant, name, "{}"]
        self._execute(
            f"INSERT INTO worker_jobs ({', '.join(names)}) VALUES "
            f"({', '.join(m for _ in names)}) ON CONFLICT DO NOTHING",
            vals,
        )
        return (
            self._execute(
                f"UPDATE worker_jobs SET owner = {m}, locked_until = {m}, last_started_at = {m} "
                f"WHERE {tenant}name = {m} AND (locked_until IS NULL OR locked_until <= {m} "
                f"OR owner = {m})",
                [owner, until, now, *tparams, name, now, owner],
            )
            > 0
        )

    def finish_job(
        self, name: str, owner: str, at: str, status: str, detail: dict[str, Any]
    ) -> bool:
        """Release ``owner``'s lease on ``name`` and record how the run ended."""
        m, (tenant, tparams) = self.d.mark, self._t()
        return (
            self._execute(
                f"UPDATE worker_jobs SET locked_until = NULL, last_finished_at = {m}, "
                f"last_status = {m}, last_detail = {m} WHERE {tenant}name = {m} AND owner = {m}",
                [at, status, dumps(detail), *tparams, name, owner],
            )
            > 0
        )

    def list_jobs(self) -> list[JobState]:
        """Every job the worker ever claimed, by name."""
        tenant, tparams = self._t()
        rows = self._rows(
            f"SELECT {', '.join(JOB_COLUMNS)} FROM worker_jobs WHERE {tenant}1 = 1 ORDER BY name",
            tparams,
        )
        return [job_from_row(r) for r in rows]
