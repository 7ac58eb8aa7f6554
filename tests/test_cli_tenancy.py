"""``cortex tenant`` and ``cortex key`` on a real PostgreSQL database, and a key they make
authenticating through the service."""

from __future__ import annotations

import json
import secrets

from click.testing import CliRunner

from cortex.adapters.cli.main import cli
from cortex.services.hosting import ServiceHost


def cortex(*args: str) -> dict | list:  # type: ignore[type-arg]
    result = CliRunner().invoke(cli, ["--json", *args], obj={})
    assert result.exit_code == 0, result.output
    return json.loads(result.output)  # type: ignore[no-any-return]


def test_tenant_and_key_commands_manage_the_registry(pg_url: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    name = f"cli-{secrets.token_hex(4)}"
    assert cortex("tenant", "create", name, "--db", pg_url)["tenant"] == name
    assert name in [t["tenant"] for t in cortex("tenant", "list", "--db", pg_url)]
    made = cortex("key", "create", name, "--scopes", "read", "--db", pg_url)
    host = ServiceHost(pg_url, tmp_path)
    try:
        assert host.authenticate(made["key"]) == (name, ("read",))
        listed = cortex("key", "list", "--tenant", name, "--db", pg_url)
        assert [k["key_id"] for k in listed] == [made["key_id"]] and "key" not in listed[0]
        assert cortex("key", "revoke", made["key_id"], "--db", pg_url)["revoked_at"]
        assert cortex("tenant", "revoke", name, "--db", pg_url)["revoked_at"]
    finally:
        host.close()
