"""The team server's load test on an older commit and on this checkout, interleaved: for each
worker count, ``bench/server_load.py`` with the old tree's ``src`` on ``PYTHONPATH``, then with
this checkout's, so both meet the same host in the same minutes (a shared host drifts).

Run: ``.venv/bin/python bench/server_compare.py --rev d20ce8b --workers 1,2,4 -- --seconds 15``
(arguments after ``--`` go to ``server_load.py`` as they are, ``--rate 500`` for instance).
The older commit is extracted with ``git archive`` into a temporary directory and run by this
checkout's interpreter and generator settings; each run prints its own table (floor, load,
CPU per request).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from compare import extract

ROOT = Path(__file__).resolve().parents[1]


def run(src: Path | None, workers: str, passed: list[str]) -> str:
    """``server_load.py`` with ``src`` first on the path (None: this checkout)."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    command = [sys.executable, str(ROOT / "bench" / "server_load.py"), "--workers", workers]
    done = subprocess.run([*command, *passed], env=env, capture_output=True, text=True)
    return done.stdout + (done.stderr[-2000:] if done.returncode else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rev", required=True, help="the older commit, e.g. HEAD~3")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("passed", nargs="*", help="arguments for server_load.py (after --)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = extract(args.rev, Path(tmp)) / "src"
        for workers in args.workers.split(","):
            for name, src in ((f"before ({args.rev})", old), ("after (this checkout)", None)):
                print(f"== {name}, workers={workers}", flush=True)
                print(run(src, workers, args.passed), flush=True)


if __name__ == "__main__":
    main()
