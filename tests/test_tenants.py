"""Tenants, API keys and request-id claims: the registry on every backend, and the service."""

from __future__ import annotations

import secrets

import pytest

from cortex.clock import FixedClock
from cortex.config import load_config
from cortex.core.tenancy import allows, check_scopes, parse_key
from cortex.errors import (
    ConflictError,
    NotFoundError,
    RequestReplayed,
    UnauthorizedError,
    ValidationError,
)
from cortex.services.tenants import TenantService
from cortex.store import Store

START = "2026-02-16T09:00:00Z"


def service(store: Store) -> TenantService:
    return TenantService(store, load_config(env={}), FixedClock(START))


def fresh() -> str:
    return f"t-{secrets.token_hex(5)}"


def test_a_created_key_authenticates_to_its_tenant_and_scopes(store: Store) -> None:
    tenants = service(store)
    name = fresh()
    tenants.create_tenant(name)
    record, plaintext = tenants.create_key(name, "read,write")
    assert parse_key(plaintext) is not None and plaintext.startswith(f"ctx_{record.key_id}_")
    assert tenants.authenticate(plaintext) == (name, ("read", "write"))
    stored = store.get_api_key(record.key_id)
    assert stored is not None and stored.secret_hash not in plaintext  # only a hash is kept
    assert [k.key_id for k in tenants.list_keys(name)] == [record.key_id]
    assert "secret_hash" not in record.to_dict()


def test_wrong_secret_unknown_and_malformed_keys_are_refused(store: Store) -> None:
    tenants = service(store)
    name = fresh()
    tenants.create_tenant(name)
    record, plaintext = tenants.create_key(name, ["read"])
    forged = plaintext[:-4] + ("AAAA" if not plaintext.endswith("AAAA") else "BBBB")
    for bad in (forged, f"ctx_{'0' * 12}_{'x' * 43}", "nonsense", ""):
        with pytest.raises(UnauthorizedError):
            tenants.authenticate(bad)


def test_revoking_a_key_or_its_tenant_stops_it_at_once(store: Store) -> None:
    tenants = service(store)
    name = fresh()
    tenants.create_tenant(name)
    one, key_one = tenants.create_key(name, "write")
    _, key_two = tenants.create_key(name, "read")
    tenants.revoke_key(one.key_id)
    with pytest.raises(UnauthorizedError, match="revoked"):
        tenants.authenticate(key_one)
    assert tenants.authenticate(key_two)[0] == name
    tenants.revoke_tenant(name)
    with pytest.raises(UnauthorizedError, match="revoked"):
        tenants.authenticate(key_two)
    with pytest.raises(NotFoundError):
        tenants.revoke_key(one.key_id)
    with pytest.raises(ConflictError):
        tenants.create_key(name, "read")
    assert [t.revoked_at for t in tenants.list_tenants() if t.tenant == name] == [
        "2026-02-16T09:00:00.000000Z"
    ]
    with pytest.raises(ConflictError) as refused:
        tenants.create_tenant(name)
    assert str(refused.value) == (
        f"tenant '{name}' was revoked at 2026-02-16T09:00:00.000000Z and its id is not "
        "reused; pick another id"
    )


def test_registry_refuses_bad_ids_scopes_and_duplicates(store: Store) -> None:
    tenants = service(store)
    name = fresh()
    tenants.create_tenant(name)
    with pytest.raises(ConflictError):
        tenants.create_tenant(name)
    for bad in ("", "../etc", "A", "x" * 64, "a b"):
        with pytest.raises(ValidationError):
            tenants.create_tenant(bad)
    with pytest.raises(ValidationError):
        tenants.create_key(name, "read,root")
    with pytest.raises(NotFoundError):
        tenants.create_key(fresh(), "read")


def test_admin_actions_are_audited(store: Store) -> None:
    tenants = service(store)
    name = fresh()
    tenants.create_tenant(name)
    record, _ = tenants.create_key(name, "admin")
    tenants.revoke_key(record.key_id)
    next_id = store.append_admin_audit("probe", "test", name, {}, START)
    assert next_id >= 4  # tenant.create, key.create, key.revoke came before


def test_a_request_id_is_claimed_once_and_a_rolled_back_claim_is_free_again(store: Store) -> None:
    rid = f"req-{secrets.token_hex(4)}"
    assert store.claim_request(rid, START) is True
    assert store.claim_request(rid, START) is False
    other = f"req-{secrets.token_hex(4)}"
    with pytest.raises(RuntimeError), store.transaction():
        assert store.claim_request(other, START) is True
        raise RuntimeError("the change failed")
    assert store.claim_request(other, START) is True


def test_a_claim_ahead_settles_with_the_next_statement_and_a_replay_rolls_back_all(
    store: Store,
) -> None:
    rid, other, late = (f"req-{secrets.token_hex(4)}" for _ in range(3))
    with store.transaction():
        store.claim_request_ahead(rid, START)
        assert store.list_tasks() == []  # the claim went with this read, and was new
    assert store.claim_request(rid, START) is False  # it committed with the change
    with pytest.raises(RequestReplayed), store.transaction():
        store.claim_request_ahead(rid, START)
        store.claim_request(other, START)  # sent with the replayed claim: undone with it
        raise AssertionError("the change ran past a replayed claim")
    assert store.claim_request(other, START) is True
    with pytest.raises(RequestReplayed), store.transaction():
        store.claim_request_ahead(late, START)
        store.claim_request_ahead(rid, START)  # nothing after it: settled before the COMMIT
    assert store.claim_request(late, START) is True  # nothing of that transaction committed


def test_scopes_rank_admin_over_write_over_read() -> None:
    assert check_scopes("write, read") == ("read", "write")
    assert allows(("admin",), "write") and allows(("write",), "read")
    assert not allows(("read",), "write") and not allows(("write",), "admin")
