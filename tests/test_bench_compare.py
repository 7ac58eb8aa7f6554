"""``bench/compare.py``'s ``for_tree``: a database this tree migrated, made one that an older
tree opens (the before-and-after scripts copy the cached corpora for both trees)."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import compare  # noqa: E402 - bench/compare.py
from cortex.store import SQLiteStore, migration_names  # noqa: E402


def older_tree(root: Path, *left_out: str) -> Path:
    """A tree whose sources know every migration but ``left_out``."""
    known = tuple(name for name in migration_names() if name not in left_out)
    source = root / "tree" / "src" / "cortex" / "store" / "migrations.py"
    source.parent.mkdir(parents=True)
    source.write_text(f'"""An older tree."""\n\nMIGRATION_NAMES = {known!r}\n')
    return root / "tree"


def shape(db: Path) -> tuple[list[str], str]:
    """The applied migrations and the vectors table's statement (its white space folded)."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        applied = [row[0] for row in conn.execute("SELECT name FROM _cortex_migrations")]
        (sql,) = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'memory_embeddings'"
        ).fetchone()
    return applied, " ".join(str(sql).split())


def test_a_step_with_a_way_back_is_taken_back_for_the_older_tree(tmp_path: Path) -> None:
    db = tmp_path / "brain.db"
    SQLiteStore(db).close()
    compare.for_tree(db, ROOT)  # this tree knows every step: nothing changes
    assert shape(db)[0] == migration_names() and "WITHOUT ROWID" not in shape(db)[1]
    compare.for_tree(db, older_tree(tmp_path, "m025_memory_embeddings_in_rows"))
    applied, sql = shape(db)
    assert applied == [n for n in migration_names() if n != "m025_memory_embeddings_in_rows"]
    assert sql.endswith("WITHOUT ROWID")
    with SQLiteStore(db) as store:  # and this tree migrates it forward again
        assert sorted(name for name, _ in store.applied_migrations()) == migration_names()
    assert "WITHOUT ROWID" not in shape(db)[1]


def test_a_step_that_changes_nothing_on_sqlite_is_taken_back_by_its_row(tmp_path: Path) -> None:
    db = tmp_path / "brain.db"
    SQLiteStore(db).close()
    before = shape(db)[1]
    compare.for_tree(db, older_tree(tmp_path, "m026_open_sessions_by_start"))
    assert shape(db) == (
        [n for n in migration_names() if n != "m026_open_sessions_by_start"],
        before,
    )
    with SQLiteStore(db) as store:  # and this tree applies it again
        assert [name for name, _ in store.applied_migrations()] == migration_names()


@pytest.mark.parametrize("vector", [True, False])
def test_a_step_with_no_way_back_stops_the_benchmark(tmp_path: Path, vector: bool) -> None:
    db = tmp_path / "brain.db"
    with SQLiteStore(db) as store:
        store.connection.execute(
            "INSERT INTO memories (id, content, created_at, updated_at) VALUES ('a', 'x', 't', 't')"
        )
        if vector:  # the table is not empty: taking the step back would lose it
            store.save_embeddings("m", [("a", 1, b"\x00\x00\x80?")])
    before = db.read_bytes()
    left_out = ("m025_memory_embeddings_in_rows",) if vector else ("m024_memory_supersedes_column",)
    tree = older_tree(tmp_path, *left_out)
    with pytest.raises(SystemExit, match=f"migrated by {left_out[0]}, which .* does not know"):
        compare.for_tree(db, tree)
    assert db.read_bytes() == before
    shutil.rmtree(tree)
