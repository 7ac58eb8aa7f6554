"""The ``Store`` contract (``store_contract.py``) on every backend, and what all backends share."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import cortex.store
from cortex.store import migration_names
from store_contract import StoreContract
from store_contract_memory import HygieneStoreContract, MemoryStoreContract


class TestStore(StoreContract):
    """Sessions, leases, metrics, audit and transactions, on each ``store`` backend."""


class TestMemoryStore(MemoryStoreContract):
    """Memories, search, links, embeddings and session history, on each ``store`` backend."""


class TestHygieneStore(HygieneStoreContract):
    """Consolidation, stale/review, procedures and job leases, on each ``store`` backend."""


def backend_packages() -> list[str]:
    """Every backend package present under ``cortex.store`` (``sqlite``, ``postgres``...)."""
    return [
        f"cortex.store.{m.name}" for m in pkgutil.iter_modules(cortex.store.__path__) if m.ispkg
    ]


def test_every_backend_carries_the_shared_migrations_in_order() -> None:
    packages = backend_packages()
    assert "cortex.store.sqlite" in packages
    for package in packages:
        steps = importlib.import_module(f"{package}.migrations").MIGRATIONS
        assert [name for name, _ in steps] == migration_names(), package
        assert all(callable(step) for _, step in steps), package


def test_migration_names_are_ordered_and_unique() -> None:
    names = migration_names()
    assert names == sorted(set(names))
    assert names[0] == cortex.store.SCHEMA_V4 == "m001_session_states"


def test_importing_the_store_loads_no_backend() -> None:
    code = (
        "import sys; from cortex.store import Store, open_store; "
        "print(sorted(m for m in sys.modules if m == 'sqlite3' or m.startswith('cortex.store.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['cortex.store.migrations', 'cortex.store.protocol']"
