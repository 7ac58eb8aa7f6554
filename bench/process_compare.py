"""Before and after, sample by sample: the three process rows of the speed table on an older
commit and on this tree, interleaved with the floor.

    .venv/bin/python bench/process_compare.py --rev 3f3e176 --rounds 20

Each round times, one after another: the floor (``python -c "import sqlite3"``), then for the
old tree and for this one (the old one first in even rounds, this one first in odd ones) a
SessionStart hook with the hook server disabled (the installed
command: ``python -S -I -X frozen_modules=on .../client.py hook claude-code``, 10,000 stored
sessions, the previous start left open as the table's runs leave it), a ``cortex session
start`` (10,000 stored sessions) and a ``cortex memory search`` (100,000 memories). The old tree
is ``git archive REV`` in a temporary directory, run by the same interpreter with its ``src``
first on ``PYTHONPATH`` and its bytecode compiled; its console script is this venv's wrapper
text run by path. Wall time and the child's CPU time (user + system) are both reported as
medians and as ratios to the floor's: on a shared, loaded machine the CPU ratio moves less; the
least CPU time of the rounds (the run least disturbed by other processes) is given too.

Each round also times four lower bounds (``--no-bounds`` leaves them out): the bare
interpreter as the hook client runs it (``python -S -I -X frozen_modules=on -c pass``), the
standard modules any start needs (``sqlite3``, ``json``, ``re``, ``_datetime``: the store, the
event's JSON, redaction, timestamps), and every standard module this tree's no-server hook
imports, without Cortex's own (found by one ``-X importtime`` run; ``cortex/__init__.py`` and
``cortex.codecache`` first, as the hook has them: their stand-ins keep ``json`` from importing
the real ``re``, with ``enum``): how close a no-server hook can get in CPython. A fourth
adds the Cortex modules any restore needs (``RESTORE_CORE`` and what they import), nothing
run: how close a hook that restores in-process can get, however few other modules its path
imports.
"""

from __future__ import annotations

import compileall
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import core  # noqa: E402 - the bench modules next to this file
import hooks  # noqa: E402
import memory  # noqa: E402
from compare import compare_parser, extract, for_tree  # noqa: E402
from cortex.services.project import project_identity  # noqa: E402

ROOT = BENCH.parent
PY = sys.executable


def old_tree(rev: str, into: Path) -> Path:
    """``git archive rev`` unpacked under ``into``; returns its ``src``."""
    return extract(rev, into) / "src"


def timed(
    cmd: list[str], env: dict[str, str], stdin: bytes | None = None, cwd: str | None = None
) -> tuple[float, float, bytes, bytes]:
    """(wall ms, child CPU ms, stdout, stderr) of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, input=stdin, capture_output=True, cwd=cwd)
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{cmd[:4]} failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
    return wall, cpu, done.stdout, done.stderr


CLIENT_FLAGS = ("-S", "-I", "-X", "frozen_modules=on")
"""How an installed hook runs the client (and so the lower bounds)."""


def hook_command(src: Path) -> list[str]:
    client = str(src / "cortex" / "adapters" / "hooks" / "client.py")
    return [PY, *CLIENT_FLAGS, client, "hook", "claude-code"]


def start_event(session_id: str, cwd: str) -> bytes:
    event = {
        "hook_event_name": "SessionStart",
        "source": "startup",
        "session_id": session_id,
        "transcript_path": "/tmp/t.jsonl",
        "cwd": cwd,
    }
    return json.dumps(event).encode()


def hook_stdlib(src: Path, home: Path, cwd: str, base: dict[str, str]) -> list[str]:
    """The standard modules (top-level names) a no-server SessionStart hook of ``src``
    imports, in their order; its home is left as the run found it."""
    probe = home.with_name(home.name + "-probe")
    shutil.copytree(home, probe)
    env = {**base, "CORTEX_HOME": str(probe), "CORTEX_HOOK_SERVER": "0"}
    command = hook_command(src)
    command = [*command[:-3], "-X", "importtime", *command[-3:]]
    for tag in ("first", "second"):  # the second as the timed ones run: the project known
        stderr = timed(command, env, start_event(f"bounds-probe-{tag}", cwd), cwd)[3]
    shutil.rmtree(probe)
    bare = [PY, *CLIENT_FLAGS, "-c", "import sys; print(' '.join(sys.modules))"]
    started = set(timed(bare, base)[2].decode().split())  # what the interpreter has at start
    names: list[str] = []
    for name in import_order(stderr.decode()):
        top = name.split(".")[0]
        if top in sys.stdlib_module_names and top not in started and top not in names:
            names.append(top)
    return names


def import_order(report: str) -> list[str]:
    """The modules of an ``-X importtime`` report in the order their imports began (it lists
    each when its import ends, after the modules that import made): a parent before what it
    imports, so that importing them in this order imports each as the process did."""
    pending: dict[int, list[tuple[str, list[Any]]]] = {}
    for line in report.splitlines():
        if not line.startswith("import time:") or "imported package" in line:
            continue
        field = line.rsplit("|", 1)[-1]
        depth = (len(field) - len(field.lstrip())) // 2
        node = (field.strip(), pending.pop(depth + 1, []))
        pending.setdefault(depth, []).append(node)
    order: list[str] = []
    stack = list(reversed(pending.get(0, [])))
    while stack:
        name, children = stack.pop()
        order.append(name)
        stack.extend(reversed(children))
    return order


def lower_bounds(src: Path, home: Path, cwd: str, base: dict[str, str]) -> dict[str, list[str]]:
    """The lower-bound processes: {label: command}."""
    # (each one tried, as the hook tried some: a Windows module, say)
    every = hook_stdlib(src, home, cwd, base)
    # ``cortex`` and the method and pattern cache first, as the hook has them: their stand-ins
    # (``inspect``, ``re``...) are what the hook's standard modules find, not the real ones.
    stand_ins = f"import sys; sys.path.insert(0, {str(src)!r}); import cortex, cortex.codecache\n"
    tries = f"for name in {every!r}:\n    try:\n        __import__(name)\n"
    tries += "    except ImportError:\n        pass\n"
    return {
        "bare interpreter (-S -I)": [PY, *CLIENT_FLAGS, "-c", "pass"],
        "sqlite3, json, re, _datetime": [
            *(PY, *CLIENT_FLAGS, "-c"),
            "import sqlite3, json, re, _datetime",
        ],
        "every standard module the hook imports": [
            *(PY, *CLIENT_FLAGS, "-c"),
            stand_ins + tries,
        ],
        "the same and the restore's own modules": [
            *(PY, *CLIENT_FLAGS, "-c"),
            stand_ins + tries + f"for name in {RESTORE_CORE!r}:\n    __import__(name)\n",
        ],
    }


RESTORE_CORE = ("cortex.services.restoration", "cortex.store.records", "cortex.store.sqlite.db")
"""The roots of what a restore cannot do without, however lean the path that calls it: the
plan (which brings the settings, the session entity, scoring, pins, tasks, decay, redaction and
the preamble), the session rows' codec and the database connection (a module of the SQLite
store's package, whose ``__init__`` brings the store itself). Importing them with what they
import, the method and pattern cache first as the hook has it, and running nothing, is the
floor of any hook that restores in-process with this engine."""


class Setup:
    """The homes, the directory and the query the three processes run with."""

    def __init__(self, root: Path, labels: tuple[str, ...], sessions: int, memories: int) -> None:
        self.cwd = hooks.make_repo(root)
        hook_db = root / "hook.db"
        self.hook_project = project_identity(self.cwd, root / "cache").id
        core.populate(
            hook_db,
            sessions,
            50,
            self.hook_project,
            other="git:example.com/p{}",
            channel="claude-code",
            lead_topics=("radio-control", "ft991a"),
        )
        corpus, _ = memory.corpus(memories)
        service = memory.open_service(corpus)
        self.query, self.project, _ = memory.queries(service, 1, random.Random(memory.SEED + 2))[0]
        service.store.close()
        self.base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("CORTEX_", "PYTHONDONTWRITEBYTECODE", "PYTHONPATH"))
        }
        self.base["CORTEX_NOW"] = core.NOW
        self.homes: dict[tuple[str, str], Path] = {}
        for label in labels:
            for kind, source in (("hook", hook_db), ("start", hook_db), ("search", corpus)):
                home = root / f"{label}-{kind}"
                home.mkdir()
                shutil.copyfile(source, home / "brain.db")
                self.homes[label, kind] = home

    def run(
        self,
        kind: str,
        label: str,
        env: dict[str, str],
        src: Path,
        cortex: list[str],
        i: int,
        importtime: bool = False,
    ) -> tuple[float, float, bytes, bytes]:
        """One process of ``kind`` (hook, start, search) of the tree ``label``: (wall ms,
        CPU ms, stdout, stderr). ``cortex`` is how the tree's console script is run;
        ``importtime`` adds ``-X importtime``."""
        env = {**env, "CORTEX_HOME": str(self.homes[label, kind])}
        if importtime:  # (the hook client ignores PYTHON* variables: it gets the -X option)
            env["PYTHONPROFILEIMPORTTIME"] = "1"
        if kind == "hook":
            env["CORTEX_HOOK_SERVER"] = "0"
            tag = "-importtime" if importtime else ""
            event = start_event(f"compare-{label}-{i}{tag}", self.cwd)
            command = hook_command(src)
            if importtime:
                command = [*command[:-3], "-X", "importtime", *command[-3:]]
            done = timed(command, env, event, self.cwd)
            if b"SESSION CONTINUITY" not in done[2]:
                raise SystemExit(f"the {label} hook restored nothing: {done[2][:200]!r}")
            return done
        if kind == "start":
            # The hook's project: its 50 sessions in the window are what a start restores.
            command = [*cortex, "session", "start", "--project", self.hook_project]
            done = timed([*command, "--session-id", f"w{i}{'i' if importtime else ''}"], env)
            if b"SESSION CONTINUITY" not in done[2]:
                raise SystemExit(f"the {label} session start restored nothing: {done[2][:200]!r}")
            return done
        return timed([*cortex, "memory", "search", self.query, "--project", self.project], env)


KINDS = {
    "hook": "hook, no server",
    "start": "cortex session start",
    "search": "cortex memory search",
}


def main() -> None:
    parser = compare_parser(__doc__, rounds=20)
    parser.add_argument("--sessions", type=int, default=10_000, help="sessions stored")
    parser.add_argument("--memories", type=int, default=100_000, help="memories stored")
    parser.add_argument("--no-bounds", action="store_true", help="time no lower bounds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cortex-process-compare-") as tmp:
        root = Path(tmp)
        old_src = old_tree(args.rev, root)
        new_src = ROOT / "src"
        for src in (old_src, new_src):
            compileall.compile_dir(str(src), quiet=1)
        script = root / "cortex-old"
        script.write_text(Path(PY).with_name("cortex").read_text())
        setup = Setup(root, ("before", "after"), args.sessions, args.memories)
        for kind in KINDS:  # (databases this tree migrated past the old one)
            for_tree(setup.homes["before", kind] / "brain.db", old_src.parent)
        base = setup.base
        trees = {
            "before": ({**base, "PYTHONPATH": str(old_src)}, old_src, [PY, str(script)]),
            "after": (base, new_src, [str(Path(PY).with_name("cortex"))]),
        }
        bounds = {}
        if not args.no_bounds:
            bounds = lower_bounds(new_src, setup.homes["after", "hook"], setup.cwd, base)
        samples: dict[str, list[tuple[float, float]]] = {}
        for i in range(args.rounds):
            wall, cpu, _, _ = timed([PY, "-c", "import sqlite3"], base)
            samples.setdefault("floor", []).append((wall, cpu))
            for name, command in bounds.items():
                samples.setdefault(name, []).append(timed(command, base)[:2])
            # The order alternates: a process timed right after another one (a search of
            # 100,000 memories) ran slower, and the tree always second took all of that.
            for label in list(trees) if i % 2 == 0 else list(trees)[::-1]:
                env, src, cortex = trees[label]
                for kind, name in KINDS.items():
                    wall, cpu, _, _ = setup.run(kind, label, env, src, cortex, i)
                    samples.setdefault(f"{name}, {label}", []).append((wall, cpu))
    floor_wall = statistics.median(w for w, _ in samples["floor"])
    floor_cpu = statistics.median(c for _, c in samples["floor"])
    print(f"rev {args.rev}, {args.rounds} rounds; load average {os.getloadavg()}")
    floor_least = min(c for _, c in samples["floor"])
    print("| figure | wall ms | x floor | CPU ms | x floor CPU | least CPU ms | x least floor |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, values in samples.items():
        wall = statistics.median(w for w, _ in values)
        cpu = statistics.median(c for _, c in values)
        least = min(c for _, c in values)  # the run least disturbed by other processes
        ratios = f"{wall / floor_wall:.2f} | {cpu:.1f} | {cpu / floor_cpu:.2f}"
        print(f"| {name} | {wall:.1f} | {ratios} | {least:.1f} | {least / floor_least:.2f} |")


if __name__ == "__main__":
    main()
