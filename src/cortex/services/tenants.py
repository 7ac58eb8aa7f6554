"""Tenants and API keys of the team server: create, list, revoke, and authenticate a key.

Only the SHA-256 of a key's secret is stored; the whole key is returned once, at creation.
``authenticate`` reads the registry on every call (no cache), so a revoked key, or a key of a
revoked tenant, stops at its next request. Every change writes an admin audit row.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from cortex.core.tenancy import (
    KEY_ID_HEX,
    ApiKeyRecord,
    TenantRecord,
    check_scopes,
    check_tenant_id,
    format_key,
    parse_key,
)
from cortex.errors import ConflictError, NotFoundError, UnauthorizedError
from cortex.services.base import Service

_NO_HASH = hashlib.sha256(b"no such key").hexdigest()
"""Compared against when a key id is unknown, so that both paths take the same time."""


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def verify_key(plaintext: str, record: ApiKeyRecord | None) -> tuple[str, tuple[str, ...]]:
    """(tenant, scopes) of ``plaintext`` when ``record`` (the registry's row of its key id, or
    None) is live and holds its secret; ``UnauthorizedError`` for anything else."""
    parsed = parse_key(plaintext)
    given = secret_hash(parsed[1]) if parsed else _NO_HASH
    expected = record.secret_hash if record else _NO_HASH
    if not hmac.compare_digest(given, expected) or record is None:
        raise UnauthorizedError(
            "unknown API key; send a key from `cortex key create` as a Bearer token in the "
            "Authorization header"
        )
    if record.revoked_at is not None:
        raise UnauthorizedError(f"API key {record.key_id} is revoked; ask an admin for a new one")
    return record.tenant, record.scopes


class TenantService(Service):
    """The registry of tenants and API keys (any store of the database sees the same one)."""

    def create_tenant(self, tenant: str, *, actor: str = "cli") -> TenantRecord:
        """Register ``tenant`` (a-z, 0-9, '_' and '-'); ``ConflictError`` if it exists."""
        check_tenant_id(tenant)
        at = self.now_iso()
        with self.store.transaction():
            record = self.store.create_tenant(tenant, at)
            self.store.append_admin_audit("tenant.create", actor, tenant, {}, at)
        return record

    def list_tenants(self) -> list[TenantRecord]:
        return self.store.list_tenants()

    def revoke_tenant(self, tenant: str, *, actor: str = "cli") -> TenantRecord:
        """Revoke ``tenant``: every key of it fails from its next request on."""
        at = self.now_iso()
        with self.store.transaction():
            if not self.store.revoke_tenant(tenant, at):
                raise NotFoundError(
                    f"no live tenant {tenant!r}; see `cortex tenant list` for the tenants"
                )
            self.store.append_admin_audit("tenant.revoke", actor, tenant, {}, at)
        return TenantRecord(tenant, self._tenant(tenant).created_at, at)

    def _tenant(self, tenant: str) -> TenantRecord:
        found = self.store.get_tenant(tenant)
        if found is None:
            raise NotFoundError(f"no tenant {tenant!r}; run `cortex tenant create {tenant}`")
        return found

    def create_key(
        self, tenant: str, scopes: str | list[str] | tuple[str, ...], *, label: str = "",
        actor: str = "cli",
    ) -> tuple[ApiKeyRecord, str]:  # fmt: skip
        """A new key of ``tenant`` with ``scopes``: its record and the plaintext key, which
        is shown this once and never stored."""
        wanted = check_scopes(scopes)
        if self._tenant(tenant).revoked_at is not None:
            raise ConflictError(f"tenant {tenant!r} is revoked; create a new tenant for new keys")
        key_id, secret = secrets.token_hex(KEY_ID_HEX // 2), secrets.token_urlsafe(32)
        at = self.now_iso()
        record = ApiKeyRecord(key_id, tenant, wanted, secret_hash(secret), at, None, label[:200])
        with self.store.transaction():
            self.store.create_api_key(record)
            detail = {"key_id": key_id, "scopes": list(wanted)}
            self.store.append_admin_audit("key.create", actor, tenant, detail, at)
        return record, format_key(key_id, secret)

    def list_keys(self, tenant: str | None = None) -> list[ApiKeyRecord]:
        return self.store.list_api_keys(tenant)

    def revoke_key(self, key_id: str, *, actor: str = "cli") -> ApiKeyRecord:
        """Revoke the key ``key_id``: it fails from its next request on."""
        at = self.now_iso()
        with self.store.transaction():
            found = self.store.get_api_key(key_id)
            if found is None or not self.store.revoke_api_key(key_id, at):
                raise NotFoundError(f"no live key {key_id!r}; see `cortex key list` for the keys")
            detail = {"key_id": key_id}
            self.store.append_admin_audit("key.revoke", actor, found.tenant, detail, at)
        return ApiKeyRecord(**{**vars(found), "revoked_at": at})

    def authenticate(self, plaintext: str) -> tuple[str, tuple[str, ...]]:
        """(tenant, scopes) of a live key; ``UnauthorizedError`` for anything else."""
        parsed = parse_key(plaintext)
        return verify_key(plaintext, self.store.get_api_key(parsed[0]) if parsed else None)
