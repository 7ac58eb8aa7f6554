"""Where the three process rows' time goes: the interpreter, each group of imported modules,
and the rest (the command's own work and its exit), in milliseconds.

    .venv/bin/python bench/process_phases.py --rounds 15

Each round times, one after another: the floor (``python -c "import sqlite3"``), the bare
interpreter each process starts as (``python -S -I -X frozen_modules=on -c pass`` for the hook
client, ``python -c pass`` for the console script, which runs ``site``), then each of the three
processes of this checkout (as ``bench/process_compare.py`` runs them: a no-server SessionStart
hook with 10,000 stored sessions, ``cortex session start``, ``cortex memory search`` over
100,000 memories) once plainly and once under ``-X importtime``. The table gives the smallest
figure of the rounds (on a shared machine a median still carries other processes' time; the
smallest is the process undisturbed): the process's CPU time (user and system: its wall time
also holds the database's fsyncs, which other processes' writes can stretch many times); the
bare interpreter's; the self time of each group of modules it imports after that
(``-X importtime``, which adds a little of its own, and which is wall time: imports wait for
nothing but the page cache); and what is left, the command's work (input, the database,
restoring or ranking, output, exit). The modules imported through ``importlib.import_module``
(``_datetime``, ``_sha256``) are counted in the work: ``-X importtime`` does not see them.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from compare import parser as make_parser  # noqa: E402 - next to this file
from process_compare import KINDS, PY, ROOT, Setup, timed  # noqa: E402

STARTUP = frozenset(
    "_io marshal posix _frozen_importlib_external time zipimport _codecs codecs encodings "
    "_signal _abc abc io _stat stat _collections_abc genericpath posixpath os _sitebuiltins "
    "site _distutils_hack sitecustomize usercustomize importlib".split()
)
"""What the interpreter imports before the command's first line (``site`` with its ``.pth``
files for the console script): counted in the bare interpreter's time."""
GROUPS = (
    ("sqlite3", {"sqlite3", "_sqlite3"}),
    (
        "functools, collections, operator (and re with enum, where imported)",
        {"re", "enum", "functools", "collections", "operator", "keyword", "reprlib", "itertools"}
        | {"_collections", "_functools", "_operator", "copyreg", "_sre", "types"},
    ),
    ("json", {"json", "_json"}),
    ("pathlib (with fnmatch, errno)", {"pathlib", "fnmatch", "errno", "ntpath", "urllib"}),
    ("dataclasses (with copy, weakref)", {"dataclasses", "copy", "weakref", "_weakrefset", "org"}),
    ("contextlib, datetime, math", {"contextlib", "datetime", "_datetime", "math"}),
)
"""The standard modules by what pulls them in (top-level names)."""
CORTEX_GROUPS = (
    ("Cortex: entry, adapters", ("cortex.entry", "cortex.adapters")),
    ("Cortex: the models", ("cortex.core.models", "cortex.core.memory_models")),
    ("Cortex: the method and pattern cache", ("cortex.codecache",)),
    ("Cortex: config, clock, logs, files, errors", tuple(
        f"cortex.{name}" for name in ("config", "clock", "logs", "files", "errors")
    )),
    ("Cortex: the rest of core", ("cortex.core",)),
    ("Cortex: the store", ("cortex.store",)),
    ("Cortex: the services", ("cortex.services",)),
)  # fmt: skip
"""Cortex's modules by layer (the first prefix that a module's name starts with)."""


def group_of(module: str) -> str:
    top = module.split(".")[0]
    if top in STARTUP or module in STARTUP:
        return "interpreter"
    if module == "cortex":  # the package (its stand-ins)
        return CORTEX_GROUPS[0][0]
    if top == "cortex":
        for name, prefixes in CORTEX_GROUPS:
            if any(module == p or module.startswith(p + ".") for p in prefixes):
                return name
    for name, tops in GROUPS:
        if top in tops:
            return name
    return "other standard modules" if top in sys.stdlib_module_names else "other modules"


def import_times(stderr: bytes) -> dict[str, float]:
    """Milliseconds of self import time per group, from ``-X importtime`` output."""
    out: dict[str, float] = {}
    for line in stderr.decode().splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _, module = (part.strip() for part in line[len("import time:") :].split("|"))
        group = group_of(module)
        out[group] = out.get(group, 0.0) + int(self_us) / 1000
    return out


def main() -> None:
    parser = make_parser(__doc__)
    parser.add_argument("--rounds", type=int, default=15, help="rounds of samples")
    parser.add_argument("--sessions", type=int, default=10_000, help="sessions stored")
    parser.add_argument("--memories", type=int, default=100_000, help="memories stored")
    args = parser.parse_args()
    src = ROOT / "src"
    script = [str(Path(PY).with_name("cortex"))]
    with tempfile.TemporaryDirectory(prefix="cortex-process-phases-") as tmp:
        setup = Setup(Path(tmp), ("this",), args.sessions, args.memories)
        base = setup.base
        bare = {
            "bare hook": [PY, "-S", "-I", "-X", "frozen_modules=on", "-c", "pass"],
            "bare console": [PY, "-c", "pass"],
        }
        # CPU time (user + system) of each process: its wall time also holds waits for the
        # disk (the database's fsyncs), which other processes' writes stretch.
        cpu: dict[str, list[float]] = {}
        groups: dict[str, dict[str, list[float]]] = {kind: {} for kind in KINDS}
        for i in range(args.rounds):
            cpu.setdefault("floor", []).append(timed([PY, "-c", "import sqlite3"], base)[1])
            for name, command in bare.items():
                cpu.setdefault(name, []).append(timed(command, base)[1])
            for kind in KINDS:
                cpu.setdefault(kind, []).append(setup.run(kind, "this", base, src, script, i)[1])
                stderr = setup.run(kind, "this", base, src, script, i, importtime=True)[3]
                found = import_times(stderr)
                for group in {*groups[kind], *found}:
                    groups[kind].setdefault(group, []).append(found.get(group, 0.0))
    floor = min(cpu["floor"])
    print(f"{args.rounds} rounds; load average {os.getloadavg()}; floor {floor:.1f} ms")
    for kind, title in KINDS.items():
        total = min(cpu[kind])
        start = min(cpu["bare hook" if kind == "hook" else "bare console"])
        print(f"\n{title}: {total:.1f} ms ({total / floor:.2f}x the floor)\n")
        print("| part | ms | x floor |")
        print("| --- | ---: | ---: |")
        print(f"| the interpreter (bare process) | {start:.1f} | {start / floor:.2f} |")
        least = {g: min(v) for g, v in groups[kind].items() if g != "interpreter"}
        for group, ms in sorted(least.items(), key=lambda item: -item[1]):
            print(f"| imports: {group} | {ms:.1f} | {ms / floor:.2f} |")
        rest = total - start - sum(least.values())
        print(f"| the rest: the command's work and exit | {rest:.1f} | {rest / floor:.2f} |")


if __name__ == "__main__":
    main()
