"""Shared fixtures: every test gets its own Cortex home; nothing touches a real one."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cortex.clock import FixedClock
from cortex.config import Config, load_config
from cortex.services.app import Services
from cortex.services.sessions.manager import SessionPersistenceManager
from cortex.store import SQLiteStore, open_store

START = "2026-02-16T09:00:00Z"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("CORTEX_HOME", str(home))
    for name in ("CORTEX_NOW", "CORTEX_SESSION_DEBUG", "CORTEX_LOOKBACK_DAYS"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def home(_isolated_home: Path) -> Path:
    return _isolated_home


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(START)


@pytest.fixture
def make_config(home: Path) -> Callable[..., Config]:
    def make(**overrides: object) -> Config:
        return load_config(home, {}, overrides)

    return make


@pytest.fixture
def services(make_config: Callable[..., Config], clock: FixedClock) -> Iterator[Services]:
    """Every service over the test home's database (what the adapters are given)."""
    with Services.open(make_config(), clock) as opened:
        yield opened


@pytest.fixture
def manager(services: Services) -> SessionPersistenceManager:
    return services.sessions


@pytest.fixture(params=["file", "memory"])
def sqlite_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SQLiteStore]:
    """A migrated SQLite store: a file under tmp_path, then ``:memory:`` (contract suites)."""
    if request.param == "file":
        store = SQLiteStore(tmp_path / "home" / "brain.db")
    else:
        opened = open_store(":memory:")
        assert isinstance(opened, SQLiteStore)
        store = opened
    yield store
    store.close()
