"""The HTTP API against its own OpenAPI document (Schemathesis): generated requests for every
operation, valid and invalid, never make the server fail (no 5xx), and every answer is JSON
in the documented shape."""

from __future__ import annotations

import secrets
from typing import Any

import pytest

pytest.importorskip("fastapi")
schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis.specs.openapi.checks import positive_data_acceptance  # noqa: E402

import test_server  # noqa: E402
from cortex.adapters.server.app import create_app  # noqa: E402
from cortex.services.hosting import ServiceHost  # noqa: E402

# One worker runs this module under pytest-xdist: its module-scoped fixtures are set up once.
pytestmark = pytest.mark.xdist_group("test_server_schema")

host = test_server.host  # the module-scoped server host fixture


@pytest.fixture(scope="module")
def key(host: ServiceHost) -> str:
    with host.registry() as app:
        tenant = f"fuzz-{secrets.token_hex(4)}"
        app.tenants.create_tenant(tenant)
        return app.tenants.create_key(tenant, "admin")[1]


@pytest.fixture(scope="module")
def api_schema(host: ServiceHost) -> object:
    app = create_app(host.url, host=host, burst=1_000_000, rate_per_second=1_000_000)
    return schemathesis.openapi.from_asgi("/openapi.json", app)


def test_generated_requests_never_fail_the_server(api_schema: object, key: str) -> None:
    # Schemathesis's pytest plugin does not run under this pytest, so each operation's
    # strategy is driven by Hypothesis here; every operation is tried, failures collected.
    headers = {"Authorization": f"Bearer {key}"}
    failures: dict[str, str] = {}
    tried = 0
    for result in api_schema.get_all_operations():  # type: ignore[attr-defined]
        operation = result.ok()
        tried += 1

        @given(case=operation.as_strategy())
        @settings(
            max_examples=10,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case: Any) -> None:
            # A body the schema allows may still be refused with a documented 400 (an
            # unknown session, '..' in an id, a type the service refuses): not a failure.
            case.call_and_validate(headers=headers, excluded_checks=[positive_data_acceptance])

        try:
            check()
        except BaseExceptionGroup as exc:  # Schemathesis's failures, reported together below
            failures[operation.label] = str(exc)[:2000]
    assert tried >= 25
    assert failures == {}, "\n\n".join(f"{k}:\n{v}" for k, v in failures.items())
