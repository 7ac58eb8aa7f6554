"""Memory search over the 1,000,000-memory corpus as ingest left it and after `cortex db
vacuum`, which merges the full-text index into one segment, round by round.

    .venv/bin/python bench/search_merged.py --rounds 4
    .venv/bin/python bench/search_merged.py --count 100000 --rounds 2

The corpus is ``bench/memory.py``'s (cached in ``bench/results``; build it first). A copy of it
is vacuumed by this tree's ``SQLiteStore.vacuum`` (the timed merge and VACUUM are reported with
the index's segments before and after). Each round times the floor (a whole ``python -c
"import sqlite3"`` process, median of 5), then, for the corpus as built and for the vacuumed
copy, a child process that runs the 500 bench queries through ``MemoryService.search``
(``bench/search_compare.py``'s child: ``--limit`` results, 10 by default, after 50 warm-up
queries) and reports the p50 / p95 of the wall time and of its own CPU time per query.
Reported: the medians over the rounds, and the p95 as a ratio to the floor of its round. The
copy is deleted at the end.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from compare import parser  # noqa: E402 - next to this file
from cortex.store import SQLiteStore  # noqa: E402
from search_compare import (  # noqa: E402
    ROOT,
    cached_corpus,
    print_table,
    search_rounds,
    with_corpus,
)


def main() -> None:
    args_parser = with_corpus(parser(__doc__))
    args_parser.add_argument("--rounds", type=int, default=4, help="rounds of samples")
    args = args_parser.parse_args()
    corpus = cached_corpus(args.count)
    with tempfile.TemporaryDirectory(prefix="cortex-search-merged-", dir=corpus.parent) as tmp:
        merged = Path(tmp) / corpus.name
        shutil.copyfile(corpus, merged)
        with SQLiteStore(merged, migrate=False) as store:
            before, started = store.search_index_segments(), time.perf_counter()
            size_before, size_after = store.vacuum()
            took, after = time.perf_counter() - started, store.search_index_segments()
        print(
            f"vacuum of a copy: {took:.1f} s; index segments {before} -> {after}; "
            f"{size_before / 2**20:.0f} -> {size_after / 2**20:.0f} MiB",
            file=sys.stderr,
        )
        targets = {
            "as built": (ROOT, ROOT / "src", corpus),
            "after `cortex db vacuum`": (ROOT, ROOT / "src", merged),
        }
        rounds = search_rounds(targets, args.rounds, args.queries, args.limit)
    print(f"{args.count:,} memories, {args.rounds} rounds; load average {os.getloadavg()}")
    print_table("corpus", rounds)


if __name__ == "__main__":
    main()
