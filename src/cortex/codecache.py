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

The file holds each module's codes as one marshalled piece behind a header of their places,
and a piece is decoded (from the bytes read, not copied) when its module makes its first
class: a hook start makes the classes of 19 of the ~55 modules that have any (about 260 of
560 methods), and decoding code objects is most of what reading the cache costs. When a module
compiles text it did not hold (its classes changed), its texts that this process did not use
are dropped on saving: they belong to the module's earlier versions.

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
    from typing import Any, TypeGuard

MAX_ENTRIES = 2048
"""Texts kept at most (the engine's classes need ~260)."""

PATH = os.path.join(
    os.path.dirname(__file__),
    "__pycache__",
    f"dataclass-methods.{sys.implementation.cache_tag}.bin",
)

FORMAT = b"CXM2"
"""After the magic number: this layout (a header of each module's place, then the pieces)."""

_file = memoryview(b"")
"""The cache file as read: the modules not decoded yet are read from it, without copies."""
_pieces: dict[str, tuple[int, int]] = {}
"""The file's modules not decoded yet: {module: (start, end) of its marshalled codes}."""
_codes: dict[str, dict[str, CodeType]] = {}
"""The decoded modules' codes: {module: {source text: code}}."""
_used: dict[str, set[str]] = {}
_changed: set[str] = set()
"""Modules that compiled text they did not hold in this process."""
_added = 0


def load(path: str = PATH) -> tuple[memoryview, dict[str, tuple[int, int]]]:
    """The cache in ``path``: its bytes and the place of each module's marshalled codes in
    them; nothing when it is missing, damaged or was written by another interpreter version
    (or in another layout)."""
    empty: tuple[memoryview, dict[str, tuple[int, int]]] = (memoryview(b""), {})
    try:
        with open(path, "rb") as file:
            data = memoryview(file.read())
    except OSError:
        return empty
    head = len(MAGIC_NUMBER) + len(FORMAT) + 4
    if data[: head - 4] != MAGIC_NUMBER + FORMAT:
        return empty
    body = head + int.from_bytes(data[head - 4 : head], "little")
    try:
        places = marshal.loads(data[head:body])
    except (EOFError, ValueError, TypeError):
        return empty
    if not isinstance(places, dict):
        return empty
    pieces: dict[str, tuple[int, int]] = {}
    for module, place in places.items():
        if type(module) is not str or type(place) is not tuple or len(place) != 2:
            return empty
        start, end = place
        if type(start) is not int or type(end) is not int or not 0 <= start <= end:
            return empty
        if body + end > len(data):
            return empty
        pieces[module] = (body + start, body + end)
    return data, pieces


def decode(piece: memoryview | bytes) -> dict[str, CodeType]:
    """One module's {source text: code}; empty for a damaged piece."""
    if not piece:
        return {}
    gc.disable()  # many new objects at once would start collections in the middle
    try:
        codes = marshal.loads(piece)
    except (EOFError, ValueError, TypeError):
        return {}
    finally:
        gc.enable()
    if not isinstance(codes, dict):
        return {}
    return {k: v for k, v in codes.items() if type(k) is str and type(v) is CodeType}


def dump(pieces: dict[str, bytes | memoryview]) -> bytes:
    """The file's bytes for {module: marshalled codes} (places counted from the pieces' start)."""
    places, start = {}, 0
    for module, piece in pieces.items():
        places[module] = (start, start + len(piece))
        start += len(piece)
    header = marshal.dumps(places)
    size = len(header).to_bytes(4, "little")
    return b"".join([MAGIC_NUMBER, FORMAT, size, header, *pieces.values()])


def save(path: str = PATH) -> None:
    """Write the cache back when this process compiled text it did not hold (atomically: a
    process reading it meanwhile sees the old file or the new one)."""
    global _added
    if not _added or sys.dont_write_bytecode:
        return
    pieces: dict[str, bytes | memoryview] = {m: _file[a:b] for m, (a, b) in _pieces.items()}
    for module, codes in _codes.items():
        if module in _changed:  # the texts it no longer makes are its earlier versions'
            codes = {text: code for text, code in codes.items() if text in _used[module]}
        if codes:
            pieces[module] = marshal.dumps(codes)
    partial = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(partial, "wb") as file:
            file.write(dump(pieces))
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
    module = globals.get("__name__") if globals is not None else None
    if type(source) is str and _ours(module):
        source = _code(module, source)
    elif type(source) is str:
        # Not ``exec(text)`` here: it would compile the text with this module's own future
        # statement (``annotations``), and other packages' ``__init__`` annotations would be
        # strings ('_type_x'); ``dataclasses``' own ``exec`` inherits none.
        source = compile(source, "<string>", "exec", dont_inherit=True)
    if globals is None:  # as ``exec`` called in ``dataclasses`` would run: in its namespace
        globals = vars(dataclasses)
    exec(source, globals, locals)


def _code(module: str, source: str) -> CodeType:
    """The code of ``source`` for a class of ``module``: held, or compiled and then held."""
    global _added
    codes = _codes.get(module)
    if codes is None:
        start, end = _pieces.pop(module, (0, 0))
        codes = _codes[module] = decode(_file[start:end])
        _used[module] = set()
    _used[module].add(source)
    code = codes.get(source)
    if code is None:
        # As ``exec(text)`` in ``dataclasses`` compiles it: no future flags inherited.
        code = compile(source, "<string>", "exec", dont_inherit=True)
        if sum(map(len, _codes.values())) < MAX_ENTRIES:
            codes[source] = code
            _changed.add(module)
            if not _added:
                import atexit

                atexit.register(save)
            _added += 1
    return code


def _ours(module: object) -> TypeGuard[str]:
    return isinstance(module, str) and (module == "cortex" or module.startswith("cortex."))


def install() -> None:
    """Route ``dataclasses``' compilation through the cache (once per process)."""
    if getattr(dataclasses, "exec", None) is not cached_exec:
        global _file
        _file, pieces = load()
        _pieces.update(pieces)
        setattr(dataclasses, "exec", cached_exec)  # noqa: B010 - a module global, not a typo


if os.environ.get("CORTEX_CODECACHE") != "0":  # the hook server sets 0 for itself
    install()
