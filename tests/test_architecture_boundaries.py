"""The pure core imports only the standard library and itself, and never reads the clock or
opens a file (STYLE.md, "Pure core")."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "cortex"
PURE_CORE = (
    "models",
    "decay",
    "scoring",
    "topics",
    "preamble",
    "redaction",
    "tasks",
    "sizing",
    "tokens",
    "clock",
    "errors",
    "memory_models",
    "retrieval",
    "budgets",
    "transcripts",
)
# Standard-library modules that touch files, processes, the network or the clock.
IO_MODULES = frozenset(
    "os pathlib io shutil sqlite3 subprocess socket tempfile urllib http glob fcntl mmap "
    "signal threading multiprocessing asyncio time".split()
)
CLOCK_CALLS = frozenset({"now", "utcnow", "today", "time", "time_ns", "monotonic"})
FILE_CALLS = frozenset({"open", "read_text", "write_text", "read_bytes", "write_bytes"})
# clock.py is where the wall clock is read, once, behind the injected Clock protocol.
CLOCK_READERS = frozenset({"clock"})


def imported_modules(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # the package is flat: a relative import names a cortex module
                base = f"cortex.{node.module}" if node.module else "cortex"
            else:
                base = node.module or ""
            if base == "cortex":  # from cortex import x: x is a module or a root re-export
                names.extend(f"cortex.{alias.name}" for alias in node.names)
            else:
                names.append(base)
    return names


def import_violations(tree: ast.AST) -> list[str]:
    problems = []
    for name in imported_modules(tree):
        top = name.split(".")[0]
        if name == "__future__":
            continue
        if top == "cortex":
            parts = name.split(".")
            if len(parts) < 2 or parts[1] not in PURE_CORE:
                problems.append(f"imports {name}")
        elif top not in sys.stdlib_module_names:
            problems.append(f"imports third-party {name}")
        elif top in IO_MODULES:
            problems.append(f"imports I/O module {name}")
    return problems


def call_violations(tree: ast.AST, module: str) -> list[str]:
    problems = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if name in FILE_CALLS:
            problems.append(f"calls {name}() on line {node.lineno}")
        if isinstance(func, ast.Attribute) and name in CLOCK_CALLS and module not in CLOCK_READERS:
            problems.append(f"calls .{name}() on line {node.lineno}")
    return problems


@pytest.mark.parametrize("module", PURE_CORE)
def test_pure_core_module_stays_pure(module: str):
    path = PACKAGE / f"{module}.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    assert import_violations(tree) + call_violations(tree, module) == []


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("from cortex.store import open_store", "imports cortex.store"),
        ("import cortex.sessions", "imports cortex.sessions"),
        ("from cortex import config", "imports cortex.config"),
        ("from .cli import main", "imports cortex.cli"),
        ("from . import hooks", "imports cortex.hooks"),
        ("import cortex", "imports cortex"),
        ("import requests", "imports third-party requests"),
        ("import os.path", "imports I/O module os.path"),
        ("from pathlib import Path", "imports I/O module pathlib"),
        ("from datetime import datetime\nx = datetime.now()", "calls .now() on line 2"),
        ("import time\ny = time.time()", "calls .time() on line 2"),
        ("data = open('f').read()", "calls open() on line 1"),
        ("p.read_text()", "calls read_text() on line 1"),
    ],
)
def test_the_checker_catches_violations(source: str, problem: str):
    tree = ast.parse(source)
    assert problem in import_violations(tree) + call_violations(tree, "decay")


def test_the_checker_accepts_pure_imports():
    tree = ast.parse("from __future__ import annotations\nimport re\nfrom cortex.models import Pin")
    assert import_violations(tree) == []
