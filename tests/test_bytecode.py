"""Cortex's modules' bytecode from one file: served while current, the standard path otherwise.

Each test runs real processes on a copy of the package in ``tmp_path``, so that what they
write (``.pyc`` files and the file itself) and what they edit stay out of the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cortex
from cortex import bytecode

PACKAGE = Path(cortex.__file__).parent

REPORT = """
import sys
import cortex.core.tokens, cortex.core.topics, cortex.store
import cortex.adapters.hooks
served = sorted(
    name for name, module in sys.modules.items()
    if type(getattr(module.__spec__, "loader", None)).__name__ == "CachedLoader"
)
print(" ".join(served))
tokens = sys.modules["cortex.core.tokens"]
print(tokens.__file__, tokens.__cached__, *(getattr(tokens, n, "-") for n in ("EDITED", "SHADOW")))
store = sys.modules["cortex.store"]
print(store.__path__[0], store.__spec__.origin)
from importlib import resources
print(resources.files("cortex.adapters.hooks").joinpath("client.py").is_file())
"""


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A copy of the package with no ``__pycache__``: its first process writes the file."""
    shutil.copytree(PACKAGE, tmp_path / "cortex", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "cortex"


def _run(package: Path, *, write: bool = True, code: str = REPORT) -> list[list[str]]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONDONTWRITEBYTECODE", "CORTEX_CODECACHE")
    }
    env["PYTHONPATH"] = str(package.parent)
    if not write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return [line.split() for line in done.stdout.splitlines()]


def _file(package: Path) -> Path:
    return package / "__pycache__" / f"modules.{sys.implementation.cache_tag}.bin"


def test_a_second_process_imports_the_modules_from_the_file_as_the_standard_path_does(
    package: Path,
) -> None:
    first = _run(package)
    assert first[0] == []  # nothing held yet: every module the standard way, then saved
    assert _file(package).is_file()
    second = _run(package)
    assert {"cortex.core.tokens", "cortex.core.topics", "cortex.store"} <= set(second[0])
    assert "cortex.bytecode" not in second[0]  # (imported before the finder exists)
    assert second[1:] == first[1:]  # __file__, __cached__, __path__, origin, resources
    tokens = package / "core" / "tokens.py"
    assert second[1][:2] == [
        str(tokens),
        str(package / "core" / "__pycache__" / f"tokens.{sys.implementation.cache_tag}.pyc"),
    ]
    assert second[2] == [str(package / "store"), str(package / "store" / "__init__.py")]
    assert second[3] == ["True"]


def test_an_edited_module_is_imported_from_its_source_and_held_again(package: Path) -> None:
    _run(package)
    tokens = package / "core" / "tokens.py"
    tokens.write_text(tokens.read_text() + "\nEDITED = 'yes'\n")
    edited = _run(package)
    assert "cortex.core.tokens" not in edited[0] and "cortex.core.topics" in edited[0]
    assert edited[1][2] == "yes"
    again = _run(package)
    assert "cortex.core.tokens" in again[0] and again[1][2] == "yes"


def test_a_package_folder_that_now_shadows_a_module_wins_as_it_does_without_the_file(
    package: Path,
) -> None:
    _run(package)
    _run(package)
    time.sleep(0.01)  # (a folder's modification time must move)
    shadow = package / "core" / "tokens"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("SHADOW = 'package'\n")
    seen = _run(package)
    assert seen[1][3] == "package"
    assert seen[1][0] == str(shadow / "__init__.py")
    assert _run(package)[1][3] == "package"  # and the file holds the package now


def test_a_damaged_file_is_ignored_and_written_again(package: Path) -> None:
    _run(package)
    path = _file(package)
    data = path.read_bytes()
    for damaged in (b"", data[:40], data[:-5000], b"x" * len(data)):
        path.write_bytes(damaged)
        assert _run(package)[1][2] == "-"
    assert "cortex.core.tokens" in _run(package)[0]


def test_a_damaged_code_piece_falls_back_to_the_pyc(package: Path) -> None:
    _run(package)
    opened, entries, _ = bytecode.load(str(_file(package)))
    opened.close()
    start, end = entries["cortex.core.tokens"][:2]
    damaged = bytearray(_file(package).read_bytes())
    damaged[start:end] = b"\0" * (end - start)
    _file(package).write_bytes(bytes(damaged))
    seen = _run(package, write=False)
    assert "cortex.core.tokens" in seen[0]  # served by the file's loader, from the .pyc
    assert seen[1][0].endswith("tokens.py")


def test_nothing_is_written_where_bytecode_is_not(package: Path) -> None:
    _run(package, write=False)
    assert not _file(package).exists()


def test_a_process_with_the_cache_off_takes_the_standard_path(package: Path) -> None:
    _run(package)
    code = "import os; os.environ['CORTEX_CODECACHE'] = '0'\n" + REPORT
    assert _run(package, code=code)[0] == []


def test_save_keeps_what_is_current_and_drops_what_is_not(tmp_path: Path) -> None:
    path = str(tmp_path / "modules.bin")
    import cortex.core.tokens  # noqa: F401 - imported: its code is saved

    bytecode.save(path)
    _, entries, folders = bytecode.load(path)
    assert "cortex.core.tokens" in entries and "" in folders and "core" in folders
    assert entries["cortex.core.tokens"][2] == os.path.join("core", "tokens.py")
    bad = bytecode.dump(
        {"cortex.gone": (b"x", os.path.join("core", "gone.py"), 1, 1, False)}, folders
    )
    Path(path).write_bytes(bad)
    bytecode.save(path)
    _, entries, _ = bytecode.load(path)
    assert "cortex.gone" not in entries and "cortex.core.tokens" in entries


def test_the_hook_server_lets_the_finder_and_the_file_go(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hook server lives for hours and imports its modules once: ``spawn`` starts it with
    the caches off, and ``main`` takes the finder out (with the file's bytes) where it was
    started another way."""
    from cortex.adapters.hooks import server

    monkeypatch.setattr(sys, "meta_path", [bytecode.Finder, *sys.meta_path])
    monkeypatch.setattr(bytecode, "_entries", dict(bytecode._entries))
    held = open(os.devnull, "rb", buffering=0)  # noqa: SIM115 - closed by ``main``
    monkeypatch.setattr(bytecode, "_file", held)
    monkeypatch.setattr(server, "serve", lambda home, idle: 0)
    monkeypatch.setenv("CORTEX_CODECACHE", "")
    assert server.main(["/nowhere"]) == 0
    assert bytecode.Finder not in sys.meta_path and bytecode._file is None and held.closed
    seen: dict[str, object] = {}

    def start(argv: list[str], env: dict[str, str]) -> None:
        seen.update(argv=argv, env=env)

    monkeypatch.setattr(server, "start_detached", start)
    server.spawn(os.environ["CORTEX_HOME"], {"PATH": "/bin", "CORTEX_HOOK_OWNER_PID": "42"})
    assert seen["env"] == {"PATH": "/bin", "CORTEX_CODECACHE": "0"}  # (no harness pid)


def test_a_read_only_package_is_not_even_read_for_saving(
    package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the package's folder cannot be written (an install owned by another user), a
    process that missed modules does none of the work of making the file at exit."""
    _run(package)  # (the .pyc files exist, as an install compiles them)
    _file(package).unlink()
    monkeypatch.setattr(bytecode, "_writable", lambda folder: False)
    monkeypatch.setattr(bytecode, "load", lambda path: pytest.fail("read for saving"))
    bytecode.save(str(_file(package)))
    assert not _file(package).exists()
    monkeypatch.undo()
    assert bytecode._writable(str(package / "__pycache__" / "nowhere" / "deeper"))


FAILING = """
from cortex import bytecode
def counted(*args):
    print("read")
    return loaded(*args)
loaded, bytecode.load = bytecode.load, counted
import cortex.core.tokens
try:
    import cortex.failing_extra
except ImportError:
    print("failed")
"""


def test_a_module_that_fails_to_import_does_not_make_each_process_read_the_file(
    package: Path,
) -> None:
    """A module whose import fails (an extra's dependency missing) is never in the file, so
    each process misses it; with nothing imported the standard way, nothing could be saved,
    and the file is not read at exit."""
    (package / "failing_extra.py").write_text("raise ImportError('no such extra')\n")
    _run(package, code=FAILING)  # the first process: everything the standard way, saved
    assert _run(package, code=FAILING) == [["failed"]]  # nothing read at exit
    tokens = package / "core" / "tokens.py"
    tokens.write_text(tokens.read_text() + "EDITED = 1\n")
    assert _run(package, code=FAILING) == [["failed"], ["read"]]  # tokens to take again
    assert _run(package, code=FAILING) == [["failed"]]


@pytest.mark.parametrize("mode", ["CHECKED_HASH", "UNCHECKED_HASH"])
def test_hash_based_pyc_files_are_taken_as_the_standard_loader_takes_them(
    package: Path, mode: str
) -> None:
    """Builds with ``SOURCE_DATE_EPOCH`` (Nix, distributions) write hash-based ``.pyc`` files:
    their modules are held too, not missed (and the file written again) in every process."""
    import importlib.util
    import py_compile

    tokens = package / "core" / "tokens.py"
    py_compile.compile(
        str(tokens), doraise=True, invalidation_mode=getattr(py_compile.PycInvalidationMode, mode)
    )
    _run(package)
    assert "cortex.core.tokens" in _run(package)[0]
    if mode == "CHECKED_HASH":
        pyc = Path(importlib.util.cache_from_source(str(tokens))).read_bytes()
        assert bytecode._matches(pyc, str(tokens), tokens.stat())
        tokens.write_text(tokens.read_text() + "\n# edited\n")
        assert not bytecode._matches(pyc, str(tokens), tokens.stat())


def test_a_process_reads_the_file_it_opened_while_another_replaces_it(package: Path) -> None:
    """A process keeps the file open and reads a module's code when the module is imported:
    another process's rewrite (a new file put in its place) does not change what it reads."""
    _run(package)
    code = (
        "import os, cortex\n"
        "from cortex import bytecode\n"
        "assert bytecode._file is not None and 'cortex.core.tokens' in bytecode._entries\n"
        "partial = bytecode.PATH + '.other'\n"
        "with open(partial, 'wb') as file:\n"
        "    file.write(os.urandom(os.path.getsize(bytecode.PATH)))\n"
        "os.replace(partial, bytecode.PATH)\n" + REPORT
    )
    seen = _run(package, write=False, code=code)
    assert "cortex.core.tokens" in seen[0] and seen[1][0].endswith("tokens.py")
