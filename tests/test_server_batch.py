"""Group commit of captured turns on the real PostgreSQL: a batch of turns of several
tenants in one transaction gives every turn the answer it would get alone (its session,
a replay's None, its own error) and never loses or duplicates one."""

from __future__ import annotations

import asyncio
import secrets
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from cortex.adapters.server.app import create_app  # noqa: E402
from cortex.adapters.server.auth import RateLimitedError, RateLimiter  # noqa: E402
from cortex.adapters.server.batching import TurnBatcher  # noqa: E402
from cortex.adapters.server.direct import DirectRoutes  # noqa: E402
from cortex.adapters.server.threads import Threads  # noqa: E402
from cortex.core.models import SessionState  # noqa: E402
from cortex.core.tenancy import parse_key  # noqa: E402
from cortex.errors import (  # noqa: E402
    ConfigError,
    ConflictError,
    NotFoundError,
    UnauthorizedError,
    ValidationError,
)
from cortex.services.hosting import ServiceHost, apply_once  # noqa: E402
from cortex.services.turn_batch import ALONE, Outcome, Turn, Written, capture_turns  # noqa: E402
from pg_helpers import waiting_or_done  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from server_path import counted_round_trips as round_trips  # noqa: E402

pytestmark = pytest.mark.xdist_group("test_server_batch")


@pytest.fixture(scope="module")
def host(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceHost]:
    served = ServiceHost(pg_url, tmp_path_factory.mktemp("data"), pool_size=4)
    yield served
    served.close()


def tenant_key(host: ServiceHost) -> tuple[str, str]:
    """A new tenant and a write key of it."""
    tenant = f"t-{secrets.token_hex(5)}"
    with host.registry() as app:
        app.tenants.create_tenant(tenant)
        return tenant, app.tenants.create_key(tenant, "write")[1]


def started(host: ServiceHost, tenant: str) -> str:
    with host.open(tenant) as app:
        return app.sessions.on_session_start(None, "api").session_id


def stored(host: ServiceHost, tenant: str, session_id: str) -> SessionState:
    with host.open(tenant) as app:
        found = app.sessions.get_session(session_id)
    assert found is not None
    return found


def admit_all(key_id: str, tenant: str, scopes: tuple[str, ...]) -> None:
    """Every authenticated caller may capture (the server's limiter is tested below)."""


def capture(host: ServiceHost, turns: list[Turn]) -> list[Outcome]:
    return capture_turns(host, turns, admit_all)


def test_turns_of_several_tenants_commit_together_each_in_its_own_tenant(
    host: ServiceHost,
) -> None:
    callers = [tenant_key(host) for _ in range(3)]
    sessions = [started(host, tenant) for tenant, _ in callers]
    turns = [
        Turn(key, sid, f"r-{n}", {"text": f"topic{n} deploy pipeline", "files": [f"src/{n}.py"]})
        for n, ((_, key), sid) in enumerate(zip(callers, sessions, strict=True))
    ]
    outcomes = capture(host, turns)
    for n, ((tenant, _), sid) in enumerate(zip(callers, sessions, strict=True)):
        found = outcomes[n]
        assert isinstance(found, SessionState) and found.session_id == sid
        assert f"topic{n}" in stored(host, tenant, sid).hot_topics
        for other, _ in callers:
            if other != tenant:  # a session id names a session of its own tenant only
                with host.open(other) as app:
                    assert app.sessions.get_session(sid) is None


def test_a_batch_stores_what_one_turn_alone_stores(host: ServiceHost) -> None:
    tenant, key = tenant_key(host)
    alone, batched = started(host, tenant), started(host, tenant)
    signals: dict[str, Any] = {"text": "refactor the auth module", "categories": ("infra",)}
    with host.open(tenant) as app:
        app.sessions.record(alone, **signals)
    assert isinstance(capture(host, [Turn(key, batched, None, signals)])[0], SessionState)
    one, other = stored(host, tenant, alone), stored(host, tenant, batched)
    assert (one.hot_topics, one.topic_state, one.pending_tasks) == (
        other.hot_topics,
        other.topic_state,
        other.pending_tasks,
    )


def test_a_request_id_applies_once_within_a_batch_and_across_batches(host: ServiceHost) -> None:
    tenant, key = tenant_key(host)
    twice, once = started(host, tenant), started(host, tenant)
    turn = Turn(key, twice, "same-id", {"text": "alpha beta"})
    outcomes = capture(host, [turn, Turn(key, once, "other-id", {"text": "alpha beta"}), turn])
    assert isinstance(outcomes[0], SessionState) and outcomes[2] is None
    assert capture(host, [turn]) == [None]  # a replay in a later batch
    # the same id in another tenant is another request
    other, other_key = tenant_key(host)
    elsewhere = started(host, other)
    assert isinstance(capture(host, [Turn(other_key, elsewhere, "same-id", {})])[0], SessionState)
    assert stored(host, tenant, twice).topic_state == stored(host, tenant, once).topic_state


def test_two_turns_of_one_session_in_a_batch_both_count_in_order(host: ServiceHost) -> None:
    tenant, key = tenant_key(host)
    sid = started(host, tenant)
    outcomes = capture(
        host, [Turn(key, sid, "a", {"text": "kafka"}), Turn(key, sid, "b", {"text": "redis"})]
    )
    assert all(isinstance(found, SessionState) for found in outcomes)
    assert {"kafka", "redis"} <= set(stored(host, tenant, sid).hot_topics)


def test_a_batch_waits_for_a_pin_being_written_to_its_session_and_keeps_it(
    host: ServiceHost,
) -> None:
    tenant, key = tenant_key(host)
    sid = started(host, tenant)
    with host.open(tenant) as app, app.sessions.transaction():
        app.sessions.add_pin("deploy", "make deploy", sid)
        batch = threading.Thread(
            target=capture, args=(host, [Turn(key, sid, None, {"text": "kafka"})])
        )
        batch.start()
        assert waiting_or_done(batch, host.url)  # the session is held until the pin commits
    batch.join(10)
    found = stored(host, tenant, sid)
    assert [p.label for p in found.working_memory] == ["deploy"] and "kafka" in found.hot_topics


def test_a_failing_turn_gets_its_error_and_its_claim_back_while_the_others_commit(
    host: ServiceHost,
) -> None:
    tenant, key = tenant_key(host)
    good, ended = started(host, tenant), started(host, tenant)
    with host.open(tenant) as app:
        app.sessions.on_session_end(ended)
    prefix = good[:12]
    outcomes = capture(
        host,
        [
            Turn(key, ended, "to-ended", {"text": "late"}),
            Turn(key, "no-such-session", "to-nothing", {}),
            Turn(key, good, "good", {"text": "kubernetes"}),
            Turn(key, good, "bad id with spaces", {}),
        ],
    )
    assert isinstance(outcomes[0], ConflictError)
    assert isinstance(outcomes[1], NotFoundError)
    assert isinstance(outcomes[2], SessionState) and "kubernetes" in outcomes[2].hot_topics
    assert isinstance(outcomes[3], ValidationError)
    with host.open(tenant) as app:  # the failed turns' request ids were not used up
        assert app.store.claim_request("to-ended", "2026-01-01T00:00:00Z")
        assert app.store.claim_request("to-nothing", "2026-01-01T00:00:00Z")
        assert not app.store.claim_request("good", "2026-01-01T00:00:00Z")
    # a session named by a unique prefix is captured (alone, after the batch), as one turn is
    assert isinstance(
        capture(host, [Turn(key, prefix, None, {"text": "terraform"})])[0], SessionState
    )
    assert "terraform" in stored(host, tenant, good).hot_topics


def test_a_key_revoked_before_the_batch_stops_its_turn_only(host: ServiceHost) -> None:
    (tenant, key), (other, revoked) = tenant_key(host), tenant_key(host)
    sid, theirs = started(host, tenant), started(host, other)
    assert isinstance(capture(host, [Turn(revoked, theirs, None, {})])[0], SessionState)
    parsed = parse_key(revoked)
    assert parsed is not None
    with host.registry() as app:
        assert app.store.revoke_api_key(parsed[0], "2026-01-01T00:00:00Z")
    outcomes = capture(
        host,
        [
            Turn(revoked, theirs, "r1", {"text": "grafana"}),
            Turn(key, sid, "r1", {"text": "still fine"}),
            Turn("ctx_not_a_key", sid, None, {}),
        ],
    )
    assert isinstance(outcomes[0], UnauthorizedError) and "revoked" in str(outcomes[0])
    assert isinstance(outcomes[1], SessionState)
    assert isinstance(outcomes[2], UnauthorizedError)
    assert "grafana" not in stored(host, other, theirs).hot_topics


def test_admission_runs_once_per_turn_and_its_refusal_is_that_turns_answer(
    host: ServiceHost,
) -> None:
    tenant, key = tenant_key(host)
    sid, other = started(host, tenant), started(host, tenant)
    admitted: list[str] = []

    def admit(key_id: str, tenant: str, scopes: tuple[str, ...]) -> None:
        admitted.append(key_id)
        if len(admitted) == 2:
            raise RateLimitedError("rate limit of 1 requests/s exceeded; retry in 1s", 1)

    turns = [Turn(key, sid, None, {"text": "one"}), Turn(key, other, None, {"text": "two"})]
    outcomes = capture_turns(host, turns, admit)
    assert isinstance(outcomes[0], SessionState) and isinstance(outcomes[1], RateLimitedError)
    assert len(admitted) == 2 and "two" not in stored(host, tenant, other).hot_topics


def test_a_postgresql_error_in_the_batch_leaves_each_turn_to_its_own_transaction(
    host: ServiceHost,
) -> None:
    tenant, key = tenant_key(host)
    first, second = started(host, tenant), started(host, tenant)
    with host.open(tenant) as app:  # PostgreSQL refuses a NUL in JSON: the UPSERT fails
        with pytest.raises(ValidationError):
            app.sessions.record(first, learning_id="bad\x00id")
    outcomes = capture(
        host,
        [
            Turn(key, first, "poison", {"learning_id": "bad\x00id"}),
            Turn(key, second, "fine", {"text": "postgresql"}),
        ],
    )
    assert isinstance(outcomes[0], ValidationError)
    assert isinstance(outcomes[1], SessionState)
    assert "postgresql" in stored(host, tenant, second).hot_topics
    assert capture(host, [Turn(key, second, "fine", {"text": "again"})]) == [None]
    with host.open(tenant) as app:
        assert app.store.claim_request("poison", "2026-01-01T00:00:00Z")


def test_concurrent_http_turns_are_answered_after_their_commit(host: ServiceHost) -> None:
    callers = [tenant_key(host) for _ in range(4)]
    sessions = [started(host, tenant) for tenant, _ in callers]
    app = create_app(host.url, host=host, burst=10_000, rate_per_second=10_000, turn_batches=1)

    def send(client: TestClient, n: int) -> tuple[int, Any]:
        (_, key), sid = callers[n % 4], sessions[n % 4]
        response = client.post(
            f"/v1/sessions/{sid}/turns",
            json={"learning_id": f"learned-{n}", "request_id": f"req-{n}"},
            headers=auth(key),
        )
        return response.status_code, response.json()

    with TestClient(app) as client, ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda n: send(client, n), range(40)))
        replays = list(pool.map(lambda n: send(client, n), range(0, 40, 5)))
    assert all(status == 200 and not body["duplicate"] for status, body in answers)
    assert all(status == 200 and body["duplicate"] for status, body in replays)
    for n, ((tenant, _), sid) in enumerate(zip(callers, sessions, strict=True)):
        learned = stored(host, tenant, sid).topic_state["learning_ids"]
        assert sorted(learned) == sorted(f"learned-{k}" for k in range(n, 40, 4))  # once each


def test_turn_batches_0_and_a_sqlite_server_capture_one_turn_at_a_time(
    host: ServiceHost, tmp_path: Path
) -> None:
    tenant, key = tenant_key(host)
    sid = started(host, tenant)
    client = TestClient(create_app(host.url, host=host, turn_batches=0))
    body = {"text": "ansible", "request_id": "only-once"}
    for duplicate in (False, True):
        response = client.post(f"/v1/sessions/{sid}/turns", json=body, headers=auth(key))
        assert response.json() == {"session_id": sid, "duplicate": duplicate}
    assert "ansible" in stored(host, tenant, sid).hot_topics
    with pytest.raises(ConfigError, match="postgresql"):
        ServiceHost(str(tmp_path / "cortex.db"), tmp_path).turn_batch()


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_with_group_commit_turns_hold_one_connection_per_batch_and_starts_the_rest(
    host: ServiceHost,
) -> None:
    def split(batches: int) -> tuple[float, float]:
        direct = DirectRoutes(
            host=host,
            limiter=RateLimiter(1, 1),
            render=lambda *_: None,  # type: ignore[arg-type,return-value]
            turn_batches=batches,
        )
        if direct._batches is not None:  # the batches' writer threads
            return direct._batches.threads.size, direct._others.size
        return direct._queue.size, direct._others.size  # type: ignore[union-attr]

    assert host.pool_size == 4
    assert split(1) == (1, 3)
    assert split(5) == (2, 2)  # never more batches than half the pool
    assert split(0) == (2, 2)  # one transaction a turn: half the pool, as before


def test_a_batch_is_written_by_the_batchers_own_writer_and_outlives_its_event_loop(
    host: ServiceHost,
) -> None:
    """A batch goes to the batcher's writer thread with no task of the event loop waiting for
    it; one whose event loop closed while it was written (a test client's) is dropped, and
    the same writer writes the next loop's batches."""
    tenant, key = tenant_key(host)
    sids = [started(host, tenant) for _ in range(2)]
    gate, seen = threading.Event(), []

    def admit(key_id: str, tenant: str, scopes: tuple[str, ...]) -> None:
        seen.append((threading.current_thread().name, len(batcher._tasks)))
        gate.wait(10)

    batcher = TurnBatcher(host, admit, slots=1, alone=Threads(1, "alone"))

    async def abandon() -> None:
        turn = Turn(key, sids[0], None, {"text": "kafka"})
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(batcher.submit(turn), 0.2)

    asyncio.run(abandon())  # closed while its batch waits in admit
    gate.set()
    turn = Turn(key, sids[1], None, {"text": "redis"})
    found = asyncio.run(asyncio.wait_for(batcher.submit(turn), 30))
    assert isinstance(found, SessionState) and found.session_id == sids[1]
    assert seen == [("cortex-turns_0", 0)] * 2
    assert "kafka" in stored(host, tenant, sids[0]).hot_topics  # written, though nobody waited


def test_the_batcher_groups_waiting_turns_and_serves_a_turn_sent_right_after_an_answer(
    host: ServiceHost,
) -> None:
    tenant, key = tenant_key(host)
    sessions = [started(host, tenant) for _ in range(6)]
    sizes: list[int] = []

    def admit(key_id: str, tenant: str, scopes: tuple[str, ...]) -> None:
        sizes.append(1)

    async def main() -> tuple[list[Outcome], list[Outcome]]:
        batcher = TurnBatcher(host, admit, slots=1, alone=Threads(1, "alone"))
        together = await asyncio.gather(
            *(batcher.submit(Turn(key, sid, None, {"text": "kafka"})) for sid in sessions)
        )
        one_by_one = []  # each sent as soon as the last is answered: the slot must be free
        for sid in sessions[:3]:
            turn = Turn(key, sid, None, {"text": "redis"})
            one_by_one.append(await batcher.submit(turn))
        assert batcher._writers == 0
        return together, one_by_one

    together, one_by_one = asyncio.run(asyncio.wait_for(main(), 60))
    assert all(isinstance(found, SessionState) for found in together + one_by_one)
    assert len(sizes) == 9  # each turn admitted once
    assert all("kafka" in stored(host, tenant, sid).hot_topics for sid in sessions)


def test_the_turns_a_batch_leaves_go_in_chains_of_one_session_or_one_request_id() -> None:
    """Turns left to be written alone that name one session id, or one request id, keep
    their order in one chain (each must see what the one before did); the others are
    chains of their own, written at the same time."""
    turns = [
        Turn("k", "s1", "r1"),
        Turn("k", "s2", None),
        Turn("k", "s1", "r2"),
        Turn("k", "s3", "r2"),  # another session, the request id of the third: its chain
        Turn("k", "s4", "r4"),  # settled by the batch: in no chain
        Turn("k", "s5", None),
        Turn("k", "s2", "r1"),  # joins the chains of s2 and of r1 (s1's)
    ]
    outcomes: list[Any] = [ALONE] * len(turns)
    outcomes[4] = None
    written = Written(host=None, turns=turns, admit=lambda *_: None, outcomes=outcomes,
                      tenants=[None] * len(turns))  # type: ignore[arg-type]  # fmt: skip
    assert written.chains() == [[0, 1, 2, 3, 6], [5]]
    outcomes[6] = None
    assert written.chains() == [[0, 2, 3], [1], [5]]


def test_a_batch_of_keys_the_process_knows_reads_them_with_its_sessions(
    host: ServiceHost,
) -> None:
    """Two round trips, not three, once every caller's key was authenticated before."""
    tenant, key = tenant_key(host)
    sid = started(host, tenant)
    with round_trips() as first:
        assert isinstance(
            capture(host, [Turn(key, sid, "k-1", {"text": "kafka"})])[0], SessionState
        )
    with round_trips() as known:
        assert isinstance(
            capture(host, [Turn(key, sid, "k-2", {"text": "redis"})])[0], SessionState
        )
    assert (first[0], known[0]) == (3, 2)
    assert {"kafka", "redis"} <= set(stored(host, tenant, sid).hot_topics)


def test_a_known_key_revoked_or_forged_stops_its_turn_and_takes_its_claim_back(
    host: ServiceHost,
) -> None:
    (tenant, key), (other, revoked) = tenant_key(host), tenant_key(host)
    sid, mine, theirs = started(host, tenant), started(host, tenant), started(host, other)
    capture(host, [Turn(key, sid, None, {}), Turn(revoked, theirs, None, {})])  # known now
    forged = key[: key.rindex("_") + 1] + "0" * len(key.rsplit("_", 1)[1])
    parsed = parse_key(revoked)
    assert parsed is not None and host.known_key(parsed[0]) is not None
    with host.registry() as app:
        assert app.store.revoke_api_key(parsed[0], "2026-01-01T00:00:00Z")
    with round_trips() as trips:
        outcomes = capture(
            host,
            [
                Turn(revoked, theirs, "r-revoked", {"text": "grafana"}),
                Turn(forged, mine, "r-forged", {"text": "prometheus"}),
                Turn(key, sid, "r-fine", {"text": "loki"}),
            ],
        )
    assert trips[0] == 2  # read with the claims and sessions, in one round trip
    assert isinstance(outcomes[0], UnauthorizedError) and "revoked" in str(outcomes[0])
    assert isinstance(outcomes[1], UnauthorizedError) and "unknown API key" in str(outcomes[1])
    assert isinstance(outcomes[2], SessionState)
    assert "grafana" not in stored(host, other, theirs).hot_topics
    assert "loki" in stored(host, tenant, sid).hot_topics
    assert "prometheus" not in stored(host, tenant, mine).hot_topics
    with host.open(other) as app:  # the refused turns' request ids were not used up
        assert app.store.claim_request("r-revoked", "2026-01-01T00:00:00Z")
    with host.open(tenant) as app:
        assert app.store.claim_request("r-forged", "2026-01-01T00:00:00Z")
        assert not app.store.claim_request("r-fine", "2026-01-01T00:00:00Z")


def test_a_known_key_that_reads_as_another_tenants_is_captured_alone_in_its_own(
    host: ServiceHost,
) -> None:
    """Were the process's note of a key wrong, the batch would ask for the claim and the
    session in the noted tenant: the turn is then captured alone, in the key's tenant."""
    (tenant, key), (other, _) = tenant_key(host), tenant_key(host)
    sid = started(host, tenant)
    with host.open(other) as app:  # a session of the same id in the noted tenant
        app.sessions.on_session_start(sid, "api")
    parsed = parse_key(key)
    assert parsed is not None
    host.remember_key(parsed[0], (other, ("write",)))
    [outcome] = capture(host, [Turn(key, sid, "r-noted", {"text": "cassandra"})])
    assert isinstance(outcome, SessionState) and outcome.session_id == sid
    assert "cassandra" in stored(host, tenant, sid).hot_topics
    assert "cassandra" not in stored(host, other, sid).hot_topics
    with host.open(other) as app:
        assert app.store.claim_request("r-noted", "2026-01-01T00:00:00Z")
    with host.open(tenant) as app:
        assert not app.store.claim_request("r-noted", "2026-01-01T00:00:00Z")
    assert host.known_key(parsed[0]) == (tenant, ("write",))  # authenticated again


def test_an_end_reads_its_session_and_learnings_with_its_first_round_trip(
    host: ServiceHost,
) -> None:
    """An end of a known key's session: its key, claim, session, learnings and pending tasks
    in one round trip, then the write with the metrics chain's head, then the commit."""
    tenant, key = tenant_key(host)
    sid = started(host, tenant)
    host.authenticate(key)
    check = host.key_check(key, lambda _: None)
    with host.open(tenant) as app, round_trips() as trips:
        ended = apply_once(
            app, "end-1", lambda: app.sessions.on_session_end(sid), ahead=True, key=check
        )
    assert trips[0] == 3
    assert ended is not None and ended.end_time is not None
    assert stored(host, tenant, sid).end_time == ended.end_time


def test_a_batch_reads_and_claims_ids_that_hold_an_arrays_quotes_and_separators(
    host: ServiceHost,
) -> None:
    """The batch sends its (tenant, id) pairs as array texts: an id holding double quotes,
    backslashes, commas, braces, spaces or the word NULL is claimed, read and taken back as
    itself."""
    tenant, _ = tenant_key(host)
    odd = ['a"b', "c\\d", "e,f", "{g}", "h i", "NULL", 'j\\"k', ""]
    with host.open(tenant) as app:
        sessions = [app.sessions.on_session_start(f"s-{i}", "api").session_id for i in range(2)]
    at = "2026-01-01T00:00:00Z"
    with host.turn_batch() as batch:
        taken, states, _, _ = batch.claim_and_read(
            [(tenant, r) for r in odd], at, [(tenant, s) for s in [*sessions, *odd]]
        )
        batch.release([(tenant, odd[0])])
    assert taken == {(tenant, r) for r in odd}
    assert set(states) == {(tenant, s) for s in sessions}
    with host.open(tenant) as app:
        assert app.store.claim_request(odd[0], at)  # taken back
        assert not any(app.store.claim_request(r, at) for r in odd[1:])


def test_a_closed_connections_kept_cursors_are_let_go_when_a_new_one_comes(pg_url: str) -> None:
    """A batch's statements run on cursors kept per connection; a cursor refers to its
    connection, so keeping them must not keep a closed connection alive."""
    import gc
    import weakref

    import psycopg

    from cortex.store.postgres import batch

    first = psycopg.connect(pg_url, autocommit=True)
    cursor = batch._cursor(first, "SELECT 1")
    assert batch._cursor(first, "SELECT 1") is cursor  # kept
    assert batch._cursor(first, "SELECT 2") is not cursor  # one per statement
    first.close()
    gone = weakref.ref(first)
    del first, cursor
    with psycopg.connect(pg_url, autocommit=True) as second:
        batch._cursor(second, "SELECT 1")
        gc.collect()
        assert gone() is None
