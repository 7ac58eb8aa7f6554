"""The tenant and API-key registry and request-id claims, in SQL both backends run.

Both backends hand a ``Runner``-like callable pair: ``rows(sql, params)`` and
``execute(sql, params) -> rowcount``; the SQL here uses ``%s`` placeholders, which SQLite's
side rewrites to ``?``. Registry tables belong to the database, not to a store's tenant; each
row names its tenant in ``tenant_id``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cortex.core.tenancy import ApiKeyRecord, TenantRecord
from cortex.errors import ConflictError
from cortex.store.records import dumps

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:
    from typing import Any

    Rows = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
    Execute = Callable[[str, Sequence[Any]], int]


_KEY_COLUMNS = (
    "k.key_id, k.tenant_id, k.scopes, k.secret_hash, k.created_at, "
    "COALESCE(k.revoked_at, t.revoked_at), k.label"
)
KEYS = f"SELECT {_KEY_COLUMNS} FROM api_keys k JOIN tenants t ON t.tenant_id = k.tenant_id"
"""Every key with its tenant's revocation folded in; rows for ``key_from_row``."""
KEY_BY_ID = f"{KEYS} WHERE k.key_id = %s"


CLAIM = (
    "INSERT INTO request_ids (tenant_id, request_id, created_at) "
    "VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"
)
"""A request id's claim: changes one row when the id is new to the tenant, none if not."""


def key_from_row(row: Sequence[Any]) -> ApiKeyRecord:
    key_id, tenant, scopes, secret_hash, created_at, revoked_at, label = row
    return ApiKeyRecord(
        key_id=str(key_id),
        tenant=str(tenant),
        scopes=tuple(s for s in str(scopes).split(",") if s),
        secret_hash=str(secret_hash),
        created_at=str(created_at),
        revoked_at=revoked_at,
        label=str(label or ""),
    )


def _tenant(row: Sequence[Any]) -> TenantRecord:
    return TenantRecord(tenant=str(row[0]), created_at=str(row[1]), revoked_at=row[2])


class Registry:
    """``TenantStore`` and ``RequestStore`` over one backend's ``rows``/``execute``."""

    def __init__(self, rows: Rows, execute: Execute, tenant: str) -> None:
        self._rows = rows
        self._execute = execute
        self.tenant = tenant

    def create_tenant(self, tenant: str, at: str) -> TenantRecord:
        found = self.get_tenant(tenant)
        if found is not None and found.revoked_at is not None:
            raise ConflictError(
                f"tenant {tenant!r} was revoked at {found.revoked_at} and its id is not reused; "
                "pick another id"
            )
        if found is not None:
            raise ConflictError(f"tenant {tenant!r} exists; pick another id or use it")
        self._execute("INSERT INTO tenants (tenant_id, created_at) VALUES (%s, %s)", (tenant, at))
        return TenantRecord(tenant, at)

    def get_tenant(self, tenant: str) -> TenantRecord | None:
        found = self._rows(
            "SELECT tenant_id, created_at, revoked_at FROM tenants WHERE tenant_id = %s",
            (tenant,),
        )
        return _tenant(found[0]) if found else None

    def list_tenants(self) -> list[TenantRecord]:
        rows = self._rows(
            "SELECT tenant_id, created_at, revoked_at FROM tenants "
            "WHERE tenant_id IS NOT NULL ORDER BY created_at, tenant_id",
            (),
        )
        return [_tenant(row) for row in rows]

    def revoke_tenant(self, tenant: str, at: str) -> bool:
        return (
            self._execute(
                "UPDATE tenants SET revoked_at = %s WHERE tenant_id = %s AND revoked_at IS NULL",
                (at, tenant),
            )
            > 0
        )

    def create_api_key(self, key: ApiKeyRecord) -> None:
        if self.get_tenant(key.tenant) is None:
            raise ConflictError(
                f"tenant {key.tenant!r} does not exist; run `cortex tenant create {key.tenant}`"
            )
        self._execute(
            "INSERT INTO api_keys (key_id, tenant_id, scopes, secret_hash, label, created_at) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            (key.key_id, key.tenant, ",".join(key.scopes), key.secret_hash, key.label,
             key.created_at),
        )  # fmt: skip

    def get_api_key(self, key_id: str) -> ApiKeyRecord | None:
        found = self._rows(KEY_BY_ID, (key_id,))
        return key_from_row(found[0]) if found else None

    def list_api_keys(self, tenant: str | None = None) -> list[ApiKeyRecord]:
        where = "" if tenant is None else " WHERE k.tenant_id = %s"
        params = () if tenant is None else (tenant,)
        rows = self._rows(f"{KEYS}{where} ORDER BY k.created_at, k.key_id", params)
        return [key_from_row(row) for row in rows]

    def revoke_api_key(self, key_id: str, at: str) -> bool:
        return (
            self._execute(
                "UPDATE api_keys SET revoked_at = %s "
                "WHERE key_id = %s AND revoked_at IS NULL AND tenant_id IS NOT NULL",
                (at, key_id),
            )
            > 0
        )

    def append_admin_audit(
        self, action: str, actor: str, tenant: str, detail: dict[str, Any], at: str
    ) -> int:
        found = self._rows(
            "INSERT INTO admin_audit (tenant_id, action, actor, detail, created_at) "
            "VALUES (%s, %s, %s, %s, %s) RETURNING id",
            (tenant, action, actor, dumps(detail), at),
        )
        return int(found[0][0])

    def claim_request(self, request_id: str, at: str) -> bool:
        return self._execute(CLAIM, (self.tenant, request_id, at)) == 1
