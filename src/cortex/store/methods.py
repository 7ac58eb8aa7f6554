"""The methods a store answers through a repository that both backends share (hygiene,
tenants and request ids, pipeline tasks), without importing that repository's module.

``SQLiteStore`` builds these repositories when one is first used: a hook event or a session
command never touches them, so the processes that run one need not import ``hygiene_sql``,
``registry`` or ``tasks`` (nor the records they make: ``core.hygiene``, ``core.tenancy``).
``PostgresStore`` builds them with the store.
"""

from __future__ import annotations

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    from cortex.core.hygiene import ConsolidationRun, JobState, Procedure
    from cortex.core.memory_models import Memory, MemoryFilter
    from cortex.core.tasks import TaskRecord
    from cortex.core.tenancy import ApiKeyRecord, TenantRecord
    from cortex.store.hygiene_sql import HygieneRepository
    from cortex.store.registry import Registry
    from cortex.store.tasks import TaskRepository


class HygieneMethods:
    """The hygiene methods of a store (``HygieneStore``), over its ``hygiene`` repository."""

    if TYPE_CHECKING:  # each backend's own (built at first use)

        @property
        def hygiene(self) -> HygieneRepository: ...

    def consolidation_candidates(self, flt: MemoryFilter, now: str, *, limit: int) -> list[Memory]:
        return self.hygiene.consolidation_candidates(flt, now, limit=limit)

    def supersede_memory(self, old_id: str, new_id: str, at: str) -> bool:
        return self.hygiene.supersede_memory(old_id, new_id, at)

    def memory_conflicts(
        self, flt: MemoryFilter, now: str, *, limit: int
    ) -> list[tuple[Memory, Memory]]:
        return self.hygiene.memory_conflicts(flt, now, limit=limit)

    def stale_memories(
        self, flt: MemoryFilter, now: str, before: str, *, limit: int
    ) -> list[Memory]:
        return self.hygiene.stale_memories(flt, now, before, limit=limit)

    def save_consolidation_run(self, run: ConsolidationRun) -> None:
        self.hygiene.save_consolidation_run(run)

    def list_consolidation_runs(self, *, limit: int = 20) -> list[ConsolidationRun]:
        return self.hygiene.list_consolidation_runs(limit=limit)

    def save_procedure(self, procedure: Procedure) -> Procedure:
        return self.hygiene.save_procedure(procedure)

    def get_procedure(self, procedure_id: str) -> Procedure | None:
        return self.hygiene.get_procedure(procedure_id)

    def list_procedures(
        self, project: str | None, user_id: str | None, *, limit: int = 50
    ) -> list[Procedure]:
        return self.hygiene.list_procedures(project, user_id, limit=limit)

    def record_procedure_use(self, procedure_id: str, at: str) -> bool:
        return self.hygiene.record_procedure_use(procedure_id, at)

    def delete_procedure(self, procedure_id: str, at: str) -> bool:
        return self.hygiene.delete_procedure(procedure_id, at)

    def claim_job(self, name: str, owner: str, now: str, until: str) -> bool:
        return self.hygiene.claim_job(name, owner, now, until)

    def finish_job(
        self, name: str, owner: str, at: str, status: str, detail: dict[str, Any]
    ) -> bool:
        return self.hygiene.finish_job(name, owner, at, status, detail)

    def list_jobs(self) -> list[JobState]:
        return self.hygiene.list_jobs()


class RegistryMethods:
    """The ``TenantStore`` and ``RequestStore`` methods of a store, over its ``registry``."""

    if TYPE_CHECKING:  # each backend's own (built at first use)

        @property
        def registry(self) -> Registry: ...

    def create_tenant(self, tenant: str, at: str) -> TenantRecord:
        return self.registry.create_tenant(tenant, at)

    def get_tenant(self, tenant: str) -> TenantRecord | None:
        return self.registry.get_tenant(tenant)

    def list_tenants(self) -> list[TenantRecord]:
        return self.registry.list_tenants()

    def revoke_tenant(self, tenant: str, at: str) -> bool:
        return self.registry.revoke_tenant(tenant, at)

    def create_api_key(self, key: ApiKeyRecord) -> None:
        self.registry.create_api_key(key)

    def get_api_key(self, key_id: str) -> ApiKeyRecord | None:
        return self.registry.get_api_key(key_id)

    def check_api_key_ahead(
        self, key_id: str, check: Callable[[ApiKeyRecord | None], None]
    ) -> None:
        check(self.registry.get_api_key(key_id))

    def list_api_keys(self, tenant: str | None = None) -> list[ApiKeyRecord]:
        return self.registry.list_api_keys(tenant)

    def revoke_api_key(self, key_id: str, at: str) -> bool:
        return self.registry.revoke_api_key(key_id, at)

    def append_admin_audit(
        self, action: str, actor: str, tenant: str, detail: dict[str, Any], at: str
    ) -> int:
        return self.registry.append_admin_audit(action, actor, tenant, detail, at)

    def claim_request(self, request_id: str, at: str) -> bool:
        return self.registry.claim_request(request_id, at)

    def claim_request_ahead(self, request_id: str, at: str) -> None:
        if not self.registry.claim_request(request_id, at):
            from cortex.errors import RequestReplayed

            raise RequestReplayed(request_id)


class TaskMethods:
    """The ``TaskStore`` methods of a store, over its ``task_rows`` repository."""

    if TYPE_CHECKING:  # each backend's own (built at first use)

        @property
        def task_rows(self) -> TaskRepository: ...

    def save_task(self, task: TaskRecord) -> None:
        self.task_rows.save_task(task)

    def add_tasks(self, tasks: Sequence[TaskRecord]) -> int:
        return self.task_rows.add_tasks(tasks)

    def get_task(self, task_id: str) -> TaskRecord | None:
        return self.task_rows.get_task(task_id)

    def list_tasks(
        self,
        *,
        stages: Sequence[str] | None = None,
        project: str | None = None,
        limit: int | None = None,
    ) -> list[TaskRecord]:
        return self.task_rows.list_tasks(stages=stages, project=project, limit=limit)
