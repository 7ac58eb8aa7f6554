"""The public API is exactly ``cortex.__all__``, sorted, and every name resolves."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import cortex


def test_all_is_sorted_and_complete() -> None:
    assert cortex.__all__ == sorted(cortex.__all__)
    assert set(cortex.__all__) == set(cortex._EXPORTS)
    for name in cortex.__all__:
        assert getattr(cortex, name) is not None


def test_import_cortex_is_cheap() -> None:
    code = "import sys, cortex; print(sorted(m for m in sys.modules if m.startswith('cortex')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # (and the finder that serves the package's modules' code from one file)
    assert out.stdout.strip() == "['cortex', 'cortex.bytecode']"


def test_bare_install_runs_help() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "cortex.entry", "--help"], capture_output=True, text=True, check=True
    )
    assert "Cortex: session continuity and memory for AI agents." in out.stdout


def test_every_name_of_the_pure_core_table_imports_from_its_module() -> None:
    doc = (Path(__file__).parent.parent / "docs" / "python-api.md").read_text()
    table = doc.split("## The pure core", 1)[1].split("## ", 1)[0]
    rows = [line.split(" | ")[:2] for line in table.splitlines() if line.startswith("| `")]
    assert len(rows) == 7
    for names_cell, module_cell in rows:
        module = importlib.import_module(module_cell.strip("` "))
        functions = re.sub(r" \(`[^)]*\)", "", names_cell)  # not a class's methods
        for name in re.findall(r"`(\w+)[`(]", functions):
            assert hasattr(module, name), f"{name} is not in {module.__name__}"
