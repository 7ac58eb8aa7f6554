"""Metrics keys across machines: two server processes (``ServiceHost``s with their own data
directories) sharing one PostgreSQL database and one server secret write one chain per
tenant that either verifies; the key is never stored, locally or in the database."""

from __future__ import annotations

import secrets
import shutil
import subprocess
from pathlib import Path

import pytest

from cortex.errors import ConfigError, ValidationError
from cortex.services.hosting import ServiceHost
from cortex.services.metrics import KEY_FILE, tenant_key


def hosts(pg_url: str, tmp_path: Path, secret: str) -> tuple[ServiceHost, ServiceHost]:
    return (
        ServiceHost(pg_url, tmp_path / "a", pool_size=2, secret=secret),
        ServiceHost(pg_url, tmp_path / "b", pool_size=2, secret=secret),
    )


def new_tenant(host: ServiceHost) -> str:
    tenant = f"m-{secrets.token_hex(5)}"
    with host.registry() as app:
        app.tenants.create_tenant(tenant)
    return tenant


def test_events_written_through_two_hosts_verify_through_either(
    pg_url: str, tmp_path: Path
) -> None:
    a, b = hosts(pg_url, tmp_path, "one-secret-" + "1" * 32)
    try:
        tenant = new_tenant(a)
        for turn, host in enumerate((a, b, a, b)):
            with host.open(tenant) as app:
                sid = app.sessions.on_session_start(project="api").session_id
                app.sessions.record(sid, text=f"turn {turn} on auth")
                app.sessions.on_session_end(sid)
        for host in (a, b):
            with host.open(tenant) as app:
                report = app.metrics.verify()
                assert report.ok, report.problems
                assert report.checked >= 4
        assert not list(tmp_path.rglob(KEY_FILE)) and not list(tmp_path.rglob("metrics.head"))
        if shutil.which("pg_dump"):  # the whole database holds no trace of the key
            dump = subprocess.run(["pg_dump", pg_url], capture_output=True, text=True, check=True)
            assert tenant in dump.stdout
            assert tenant_key("one-secret", tenant).hex() not in dump.stdout
    finally:
        a.close()
        b.close()


def test_a_host_with_another_secret_fails_verification(pg_url: str, tmp_path: Path) -> None:
    a, _ = hosts(pg_url, tmp_path, "right-" + "r" * 32)
    wrong = ServiceHost(pg_url, tmp_path / "c", pool_size=2, secret="wrong-" + "w" * 32)
    try:
        tenant = new_tenant(a)
        for _ in range(2):
            with a.open(tenant) as app:
                app.sessions.on_session_end(app.sessions.on_session_start().session_id)
        with wrong.open(tenant) as app:
            report = app.metrics.verify()
        assert not report.ok and "wrong metrics key" in report.problems[-1]
    finally:
        a.close()
        wrong.close()


def test_each_tenant_gets_its_own_derived_key() -> None:
    assert tenant_key("s", "acme") != tenant_key("s", "beta")
    assert tenant_key("s", "acme") == tenant_key("s", "acme") != tenant_key("t", "acme")
    with pytest.raises(ValidationError, match="CORTEX_SERVER_SECRET"):
        tenant_key("", "acme")


def test_a_host_refuses_a_secret_under_32_bytes(pg_url: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"is 5 bytes; use at least 32, e\.g\. `openssl rand"):
        ServiceHost(pg_url, tmp_path, secret="short")
    ServiceHost(pg_url, tmp_path, secret="s" * 32).close()
