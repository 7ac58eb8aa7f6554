"""Tenants, API keys and scopes of the team server: records and rules, no I/O.

An API key reads ``ctx_<key id>_<secret>``: the key id (12 lowercase hex) names the stored
record, the secret (32+ URL-safe characters) is shown once at creation; only its SHA-256 is
kept. A key carries scopes: ``read`` (reads, search, context), ``write`` (read and every
change), ``admin`` (write and tenant or key management).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cortex.errors import ValidationError, param

READ, WRITE, ADMIN = "read", "write", "admin"
SCOPES = (READ, WRITE, ADMIN)
_RANK = {READ: 1, WRITE: 2, ADMIN: 3}

KEY_PREFIX = "ctx_"
KEY_ID_HEX = 12
_KEY = re.compile(rf"{KEY_PREFIX}([0-9a-f]{{{KEY_ID_HEX}}})_([A-Za-z0-9_-]{{32,128}})")
_TENANT = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
_REQUEST_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
REQUEST_ID_PATTERN = _REQUEST_ID.pattern


@dataclass(frozen=True)
class TenantRecord:
    """One registered tenant; ``revoked_at`` set once it is revoked (its keys then fail)."""

    tenant: str
    created_at: str
    revoked_at: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return {"tenant": self.tenant, "created_at": self.created_at, "revoked_at": self.revoked_at}


@dataclass(frozen=True)
class ApiKeyRecord:
    """One stored API key: its id, tenant, scopes and the SHA-256 (hex) of its secret.

    ``revoked_at`` is the key's own revocation or, when read back, its tenant's.
    """

    key_id: str
    tenant: str
    scopes: tuple[str, ...]
    secret_hash: str
    created_at: str
    revoked_at: str | None = None
    label: str = ""

    def to_dict(self) -> dict[str, object]:
        """The record without its hash (nothing secret)."""
        return {
            "key_id": self.key_id,
            "tenant": self.tenant,
            "scopes": list(self.scopes),
            "label": self.label,
            "created_at": self.created_at,
            "revoked_at": self.revoked_at,
        }


def check_tenant_id(tenant: str) -> str:
    """``tenant`` if it is a registrable tenant id (safe in a path), else ``ValidationError``."""
    if not isinstance(tenant, str) or not _TENANT.fullmatch(tenant):
        raise ValidationError(
            f"tenant {tenant!r} is not a tenant id; use 1 to 63 of a-z, 0-9, '_' and '-', "
            "starting with a letter or digit"
        )
    return tenant


def check_scopes(scopes: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Scopes from ``"read,write"`` or a list, deduplicated in rank order; ``ValidationError``
    for an unknown one or none."""
    items = scopes.split(",") if isinstance(scopes, str) else list(scopes)
    names = {s.strip() for s in items if s.strip()}
    unknown = sorted(names - set(SCOPES))
    if unknown or not names:
        raise ValidationError(
            f"unknown scope {unknown[0]!r}; use read, write or admin"
            if unknown
            else f"a key needs at least one scope; pass {param('scopes')} read, write or admin"
        )
    return tuple(s for s in SCOPES if s in names)


def allows(scopes: tuple[str, ...], needed: str) -> bool:
    """Whether a key with ``scopes`` may do what ``needed`` guards (admin > write > read)."""
    return max((_RANK[s] for s in scopes if s in _RANK), default=0) >= _RANK[needed]


def parse_key(plaintext: str) -> tuple[str, str] | None:
    """(key id, secret) of a well-formed API key, else None."""
    found = _KEY.fullmatch(plaintext.strip()) if isinstance(plaintext, str) else None
    return (found[1], found[2]) if found else None


def format_key(key_id: str, secret: str) -> str:
    return f"{KEY_PREFIX}{key_id}_{secret}"


def check_request_id(request_id: str) -> str:
    """``request_id`` if it is a valid idempotency key, else ``ValidationError``."""
    if not isinstance(request_id, str) or not _REQUEST_ID.fullmatch(request_id):
        raise ValidationError(
            f"request_id {str(request_id)[:80]!r} is not valid; use 1 to 64 of A-Z a-z 0-9 _ . : -"
        )
    return request_id
