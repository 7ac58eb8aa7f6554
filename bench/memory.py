"""Long-term memory at scale: 1,000,000 memories in one SQLite file on disk.

    .venv/bin/python bench/memory.py               # builds bench/results/memory-1m.db once
    .venv/bin/python bench/memory.py --count 100000 --queries 200

Measures, in-process, with the database on disk:

- ``MemoryService.search`` (limit 10, a project plus global scope): p50 / p95;
- ``get_context`` with a 4,000-token budget (mode ``all``): p50 / p95;
- batch add with upsert (1,000 memories per ``add_many`` transaction, half of them replacing
  a live memory by ``upsert_key``): memories per second, on a copy of the database.

The corpus is synthetic (seeded): developer-session memories from 12 templates over 50
projects, with topic words drawn from a Zipf distribution over a 20,000-word vocabulary, so
that common words are common and queries hit documents at realistic frequencies. Queries are
natural-language questions around two or three topic words of a stored memory.
Writes ``bench/results/memory.json``.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import contextlib
import itertools
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from compare import floor_ms  # noqa: E402 - bench/compare.py, the shared floor
from cortex.clock import FixedClock  # noqa: E402
from cortex.config import load_config  # noqa: E402
from cortex.core.memory_models import MemoryFilter  # noqa: E402
from cortex.core.retrieval import fts_query, query_terms  # noqa: E402
from cortex.services.memory import MemoryService, NewMemory  # noqa: E402
from cortex.store import SQLiteStore  # noqa: E402
from cortex.store.sqlite.memories import filter_sql  # noqa: E402

RESULTS = ROOT / "bench" / "results"
SEED = 20261122
PROJECTS = [f"proj-{i:02d}" for i in range(50)]
TEMPLATES = [
    "Decided to use {a} for {b} in {p} because {c} was too slow",
    "Fixed a bug in {p} where {a} broke {b} under load",
    "The {a} service of {p} talks to {b} through {c}",
    "Remember: {a} needs {b} configured before {c} starts",
    "User prefers {a} over {b} when working on {c}",
    "Deploy of {p} failed: {a} timed out waiting for {b}",
    "{a} and {b} share the {c} cache in {p}",
    "Rotated the {a} credentials; {b} reads them from {c}",
    "Benchmark: {a} is twice as fast as {b} for {c}",
    "Open question in {p}: should {a} own {b} or {c}",
    "Migrated {a} from {b} to {c} last sprint",
    "Pairing note: {a} explains the {b} quirk in {c}",
]
SYLLABLES = "ka lo mi nu pe ra si tu vo xe za bri cho dre fla gro ple qua sti tro".split()
NL_WRAPPERS = [
    "what did we decide about {w}?",
    "any problems with {w} recently?",
    "how does {w} work in this project",
    "{w}",
    "remind me about {w} and the setup",
]


def vocabulary(size: int, rng: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def zipf_sampler(words: list[str], rng: random.Random, s: float = 1.05):  # type: ignore[no-untyped-def]
    cumulative = list(itertools.accumulate(1.0 / (rank**s) for rank in range(1, len(words) + 1)))
    total = cumulative[-1]
    return lambda: words[bisect.bisect_left(cumulative, rng.random() * total)]


def make_memories(count: int, rng: random.Random) -> list[NewMemory]:
    draw = zipf_sampler(vocabulary(20_000, rng), rng)
    out = []
    for i in range(count):
        project = rng.choice(PROJECTS)
        text = rng.choice(TEMPLATES).format(a=draw(), b=draw(), c=draw(), p=project)
        roll = rng.random()
        layer = "rule" if roll < 0.002 else ("working" if roll < 0.05 else "long_term")
        scoped = rng.random() < 0.8
        out.append(
            NewMemory(
                text,
                layer=layer,
                project=project if scoped else None,
                tags=[draw()] if rng.random() < 0.3 else None,
                upsert_key=f"k{i}" if rng.random() < 0.1 else None,
                confidence=round(rng.uniform(0.5, 1.0), 2),
            )
        )
    return out


def build(path: Path, count: int) -> float:
    """Fill a new database through the service in 10,000-memory transactions; seconds."""
    rng = random.Random(SEED)
    service = open_service(path)
    started = time.perf_counter()
    for start in range(0, count, 10_000):
        service.add_many(make_memories(min(10_000, count - start), rng), actor="bench")
        if start % 100_000 == 0:
            print(f"  built {min(count, start + 10_000):,}", file=sys.stderr)
    elapsed = time.perf_counter() - started
    service.store.close()
    return elapsed


def open_service(path: Path) -> MemoryService:
    config = load_config(RESULTS / "home", {})
    return MemoryService(SQLiteStore(path), config, FixedClock("2026-02-16T09:00:00Z"))


def queries(service: MemoryService, n: int, rng: random.Random) -> list[tuple[str, str, str]]:
    """(query, project, source memory id) around the words of randomly chosen memories."""
    store = service.store
    assert isinstance(store, SQLiteStore)
    top = store.connection.execute("SELECT max(seq) FROM memories").fetchone()[0]
    out = []
    while len(out) < n:
        row = store.connection.execute(
            "SELECT content, project_id, id FROM memories WHERE seq = ? AND deleted_at IS NULL "
            "AND superseded_at IS NULL AND memory_layer = 'long_term'",
            (rng.randint(1, top),),
        ).fetchone()
        if row is None:
            continue
        words = [w for w in row[0].replace(":", " ").split() if w.isalpha() and len(w) > 3]
        picked = " and ".join(rng.sample(words, min(len(words), rng.randint(2, 3))))
        query = rng.choice(NL_WRAPPERS).format(w=picked)
        out.append((query, row[1] or rng.choice(PROJECTS), row[2]))
    return out


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 3),
        "max_ms": round(ordered[-1], 3),
    }


def timed(calls: list[tuple[str, str, str]], run) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for query, project, _ in calls:
        started = time.perf_counter()
        run(query, project)
        out.append((time.perf_counter() - started) * 1000)
    return out


def live_keys(path: Path) -> list[tuple[str, str]]:
    """The (project, upsert key) pairs of the live long-term project memories in the database at
    ``path``, in a stable order: what a batch's upserts name, so that each one replaces a live
    memory (a key that names none is a plain insert with a key lookup)."""
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT project_id, upsert_key FROM memories WHERE upsert_key IS NOT NULL"
            " AND superseded_by IS NULL AND deleted_at IS NULL"
            " AND memory_layer = 'long_term' AND scope = 'project' ORDER BY seq"
        ).fetchall()
    db.close()
    return [(project, key) for project, key in rows]


def write_rate(path: Path, batches: int, rng: random.Random) -> float:
    """Memories/s of ``add_many`` batches of 1,000, half replacing live memories by key."""
    return write_rates(path, batches, rng)[0]


def write_rates(
    path: Path, batches: int, rng: random.Random, *, replacing: bool = True
) -> tuple[float, float]:
    """``write_rate``, and the same per second of this process's CPU time (what a machine
    shared with other work inflates least), on a copy of the database at ``path``.

    Half of each batch carries an upsert key. With ``replacing`` each of those keys names a
    live memory, which the new one supersedes (an update of the old row, its index entries and
    a link, besides the insert); without it the keys are drawn from ``k0``-``k99999``, as the
    speed goal's first measurement drew them, and most name no live memory of that project
    (a key lookup, then a plain insert).

    The copy is flushed to disk before the clock starts: otherwise the first checkpoint's
    ``fdatasync`` writes back the whole fresh copy (500 MB at 1,000,000 stored, about 20 ms a
    batch over ten batches), a cost of the benchmark, not of ingest. The clock ends after a
    last checkpoint has moved what the batches left in the write-ahead log into the database:
    a commit checkpoints only past a number of pages in the log, and the work it leaves to a
    later one is the ingest's too."""
    total, elapsed, cpu = 0, 0.0, 0.0
    with scratch_copy(path, "write", flushed=True) as (service, live):
        for _ in range(batches):
            items = upsert_batch(live, rng, replacing=replacing)
            started, cpu_started = time.perf_counter(), time.process_time()
            results = service.add_many(items, actor="bench")
            elapsed += time.perf_counter() - started
            cpu += time.process_time() - cpu_started
            total += len(results)
        started, cpu_started = time.perf_counter(), time.process_time()
        service.store.checkpoint()
        elapsed += time.perf_counter() - started
        cpu += time.process_time() - cpu_started
    return total / elapsed, total / cpu


@contextlib.contextmanager
def scratch_copy(
    path: Path, tag: str, *, flushed: bool = False
) -> Iterator[tuple[MemoryService, list[tuple[str, str]]]]:
    """A service over a copy of the database at ``path`` (``flushed``: on disk before it is
    used) and the copy's live upsert keys; the copy is deleted afterwards."""
    copy = path.with_name(f"{path.stem}-{tag}.db")
    shutil.copyfile(path, copy)
    if flushed:
        with copy.open("rb") as data:
            os.fsync(data.fileno())
    live = live_keys(copy)
    service = open_service(copy)
    try:
        yield service, live
    finally:
        service.store.close()
        for suffix in ("", "-wal", "-shm"):
            Path(str(copy) + suffix).unlink(missing_ok=True)


def upsert_batch(
    live: list[tuple[str, str]], rng: random.Random, *, replacing: bool = True
) -> list[NewMemory]:
    """1,000 new memories, every other one with an upsert key: with ``replacing`` a key of
    ``live`` each (it replaces that memory), else one drawn from ``k0``-``k99999``."""
    items = make_memories(1000, rng)
    if replacing:
        named = rng.sample(live, min(len(live), len(items) // 2))
    else:
        named = [(m.project, f"k{rng.randrange(100_000)}") for m in items[::2]]
    for i, (project, key) in enumerate(named):
        items[2 * i] = NewMemory(items[2 * i].content, project=project, upsert_key=key)
    return items


def write_pages(path: Path, batches: int, rng: random.Random) -> dict[str, float]:
    """The pages a replacing batch (``write_rates``'s) writes to the write-ahead log, by the
    b-tree each was part of before the batch (``dbstat``; ``(new)``: past the file's end),
    averaged over ``batches``, on a copy of the database at ``path``: the log is emptied
    before each batch and this connection makes no checkpoint, so each page the batch
    dirtied is one log frame or more, counted once. Every one of them is written again, at
    random, by the checkpoint that follows."""
    counts: collections.Counter[str] = collections.Counter()
    with scratch_copy(path, "pages") as (service, live):
        store = service.store
        assert isinstance(store, SQLiteStore)
        wal = Path(f"{store.url}-wal")
        store.connection.execute("PRAGMA wal_autocheckpoint = 0")
        for _ in range(batches):
            store.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            owner = dict(store.connection.execute("SELECT pageno, name FROM dbstat"))
            service.add_many(upsert_batch(live, rng), actor="bench")
            counts.update(owner.get(page, "(new)") for page in log_pages(wal))
    return {name: n / batches for name, n in counts.most_common()}


def log_pages(wal: Path) -> set[int]:
    """The page numbers a write-ahead log holds frames of (its 32-byte header, then frames
    of a 24-byte header, whose first four bytes are the page number, and a page)."""
    data = wal.read_bytes()
    page_size = int.from_bytes(data[8:12], "big")
    return {
        int.from_bytes(data[at : at + 4], "big") for at in range(32, len(data) - 23, 24 + page_size)
    }


def corpus(count: int) -> tuple[Path, float | None]:
    """The cached database of ``count`` memories (built on first use); its path and the
    seconds the build took now (None when it was cached)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"memory-{count}.db"
    return path, None if path.exists() else build(path, count)


def exact_top(store: SQLiteStore, terms: list[str], flt: MemoryFilter, now: str, k: int):  # type: ignore[no-untyped-def]
    """The ``k`` best memories ``flt`` sees by FTS5's ``bm25`` over every term, as
    {seq: bm25}: FTS5 ranks every match (tens to hundreds of milliseconds at a million)."""
    where, params = filter_sql(flt, now)
    rows = store.connection.execute(
        "SELECT f.rowid, f.rank FROM memories_fts f JOIN memories m ON m.seq = f.rowid "
        f"WHERE memories_fts MATCH ? AND {where} ORDER BY f.rank LIMIT ?",
        (fts_query(terms), *params, k),
    ).fetchall()
    return {int(seq): float(score) for seq, score in rows}


def ranking_quality(service: MemoryService, calls: list[tuple[str, str, str]]) -> dict[str, float]:
    """How close the store's top 10 is to the exact top 10 (FTS5 ranking every match by
    ``bm25`` over every query term), over ``calls``:

    - ``exact_top10_recall``: the share of the exact top 10 the search found, ties counted
      (a memory that scores as well as the exact 10th is as good as it);
    - ``exact_top10_queries``: the share of queries whose top 10 is an exact top 10;
    - ``exact_top10_score_share``: the summed ``bm25`` of the search's top 10 over that of
      the exact top 10 (1.0: as good; a near miss, a memory a token longer, costs little)."""
    store = service.store
    assert isinstance(store, SQLiteStore)
    now = service.now_iso()
    found = wanted = exact_queries = asked = 0
    share = 0.0
    for query, project, _ in calls:
        terms = query_terms(query)
        flt = service.scope_filter(project=project)
        exact = exact_top(store, terms, flt, now, 10)
        if not exact:
            continue
        asked += 1
        ids = [m.id for m, _ in store.search_memories(terms, flt, now, limit=10)][:10]
        seqs = [
            int(r[0])
            for r in store.connection.execute(
                f"SELECT seq FROM memories WHERE id IN ({','.join('?' * len(ids))})", ids
            )
        ]
        scores = dict(
            store.connection.execute(
                "SELECT rowid, bm25(memories_fts, 1.0, 0.5) FROM memories_fts WHERE "
                f"memories_fts MATCH ? AND rowid IN ({','.join('?' * len(seqs))})",
                (fts_query(terms), *seqs),
            ).fetchall()
        )
        tenth = max(exact.values())
        share += sum(scores.get(seq, 0.0) for seq in seqs) / sum(exact.values())
        good = sum(1 for seq in seqs if scores.get(seq, 0.0) <= tenth + 1e-9)
        found += min(good, len(exact))
        wanted += len(exact)
        exact_queries += good >= len(exact)
    return {
        "exact_top10_recall": round(found / max(wanted, 1), 3),
        "exact_top10_queries": round(exact_queries / max(asked, 1), 3),
        "exact_top10_score_share": round(share / max(asked, 1), 3),
    }


def warm_file(path: Path) -> None:
    """Read the database file once, so that it sits in the OS page cache as a database in use
    does: the first queries after a cold boot (or a test suite that evicted it) read the disk,
    and a 1,000,000-memory file is 500 MB."""
    with path.open("rb") as data:
        while data.read(1 << 20):
            pass


def measure(
    count: int, n_queries: int, batches: int, quality_queries: int = 100
) -> dict[str, object]:
    """Search and context p50/p95 over ``count`` memories, recall of the source memory, how
    close the first ``quality_queries`` queries' top 10 is to the exact one
    (``ranking_quality``), and the batch add rate (``write_rate``); no floor."""
    path, build_seconds = corpus(count)
    warm_file(path)
    rng = random.Random(SEED + 1)
    service = open_service(path)
    calls = queries(service, n_queries, rng)
    timed(calls[:50], lambda q, p: service.search(q, project=p, limit=10))  # warm the cache
    search = timed(calls, lambda q, p: service.search(q, project=p, limit=10))
    context = timed(
        calls, lambda q, p: service.get_context(q, project=p, budget_tokens=4000, mode="all")
    )
    found = sum(
        1 for q, p, source in calls if source in {h.memory.id for h in service.search(q, project=p)}
    )
    quality = ranking_quality(service, calls[:quality_queries])
    service.store.close()
    wall, cpu = write_rates(path, batches, rng)
    new_wall, new_cpu = write_rates(path, batches, rng, replacing=False)
    return {
        "memories": count,
        "db_bytes": path.stat().st_size,
        "build_seconds": build_seconds,
        "search_limit10": percentiles(search),
        "get_context_4000": percentiles(context),
        "source_memory_in_top10": round(found / len(calls), 3),
        **quality,
        "quality_queries": min(quality_queries, len(calls)),
        "add_with_upsert_per_second": round(wall),
        "add_with_upsert_per_cpu_second": round(cpu),
        "add_with_new_keys_per_second": round(new_wall),
        "add_with_new_keys_per_cpu_second": round(new_cpu),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description="1M-memory search/context/add benchmark")
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument(
        "--quality-queries",
        type=int,
        default=100,
        help="queries whose top 10 is compared with the exact bm25 top 10 (each ranks "
        "every match: about a second per query at 1,000,000 memories)",
    )
    args = parser.parse_args()
    report = measure(args.count, args.queries, args.batches, args.quality_queries)
    # The floor of this run: a whole `python -c "import sqlite3"` process (bench/compare.py).
    floor = floor_ms()
    report["floor_ms"] = round(floor, 2)
    for key in ("search_limit10", "get_context_4000"):
        row = report[key]
        assert isinstance(row, dict)
        row["p95_x_floor"] = round(row["p95_ms"] / floor, 4)
    report["loadavg_1m"] = round(os.getloadavg()[0], 2)
    (RESULTS / "memory.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
