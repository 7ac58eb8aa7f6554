"""What the query fit costs a search at scale: on and off, interleaved, in one process.

    .venv/bin/python bench/memory.py --count 100000 --queries 300   # builds the store once
    .venv/bin/python bench/fit_cost.py --count 100000 --queries 1000 --rounds 2
    .venv/bin/python bench/fit_cost.py --count 100000 --queries 1000 --rounds 2 --dated

Over the store ``bench/memory.py`` built (``bench/results/memory-<count>.db``) and its
generated questions, each query is searched twice (limit 10, project scope), once with
``cortex.core.retrieval.query_fit`` and ``date_fit`` and once with both replaced by a
constant 1 (and no date looked for in the question), the order swapped every other query, so
that both see the same load; with ``--dated`` every question ends in " on May 7, 2026", so that
the date is parsed and checked against every candidate. Per round: wall-time p50 / p95,
each also as a ratio to the floor timed right after the round (a whole
``python -c "import sqlite3"`` process), the mean and p95 of the process's CPU time per
search (less disturbed by other jobs on a shared machine), and the share of queries whose
source memory is in the top 10. Writes ``bench/results/fit_cost.json``.

With ``--factor neighbours`` the two variants are the search with and without its
neighbour pass (``MemoryReader._neighboured``: the store's ``adjacent_memories`` and the
votes); ``--session-size N`` runs over a copy of the store whose memories were captured in
sessions of N consecutive memories (made once, ``memory-<count>-sessions<N>.db``), since the
generated memories name no session and the pass then costs nothing:

    .venv/bin/python bench/fit_cost.py --count 100000 --factor neighbours --session-size 40
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cortex.services.search as search_module  # noqa: E402
import memory  # noqa: E402 - bench/memory.py: the store and its queries
from compare import floor_ms  # noqa: E402
from cortex.core.memory_models import ScoredMemory  # noqa: E402
from cortex.core.retrieval import date_fit, query_dates, query_fit  # noqa: E402
from cortex.services.memory import MemoryService  # noqa: E402

FIT_ON = query_fit


def fit_off(terms: Sequence[str], when: bool, text: str) -> float:
    """The fit of a search without it: every candidate keeps its score."""
    return 1.0


def dates_off(query: str, now: object = None) -> None:
    """The dates of a question, for a search without the fit: none."""
    return None


FITS = {"on": (FIT_ON, query_dates, date_fit), "off": (fit_off, dates_off, date_fit)}
NEIGHBOURED = search_module.MemoryReader._neighboured
FACTOR = {"name": "fit"}
"""Which factor the variants switch: the query fit (``fit``) or the neighbour pass."""


def unneighboured(
    self: search_module.MemoryReader, hits: list[ScoredMemory], flt: object
) -> list[ScoredMemory]:
    """The neighbour pass of a search without it: the hits as they are."""
    return hits


def use(name: str) -> None:
    """Make the search use the ``name`` variant (``on`` / ``off``) of the chosen factor."""
    if FACTOR["name"] == "neighbours":
        pass_ = NEIGHBOURED if name == "on" else unneighboured
        search_module.MemoryReader._neighboured = pass_  # type: ignore[method-assign]
        return
    for attribute, value in zip(("query_fit", "query_dates", "date_fit"), FITS[name], strict=True):
        setattr(search_module, attribute, value)


def with_sessions(path: Path, size: int) -> Path:
    """A copy of the store at ``path`` whose memories were captured in sessions of ``size``
    consecutive memories (made once)."""
    copy = path.with_name(f"{path.stem}-sessions{size}.db")
    if not copy.exists():
        shutil.copyfile(path, copy)
        with sqlite3.connect(copy) as conn:
            conn.execute("UPDATE memories SET source_session_id = 'bench-' || (seq / ?)", (size,))
    return copy


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def one_round(service: MemoryService, calls: list[tuple[str, str, str]]) -> dict[str, object]:
    """Both variants over ``calls``, interleaved; their figures and this round's floor."""
    variants = list(FITS)
    wall: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    found = dict.fromkeys(variants, 0)
    for index, (query, project, source) in enumerate(calls):
        order = list(variants) if index % 2 == 0 else list(reversed(variants))
        for name in order:
            use(name)
            started, cpu_started = time.perf_counter(), time.process_time()
            hits = service.search(query, project=project, limit=10)
            cpu[name].append((time.process_time() - cpu_started) * 1000)
            wall[name].append((time.perf_counter() - started) * 1000)
            found[name] += source in {h.memory.id for h in hits}
    use("on")
    floor = floor_ms()
    out: dict[str, object] = {"floor_ms": round(floor, 2), "loadavg_1m": os.getloadavg()[0]}
    for name in variants:
        p50 = statistics.median(wall[name])
        out[name] = {
            "p50_ms": round(p50, 3),
            "p95_ms": round(p95(wall[name]), 3),
            "p50_x_floor": round(p50 / floor, 4),
            "p95_x_floor": round(p95(wall[name]) / floor, 4),
            "cpu_mean_ms": round(statistics.fmean(cpu[name]), 3),
            "cpu_p95_ms": round(p95(cpu[name]), 3),
            "source_in_top10": round(found[name] / len(calls), 3),
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000, help="the store's size")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dated", action="store_true", help="end each question in a date")
    parser.add_argument("--factor", choices=("fit", "neighbours"), default="fit")
    parser.add_argument(
        "--session-size", type=int, default=0, help="memories per session (0: as built)"
    )
    args = parser.parse_args(argv)
    FACTOR["name"] = args.factor
    path = memory.RESULTS / f"memory-{args.count}.db"
    if not path.exists():
        print(f"no {path}; build it with bench/memory.py --count {args.count}", file=sys.stderr)
        return 2
    if args.session_size:
        path = with_sessions(path, args.session_size)
    service = memory.open_service(path)
    calls = memory.queries(service, args.queries, random.Random(memory.SEED + 1))
    if args.dated:
        calls = [(f"{query} on May 7, 2026", project, source) for query, project, source in calls]
    for query, project, _ in calls[:50]:  # warm the cache
        service.search(query, project=project, limit=10)
    rounds = [one_round(service, calls) for _ in range(args.rounds)]
    service.store.close()
    name = f"{args.factor}_cost{'-dated' if args.dated else ''}.json"
    (memory.RESULTS / name).write_text(json.dumps(rounds, indent=2))
    print(json.dumps(rounds, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
