"""Timing of OpenClaw file mode over a real workspace, as ratios to a process floor.

Run: ``.venv/bin/python bench/filemode.py`` (``--entries N``, ``--log-mb N``). The floor is
the median wall time of ``python -c "import sqlite3"`` measured in the same run, so the ratios
compare across machines. Each case runs in-process on a fresh home in a temporary directory:
the first sync of N hand-written memory.md lines, a sync that finds nothing to do, a
bootstrap beside a large daily log (its tail only), and the first sync of that log; the
peak of Python allocations (tracemalloc) is shown for the last two.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from compare import floor_ms  # bench/compare.py, the shared floor
from cortex.clock import FixedClock
from cortex.config import load_config
from cortex.services.app import Services

NOW = "2026-02-16T09:00:00Z"


def timed(call: Callable[[], object], trace: bool = False) -> tuple[float, int | None]:
    if trace:
        tracemalloc.start()
    start = time.perf_counter()
    call()
    ms = (time.perf_counter() - start) * 1000
    peak = tracemalloc.get_traced_memory()[1] if trace else None
    if trace:
        tracemalloc.stop()
    return ms, peak


def write_log(path: Path, megabytes: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    line = b"  " + b"x" * 1021 + b"\n"
    with path.open("wb") as handle:
        handle.write(b"# log\n\n- a pasted build log\n")
        for _ in range(megabytes * 1024):
            handle.write(line)
        handle.write(b"\n- the newest note\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--log-mb", type=int, default=50)
    args = parser.parse_args()
    floor = floor_ms(7)
    rows: list[tuple[str, float, int | None]] = []
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        config = load_config(home, {}, {"file_mode_workspace": str(Path(tmp) / "ws")})
        ws = config.file_mode_workspace
        ws.mkdir(parents=True)
        (ws / "memory.md").write_text("".join(f"- fact {i}\n" for i in range(args.entries)))
        with Services.open(config, FixedClock(NOW)) as app:
            fm = app.filemode
            rows.append((f"first sync, {args.entries:,} new lines", *timed(fm.sync)))
            rows.append(("sync with nothing to do", *timed(fm.sync)))
            write_log(ws / "memory" / "daily" / f"{NOW[:10]}.md", args.log_mb)
            boot = timed(lambda: fm.bootstrap(sync=False), trace=True)
            rows.append((f"bootstrap beside a {args.log_mb} MB daily log", *boot))
            rows.append((f"first sync of the {args.log_mb} MB log", *timed(fm.sync, trace=True)))
    print(f"floor (python -c 'import sqlite3'): {floor:.1f} ms")
    print(f"{'case':<44} {'ms':>9} {'x floor':>8} {'peak alloc':>11}")
    for name, ms, peak in rows:
        shown = f"{peak / 1e6:.1f} MB" if peak is not None else "-"
        print(f"{name:<44} {ms:>9.1f} {ms / floor:>8.1f} {shown:>11}")


if __name__ == "__main__":
    main()
