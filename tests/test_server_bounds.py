"""What bounds a team server's request: a session row held too long (the lock timeout), a
DELETE retried after its success, a tenant whose settings file is invalid."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from cortex.adapters.server.app import STARTUP_FAILURE, app_from_env, create_app  # noqa: E402
from cortex.adapters.server.auth import RateLimiter  # noqa: E402
from cortex.adapters.server.batching import TurnBatcher  # noqa: E402
from cortex.adapters.server.direct import DirectRoutes  # noqa: E402
from cortex.adapters.server.threads import Threads  # noqa: E402
from cortex.core.models import SessionState  # noqa: E402
from cortex.core.server_numbers import (  # noqa: E402
    BURST,
    LOCK_TIMEOUT,
    LOCK_TIMEOUT_S,
    POOL,
    RATE,
    SERVER_NUMBERS,
    TURN_BATCHES,
    ServerNumber,
)
from cortex.errors import BusyError, ServerConfigError  # noqa: E402
from cortex.services.hosting import CONFIG_CHECK_S, ServiceHost  # noqa: E402
from cortex.services.turn_batch import Outcome, Turn, capture_turns  # noqa: E402
from pg_helpers import Holder, waiting_or_done  # noqa: E402

pytestmark = pytest.mark.xdist_group("test_server_bounds")
BOUND = 0.3


@pytest.fixture(scope="module")
def host(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceHost]:
    served = ServiceHost(pg_url, tmp_path_factory.mktemp("data"), pool_size=4, lock_timeout=BOUND)
    yield served
    served.close()


@pytest.fixture(scope="module")
def client(host: ServiceHost) -> TestClient:
    return TestClient(create_app(host.url, host=host, burst=10_000, rate_per_second=10_000))


def new_tenant(host: ServiceHost) -> tuple[str, str]:
    """A new tenant and a write key of it."""
    tenant = f"b-{secrets.token_hex(5)}"
    with host.registry() as app:
        app.tenants.create_tenant(tenant)
        return tenant, app.tenants.create_key(tenant, "write")[1]


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def started(client: TestClient, key: str) -> str:
    answer = client.post("/v1/sessions/start", json={"project": "p"}, headers=auth(key))
    assert answer.status_code == 200, answer.text
    return str(answer.json()["session_id"])


def in_thread(send: Any) -> tuple[threading.Thread, list[Any]]:
    """``send()`` started in a thread; its answer lands in the list."""
    answers: list[Any] = []
    thread = threading.Thread(target=lambda: answers.append(send()), daemon=True)
    thread.start()
    return thread, answers


def test_a_session_held_past_the_lock_timeout_answers_503_and_others_are_served(
    client: TestClient, host: ServiceHost, pg_url: str
) -> None:
    tenant, key = new_tenant(host)
    held, other = started(client, key), started(client, key)
    holder = Holder(pg_url, tenant, held)
    try:
        began = time.monotonic()
        thread, answers = in_thread(
            lambda: client.put(
                f"/v1/sessions/{held}/pins/deploy", json={"content": "x"}, headers=auth(key)
            )
        )
        thread.join(10)  # with no bound it would wait until the holder lets go
        assert answers, "the request waited for the held session past its bound"
        waited = time.monotonic() - began
        answer = answers[0]
        assert answer.status_code == 503 and BOUND <= waited < 5, (answer.text, waited)
        error = answer.json()["error"]
        assert error["code"] == "unavailable"
        assert error["message"] == (
            f"session {held} is busy (another request or transaction holds it); retry shortly"
        )
        assert answer.headers["Retry-After"] == "1"
        # A captured turn (the direct route: its batch passes the session over, then alone)
        # says the same, as soon: the bound once, not twice.
        began = time.monotonic()
        turn = client.post(f"/v1/sessions/{held}/turns", json={"text": "t"}, headers=auth(key))
        waited = time.monotonic() - began
        assert turn.status_code == 503 and f"session {held} is busy" in turn.text
        assert turn.headers["Retry-After"] == "1" and BOUND <= waited < BOUND * 1.6, waited
        # Another session of the tenant is served meanwhile, at once.
        pinned = client.put(
            f"/v1/sessions/{other}/pins/deploy", json={"content": "y"}, headers=auth(key)
        )
        assert pinned.status_code == 200, pinned.text
    finally:
        holder.release()
    pins = client.get(f"/v1/sessions/{held}/pins", headers=auth(key)).json()["pins"]
    assert pins == []  # the request that gave up wrote nothing


def in_one_batch(
    host: ServiceHost, turns: list[Turn], batcher: TurnBatcher | None = None
) -> list[tuple[Outcome, float]]:
    """``turns`` sent together to a batcher of ``host`` (one batch; by default one of a single
    thread): each one's outcome and the seconds it took to come."""

    async def main() -> list[tuple[Outcome, float]]:
        nonlocal batcher
        if batcher is None:
            batcher = TurnBatcher(host, lambda *_: None, slots=1, alone=Threads(1, "alone"))
        began = time.monotonic()

        async def send(turn: Turn) -> tuple[Outcome, float]:
            found = await batcher.submit(turn)
            return found, time.monotonic() - began

        return list(await asyncio.gather(*(send(turn) for turn in turns)))

    return asyncio.run(asyncio.wait_for(main(), 30))


def test_a_batch_with_a_held_session_waits_one_bound_for_it_and_none_for_the_others(
    pg_url: str, tmp_path: Path
) -> None:
    """A batch passes a held session over rather than failing after the bound: its turns
    answer busy after one bound (a second turn of it at the same time, not another bound),
    having changed nothing, and the batch's other turns are answered once it committed."""
    bound = 1.0
    host = ServiceHost(pg_url, tmp_path / "data", pool_size=4, lock_timeout=bound)
    try:
        tenant, key = new_tenant(host)
        with host.open(tenant) as app:
            held, one, two = (app.sessions.on_session_start(None, "api").session_id for _ in "abc")
            before = app.sessions.get_session(held)
        turns = [
            Turn(key, one, "r-one", {"text": "kafka"}),
            Turn(key, held, "r-held", {"text": "redis"}),
            Turn(key, two, "r-two", {"text": "kafka"}),
            Turn(key, held, "r-held-2", {"text": "nginx"}),
        ]
        holder = Holder(pg_url, tenant, held)
        try:
            answered = in_one_batch(host, turns)
        finally:
            holder.release()
        for turn, (outcome, waited) in zip(turns, answered, strict=True):
            if turn.session_id == held:
                assert isinstance(outcome, BusyError) and f"session {held} is busy" in str(outcome)
                assert bound <= waited < bound * 1.6, waited
            else:
                assert isinstance(outcome, SessionState), outcome
                assert waited < bound, waited
        with host.open(tenant) as app:
            assert app.sessions.get_session(held) == before  # nothing of its turns written
        again = capture_turns(host, turns, lambda *_: None)
        assert [type(found).__name__ for found in again] == [
            "NoneType",  # replays: applied once, in the batch
            "SessionState",  # the held session's request ids were left unused
            "NoneType",
            "SessionState",
        ]
    finally:
        host.close()


def served_batcher(host: ServiceHost) -> TurnBatcher:
    """The batcher of a server over ``host`` with one batch slot (``--turn-batches 1``), with
    the share of the pool it writes the turns a batch leaves in."""
    direct = DirectRoutes(
        host=host,
        limiter=RateLimiter(10_000, 10_000),
        render=lambda *_: None,  # type: ignore[arg-type,return-value]
        turn_batches=1,
    )
    assert direct._batches is not None
    return direct._batches


def test_turns_of_two_held_sessions_in_one_batch_each_wait_one_bound(
    pg_url: str, tmp_path: Path
) -> None:
    """Two sessions held by other transactions: the batch leaves their turns to be written
    alone, and they wait their bounds side by side, so each answers busy after about one
    bound (the second not after two), the batch's other turn at once."""
    bound = 1.0
    host = ServiceHost(pg_url, tmp_path / "data", pool_size=4, lock_timeout=bound)
    try:
        tenant, key = new_tenant(host)
        with host.open(tenant) as app:
            first, free, second = (app.sessions.on_session_start(None, "api").session_id
                                   for _ in "abc")  # fmt: skip
            before = [app.sessions.get_session(sid) for sid in (first, second)]
        turns = [
            Turn(key, first, "h-1", {"text": "redis"}),
            Turn(key, free, "f-1", {"text": "kafka"}),
            Turn(key, second, "h-2", {"text": "nginx"}),
        ]
        holders = [Holder(pg_url, tenant, sid) for sid in (first, second)]
        try:
            answered = in_one_batch(host, turns, served_batcher(host))
        finally:
            for holder in holders:
                holder.release()
        for turn, (outcome, waited) in zip(turns, answered, strict=True):
            if turn.session_id == free:
                assert isinstance(outcome, SessionState), outcome
                assert waited < bound, waited
            else:
                assert isinstance(outcome, BusyError), outcome
                assert f"session {turn.session_id} is busy" in str(outcome)
                assert bound <= waited < bound * 1.6, (turn.session_id, waited)
        with host.open(tenant) as app:
            assert [app.sessions.get_session(sid) for sid in (first, second)] == before
    finally:
        host.close()


def test_a_turn_waiting_for_a_held_session_holds_up_no_later_turn(
    pg_url: str, tmp_path: Path
) -> None:
    """The held session's turn waits in a transaction of its own, not in the batch's slot:
    a turn of another session sent meanwhile is captured at once."""
    bound = 1.0
    host = ServiceHost(pg_url, tmp_path / "data", pool_size=4, lock_timeout=bound)
    try:
        app = create_app(pg_url, host=host, turn_batches=1)
        with TestClient(app) as client:
            tenant, key = new_tenant(host)
            held, other = started(client, key), started(client, key)
            holder = Holder(pg_url, tenant, held)
            try:
                path = f"/v1/sessions/{held}/turns"
                thread, answers = in_thread(
                    lambda: client.post(path, json={"text": "t"}, headers=auth(key))
                )
                assert waiting_or_done(thread, pg_url)
                began = time.monotonic()
                path = f"/v1/sessions/{other}/turns"
                served = client.post(path, json={"text": "kafka"}, headers=auth(key))
                took = time.monotonic() - began
                assert served.status_code == 200 and took < bound, (served.text, took)
                thread.join(10)
            finally:
                holder.release()
        assert answers and answers[0].status_code == 503, answers
    finally:
        host.close()


def test_a_writer_that_waits_less_than_the_default_bound_is_served(
    pg_url: str, tmp_path: Path
) -> None:
    """Writers of one session taking turns wait milliseconds, far below the bound; an unpin
    takes its turn like the other writes and builds on the row it waited for."""
    host = ServiceHost(pg_url, tmp_path / "data", pool_size=4, lock_timeout=LOCK_TIMEOUT_S)
    try:
        client = TestClient(create_app(pg_url, host=host))
        tenant, key = new_tenant(host)
        sid = started(client, key)
        for label in ("a", "b"):
            pin = {"content": label}
            client.put(f"/v1/sessions/{sid}/pins/{label}", json=pin, headers=auth(key))
        holder = Holder(pg_url, tenant, sid)
        try:
            thread, answers = in_thread(
                lambda: client.request("DELETE", f"/v1/sessions/{sid}/pins/a", headers=auth(key))
            )
            assert waiting_or_done(thread, pg_url)  # it waits for the holder...
        finally:
            holder.release()  # ...which lets go
        thread.join(10)
        assert answers and answers[0].status_code == 200, answers
        pins = client.get(f"/v1/sessions/{sid}/pins", headers=auth(key)).json()["pins"]
        assert [p["label"] for p in pins] == ["b"]
    finally:
        host.close()


WORKER_NUMBERS = [  # each variable, values it refuses, the end of its line, values it takes
    (POOL, ("0", "201", "1.5", "ten"), "a whole number of connections in 1-200", ("1", "200")),
    (TURN_BATCHES, ("-1", "17", "2.0", "x"), "a whole number of batches in 0-16", ("0", "16")),
    (RATE, ("0", "1e7", "nan", "inf"), "a number of requests a second in 0.01-1000000",
     ("0.01", "1000000")),
    (BURST, ("0", "1000001", "1e3", "-"), "a whole number of requests in 1-1000000",
     ("1", "1000000")),
    (LOCK_TIMEOUT, ("0", "-1", "99999", "nan"), "a number of seconds in 0.05-3600",
     ("0.05", "3600")),
]  # fmt: skip


def built(number: ServerNumber[int] | ServerNumber[float], app: Any) -> float:
    """What ``number`` became in the app ``app_from_env`` built."""
    host, limiter = app.state.host, app.state.limiter
    found = {POOL: host.pool_size, RATE: limiter.rate, BURST: limiter.burst}
    found[LOCK_TIMEOUT] = host.lock_timeout
    found[TURN_BATCHES] = app.direct.turn_batches
    return found[number]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("number", "bad", "valid", "good"), WORKER_NUMBERS, ids=[n[0].env for n in WORKER_NUMBERS]
)
def test_a_worker_refuses_each_server_variable_out_of_range_in_one_line(
    number: ServerNumber[int] | ServerNumber[float],
    bad: tuple[str, ...],
    valid: str,
    good: tuple[str, ...],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``app_from_env`` (each uvicorn worker) checks every number ``cortex serve`` passes it,
    as ``cortex serve`` checks its flags: a value out of range or of another type is one line
    naming the variable, the range and the flag, never a traceback or an odd server."""
    monkeypatch.setenv("CORTEX_SERVER_DB", str(tmp_path / "srv.db"))
    monkeypatch.setenv("CORTEX_SERVER_DATA", str(tmp_path / "data"))
    for text in bad:
        monkeypatch.setenv(number.env, text)
        with pytest.raises(SystemExit) as refused:
            app_from_env()
        assert refused.value.code == STARTUP_FAILURE
        assert capsys.readouterr().err == (
            f"error: {number.env}={text!r} is not {valid}; fix it, or pass "
            f"`cortex serve {number.flag} {number.metavar}`\n"
        )
    for text in good:
        monkeypatch.setenv(number.env, text)
        assert built(number, app_from_env()) == float(text)
    monkeypatch.setenv(number.env, "")
    assert built(number, app_from_env()) == number.default


def test_every_number_a_worker_takes_is_tested() -> None:
    assert [n[0] for n in WORKER_NUMBERS] == list(SERVER_NUMBERS)


def test_a_delete_retried_with_its_request_id_answers_duplicate_not_404(
    client: TestClient, host: ServiceHost
) -> None:
    _, key = new_tenant(host)
    sid = started(client, key)
    put = client.put(f"/v1/sessions/{sid}/pins/deploy", json={"content": "x"}, headers=auth(key))
    assert put.status_code == 200
    added = client.post("/v1/memories/add", json={"content": "Use tabs"}, headers=auth(key))
    mid = added.json()["id"]
    deletes = ((f"/v1/sessions/{sid}/pins/deploy", "label"), (f"/v1/memories/{mid}", "id"))
    for path, field in deletes:
        body = {"request_id": f"del-{secrets.token_hex(3)}"}
        first = client.request("DELETE", path, json=body, headers=auth(key))
        assert first.status_code == 200 and field in first.json(), first.text
        again = client.request("DELETE", path, json=body, headers=auth(key))
        assert (again.status_code, again.json()) == (200, {"duplicate": True})
        fresh = client.request("DELETE", path, json={"request_id": "other"}, headers=auth(key))
        assert fresh.status_code == 404  # a new delete of what is gone is still refused
        bare = client.request("DELETE", path, headers=auth(key))  # the body stays optional
        assert bare.status_code == 404


def test_a_refused_delete_leaves_its_request_id_unused(
    client: TestClient, host: ServiceHost
) -> None:
    _, key = new_tenant(host)
    sid = started(client, key)
    path, body = f"/v1/sessions/{sid}/pins/deploy", {"request_id": "del-early"}
    assert client.request("DELETE", path, json=body, headers=auth(key)).status_code == 404
    client.put(path, json={"content": "x"}, headers=auth(key))
    removed = client.request("DELETE", path, json=body, headers=auth(key))
    assert removed.status_code == 200 and removed.json()["label"] == "deploy"


def test_a_tenants_invalid_settings_answer_503_naming_them_logged_once(
    client: TestClient, host: ServiceHost, caplog: pytest.LogCaptureFixture
) -> None:
    tenant, key = new_tenant(host)
    settings = host.data_dir / "tenants" / tenant / "config.toml"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text("session_idle_close_minutes = 1\n")
    with caplog.at_level(logging.ERROR, logger="cortex.server"):
        answers = [client.get("/v1/sessions", headers=auth(key)) for _ in range(2)]
        answers.append(client.post("/v1/sessions/start", json={}, headers=auth(key)))
    for answer in answers:
        assert answer.status_code == 503, answer.text
        error = answer.json()["error"]
        assert error["code"] == "unavailable"
        assert error["message"] == (
            f"the server's settings for tenant {tenant!r} are invalid "
            f"(session_idle_close_minutes=1 (from <server data>/tenants/{tenant}/config.toml) "
            "is out of range; use a value in 5-10080); the server's operator must fix them, "
            "then retry"
        )
    logged = [r.getMessage() for r in caplog.records if "invalid settings" in r.getMessage()]
    assert len(logged) == 1 and str(settings) in logged[0]  # once, with the file
    detail = logged[0].split("invalid settings: ")[1]
    assert host.invalid_configs() == [f"tenant {tenant!r}: {detail}"]
    settings.write_text("session_idle_close_minutes = 30\n")  # fixed: served, no restart
    assert client.get("/v1/sessions", headers=auth(key)).status_code == 200
    assert host.invalid_configs() == []


def test_the_default_tenants_invalid_settings_leave_the_other_tenants_served(
    pg_url: str, tmp_path: Path
) -> None:
    """The registry (keys, tenants, migrations) is the server's, not tenant 'default''s: an
    invalid ``tenants/default/config.toml`` makes that tenant's requests 503 and no other's."""
    from cortex.services.worker import BUILTIN_JOBS, hosted_pass

    data = tmp_path / "data"
    made = ServiceHost(pg_url, data)  # the key made before the file goes wrong
    try:
        tenant, key = new_tenant(made)
    finally:
        made.close()
    default = data / "tenants" / "default" / "config.toml"
    default.parent.mkdir(parents=True)
    default.write_text("session_idle_close_minutes = 1\n")
    host = ServiceHost(pg_url, data, pool_size=4, secret="s" * 32)
    try:
        client = TestClient(create_app(pg_url, host=host))
        for _ in range(2):  # the key's first check, then the one made with the request
            answer = client.get("/v1/sessions", headers=auth(key))
            assert answer.status_code == 200, answer.text
        assert started(client, key)
        signed_in = client.post("/ui/login", data={"key": key}, follow_redirects=False)
        assert signed_in.status_code == 303, signed_in.text
        assert client.get("/readyz").json() == {"status": "ready"}
        _, other = new_tenant(host)  # `cortex tenant create` and `key create` still work
        assert client.get("/v1/sessions", headers=auth(other)).status_code == 200
        with host.registry() as app:
            if app.store.get_tenant("default") is None:
                app.tenants.create_tenant("default")
            own = app.tenants.create_key("default", "read")[1]
        runs = hosted_pass(host, BUILTIN_JOBS[2:3], "owner", force=True)
        assert {run.tenant: run.status for run in runs}[tenant] != "failed"
        assert {run.tenant: run.status for run in runs}["default"] == "failed"
        refused = client.get("/v1/sessions", headers=auth(own))  # its own requests: 503
        assert refused.status_code == 503 and "tenant 'default'" in refused.text
    finally:
        host.close()


def test_a_migration_waits_past_the_lock_timeout(fresh_database: str) -> None:
    """The bound is for requests: a server process migrating while another one does waits
    for it, however long that takes."""
    import psycopg

    from cortex.store.postgres import PostgresStore
    from cortex.store.postgres.db import LOCK_MIGRATIONS

    with psycopg.connect(fresh_database) as other:
        other.execute("SELECT pg_advisory_xact_lock(%s, 0)", (LOCK_MIGRATIONS,))
        thread, opened = in_thread(
            lambda: PostgresStore(fresh_database, lock_timeout=BOUND, pool_size=1)
        )
        assert waiting_or_done(thread, fresh_database)  # the other process migrates...
        thread.join(BOUND * 3)  # ...for longer than a request may wait
        assert thread.is_alive()
        other.rollback()
    thread.join(30)
    assert opened and opened[0].check_integrity() == []
    opened[0].close()


def tenant_settings(host: ServiceHost, tenant: str, text: str) -> None:
    """Write ``tenant``'s ``config.toml`` under ``host``'s data directory, as an operator."""
    settings = host.data_dir / "tenants" / tenant / "config.toml"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(text)


def test_a_tenants_settings_edited_while_served_take_effect_without_a_restart(
    pg_url: str, tmp_path: Path
) -> None:
    """A valid file edited into another valid one is used from the next look at it; edited
    into an invalid one, the tenant's requests answer 503 naming it (the old settings are no
    longer used); fixed, they are served again."""
    host = ServiceHost(pg_url, tmp_path / "data", pool_size=2, config_check_seconds=0)
    try:
        client = TestClient(create_app(pg_url, host=host))
        tenant, key = new_tenant(host)
        tenant_settings(host, tenant, "session_idle_close_minutes = 30\n")
        assert client.get("/v1/sessions", headers=auth(key)).status_code == 200
        assert host.config(tenant).session_idle_close_minutes == 30
        tenant_settings(host, tenant, "session_idle_close_minutes = 120\n")
        assert client.get("/v1/sessions", headers=auth(key)).status_code == 200
        assert host.config(tenant).session_idle_close_minutes == 120
        tenant_settings(host, tenant, "session_idle_close_minutes = 1\n")
        refused = client.get("/v1/sessions", headers=auth(key))
        assert refused.status_code == 503, refused.text
        assert "session_idle_close_minutes=1" in refused.json()["error"]["message"]
        with pytest.raises(ServerConfigError):
            host.config(tenant)
        tenant_settings(host, tenant, "session_idle_close_minutes = 45\n")
        assert client.get("/v1/sessions", headers=auth(key)).status_code == 200
        assert host.config(tenant).session_idle_close_minutes == 45
    finally:
        host.close()


def openclaw_settings(host: ServiceHost, tenant: str, block: dict[str, Any] | str) -> None:
    """Write ``tenant``'s ``openclaw.json`` (its Cortex block, or raw text), as an operator."""
    settings = host.data_dir / "tenants" / tenant / "openclaw.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    plugin = {"plugins": {"cortex": {"session_persistence": block}}}
    settings.write_text(block if isinstance(block, str) else json.dumps(plugin))


def test_a_tenants_openclaw_json_edited_while_served_takes_effect_as_config_toml_does(
    pg_url: str, tmp_path: Path
) -> None:
    """The OpenClaw-compatible block is read for the same settings, below ``config.toml``:
    an edit of it is seen at the next look as an edit of ``config.toml`` is, an invalid one
    (a value out of range, or not JSON) answers the operator's 503, and a fix is served."""
    host = ServiceHost(pg_url, tmp_path / "data", pool_size=2, config_check_seconds=0)
    try:
        client = TestClient(create_app(pg_url, host=host))
        tenant, key = new_tenant(host)
        openclaw_settings(host, tenant, {"session_idle_close_minutes": 30})
        assert client.get("/v1/sessions", headers=auth(key)).status_code == 200
        assert host.config(tenant).session_idle_close_minutes == 30
        openclaw_settings(host, tenant, {"session_idle_close_minutes": 120})
        assert client.get("/v1/sessions", headers=auth(key)).status_code == 200
        assert host.config(tenant).session_idle_close_minutes == 120
        for bad, said in (
            ({"session_idle_close_minutes": 1}, "session_idle_close_minutes=1"),
            ("{not json", "openclaw.json is not valid JSON"),
        ):
            openclaw_settings(host, tenant, bad)
            refused = client.get("/v1/sessions", headers=auth(key))
            assert refused.status_code == 503, refused.text
            message = refused.json()["error"]["message"]
            assert said in message and "the server's operator must fix them" in message
            assert [t for t in host.invalid_configs() if f"tenant {tenant!r}" in t]
        openclaw_settings(host, tenant, {"session_idle_close_minutes": 45})
        assert client.get("/v1/sessions", headers=auth(key)).status_code == 200
        assert host.config(tenant).session_idle_close_minutes == 45
        tenant_settings(host, tenant, "session_idle_close_minutes = 60\n")  # config.toml wins
        assert host.config(tenant).session_idle_close_minutes == 60
    finally:
        host.close()


def test_a_tenants_settings_file_is_looked_at_once_a_second_not_per_request(
    pg_url: str, tmp_path: Path
) -> None:
    """Within the check interval a request reads no file (an edit waits for the next look);
    with the default interval an edit is seen a second later."""
    slow = ServiceHost(pg_url, tmp_path / "slow", pool_size=2, config_check_seconds=3600)
    host = ServiceHost(pg_url, tmp_path / "data", pool_size=2)
    try:
        tenant, key = new_tenant(slow)
        tenant_settings(slow, tenant, "session_idle_close_minutes = 30\n")
        assert slow.config(tenant).session_idle_close_minutes == 30
        tenant_settings(slow, tenant, "session_idle_close_minutes = 1\n")
        client = TestClient(create_app(pg_url, host=slow))
        assert client.get("/v1/sessions", headers=auth(key)).status_code == 200
        assert slow.config(tenant).session_idle_close_minutes == 30
        assert host.config_check_seconds == CONFIG_CHECK_S == 1.0
        tenant_settings(host, tenant, "session_idle_close_minutes = 30\n")
        assert host.config(tenant).session_idle_close_minutes == 30
        tenant_settings(host, tenant, "session_idle_close_minutes = 1\n")
        time.sleep(CONFIG_CHECK_S + 0.05)
        with pytest.raises(ServerConfigError):
            host.config(tenant)
    finally:
        slow.close()
        host.close()
