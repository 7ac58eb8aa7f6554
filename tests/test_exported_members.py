"""The public API is exactly ``cortex.__all__``, sorted, and every name resolves."""

from __future__ import annotations

import subprocess
import sys

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
