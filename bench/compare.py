"""Before and after, in one run: the hook and restore benchmarks on an older commit and on this
checkout, interleaved, each figure also as a ratio to a floor timed in the same run.

Run: ``.venv/bin/python bench/compare.py --rev f69c8b9~1`` (``--rounds N``, ``--runs N``,
``--sessions N``). The older commit is extracted with ``git archive`` into a temporary
directory; each round runs that tree's own ``bench/hooks.py`` and ``bench/core.py --quick``
with ``PYTHONPATH`` pointing at its ``src``, then this checkout's, so both see the same load.
The floor is a whole ``python -c "import sqlite3"`` process of this virtualenv, timed before
each benchmark. Prints a table and writes bench/results/compare.json.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
DATA = ROOT.parent / "shared" / "data"
"""The benchmark data (LoCoMo, LongMemEval) beside the checkout; scripts take ``--data``."""
RESTORE = "restore (on_session_start)"
# (label, benchmark file, key path into its results JSON)
FIGURES = (
    ("hook SessionStart, hook server", "hooks", ("server", "SessionStart", "median_ms")),
    ("hook UserPromptSubmit, hook server", "hooks", ("server", "UserPromptSubmit", "median_ms")),
    ("hook PostToolUse, hook server", "hooks", ("server", "PostToolUse", "median_ms")),
    ("hook SessionStart, in-process", "hooks", ("in-process", "SessionStart", "median_ms")),
    ("restore in-process, 10,000 stored", "core", ("10,000 stored", RESTORE, "median_ms")),
    ("restore CPU in-process, 10,000 stored", "core", ("10,000 stored", RESTORE, "cpu_median_ms")),
    ("turn capture in-process", "core", ("10,000 stored", "turn capture (record)", "median_ms")),
    (
        "whole `cortex session start`",
        "core",
        ("10,000 stored", "whole `cortex session start` process", "median_ms"),
    ),
)


def parser(doc: str | None) -> argparse.ArgumentParser:
    """A bench script's parser: its docstring's first paragraph as the description, and the
    docstring's indented command lines as examples under the options."""
    paragraphs = (doc or "").strip().split("\n\n")
    examples = [line.strip() for line in (doc or "").splitlines() if line.startswith("    .")]
    return argparse.ArgumentParser(
        description=" ".join(paragraphs[0].split()),
        epilog="Examples:\n  " + "\n  ".join(examples) if examples else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def compare_parser(doc: str | None, rounds: int) -> argparse.ArgumentParser:
    """``parser`` with the options of a before-and-after script: ``--rev``, the older commit,
    and ``--rounds``, each tree timed once a round."""
    made = parser(doc)
    made.add_argument("--rev", required=True, help="the older commit, e.g. HEAD~3")
    made.add_argument("--rounds", type=int, default=rounds, help="rounds of samples")
    return made


def extract(rev: str, into: Path) -> Path:
    """The tree of ``rev`` (committed files only) under ``into``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev], capture_output=True, check=True
    ).stdout
    tar_path = into / "tree.tar"
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into / "tree", filter="data")
    script_entry(into / "tree" / "src")
    return into / "tree"


UNDO = {"m025_memory_embeddings_in_rows": ("memory_embeddings", "m012_memory_embeddings")}
"""How to take back a migration that changed only a table the benchmark corpora leave empty:
{name: (that table, the step that made its earlier shape)}. The table is dropped and that step
(this checkout's: a step never changes once shipped) made again. A corpus that a newer tree
opened carries its steps, and an older tree refuses a file migrated past what it knows."""


def for_tree(db: Path, tree: Path) -> None:
    """Make the SQLite file ``db`` (a copy) one that ``tree``'s Cortex opens: take back the
        migrations it does not know (``UNDO``, each on a table that holds no row). A step with no
        way back stops the benchmark with what to do instead; one that changes nothing on SQLite is
    taken back by its row."""
    from cortex.store.migrations import NOTHING_ON_SQLITE
    from cortex.store.sqlite.migrations import MIGRATIONS

    steps = {step.name: step.apply for step in MIGRATIONS}
    known = _migration_names(tree)
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        applied = [row[0] for row in conn.execute("SELECT name FROM _cortex_migrations")]
        for name in reversed([name for name in applied if name not in known]):
            if name in NOTHING_ON_SQLITE:  # taken back by its row
                conn.execute("DELETE FROM _cortex_migrations WHERE name = ?", (name,))
                continue
            table, earlier = UNDO.get(name, ("", ""))
            if not table or conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone():
                raise SystemExit(
                    f"{db} was migrated by {name}, which {tree} does not know: compare with a "
                    "commit that has it, or rebuild the corpus (delete it; bench/memory.py "
                    "builds it again) with that commit's sources"
                )
            conn.execute(f"DROP TABLE {table}")
            steps[earlier](conn)
            conn.execute("DELETE FROM _cortex_migrations WHERE name = ?", (name,))


def _migration_names(tree: Path) -> set[str]:
    """The migration names ``tree``'s sources know (its ``MIGRATION_NAMES``)."""
    source = tree / "src" / "cortex" / "store" / "migrations.py"
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "MIGRATION_NAMES" for t in node.targets
        ):
            return set(ast.literal_eval(node.value))
    raise SystemExit(f"{source} names no MIGRATION_NAMES")


def script_entry(src: Path) -> None:
    """Give an older tree the ``cortex.entry.run`` that this venv's ``cortex`` script calls
    (the script called ``main`` before; ``run`` then is ``sys.exit(main())``, as it was)."""
    entry = src / "cortex" / "entry.py"
    text = entry.read_text() if entry.exists() else ""
    if text and "\ndef run(" not in text:
        entry.write_text(text + "\n\ndef run() -> None:  # added by bench/compare.py\n"
                         "    sys.exit(main())\n")  # fmt: skip


def floor_sample() -> float:
    """One whole ``python -c "import sqlite3"`` process (the cost of any hook), in ms."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import sqlite3"], check=True)
    return (time.perf_counter() - started) * 1000


def floor_ms(runs: int = 20) -> float:
    """Median of ``runs`` floor processes (``floor_sample``)."""
    return statistics.median(floor_sample() for _ in range(runs))


def interleaved(
    trees: Mapping[str, Path],
    rounds: int,
    sample: Callable[[str], list[float]],
    figures: Sequence[str],
) -> tuple[dict[str, list[list[float]]], list[float]]:
    """``rounds`` rounds of ``sample(label)`` for each tree, each after a floor process
    (``floor_sample``), the trees' order alternating (a process timed right after another
    runs slower, and a fixed order would give one tree all of it); each sample's ``figures``
    on stderr. Returns every tree's samples and the floors, in ms."""
    samples: dict[str, list[list[float]]] = {label: [] for label in trees}
    floors: list[float] = []
    for number in range(1, rounds + 1):
        for label in list(trees) if number % 2 == 0 else list(trees)[::-1]:
            floors.append(floor_sample())
            samples[label].append(sample(label))
            shown = ", ".join(
                f"{k} {v:.2f}" for k, v in zip(figures, samples[label][-1], strict=True)
            )
            print(f"round {number} {label}: {shown} ms", file=sys.stderr)
    return samples, floors


def medians(samples: Sequence[Sequence[float]]) -> list[float]:
    """Each figure's median over the rounds' ``samples`` (lists of the same figures)."""
    return [statistics.median(column) for column in zip(*samples, strict=True)]


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def floor_ratios(samples: list[float], floors: list[float]) -> dict[str, float]:
    """Samples against the floor process timed before each of them: the floors' median
    (``floor_ms``) and the median and p95 of the per-sample ratios (``x_floor``,
    ``x_floor_p95``), which a busy host's swings hit alike."""
    ratios = [s / f for s, f in zip(samples, floors, strict=True)]
    return {
        "floor_ms": round(statistics.median(floors), 2),
        "x_floor": round(statistics.median(ratios), 3),
        "x_floor_p95": round(p95(ratios), 3),
    }


def run_bench(tree: Path, name: str, args: list[str]) -> dict[str, object]:
    """Run ``tree``'s own ``bench/NAME.py`` on ``tree``'s sources; return its results JSON."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    subprocess.run(
        [sys.executable, str(tree / "bench" / f"{name}.py"), *args],
        env=env,
        cwd=tree,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return dict(json.loads((tree / "bench" / "results" / f"{name}.json").read_text()))


def pick(data: dict[str, object], keys: tuple[str, ...]) -> float | None:
    value: object = data
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return float(value) if isinstance(value, int | float) else None


def one_round(trees: dict[str, Path], args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """{tree label: {figure label: ms}} plus each tree's floor, for one interleaved round."""
    out: dict[str, dict[str, float]] = {}
    for label, tree in trees.items():
        figures: dict[str, float] = {"floor": floor_ms()}
        hooks = run_bench(
            tree, "hooks", ["--runs", str(args.runs), "--sessions", str(args.sessions)]
        )
        core = run_bench(tree, "core", ["--quick"])
        for name, bench, keys in FIGURES:
            value = pick(hooks if bench == "hooks" else core, keys)
            if value is not None:
                figures[name] = value
        out[label] = figures
        print(f"  {label}: " + ", ".join(f"{k} {v:.1f}" for k, v in figures.items()), flush=True)
    return out


def summarize(rounds: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Median over rounds of each figure and of its ratio to the same round's floor."""
    table: dict[str, dict[str, float]] = {}
    for name in ["floor", *(f[0] for f in FIGURES)]:
        row: dict[str, float] = {}
        for label in rounds[0]:
            values = [r[label][name] for r in rounds if name in r[label]]
            ratios = [r[label][name] / r[label]["floor"] for r in rounds if name in r[label]]
            if values:
                row[f"{label}_ms"] = round(statistics.median(values), 2)
                row[f"{label}_x_floor"] = round(statistics.median(ratios), 2)
        table[name] = row
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rev", required=True, help="the older commit, e.g. HEAD~3")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=15, help="hook processes per event and mode")
    parser.add_argument("--sessions", type=int, default=10_000, help="stored for the hook bench")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cortex-compare-") as tmp:
        trees = {"before": extract(args.rev, Path(tmp)), "after": ROOT}
        rounds = []
        for n in range(args.rounds):
            print(f"round {n + 1}/{args.rounds}", flush=True)
            rounds.append(one_round(trees, args))
    table = summarize(rounds)
    load = os.getloadavg()
    report = {"rev": args.rev, "rounds": args.rounds, "loadavg": load, "figures": table}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "compare.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nbefore = {args.rev}, after = this checkout; medians of {args.rounds} rounds")
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'figure':<38} {'before ms':>10} {'x floor':>8} {'after ms':>9} {'x floor':>8}")
    nan = float("nan")
    for name, row in table.items():
        before = f"{row.get('before_ms', nan):>10.1f} {row.get('before_x_floor', nan):>8.2f}"
        after = f"{row.get('after_ms', nan):>9.1f} {row.get('after_x_floor', nan):>8.2f}"
        print(f"{name:<38} {before} {after}")


if __name__ == "__main__":
    main()
