"""The compiled methods of dataclasses, kept between processes like a module's bytecode.

``@dataclass`` writes each generated method (``__init__``, ``__repr__``, ``__eq__``, a frozen
class's ``__setattr__``, ``__delattr__`` and ``__hash__``) as source text and compiles it with
``exec`` when the class is created. The engine defines some forty dataclasses, so every
process that imports it compiled about 260 small functions: close to half of the import time
of a hook or a CLI command. Importing this module makes ``dataclasses`` run the same text,
for the classes of Cortex's own modules (other packages' classes compile as always), through
a cache of code objects instead: one file in the package's ``__pycache__``
(``dataclass-methods.<cache tag>.bin``), read once per process, written back at exit when a
process compiled text it did not hold (the first run after an install or an upgrade).

Nothing else changes: the cache is keyed by the complete text ``dataclasses`` compiles (a
class whose fields change has other text), the code is compiled exactly as ``exec`` would
compile it (``dataclasses`` uses no future statement), and ``exec`` then runs it with the same
namespaces. The file starts with the interpreter's bytecode magic number, so another Python
version's file is ignored; an unreadable or damaged file counts as empty; where the package
directory cannot be written, or bytecode is not to be written (``PYTHONDONTWRITEBYTECODE``),
processes compile as before.
"""

from __future__ import annotations

import dataclasses
import gc
import marshal
import os
import sys
from importlib._bootstrap_external import MAGIC_NUMBER
from types import CodeType

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the hook path need not import typing
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

MAX_ENTRIES = 2048
"""Texts kept at most (the engine's classes need ~260)."""

PATH = os.path.join(
    os.path.dirname(__file__),
    "__pycache__",
    f"dataclass-methods.{sys.implementation.cache_tag}.bin",
)

_codes: dict[str, CodeType] = {}
_added = 0


def load(path: str = PATH) -> dict[str, CodeType]:
    """The cache in ``path``: {source text: code}; empty when it is missing, damaged or was
    written by another interpreter version."""
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError:
        return {}
    if not data.startswith(MAGIC_NUMBER):
        return {}
    gc.disable()  # half a megabyte of new objects would start collections in the middle
    try:
        codes = marshal.loads(data[len(MAGIC_NUMBER) :])
    except (EOFError, ValueError, TypeError):
        return {}
    finally:
        gc.enable()
    if not isinstance(codes, dict):
        return {}
    return {k: v for k, v in codes.items() if type(k) is str and type(v) is CodeType}


def save(path: str = PATH) -> None:
    """Write the cache back when this process compiled text it did not hold (atomically: a
    process reading it meanwhile sees the old file or the new one)."""
    global _added
    if not _added or sys.dont_write_bytecode:
        return
    partial = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(partial, "wb") as file:
            file.write(MAGIC_NUMBER + marshal.dumps(_codes))
        os.replace(partial, path)
        _added = 0
    except OSError:  # a read-only install: compile in every process, as without the cache
        try:
            os.unlink(partial)
        except OSError:
            pass


def cached_exec(source: Any, globals: dict[str, Any] | None = None, locals: Any = None, /) -> None:
    """``exec`` for ``dataclasses``: source text runs as its cached code object (for Cortex's
    own classes: ``globals`` is the namespace of the module that defines the class)."""
    global _added
    if type(source) is str and globals is not None and _ours(globals.get("__name__")):
        code = _codes.get(source)
        if code is None:
            # As ``exec(text)`` in ``dataclasses`` compiles it: no future flags inherited.
            code = compile(source, "<string>", "exec", dont_inherit=True)
            if len(_codes) < MAX_ENTRIES:
                _codes[source] = code
                if not _added:
                    import atexit

                    atexit.register(save)
                _added += 1
        source = code
    elif type(source) is str:
        # Not ``exec(text)`` here: it would compile the text with this module's own future
        # statement (``annotations``), and other packages' ``__init__`` annotations would be
        # strings ('_type_x'); ``dataclasses``' own ``exec`` inherits none.
        source = compile(source, "<string>", "exec", dont_inherit=True)
    if globals is None:  # as ``exec`` called in ``dataclasses`` would run: in its namespace
        globals = vars(dataclasses)
    exec(source, globals, locals)


def _ours(module: object) -> bool:
    return isinstance(module, str) and (module == "cortex" or module.startswith("cortex."))


def install() -> None:
    """Route ``dataclasses``' compilation through the cache (once per process)."""
    if getattr(dataclasses, "exec", None) is not cached_exec:
        _codes.update(load())
        setattr(dataclasses, "exec", cached_exec)  # noqa: B010 - a module global, not a typo


if os.environ.get("CORTEX_CODECACHE") != "0":  # the hook server sets 0 for itself
    install()
