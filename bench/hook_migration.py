"""A SessionStart hook on a database with a slow migration pending: the step applied inline by
the hook, against the step handed to a background migration (what hooks do on a database over
``hook_migrate_max_mb``).

    .venv/bin/python bench/hook_migration.py
    .venv/bin/python bench/hook_migration.py --memories 10000 --json

The database is the benchmark corpus of ``--memories`` memories (``bench/memory.py``, cached in
``bench/results``) with a random 384-float vector for each memory in the table m012 made, and
m025 (which moves those vectors into a table of ordinary rows) not applied: a home upgraded to
this version. For each mode a fresh copy, then, timed as whole processes run as ``cortex
install`` writes them (``bench/hooks.py``): a no-server SessionStart hook; the wait until m025
is applied; a second SessionStart. "inline" sets
``CORTEX_HOOK_MIGRATE_MAX_MB`` above the file's size (a hook migrates it, as every hook did
before the setting); "background" leaves the default (32 MB). Each time is also given as a
ratio to the floor (``python -c "import sqlite3"``) timed in the same run.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import hooks  # noqa: E402 - next to this file
import memory  # noqa: E402
from compare import floor_ms, parser  # noqa: E402

M025 = "m025_memory_embeddings_in_rows"


def before_m025(memories: int) -> Path:
    """The cached corpus of ``memories`` with a vector a memory in m012's table and m025 not
    applied (built once, next to the corpus)."""
    corpus, _ = memory.corpus(memories)
    path = corpus.with_name(f"{corpus.stem}-before-m025.db")
    if path.exists():
        return path
    from cortex.store.sqlite.migrations import m012_memory_embeddings

    building = path.with_suffix(".building")
    shutil.copyfile(corpus, building)
    conn = sqlite3.connect(building, isolation_level=None)
    try:
        conn.execute("BEGIN")
        conn.execute("DROP TABLE memory_embeddings")
        m012_memory_embeddings(conn)
        conn.execute(
            "INSERT INTO memory_embeddings SELECT seq, 'all-minilm-l6-v2-int8', 384, "
            "randomblob(1536) FROM memories"
        )
        conn.execute("DELETE FROM _cortex_migrations WHERE name = ?", (M025,))
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    building.rename(path)
    return path


def applied(db: Path) -> bool:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return (
            conn.execute("SELECT 1 FROM _cortex_migrations WHERE name = ?", (M025,)).fetchone()
            is not None
        )


def hook(home: Path, cwd: str, session: str, env: dict[str, str]) -> tuple[float, bool]:
    """(ms, recorded) of one SessionStart hook process, as ``cortex install`` writes it."""
    payload = {"session_id": session, "cwd": cwd, "hook_event_name": "SessionStart"}
    elapsed, _ = hooks.run_once({**payload, "source": "startup"}, env, cwd)
    with contextlib.closing(sqlite3.connect(home / "brain.db")) as conn:
        found = conn.execute("SELECT 1 FROM session_states WHERE id = ?", (session,)).fetchone()
    return elapsed, found is not None


def one_mode(source: Path, mode: str, root: Path, max_mb: float) -> dict[str, float | bool]:
    """The two hooks of ``mode`` (``inline`` or ``background``, under ``max_mb``)."""
    home = root / mode
    home.mkdir()
    shutil.copyfile(source, home / "brain.db")
    env = hooks.child_env(home, server=False)
    env["CORTEX_HOOK_MIGRATE_MAX_MB"] = "1000000" if mode == "inline" else str(max_mb)
    first, first_recorded = hook(home, str(root), "first", env)
    started = time.perf_counter()
    while not applied(home / "brain.db"):
        time.sleep(0.05)
    waited = (time.perf_counter() - started) * 1000
    second, second_recorded = hook(home, str(root), "second", env)
    log = home / "logs" / "hooks.log"
    deadline = time.monotonic() + 30  # (the migration's line follows its commit)
    while mode == "background" and not _logged(log) and time.monotonic() < deadline:
        time.sleep(0.05)
    return {
        "in_background": _logged(log),
        "first_hook_ms": round(first, 1),
        "first_recorded": first_recorded,
        "migration_left_ms": round(waited, 1),
        "second_hook_ms": round(second, 1),
        "second_recorded": second_recorded,
    }


def _logged(log: Path) -> bool:
    """Whether a background migration logged its line to ``log``."""
    return log.exists() and "background migration" in log.read_text()


def main() -> None:
    args_parser = parser(__doc__)
    args_parser.add_argument("--memories", type=int, default=100_000, help="corpus size")
    args_parser.add_argument(
        "--max-mb",
        type=float,
        default=32.0,
        help="hook_migrate_max_mb of the background mode (default: the setting's default)",
    )
    args_parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args_parser.add_argument(
        "--results", type=Path, default=memory.RESULTS, help="where corpora are cached"
    )
    args = args_parser.parse_args()
    memory.RESULTS = args.results
    print(f"building or reading the corpus of {args.memories:,} with vectors", file=sys.stderr)
    source = before_m025(args.memories)
    size_mb = source.stat().st_size / 2**20
    report: dict[str, object] = {
        "memories": args.memories,
        "database_mb": round(size_mb, 1),
        "max_mb": args.max_mb,
    }
    with tempfile.TemporaryDirectory(prefix="cortex-hook-migration-") as tmp:
        for mode in ("inline", "background"):
            print(f"{mode}: two SessionStart hooks on a copy", file=sys.stderr)
            report[mode] = one_mode(source, mode, Path(tmp), args.max_mb)
        floor = floor_ms()
    report["floor_ms"] = round(floor, 1)
    report["load_average"] = os.getloadavg()
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{args.memories:,} memories with vectors, {size_mb:,.0f} MB, m025 pending; "
          f"floor {floor:.1f} ms; load average {report['load_average'][0]:.2f}\n")  # fmt: skip
    print("| mode | first SessionStart | recorded | migration done after | second | recorded |")
    print("| --- | --- | --- | --- | --- | --- |")
    for mode in ("inline", "background"):
        row = report[mode]
        assert isinstance(row, dict)
        cells = [
            f"{row['first_hook_ms']:,.0f} ms ({row['first_hook_ms'] / floor:,.0f}x)",
            "yes" if row["first_recorded"] else "no",
            f"{row['migration_left_ms']:,.0f} ms more",
            f"{row['second_hook_ms']:,.0f} ms ({row['second_hook_ms'] / floor:.1f}x)",
            "yes" if row["second_recorded"] else "no",
        ]
        print(f"| {mode} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
