"""What the hook path and the CLI's quick commands import: the rules that keep modules off it.

The hook server holds what its events imported for hours, and every hook or CLI process pays
for each module it imports. ``logging`` is imported at the first record (``cortex.logs``), and
``typing`` is read by mypy only (``TYPE_CHECKING = False`` blocks); ``tests/test_hooks.py``
and ``tests/test_cli_plain.py`` check the modules real events and commands load.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "cortex"


def imported_at_import_time(tree: ast.Module) -> set[str]:
    """The modules a module's own body imports (not its functions', not TYPE_CHECKING's)."""
    names: set[str] = set()
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.If) and ast.unparse(node.test) != "TYPE_CHECKING":
            pending += node.body + node.orelse
        elif isinstance(node, ast.Try):
            pending += node.body + node.orelse + node.finalbody
        elif isinstance(node, ast.ClassDef):
            pending += node.body
    return names


def importers(module: str) -> list[str]:
    """Cortex's modules whose own body imports ``module``."""
    return [
        str(path.relative_to(PACKAGE))
        for path in sorted(PACKAGE.rglob("*.py"))
        if module in imported_at_import_time(ast.parse(path.read_text()))
    ]


def test_no_module_imports_logging_when_it_is_imported() -> None:
    found = importers("logging")
    assert found == [], "log through cortex.logs.getLogger; it imports logging at the first record"


def test_no_module_imports_the_store_protocols_when_it_is_imported() -> None:
    # The protocols are for mypy; defining their few hundred methods cost every hook ~0.4 ms.
    assert importers("cortex.store.protocol") == [], "import them under TYPE_CHECKING"


def test_the_store_protocols_still_load_from_the_package() -> None:
    code = (
        "import sys; import cortex.store as s; before = 'cortex.store.protocol' in sys.modules; "
        "from cortex.store import SharedStore, Store; "
        "print(before, Store.__name__, SharedStore.__name__, s.Store is Store)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.split() == ["False", "Store", "SharedStore", "True"], done.stderr


def test_the_import_finder_sees_through_blocks_but_not_functions() -> None:
    tree = ast.parse(
        "import logging\nif X:\n    import a\ntry:\n    from b import c\nexcept E:\n    pass\n"
        "if TYPE_CHECKING:\n    import d\ndef f():\n    import e\nclass K:\n    import g\n"
    )
    assert imported_at_import_time(tree) == {"logging", "a", "b", "g"}


def test_no_dataclass_field_is_a_class_variable_in_disguise() -> None:
    # ``dataclasses`` tells a ``ClassVar`` annotation from a field only when ``typing`` is
    # imported; with typing imported for mypy alone, such a field would silently become an
    # ``__init__`` argument. None is needed: keep class constants unannotated.
    found = [
        str(path.relative_to(PACKAGE))
        for path in sorted(PACKAGE.rglob("*.py"))
        if "ClassVar" in path.read_text()
    ]
    assert found == []


def test_every_dataclass_has_a_docstring() -> None:
    # ``dataclasses`` calls ``inspect.signature`` for a class without one, which loads
    # ``inspect`` (with ``ast``, ``dis`` and ``tokenize``) into every process that makes it.
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and ast.get_docstring(node) is None:
                if any("dataclass" in ast.unparse(d) for d in node.decorator_list):
                    found.append(f"{path.relative_to(PACKAGE)}: {node.name}")
    assert found == []


STAND_IN = """
import sys
import cortex, dataclasses, pathlib
print("ast" in sys.modules, "dis" in sys.modules, "tokenize" in sys.modules)
print("ip_address" in vars(sys.modules["ipaddress"]))  # urllib.parse imported the stand-in
print("urlsplit" in vars(sys.modules["urllib.parse"]), "splitdrive" in vars(sys.modules["ntpath"]))
print(pathlib.Path("/a b").as_uri(), "urlsplit" in vars(sys.modules["urllib.parse"]))
import ntpath
print(ntpath.splitdrive("c:/x"), pathlib.PureWindowsPath("c:/x/y").parent)
@dataclasses.dataclass
class NoDoc:
    x: int
print(NoDoc.__doc__)
import inspect
from inspect import signature
print(inspect is sys.modules["inspect"], dataclasses.inspect.getsource is inspect.getsource)
print(signature(NoDoc), inspect.getsource(cortex.__getattr__).startswith("def __getattr__"))
from urllib.parse import urlsplit
print(urlsplit("http://[::1]:8/").hostname, "ip_address" in vars(sys.modules["ipaddress"]))
print("deepcopy" in vars(sys.modules["copy"]))
@dataclasses.dataclass
class Box:
    'A list of sets inside (a set is deep-copied on every Python version).'
    items: list
box = Box([{1}])
copied = dataclasses.asdict(box)["items"]
print(copied == [{1}], copied[0] is not box.items[0], "deepcopy" in vars(sys.modules["copy"]))
print("fnmatchcase" in vars(sys.modules["fnmatch"]), pathlib.Path("a/b.py").match("*.py"))
print("filters" in vars(sys.modules["warnings"]))
import _warnings
_warnings.warn("a notice from C code", UserWarning)  # the interpreter's own path to warnings
print("filters" in vars(sys.modules["warnings"]))
"""


FNMATCH_AT_IMPORT = sys.version_info[:2] == (3, 12)
"""Python 3.12's ``pathlib`` calls ``fnmatch.translate`` at its import."""


def test_modules_that_stand_in_are_imported_at_their_first_use_and_whole() -> None:
    done = subprocess.run(
        [sys.executable, "-c", STAND_IN], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "False False False",  # dataclasses imported, inspect not yet loaded
        "False",
        "False False",  # pathlib imported their stand-ins
        "file:///a%20b True",  # its one use of urllib.parse loads it
        "('c:', '/x') c:\\x",
        "NoDoc(x: int)",  # the docstring dataclasses writes (it loaded inspect for it)
        "True True",
        "(x: int) -> None True",
        "::1 True",  # a bracketed host is checked by the real ipaddress
        "False",  # copy (for asdict) is a stand-in
        "True True True",  # asdict's deep copy loaded it
        f"{FNMATCH_AT_IMPORT} True",  # fnmatch: a stand-in until Path.match used it
        "False",  # warnings too
        "True",  # until a warning was issued
    ]
    assert "UserWarning: a notice from C code" in done.stderr


HELP_MODULES = """
import contextlib, io, sys
from cortex.entry import main
for command in sys.argv[1:]:
    with contextlib.redirect_stdout(io.StringIO()):
        assert main([command, "--help"]) == 0, command
print(" ".join(sorted(sys.modules)))
"""
SERVER_ONLY = (
    "cortex.services.hosting",  # the team server's composition root
    "cortex.adapters.cli.tenancy",  # `serve`, `tenant`, `key`: the server's commands
    "cortex.store",  # the store factory and its backends
    "cortex.store.migrations",
    "cortex.services.metrics",
)
"""What only a command that opens a team server's database (or any database) needs."""


def test_the_hygiene_commands_load_no_server_code() -> None:
    # `consolidate`, `procedure` and `worker` share one module; the worker's --lock-timeout
    # option is a team server's number, and its definition must not bring the server's
    # composition root (and through it the store and the metrics chain) into every run of
    # the three: only `worker --db` opens a team server's database, and imports it then.
    done = subprocess.run(
        [sys.executable, "-c", HELP_MODULES, "consolidate", "procedure", "worker"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    imported = set(done.stdout.split())
    assert "cortex.adapters.cli.hygiene" in imported  # the commands' module itself did load
    assert [name for name in SERVER_ONLY if name in imported] == []
