"""The speed table in one run: every row of docs/benchmarks.md's table, floor included.

    .venv/bin/python bench/table.py                 # full sizes (the 1M corpus is cached)
    .venv/bin/python bench/table.py --quick         # laptop smoke run: small sizes, few runs
    .venv/bin/python bench/table.py --json --out bench/results/table.json
    .venv/bin/python bench/table.py --skip ingest --skip memory-search-1m

The floor is a whole ``python -c "import sqlite3"`` process of this virtualenv
(``bench/compare.py``'s ``floor_ms``, a median of several), timed at the start, before each
step and at the end: each row is divided by the floor timed just before it (the load of a
shared machine drifts within a run), and the floor row shows the median of all of them. The
four process rows (the two hooks, ``cortex session start``, ``cortex memory search``) are
divided by the median of floor processes timed between their samples, one before each
process. Process rows are medians of whole processes; in-process rows are compared with the same
floor (a restore's CPU time against the time of the floor process, say); the hook server's
resident memory is compared with the RSS of the floor process held open. Each row reuses its
benchmark's own code: ``bench/hooks.py``, ``bench/core.py``, ``bench/memory.py`` and
``bench/hook_server_rss.py``.

Progress goes to stderr (a live bar on a terminal, plain lines otherwise); the markdown table
(or, with ``--json``, the whole report) goes to stdout, and ``--out`` writes the report as
JSON. Corpora are cached in bench/results/ (git-ignored): the memory databases of
``bench/memory.py`` and the stored-session databases made here.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import core  # noqa: E402 - the bench modules next to this file
import hook_server_rss  # noqa: E402
import hooks  # noqa: E402
import memory  # noqa: E402
from compare import floor_ms  # noqa: E402

RESULTS = BENCH / "results"


@dataclass(frozen=True)
class Sizes:
    sessions: int  # stored sessions for the hook and session-start rows
    restore_stored: int  # stored sessions for the restore wall-time row
    search_memories: int  # memories behind the `cortex memory search` process
    memories: int  # memories for in-process search and batch ingest
    queries: int
    batches: int  # add_many batches of 1,000
    runs: int  # processes per process row
    restore_runs: int
    events: int  # hook server events before reading its RSS
    floor_runs: int


FULL = Sizes(10_000, 100_000, 100_000, 1_000_000, 500, 10, 30, 200, 1000, 20)
QUICK = Sizes(2_000, 10_000, 10_000, 10_000, 100, 3, 8, 50, 300, 10)


@dataclass(frozen=True)
class Row:
    """One row of the table: how it is measured, its goal, and how its value compares with
    the floor (``per_floor`` turns the value into the quantity divided by the floor)."""

    key: str
    path: str
    unit: str
    goal: str
    met: Callable[[float, float, dict[str, Any]], bool]  # (value, ratio, figures) -> met
    compared_with: str
    per_floor: Callable[[float], float] = float


ROWS = (
    Row(
        "hook-server",
        "`cortex hook claude-code` SessionStart, hook server up, {sessions:,} sessions stored",
        "ms",
        "<= 1.0x",
        lambda v, r, f: r <= 1.0,
        "floor process time",
    ),
    Row(
        "hook-no-server",
        "same, no hook server (server disabled, the engine imported)",
        "ms",
        "<= 2.0x",
        lambda v, r, f: r <= 2.0,
        "floor process time",
    ),
    Row(
        "session-start",
        "`cortex session start` process, {sessions:,} sessions stored",
        "ms",
        "<= 2.5x",
        lambda v, r, f: r <= 2.5,
        "floor process time",
    ),
    Row(
        "memory-search-process",
        "`cortex memory search` process, {search_memories:,} memories",
        "ms",
        "<= 2.5x",
        lambda v, r, f: r <= 2.5,
        "floor process time",
    ),
    Row(
        "restore-cpu",
        "restore in-process, 50 sessions in the window, {sessions:,} stored (CPU)",
        "ms CPU",
        "<= 3 ms CPU",
        lambda v, r, f: v <= 3.0,
        "floor process time",
    ),
    Row(
        "restore-stored",
        "restore in-process, 50 in the window, {restore_stored:,} stored (wall)",
        "ms",
        "<= 10 ms",
        lambda v, r, f: v <= 10.0,
        "floor process time",
    ),
    Row(
        "memory-search-1m",
        "memory search p95 in-process, {memories:,} memories (limit 10)",
        "ms",
        "<= 8 ms, no query term left out of the ranking",
        # every candidate is scored by every query term (store/sqlite/bm25.py): the figures
        # say how close its top 10 comes to FTS5 ranking every match
        lambda v, r, f: v <= 8.0,
        "floor process time",
    ),
    *(
        Row(
            key,
            path,
            "memories/s",
            ">= 15,000/s",
            lambda v, r, f: v >= 15_000,
            "time of 1,000 memories vs floor process time",
            lambda v: 1000 / v * 1000,
        )
        for key, path in (
            (
                "ingest",
                "batch ingest (`add_many` of 1,000, half upserts with keys drawn at random), "
                "{search_memories:,} stored",
            ),
            ("ingest-1m", "same, {memories:,} stored"),
            (
                "ingest-replacing",
                "batch ingest, half of each batch replacing a live memory by key, "
                "{search_memories:,} stored",
            ),
            ("ingest-replacing-1m", "same, {memories:,} stored"),
        )
    ),
    Row(
        "server-rss",
        "hook server resident memory after {events:,} events",
        "MiB",
        "<= 20 MB (19.07 MiB)",
        lambda v, r, f: v <= 20e6 / 2**20,
        "RSS of the floor process",
    ),
)
ROW_KEYS = tuple(row.key for row in ROWS)
ONE_MILLION = ("memory-search-1m", "ingest-1m", "ingest-replacing-1m")
"""The rows one step measures (``bench/memory.py``'s ``measure`` over the large corpus)."""


class Progress:
    """Steps on stderr: a rich progress bar on a terminal, one plain line a step otherwise."""

    def __init__(self, total: int) -> None:
        from rich.console import Console

        self.console = Console(stderr=True)
        self.total, self.done = total, 0
        self.bar: Any = None
        if self.console.is_terminal:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total}"),
                TimeElapsedColumn(),
                console=self.console,
            )
            self.bar.start()
            self.task = self.bar.add_task("starting", total=total)

    def step(self, what: str) -> None:
        if self.bar is not None:
            self.bar.update(self.task, description=what, completed=self.done)
        else:
            print(f"[{self.done + 1}/{self.total}] {what}", file=sys.stderr, flush=True)
        self.done += 1

    def close(self) -> None:
        if self.bar is not None:
            self.bar.update(self.task, description="done", completed=self.total)
            self.bar.stop()


def use_results(path: Path) -> None:
    """Cache corpora (and this module's session databases) under ``path``."""
    global RESULTS
    RESULTS = memory.RESULTS = path


def machine() -> dict[str, object]:
    model = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model or platform.processor() or platform.machine(),
        "system": platform.platform(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
    }


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def sessions_home(root: Path, count: int) -> Path:
    """A home holding ``count`` stored sessions (50 of them in the restore window), copied
    from a cached database made once with ``core.populate``."""
    cached = RESULTS / f"sessions-{count}.db"
    if not cached.exists():
        RESULTS.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(cached.name + ".building")
        partial.unlink(missing_ok=True)
        core.populate(partial, count, 50)
        partial.rename(cached)
    home = root / f"sessions-{count}"
    home.mkdir()
    shutil.copyfile(cached, home / "brain.db")
    return home


def memory_home(root: Path, count: int) -> tuple[Path, str, str]:
    """A home holding the cached ``count``-memory corpus, and a query around the words of
    one of its memories with that memory's project."""
    path, _ = memory.corpus(count)
    home = root / f"memories-{count}"
    home.mkdir()
    shutil.copyfile(path, home / "brain.db")
    service = memory.open_service(home / "brain.db")
    query, project, _ = memory.queries(service, 1, random.Random(memory.SEED + 2))[0]
    service.store.close()
    return home, query, project


def process(figures: dict[str, float]) -> dict[str, Any]:
    """A process row's figures: its median wall time is the value (the CPU time ``timed``
    reports is this process's own, not the child's, so it is left out)."""
    figures = {k: v for k, v in figures.items() if k != "cpu_median_ms"}
    return {**figures, "value": figures["median_ms"]}


def measure(
    sizes: Sizes, skip: set[str], progress: Progress, step_floors: list[float]
) -> dict[str, dict[str, Any]]:
    """{row key: raw figures} for every row not in ``skip``, each with the floor timed just
    before its step (``floor_ms``, also appended to ``step_floors``): the load of a shared
    machine drifts within a run."""
    out: dict[str, dict[str, Any]] = {}
    floors: dict[str, float] = {}

    def step(what: str, *keys: str) -> None:
        progress.step(what)
        step_floors.append(floor_ms(sizes.floor_runs))
        floors.update(dict.fromkeys(keys, step_floors[-1]))

    wanted = [key for key in ROW_KEYS if key not in skip]
    with tempfile.TemporaryDirectory(prefix="cortex-table-") as tmp:
        root = Path(tmp)
        if "hook-server" in wanted or "hook-no-server" in wanted:
            cwd = hooks.make_repo(root)
            for key, mode in (("hook-server", "server"), ("hook-no-server", "in-process")):
                if key in wanted:
                    step(f"{key}: {sizes.sessions:,} sessions, {sizes.runs} hooks", key)
                    rows = hooks.bench_mode(
                        root, cwd, mode, sizes.sessions, sizes.runs, ("SessionStart",), floor=True
                    )
                    out[key] = dict(rows["SessionStart"])
                    out[key]["value"] = out[key]["median_ms"]
                    # Divided by the floor processes timed between its samples: a whole
                    # process swings with the load far more than within a step.
                    floors[key] = float(out[key]["floor_ms"] or floors[key])
        if {"session-start", "restore-cpu"} & set(wanted):
            home = sessions_home(root, sizes.sessions)
            if "session-start" in wanted:
                step(
                    f"session-start: {sizes.runs} `cortex session start` processes", "session-start"
                )
                out["session-start"] = process(core.whole_process(home, sizes.runs, floor=True))
                floors["session-start"] = out["session-start"]["floor_ms"]
            if "restore-cpu" in wanted:
                step(f"restore-cpu: {sizes.restore_runs} restores in-process", "restore-cpu")
                manager = core.open_manager(home)
                out["restore-cpu"] = core.restore(manager, sizes.restore_runs)
                out["restore-cpu"]["value"] = out["restore-cpu"]["cpu_median_ms"]
                manager.store.close()
        if "restore-stored" in wanted:
            step(f"restore-stored: {sizes.restore_stored:,} stored sessions", "restore-stored")
            manager = core.open_manager(sessions_home(root, sizes.restore_stored))
            out["restore-stored"] = core.restore(manager, sizes.restore_runs)
            out["restore-stored"]["value"] = out["restore-stored"]["median_ms"]
            manager.store.close()
        if "memory-search-process" in wanted:
            step(
                f"memory-search-process: {sizes.search_memories:,} memories",
                "memory-search-process",
            )
            home, query, project = memory_home(root, sizes.search_memories)
            figures = core.whole_process(
                home,
                sizes.runs,
                lambda i: ["memory", "search", query, "--project", project],
                floor=True,
            )
            out["memory-search-process"] = {**process(figures), "query": query}
            floors["memory-search-process"] = figures["floor_ms"]
        for key, replacing in (("ingest", False), ("ingest-replacing", True)):
            if key not in wanted:
                continue
            step(f"{key}: {sizes.batches} batches into {sizes.search_memories:,}", key)
            path, _ = memory.corpus(sizes.search_memories)
            rate, cpu = memory.write_rates(
                path, sizes.batches, random.Random(memory.SEED + 3), replacing=replacing
            )
            out[key] = {"value": rate, "per_cpu_second": round(cpu), "batches": sizes.batches}
        if set(ONE_MILLION) & set(wanted):
            step(f"memory: search and ingest over {sizes.memories:,}", *ONE_MILLION)
            report = memory.measure(sizes.memories, sizes.queries, sizes.batches)
            search = report["search_limit10"]
            assert isinstance(search, dict)
            if "memory-search-1m" in wanted:
                out["memory-search-1m"] = {**search, "value": search["p95_ms"]}
                for name in (
                    "source_memory_in_top10",
                    "exact_top10_recall",
                    "exact_top10_queries",
                    "exact_top10_score_share",
                    "quality_queries",
                ):
                    out["memory-search-1m"][name] = report[name]
            for key, figure in (("ingest-1m", "new_keys"), ("ingest-replacing-1m", "upsert")):
                if key in wanted:
                    out[key] = {
                        "value": report[f"add_with_{figure}_per_second"],
                        "per_cpu_second": report[f"add_with_{figure}_per_cpu_second"],
                        "batches": sizes.batches,
                    }
        if "server-rss" in wanted:
            step(f"server-rss: a hook server through {sizes.events:,} events", "server-rss")
            rss = hook_server_rss.measure(sizes.events, progress=False)
            out["server-rss"] = {**rss, "value": rss["after_mib"]}
    for key, figures in out.items():
        figures["floor_ms"] = round(floors[key], 2)
    return out


def report(
    sizes: Sizes, raw: dict[str, dict[str, Any]], floors: list[float], floor_rss: float
) -> dict[str, Any]:
    """Rows with value, ratio to the floor and whether the goal is met."""
    floor = statistics.median(floors)
    rows = []
    for row in ROWS:
        if row.key not in raw:
            continue
        figures = raw[row.key]
        value = float(figures.pop("value"))
        base = floor_rss if row.key == "server-rss" else figures["floor_ms"]
        ratio = row.per_floor(value) / base
        rows.append(
            {
                "key": row.key,
                "path": row.path.format(**vars(sizes)),
                "value": round(value, 3),
                "unit": row.unit,
                "x_floor": round(ratio, 3),
                "compared_with": row.compared_with,
                "goal": row.goal,
                "met": row.met(value, ratio, figures),
                "figures": figures,
            }
        )
    return {
        "floor": {
            "command": f"{sys.executable} -c 'import sqlite3'",
            "median_ms": round(floor, 2),
            "samples_ms": [round(f, 2) for f in floors],
            "rss_mib": round(floor_rss, 1),
        },
        "rows": rows,
    }


def markdown(result: dict[str, Any]) -> str:
    floor = result["floor"]
    m = result["machine"]
    before, after = result["loadavg_before"], result["loadavg_after"]
    lines = [
        f"{m['cpus']} CPUs ({m['cpu_model']}), Python {m['python']}, SQLite {m['sqlite']}; "
        f"load average {before[0]:.2f} before, {after[0]:.2f} after"
        f"{' (--quick sizes)' if result['quick'] else ''}.",
        "",
        "| path | value | floor | x floor | goal | met |",
        "| --- | --- | --- | --- | --- | --- |",
        f'| floor: a whole `python -c "import sqlite3"` process (median of '
        f"{len(floor['samples_ms'])} timings) | {floor['median_ms']:.1f} ms, "
        f"{floor['rss_mib']:.1f} MiB RSS | | 1.0x | | |",
    ]
    for row in result["rows"]:
        if row["key"] == "server-rss":
            base = f"{floor['rss_mib']:.1f} MiB RSS"
        else:
            base = f"{row['figures']['floor_ms']:.1f} ms"
        value = f"{row['value']:,.0f}" if row["value"] >= 1000 else f"{row['value']:.2f}"
        value = f"{value} {row['unit']}"
        if "per_cpu_second" in row["figures"]:
            value += f" ({row['figures']['per_cpu_second']:,} per CPU second)"
        recall = row["figures"].get("exact_top10_recall")
        if recall is not None:
            value += f" (every term scored; {recall:.0%} of the exact bm25 top 10 found)"
        lines.append(
            f"| {row['path']} | {value} | {base} | {row['x_floor']:.2f}x "
            f"({row['compared_with']}) | {row['goal']} | {'met' if row['met'] else 'missed'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").splitlines()[0],
        epilog="Example: .venv/bin/python bench/table.py --quick --skip server-rss",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--quick", action="store_true", help="small sizes, fewer samples")
    parser.add_argument("--out", type=Path, help="also write the JSON report to this file")
    parser.add_argument(
        "--skip", action="append", default=[], choices=ROW_KEYS, metavar="ROW",
        help=f"leave a row out (repeatable): {', '.join(ROW_KEYS)}",
    )  # fmt: skip
    parser.add_argument(
        "--results", type=Path, default=RESULTS, help="where corpora are cached (bench/results)"
    )
    parser.add_argument("--sizes", help=argparse.SUPPRESS)  # JSON overrides, for the tests
    args = parser.parse_args(argv)
    use_results(args.results)
    sizes = QUICK if args.quick else FULL
    if args.sizes:
        sizes = Sizes(**{**vars(sizes), **json.loads(args.sizes)})
    skip = set(args.skip)
    wanted = [key for key in ROW_KEYS if key not in skip]
    shared = len(set(ONE_MILLION) & set(wanted))  # one step measures them all
    progress = Progress(2 + len(wanted) - max(shared - 1, 0))
    started, load_before = time.perf_counter(), loadavg()
    try:
        progress.step(f"floor: {sizes.floor_runs} `python -c 'import sqlite3'` processes")
        floors = [floor_ms(sizes.floor_runs)]
        raw = measure(sizes, skip, progress, floors)
        progress.step("floor again, and its resident memory")
        floors.append(floor_ms(sizes.floor_runs))
        floor_rss = hook_server_rss.floor_mib()
    finally:
        progress.close()
    result = {
        "command": " ".join(["bench/table.py", *(argv if argv is not None else sys.argv[1:])]),
        "quick": args.quick,
        "sizes": vars(sizes),
        "machine": machine(),
        "loadavg_before": load_before,
        "loadavg_after": loadavg(),
        "seconds": round(time.perf_counter() - started, 1),
        **report(sizes, raw, floors, floor_rss),
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2) if args.json else markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
