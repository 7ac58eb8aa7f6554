"""The composition root (``Services``) and the services adapters call instead of the store,
on real SQLite files; and restoration's two pure steps around the pins the caller loads."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import replace

import pytest

from cortex.clock import FixedClock, parse_time
from cortex.config import Config
from cortex.core.models import COMPLETE, SessionState
from cortex.core.pins import make_pin
from cortex.errors import ConfigError, StorageError, UnsafeIdError, ValidationError
from cortex.services.app import Services
from cortex.services.restoration import plan_restoration, select_contributors
from cortex.services.sessions.manager import SessionPersistenceManager
from cortex.store import SQLiteStore, Store, migration_names
from store_contract_memory import memory

Factory = Callable[..., Config]


def test_services_share_one_store_and_are_built_on_first_use(services: Services) -> None:
    assert "memory" not in vars(services)
    memory = services.memory
    assert services.memory is memory and memory.store is services.store
    assert services.compaction.events is services.events
    assert services.sessions.store is services.metrics.store is services.store


def test_opening_services_imports_no_engine_until_asked() -> None:
    code = (
        "import sys\n"
        "from cortex import Services, load_config\n"
        "with Services.open(load_config()) as app:\n"
        "    app.sessions.list_sessions()\n"
        "print(sorted(m for m in ('cortex.services.memory', 'cortex.services.compaction')"
        " if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_session_lookups(services: Services, clock: FixedClock) -> None:
    sessions = services.sessions
    a = sessions.on_session_start("a", project="radio").session_id
    sessions.on_session_end(a)
    clock.advance(hours=1)
    b = sessions.on_session_start("b", project="api").session_id
    assert sessions.get_session("nope") is None
    found = sessions.get_session(a)
    assert found is not None and found.state == COMPLETE
    with pytest.raises(UnsafeIdError):
        sessions.get_session("../etc/passwd")
    assert [s.session_id for s in sessions.list_sessions()] == [b, a]
    assert [s.session_id for s in sessions.list_sessions(project="radio")] == [a]
    assert [s.session_id for s in sessions.list_sessions(limit=1)] == [b]
    assert [s.session_id for s in sessions.open_sessions()] == [b]


def test_metrics_list_and_verify(services: Services) -> None:
    sid = services.sessions.on_session_start(project="radio").session_id
    services.sessions.on_session_end(sid)
    captured = services.metrics.list(event="session_captured")
    assert [(m.event, m.session_id) for m in captured] == [("session_captured", sid)]
    report = services.metrics.verify()
    assert report.ok and report.checked == len(services.metrics.list())


def test_applied_migrations_are_every_migration(services: Services) -> None:
    assert [name for name, _ in services.applied_migrations()] == list(migration_names())


def test_vacuum_hands_back_the_free_pages_health_counts_and_names_autovacuum_on_postgres(
    store: Store, make_config: Factory
) -> None:
    app = Services(store, make_config())
    if not isinstance(store, SQLiteStore):
        with pytest.raises(ConfigError, match="PostgreSQL, whose autovacuum"):
            app.vacuum()
        assert app.health().free_bytes == 0 and app.health().index_segments == 0
        assert app.merge_search_index(least=0) == 0  # (nothing to merge there)
        return
    for i in range(3):  # a commit, a segment of the full-text index, each
        store.add_memories([memory(f"m{i}", f"deploy note {i}")])
    segments = app.health().index_segments
    assert segments == store.search_index_segments() > 1
    assert app.merge_search_index(least=segments + 1) == segments  # too few: left as they are
    assert store.search_index_segments() == segments
    assert app.merge_search_index(least=segments) == segments
    assert store.search_index_segments() == 1
    store.add_memories([memory("m3", "deploy note 3")])  # a segment again, for the vacuum
    store.connection.execute("CREATE TABLE scratch (data BLOB)")
    store.connection.executemany("INSERT INTO scratch VALUES (?)", [(b"x" * 4000,)] * 100)
    store.connection.execute("DROP TABLE scratch")
    free = app.health().free_bytes
    before, after = app.vacuum()
    assert before - after == free >= 400_000  # (":memory:" too: its pages are counted alike)
    assert app.vacuum() == (after, after) and app.health().free_bytes == 0
    assert app.health().index_segments == 1  # merged by the vacuum
    assert [name for name, _ in app.applied_migrations()] == list(migration_names())


def test_rebind_keeps_the_store_and_takes_the_new_clock(
    services: Services, make_config: Factory
) -> None:
    later = FixedClock("2026-03-01T00:00:00Z")
    rebound = services.rebind(make_config(lease_seconds=60), later)
    assert rebound.store is services.store and rebound.config.lease_seconds == 60
    assert rebound.sessions.now_iso().startswith("2026-03-01")
    other = replace(make_config(), home=services.config.home / "elsewhere")
    with pytest.raises(ConfigError, match="cannot rebind"):
        services.rebind(other)


def test_close_closes_the_store(make_config: Factory) -> None:
    with Services.open(make_config()) as app:
        app.sessions.list_sessions()
    with pytest.raises(StorageError, match=r"^the store .*brain.db is closed; open a new one"):
        app.sessions.list_sessions()
    with SessionPersistenceManager.open(make_config()) as manager:
        manager.list_sessions()
    manager.close()  # twice is fine
    with pytest.raises(StorageError, match="is closed"):
        manager.on_session_start("s1")


def test_a_store_used_from_another_thread_says_so(services: Services) -> None:
    raised: list[BaseException] = []

    def use() -> None:
        try:
            services.sessions.list_sessions()
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            raised.append(exc)

    thread = threading.Thread(target=use)
    thread.start()
    thread.join()
    assert len(raised) == 1 and isinstance(raised[0], StorageError)
    assert "open one in each thread" in str(raised[0])


def test_restoration_plans_from_the_pins_the_caller_loaded(make_config: Factory) -> None:
    config = make_config()
    now = parse_time("2026-02-18T09:00:00Z")
    pin = make_pin("deploy", "make deploy ENV=staging", "2026-02-17T08:00:00Z")
    full = SessionState(
        "a",
        "2026-02-17T08:00:00Z",
        "2026-02-17T09:00:00Z",
        "cli",
        working_memory=(pin,),
        hot_topics=("ft991a",),
        state=COMPLETE,
        project="radio",
    )
    loaded = replace(full, working_memory=())  # candidates come without their standard pins
    selection = select_contributors([loaded], ["ft991a"], now, config)
    assert selection.standard_sources == (loaded,)
    assert [s.session.session_id for s in selection.scored] == ["a"]
    plan = plan_restoration(selection, [full], (), now, config, None)
    assert [p.content for p in plan.inherited] == ["make deploy ENV=staging"]
    assert plan.preamble is not None and "1 pins inherited" in plan.preamble
    unloaded = plan_restoration(selection, selection.standard_sources, (), now, config, None)
    assert unloaded.inherited == () and [s.session_id for s in unloaded.contributors] == ["a"]


@pytest.mark.parametrize("label", ["ctl\x00x", "tab\x01x", "two\nlines", "del\x7f"])
def test_a_pin_label_with_a_control_character_is_refused(services: Services, label: str) -> None:
    sid = services.sessions.on_session_start("s1").session_id
    with pytest.raises(ValidationError, match=r"^a pin label cannot hold control characters \(U"):
        services.sessions.add_pin(label, "content", sid)
    assert services.sessions.list_pins(sid) == ()
