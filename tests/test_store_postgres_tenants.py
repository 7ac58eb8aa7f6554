"""PostgresStore tenancy and races: tenants never see each other, and server processes racing on
one tenant (crash recovery, the metrics chain, upserts) never double up or fork anything.

Each racing "server" is a thread with a store and a pool of its own, so the race happens in
PostgreSQL exactly as between two processes.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cortex.clock import FixedClock
from cortex.config import Config, load_config
from cortex.core.history_models import Checkpoint, CompactionEvent, SessionEvent, SessionSnapshot
from cortex.core.memory_models import MemoryFilter, MemoryLink
from cortex.services.metrics import MetricsWriter, load_or_create_key
from cortex.services.metrics_verify import verify
from cortex.services.sessions.manager import SessionPersistenceManager
from pg_helpers import waiting_or_done
from store_contract import session, t
from store_contract_memory import NOW, memory

pytestmark = pytest.mark.usefixtures("pg_driver")


def _seed(store: Any, who: str) -> None:
    """The same ids in every tenant, with contents that tell the tenants apart."""
    store.save_session(
        session("s1", t(1), t(2), project=who, hot_topics=(who,), task_slug="feat-shared")
    )
    store.save_session(session("open", t(3), project=who, last_activity=t(3)))
    store.add_memories(
        [
            memory("m1", f"shared words of {who}", upsert_key="k"),
            memory("m2", f"neighbour of {who}"),
        ]
    )
    store.add_memory_link(MemoryLink("m1", "m2", "relates", t(16)))
    store.save_embeddings("model", [("m1", 1, who.encode()[:4].ljust(4, b"\0"))])
    store.append_session_event(SessionEvent("e1", "s1", "user", "message", who, 1, 0, True, t(1)))
    store.save_snapshot(SessionSnapshot("snap", "s1", who, "manual", f"# {who}\n", 1, t(1)))
    store.save_checkpoint(Checkpoint("c1", "s1", t(1), "manual", who))
    store.append_compaction_event(CompactionEvent("k1", "s1", "count", who, 1, 1, None, None, t(1)))
    store.append_metric("e", "s1", {"who": who}, t(1), "0" * 64, f"{who}-h1")
    store.append_audit("seed", who, "s1", {}, t(1))


def _sees_only_its_own(store: Any, who: str) -> None:
    got = store.get_session("s1")
    assert got is not None and got.hot_topics == (who,)
    assert [s.project for s in store.list_sessions()] == [who, who]
    assert [s.session_id for s in store.open_sessions()] == ["open"]
    assert [s.session_id for s in store.completed_sessions_since(t(1), who, limit=9)] == ["s1"]
    assert _sid(store.latest_open_session(who)) == "open" == store.latest_session_id(who)
    mem = store.get_memory("m1")
    assert mem is not None and mem.content == f"shared words of {who}"
    assert sorted(m.content for m in store.list_memories(MemoryFilter(), NOW)) == [
        f"neighbour of {who}",
        f"shared words of {who}",
    ]
    found = store.search_memories(["shared", "neighbour"], MemoryFilter(), NOW, limit=9)
    assert sorted(m.content for m, _ in found) == [f"neighbour of {who}", f"shared words of {who}"]
    assert [m.content for _, _, m in store.linked_memories(["m1"], MemoryFilter(), NOW)] == [
        f"neighbour of {who}"
    ]
    assert len(store.memory_links("m1")) == 1
    assert store.embedding_vectors("model", MemoryFilter(), NOW) == [
        ("m1", who.encode()[:4].ljust(4, b"\0"))
    ]
    assert [m.content for m in store.memories_by_id(["m1"], MemoryFilter(), NOW)] == [
        f"shared words of {who}"
    ]
    assert [e.content for e in store.list_session_events("s1")] == [who]
    assert [s.slug for s in store.list_snapshots("s1")] == [who]
    assert [c.summary for c in store.list_checkpoints("s1")] == [who]
    assert [c.summary for c in store.task_checkpoints("feat-shared")] == [who]
    assert [s.project for s in store.task_sessions("feat-shared")] == [who]
    found_checkpoint = store.get_checkpoint("c1")
    assert found_checkpoint is not None and found_checkpoint.summary == who
    assert [c.reason for c in store.list_compaction_events("s1")] == [who]
    assert [(m.seq, m.payload) for m in store.list_metrics()] == [(1, {"who": who})]
    assert [a.actor for a in store.list_audit()] == [who]
    assert store.check_integrity() == []


def _sid(state: Any) -> str | None:
    return None if state is None else state.session_id


def test_tenants_share_ids_and_never_see_each_other(pg_root: Any) -> None:
    run = secrets.token_hex(4)
    ana, bo = pg_root.for_tenant(f"ana-{run}"), pg_root.for_tenant(f"bo-{run}")
    for store, who in ((ana, "ana"), (bo, "bo")):
        _seed(store, who)
    for store, who in ((ana, "ana"), (bo, "bo")):
        _sees_only_its_own(store, who)
    # The same upsert key in another tenant supersedes nothing there.
    assert ana.add_memories([memory("m3", "newer ana truth", upsert_key="k")]) == ["m1"]
    assert bo.get_memory("m1") == replace(bo.get_memory("m1"), superseded_by=None)
    # Changes in one tenant leave the other as it was.
    ana.update_memory(replace(ana.get_memory("m2"), content="edited"))
    ana.delete_memory("m2", t(17))
    assert ana.delete_sessions(["s1", "open"]) == 2
    ana.mark_continued(["s1"], "x", t(9))
    assert ana.bump_checkpoint_count("s1", t(9)) == 0
    ana.complete_compaction_event("k1", 5, t(9))
    ana.append_metric("e", None, {}, t(2), "ana-h1", "ana-h2")
    assert ana.count_sessions() == 0 and ana.list_metrics()[-1].seq == 2
    _sees_only_its_own(bo, "bo")
    assert bo.bump_checkpoint_count("s1", t(9)) == 1


def test_tasks_of_one_tenant_are_invisible_to_another(pg_root: Any) -> None:
    from cortex.core.tasks import TaskRecord

    run = secrets.token_hex(4)
    ana, bo = pg_root.for_tenant(f"ana-{run}"), pg_root.for_tenant(f"bo-{run}")
    ana.save_task(TaskRecord("t-1", "ana's task", "build", t(1)))
    assert bo.get_task("t-1") is None and bo.list_tasks() == []
    bo.save_task(TaskRecord("t-1", "bo's task", "verify", t(2)))  # the same id, its own row
    assert bo.add_tasks([TaskRecord("t-2", "bo's other", "build", t(2))]) == 1
    assert ana.get_task("t-1") == TaskRecord("t-1", "ana's task", "build", t(1))
    assert [x.task_id for x in ana.list_tasks(stages=("build", "verify"))] == ["t-1"]
    assert [x.title for x in bo.list_tasks()] == ["bo's task", "bo's other"]


def test_id_prefixes_resolve_within_a_tenant_only(pg_root: Any) -> None:
    run = secrets.token_hex(4)
    ana, bo = pg_root.for_tenant(f"ana-{run}"), pg_root.for_tenant(f"bo-{run}")
    ana.save_session(session(f"p{run}-ana", t(10)))
    bo.save_session(session(f"p{run}-bo", t(10)))
    assert ana.ids_with_prefix("session", f"p{run}") == [f"p{run}-ana"]
    assert bo.ids_with_prefix("session", f"p{run}") == [f"p{run}-bo"]


def test_the_session_service_restores_within_a_tenant_only(
    pg_root: Any, tmp_path: Path, clock: FixedClock
) -> None:
    run = secrets.token_hex(4)
    ana, bo = (
        SessionPersistenceManager(
            pg_root.for_tenant(f"{who}-{run}"), load_config(tmp_path / who, {}, {}), clock
        )
        for who in ("ana", "bo")
    )
    ana.on_session_start("s1", project="radio", workdir="/home/u/Projects/radio")
    ana.add_pin("deploy", "prod is eu-west-1", "s1", critical=True)
    ana.record("s1", text="ft991a cat control for the ham radio")
    ana.on_session_end("s1")
    clock.advance(hours=24)
    cold = bo.on_session_start("s1", project="radio")  # the same id, in another tenant
    assert (cold.preamble, cold.inherited_pins, cold.session_ids) == (None, (), ())
    warm = ana.on_session_start("s2", project="radio")
    assert warm.session_ids == ("s1",) and [p.content for p in warm.inherited_pins] == [
        "prod is eu-west-1"
    ]
    assert warm.preamble is not None and "1 pins inherited" in warm.preamble
    assert bo.store.get_session("s1").continued_by is None


# -- races between servers on one tenant -------------------------------------------------------
@pytest.fixture
def servers(pg_url: str, pg_root: Any) -> Iterator[Callable[[int], list[Any]]]:
    """``servers(n)``: n stores of one new tenant, each with its own pool, like n processes
    (on the database ``pg_root`` migrated)."""
    from cortex.store.postgres import PostgresStore

    opened: list[Any] = []

    def make(n: int) -> list[Any]:
        tenant = f"race-{secrets.token_hex(4)}"
        opened.extend(PostgresStore(pg_url, tenant, migrate=False) for _ in range(n))
        return opened[-n:]

    yield make
    for store in opened:
        store.close()


def _race(work: Callable[[int], Any], n: int) -> list[Any]:
    """Run ``work(i)`` for i in range(n) in n threads released at once; their results."""
    barrier, results, errors = threading.Barrier(n), [None] * n, []

    def run(i: int) -> None:
        try:
            barrier.wait(10)
            results[i] = work(i)
        except BaseException as exc:  # reported to the test below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    return results


SECOND_WRITERS: dict[str, tuple[Callable[[Any, str], Any], Callable[[Any], bool]]] = {
    "pin": (lambda m, sid: m.add_pin("second", "two", sid), lambda s: "second" in _labels(s)),
    "unpin": (lambda m, sid: m.remove_pin("kept", sid), lambda s: "kept" not in _labels(s)),
    "turn": (lambda m, sid: m.record(sid, text="kafka kafka"), lambda s: "kafka" in s.hot_topics),
}


def _labels(state: Any) -> set[str]:
    return {pin.label for pin in state.working_memory}


@pytest.mark.parametrize("second", SECOND_WRITERS)
def test_two_writers_of_one_session_keep_both_changes(
    servers: Callable[[int], list[Any]], pg_url: str, tmp_path: Path, second: str
) -> None:
    """A session is written whole: the second writer waits for the first's commit and reads
    its row, instead of each writing back its own copy (the later undoing the earlier)."""
    clock = FixedClock(t(1))
    first, other = (
        SessionPersistenceManager(store, load_config(tmp_path / str(i), {}, {}), clock)
        for i, store in enumerate(servers(2))
    )
    sid = first.on_session_start(project="p").session_id
    first.add_pin("kept", "one", sid)
    write, done = SECOND_WRITERS[second]
    with first.transaction():
        first.add_pin("first", "one", sid)
        thread = threading.Thread(target=write, args=(other, sid))
        thread.start()
        assert waiting_or_done(thread, pg_url)  # the row is held until this commit
    thread.join(10)
    stored = first.get_session(sid)
    assert stored is not None and "first" in _labels(stored) and done(stored)


def test_two_writers_that_deadlock_are_both_applied(pg_url: str, tmp_path: Path) -> None:
    """One request pins onto s1 then s2, another continues s1 from s2 (locking s2, then s1):
    PostgreSQL breaks the deadlock by rolling one back, and ``apply_once`` runs that one
    again instead of answering 503."""
    from cortex.services.hosting import ServiceHost, apply_once

    host = ServiceHost(pg_url, tmp_path / "data", pool_size=4)
    try:
        tenant = f"dl-{secrets.token_hex(4)}"
        with host.registry() as registry:
            registry.tenants.create_tenant(tenant)
        with host.open(tenant) as app:
            s1, s2 = (app.sessions.on_session_start(project="p").session_id for _ in range(2))
            app.sessions.add_pin("carried", "from s2", s2)
        with host.open(tenant) as first, host.open(tenant) as second:
            continued: list[Any] = []
            other = threading.Thread(
                target=lambda: continued.append(
                    apply_once(second, None, lambda: second.sessions.force_inherit_session(s2, s1))
                )
            )

            def pin_both() -> None:
                with first.sessions.transaction():
                    first.sessions.add_pin("one", "on s1", s1)
                    if not other.is_alive() and not continued:  # the first attempt only
                        other.start()
                        assert waiting_or_done(other, pg_url)  # holds s2, waits for s1
                    first.sessions.add_pin("two", "on s2", s2)  # waits for s2: a deadlock

            apply_once(first, None, pin_both)
            other.join(30)
            assert len(continued) == 1 and continued[0].session_ids == (s2,)
            one, two = first.sessions.get_session(s1), first.sessions.get_session(s2)
            assert one is not None  # its own pin, and s2's inherited (with "two" if it was first)
            assert {"one", "carried"} <= {p.label.split(" [")[0] for p in one.working_memory}
            assert two is not None and "two" in _labels(two) and two.continued_by == s1
    finally:
        host.close()


def test_racing_crash_recovery_claims_each_session_once(
    servers: Callable[[int], list[Any]], make_config: Callable[..., Config], home: Path
) -> None:
    stores = servers(3)
    lapsed = [f"crashed-{i}" for i in range(40)]
    with stores[0].transaction():
        for sid in lapsed:
            stores[0].save_session(session(sid, t(1), last_activity=t(1, 1), project="p"))
    config, clock = make_config(), FixedClock(t(16, 9))
    managers = [SessionPersistenceManager(store, config, clock) for store in stores]
    claimed = _race(lambda i: managers[i].detect_and_recover_crashed(f"current-{i}"), 3)
    ids = [state.session_id for states in claimed for state in states]
    assert sorted(ids) == sorted(lapsed)  # every lapsed session recovered, none twice
    assert stores[1].open_sessions() == []
    assert all(s.crash_recovered for s in stores[2].list_sessions(limit=50))
    captured = stores[0].list_metrics(event="session_captured")
    assert sorted(e.session_id for e in captured) == sorted(lapsed)
    key = load_or_create_key(home / "metrics.key")
    report = verify(stores[0], key, home / "metrics.head")
    assert (report.ok, report.problems, report.checked) == (True, [], 40)


def test_racing_metric_writers_keep_one_linear_chain(
    servers: Callable[[int], list[Any]],
) -> None:
    stores = servers(4)
    other = stores[0].for_tenant(stores[0].tenant + "-other")
    key = b"k" * 32
    MetricsWriter(other, key).emit("alone", None, {}, t(1))

    def write(i: int) -> None:
        writer = MetricsWriter(stores[i], key)
        for n in range(25):
            writer.emit("e", None, {"writer": i, "n": n}, t(1))

    _race(write, 4)
    report = verify(stores[1], key)
    assert (report.ok, report.problems, report.checked) == (True, [], 100)
    assert [m.seq for m in stores[2].iter_metrics()] == list(range(1, 101))
    assert verify(other, key).checked == 1


def test_racing_upserts_of_one_key_supersede_in_turn(
    servers: Callable[[int], list[Any]],
) -> None:
    stores = servers(2)

    def upsert(i: int) -> None:
        for n in range(20):
            stores[i].add_memories([memory(f"w{i}-{n}", f"value {n}", upsert_key="k")])

    _race(upsert, 2)
    live = stores[0].list_memories(MemoryFilter(), NOW)
    every = stores[1].list_memories(MemoryFilter(include_history=True), NOW, limit=100)
    assert len(live) == 1 and len(every) == 40
    successors = [m.superseded_by for m in every if m.superseded_by is not None]
    assert len(successors) == len(set(successors)) == 39  # one line: each replaced exactly once
    assert live[0].id not in {m.id for m in every if m.superseded_by is not None}
