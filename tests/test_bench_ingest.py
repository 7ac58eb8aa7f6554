"""The ingest benchmark's page count (``bench/memory.py``'s ``write_pages``, behind
``bench/ingest_compare.py --pages``) on a small corpus: what a replacing batch writes, by
b-tree; no timing is asserted."""

from __future__ import annotations

import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import memory  # noqa: E402 - bench/memory.py


def test_a_replacing_batch_writes_pages_of_the_rows_and_none_of_the_link_table(
    tmp_path: Path,
) -> None:
    db = tmp_path / "corpus.db"
    memory.build(db, 3_000)
    pages = memory.write_pages(db, 2, random.Random(7))
    assert pages["memories"] > 0 and pages["idx_memories_upsert_live"] > 0
    # A supersede's link is held by the two rows: the link table and its indexes stay as
    # they were.
    assert not {name for name in pages if "memory_links" in name}
    assert [p.name for p in tmp_path.iterdir()] == ["corpus.db"]  # the copy is removed
