"""Shared fixtures: every test gets its own Cortex home; nothing touches a real one."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from cortex.clock import FixedClock
from cortex.config import Config, load_config
from cortex.services.app import Services
from cortex.services.sessions.manager import SessionPersistenceManager
from cortex.store import Store, open_store

pytest_plugins = ["pg_helpers"]

START = "2026-02-16T09:00:00Z"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("CORTEX_HOME", str(home))
    for name in (
        "CORTEX_NOW",
        "CORTEX_SESSION_DEBUG",
        "CORTEX_LOOKBACK_DAYS",
        "CORTEX_SERVER",
        "CORTEX_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture(scope="session")
def kept_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A migrated home holding one ended session with a pin (project ``kept``), and its id.

    Fuzz tests copy it per example (``copy_home``) instead of creating and migrating a database
    each time; the session is the data no fuzzed call may reach.
    """
    template = tmp_path_factory.mktemp("kept") / "home"
    with Services.open(load_config(template, {}, {}), FixedClock(START)) as services:
        kept = services.sessions.on_session_start(project="kept").session_id
        services.sessions.add_pin("keep", "this pin", kept)
        services.sessions.on_session_end(kept)
    return template, kept


def copy_home(template: Path, parent: Path) -> Path:
    """A copy of the home ``template`` as ``parent/home``."""
    return Path(shutil.copytree(template, parent / "home"))


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


@contextlib.contextmanager
def _sqlite_file(tmp_path: Path) -> Iterator[str]:
    yield str(tmp_path / "home" / "brain.db")


@contextlib.contextmanager
def _sqlite_memory(tmp_path: Path) -> Iterator[str]:
    yield ":memory:"


STORE_URLS: dict[str, Callable[[Path], AbstractContextManager[str]]] = {
    "sqlite-file": _sqlite_file,
    "sqlite-memory": _sqlite_memory,
}
"""Where the ``store`` fixture opens each backend: a context manager that yields the URL of a
fresh, empty store and removes it afterwards. A backend joins the contract with one entry."""


@pytest.fixture(params=[*STORE_URLS, "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A migrated store of each backend in ``STORE_URLS`` (the contract suites' fixture), and
    PostgreSQL: a fresh tenant of a scratch database (``pg_helpers``; skipped when no server
    answers, except in CI)."""
    if request.param == "postgres":
        yield request.getfixturevalue("pg_store")
        return
    with STORE_URLS[request.param](tmp_path) as url:
        opened = open_store(url)
        try:
            yield opened
        finally:
            opened.close()
