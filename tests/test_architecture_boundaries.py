"""The package layout is the architecture, and this test keeps it so.

Layers, imports pointing down only (``docs/architecture.md`` draws them):

    adapters/   cli, hooks, mcp, openclaw: thin translators; never import each other
    services/   use cases over the store protocol; never a backend, never an adapter
    store/      the Store protocol, migrations, one package per backend; imports core only
    core/       pure domain: no I/O, no clock, no database, no third-party code
    config, clock, errors, files, codecache, logs: plumbing every layer may use
    bytecode: the package's modules' code from one file (installed by the package itself)

The pure core is also checked call by call: it never reads the clock or opens a file.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "cortex"
PLUMBING = frozenset(
    {
        "cortex.config",
        "cortex.clock",
        "cortex.errors",
        "cortex.files",
        "cortex.codecache",
        "cortex.bytecode",
        "cortex.logs",
    }
)
# What each layer may import from cortex, besides itself and the plumbing.
ALLOWED = {
    "core": ("cortex.core",),
    "store": ("cortex.core", "cortex.store"),
    "services": ("cortex.core", "cortex.store", "cortex.store.protocol", "cortex.services"),
    "adapters": ("cortex.core", "cortex.services"),
}
BACKENDS = ("cortex.store.sqlite", "cortex.store.postgres")
# The CLI is the process's front door: it may launch another adapter, lazily (inside a
# function), through that adapter's entry point only.
LAUNCHES = frozenset(
    {
        "cortex.adapters.hooks",
        "cortex.adapters.hooks.install",
        "cortex.adapters.hooks.doctor",
        "cortex.adapters.hooks.upgrade",  # the background migration (`db migrate` waits for it)
        "cortex.adapters.mcp.server",
        "cortex.adapters.openclaw.bridge",
        "cortex.adapters.server.ui.local",
    }
)
# Standard-library modules that touch files, processes, the network or the clock.
IO_MODULES = frozenset(
    "os pathlib io shutil sqlite3 subprocess socket tempfile urllib http glob fcntl mmap "
    "signal threading multiprocessing asyncio time".split()
)
CLOCK_CALLS = frozenset({"now", "utcnow", "today", "time", "time_ns", "monotonic"})
FILE_CALLS = frozenset({"open", "read_text", "write_text", "read_bytes", "write_bytes"})


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(layer: str | None = None) -> list[str]:
    root = PACKAGE / layer if layer else PACKAGE
    return sorted(module_name(p) for p in root.rglob("*.py"))


def source(module: str) -> ast.Module:
    path = PACKAGE.parent.joinpath(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def imports(tree: ast.AST, module: str = "cortex.x") -> list[tuple[str, bool]]:
    """(imported module, imported lazily) for every import in ``tree``: lazily means inside a
    function, or under ``if TYPE_CHECKING:`` (never at run time)."""
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend((alias.name, lazy) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    package = module.split(".")[: -child.level]
                    base = ".".join([*package, *([child.module] if child.module else [])])
                # from pkg import name: name may be a submodule; count both.
                found.append((base, lazy))
                found.extend((f"{base}.{alias.name}", lazy) for alias in child.names)
            is_function = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            type_only = isinstance(child, ast.If) and ast.unparse(child.test) == "TYPE_CHECKING"
            visit(child, lazy or is_function or type_only)

    visit(tree, False)
    return found


def is_under(name: str, prefixes: tuple[str, ...] | frozenset[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def internal(name: str) -> bool:
    """A cortex module (``from cortex import Name`` also yields ``cortex.Name``: skipped)."""
    second = name.split(".")[1] if name.startswith("cortex.") else ""
    return bool(second) and not (second[:1].isupper() or second.startswith("__"))


def layer_violations(module: str, tree: ast.AST | None = None) -> list[str]:
    """What ``module`` imports against the layer rules (its source, or ``tree``)."""
    layer = module.split(".")[1]
    problems = []
    for name, lazy in imports(source(module) if tree is None else tree, module):
        if layer == "adapters" and is_under(name, ("cortex.adapters",)):
            problems += adapter_violation(module, name, lazy)
        elif not internal(name) or is_under(name, PLUMBING) or is_under(name, (f"cortex.{layer}",)):
            continue
        elif layer == "services" and is_under(name, BACKENDS):
            problems.append(f"imports the backend {name}")
        elif not is_under(name, ALLOWED[layer]):
            problems.append(f"imports {name}")
    return problems


def adapter_violation(module: str, name: str, lazy: bool) -> list[str]:
    own = ".".join(module.split(".")[:3])
    part = name.split(".")[2] if name.count(".") >= 2 else ""
    shared = not part or not any(
        (PACKAGE / "adapters" / name).exists() for name in (part, f"{part}.py")
    )
    if shared or is_under(name, (own,)):  # the adapters package's own shared names (HOSTS)
        return []
    if own == "cortex.adapters.cli" and lazy and name in LAUNCHES:
        return []
    if own == "cortex.adapters.cli" and lazy and name.rpartition(".")[0] in LAUNCHES:
        return []  # ``from cortex.adapters.hooks import main``: the entry point itself
    if own == "cortex.adapters.cli" and lazy and any(e.startswith(name + ".") for e in LAUNCHES):
        return []  # ``from cortex.adapters.openclaw import bridge``: names the entry module
    return [f"imports another adapter: {name}"]


@pytest.mark.parametrize("module", modules("core") + ["cortex.clock", "cortex.errors"])
def test_pure_core_module_stays_pure(module: str):
    tree = source(module)
    assert import_violations(tree, module) + call_violations(tree, module) == []


@pytest.mark.parametrize(
    "module", modules("store") + modules("services") + modules("adapters") + modules("core")
)
def test_imports_point_down_only(module: str):
    assert layer_violations(module) == []


def test_every_module_belongs_to_a_layer():
    top = {module_name(p) for p in PACKAGE.glob("*.py")}
    assert top == PLUMBING | {"cortex", "cortex.entry"}, "a new top-level module needs a layer"


def test_the_store_protocol_names_no_backend():
    names = [name for name, _ in imports(source("cortex.store.protocol"), "cortex.store.protocol")]
    assert not [n for n in names if is_under(n, BACKENDS)]


def import_violations(tree: ast.AST, module: str) -> list[str]:
    problems = []
    for name, _ in imports(tree, module):
        top = name.split(".")[0]
        if name == "__future__" or (top == "cortex" and not internal(name)):
            continue
        if top == "cortex":
            if not is_under(name, ("cortex.core", "cortex.errors", "cortex.clock")):
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
        # clock.py is where the wall clock is read, once, behind the injected Clock protocol.
        if isinstance(func, ast.Attribute) and name in CLOCK_CALLS and module != "cortex.clock":
            problems.append(f"calls .{name}() on line {node.lineno}")
    return problems


@pytest.mark.parametrize(
    ("source_text", "problem"),
    [
        ("from cortex.store import open_store", "imports cortex.store"),
        ("import cortex.services.sessions", "imports cortex.services.sessions"),
        ("from cortex import config", "imports cortex.config"),
        ("from cortex.adapters.cli import main", "imports cortex.adapters.cli"),
        ("import requests", "imports third-party requests"),
        ("import os.path", "imports I/O module os.path"),
        ("from pathlib import Path", "imports I/O module pathlib"),
        ("from datetime import datetime\nx = datetime.now()", "calls .now() on line 2"),
        ("import time\ny = time.time()", "calls .time() on line 2"),
        ("data = open('f').read()", "calls open() on line 1"),
        ("p.read_text()", "calls read_text() on line 1"),
    ],
)
def test_the_pure_core_checker_catches_violations(source_text: str, problem: str):
    tree = ast.parse(source_text)
    module = "cortex.core.decay"
    assert problem in import_violations(tree, module) + call_violations(tree, module)


def test_the_pure_core_checker_accepts_pure_imports():
    tree = ast.parse(
        "from __future__ import annotations\nimport re\nfrom cortex.core import models"
    )
    assert import_violations(tree, "cortex.core.decay") == []


@pytest.mark.parametrize(
    ("module", "text", "problem"),
    [
        ("cortex.core.x", "from cortex.store import Store", "imports cortex.store"),
        ("cortex.store.x", "import cortex.services.memory", "imports cortex.services.memory"),
        (
            "cortex.services.x",
            "from cortex.store.sqlite import SQLiteStore",
            "imports the backend cortex.store.sqlite",
        ),
        ("cortex.services.x", "from cortex.adapters import hooks", "imports cortex.adapters"),
        ("cortex.adapters.cli.x", "from cortex.store import open_store", "imports cortex.store"),
        (
            "cortex.adapters.mcp.x",
            "from cortex.store.protocol import Store",
            "imports cortex.store.protocol",
        ),
        (
            "cortex.adapters.mcp.x",
            "from cortex.adapters.hooks import dispatch",
            "imports another adapter: cortex.adapters.hooks",
        ),
        (
            "cortex.adapters.cli.x",
            "from cortex.adapters.mcp.server import build_server",
            "imports another adapter: cortex.adapters.mcp.server",
        ),
    ],
)
def test_the_layer_checker_catches_violations(module: str, text: str, problem: str):
    assert problem in layer_violations(module, ast.parse(text))


def test_a_lazy_launch_from_the_cli_is_allowed():
    tree = ast.parse("def f():\n    from cortex.adapters.mcp.server import build_server\n")
    assert layer_violations("cortex.adapters.cli.x", tree) == []
    eager = ast.parse("from cortex.adapters.mcp.server import build_server\n")
    assert layer_violations("cortex.adapters.cli.x", eager) != []


# Only entry points read the process environment; everything else is passed what it needs.
ENVIRONMENT_READERS = {
    "cortex.config": None,  # load_config's default (``env=None``)
    "cortex.entry": None,
    "cortex.adapters.hooks": None,  # the hook fast path
    "cortex.adapters.hooks.wire": None,  # the installed hook command's work (client.py)
    "cortex.adapters.cli.main": "run",
    "cortex.adapters.cli.plain": "run",  # the same, for the commands it serves without click
    # ``start_detached``: a child it starts inherits the process's environment, which
    # ``posix_spawn`` takes as a mapping where ``subprocess`` took None.
    "cortex.adapters.hooks.server": ("main", "start_detached"),
    "cortex.adapters.server.app": "app_from_env",  # uvicorn's workers' factory
}


def environment_reads(tree: ast.AST) -> list[tuple[str | None, int]]:
    """(enclosing top-level function, line) of every ``os.environ``/``os.getenv``/``environ``."""
    found: list[tuple[str | None, int]] = []
    for top in ast.iter_child_nodes(tree):
        owner = top.name if isinstance(top, ast.FunctionDef | ast.AsyncFunctionDef) else None
        for node in ast.walk(top):
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv"):
                found.append((owner, node.lineno))
            elif isinstance(node, ast.ImportFrom) and node.module == "os":
                if any(a.name in ("environ", "getenv") for a in node.names):
                    found.append((owner, node.lineno))
    return found


@pytest.mark.parametrize("module", modules())
def test_only_entry_points_read_the_environment(module: str):
    if module in ENVIRONMENT_READERS and ENVIRONMENT_READERS[module] is None:
        return
    allowed = ENVIRONMENT_READERS.get(module)
    allowed = allowed if isinstance(allowed, tuple) else (allowed,)
    reads = [(fn, line) for fn, line in environment_reads(source(module)) if fn not in allowed]
    assert reads == [], f"{module} reads the environment; pass it in from the entry point"


def test_the_environment_checker_finds_reads():
    tree = ast.parse("import os\ndef f():\n    return os.environ.get('X')\nY = os.getenv('Y')\n")
    assert environment_reads(tree) == [("f", 3), (None, 4)]


def test_no_import_cycles_between_modules():
    """Module-level imports between Cortex modules form no cycle (lazy imports may)."""
    graph: dict[str, set[str]] = {}
    names = set(modules())
    for module in names:
        targets = set()
        for name, lazy in imports(source(module), module):
            while not lazy and name not in names and "." in name:
                name = name.rpartition(".")[0]  # ``from pkg.mod import Name``: the module
            # An edge to one's own package is how ``from cortex.store import x`` reads: the
            # package is already being imported, so it is not a cycle.
            if not lazy and name in names and name != module and not module.startswith(name + "."):
                targets.add(name)
        graph[module] = targets
    assert sum(map(len, graph.values())) > 200  # the graph was read, not empty
    cycles = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                cycles.append(path[path.index(target) :] + [target])
            elif target not in state:
                visit(target, [*path, target])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []
