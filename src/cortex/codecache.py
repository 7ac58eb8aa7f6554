"""The compiled methods of dataclasses and the compiled programs of regular expressions, kept
between processes like a module's bytecode.

``@dataclass`` writes each generated method (``__init__``, ``__repr__``, ``__eq__``, a frozen
class's ``__setattr__``, ``__delattr__`` and ``__hash__``) as source text and compiles it with
``exec`` when the class is created. The engine defines some forty dataclasses, so every
process that imports it compiled about 260 small functions: close to half of the import time
of a hook or a CLI command. Importing this module makes ``dataclasses`` run the same text,
for the classes of Cortex's own modules (other packages' classes compile as always), through
a cache of code objects instead: one file in the package's ``__pycache__``
(``dataclass-methods.<cache tag>.bin``), written back at exit when a process compiled text it
did not hold (the first run after an install or an upgrade).

The file holds each module's codes as one marshalled piece behind a header of their places.
A process reads the header and keeps the file open; a piece is read (``os.pread``) and
decoded when its module makes its first class: a hook start makes the classes of 19 of the
~55 modules that have any (about 260 of 560 methods). The file grows with every class any
process made (~830 KB once every module has been imported), and reading all of it cost each
start in proportion (importing a session start's modules with such a file: 15.05 ms, against
14.29 reading only the pieces used); decoding code objects is most of what the rest costs.
A rewrite replaces the file: a process that has it open goes on reading the version it
opened. Where ``os.pread`` is missing (Windows) the whole file is read at once. When a module
compiles text it did not hold (its classes changed), its texts that this process did not use
are dropped on saving: they belong to the module's earlier versions.

Nothing else changes: the cache is keyed by the complete text ``dataclasses`` compiles (a
class whose fields change has other text), the code is compiled exactly as ``exec`` would
compile it (``dataclasses`` uses no future statement), and ``exec`` then runs it with the same
namespaces. The file starts with the interpreter's bytecode magic number, so another Python
version's file is ignored; an unreadable or damaged file counts as empty; where the package
directory cannot be written, or bytecode is not to be written (``PYTHONDONTWRITEBYTECODE``),
processes compile as before.

Regular expressions are the other compilation every process repeats: ``re`` parses a pattern
and generates its program in pure Python (a 60-word alternation takes ~0.5 ms), and a hook
start compiles some thirty patterns (~3 ms), most at import. The same file keeps their
programs (one more piece, named after the ``re`` engine's own version): the code list, group
count and names that ``re`` hands to ``_sre.compile``, which then builds (and checks) the
pattern object as it does for a freshly compiled one. Only patterns whose text cannot vary are
kept: those compiled by Cortex's modules or by any module's top-level code (a module's
constants: ``json``'s, ``pathlib``'s), not what other code compiles from its input
(``fnmatch``, a user's pattern), at most ``MAX_PROGRAMS``; a full piece keeps the programs
this process used.

Where nothing imported ``re`` before this module (the hook client; the console script that
pip 25.2 or later writes, where older pips' imports ``re`` itself), ``re`` is a stand-in until
something needs more than the held programs: importing the real one (with ``enum``) is ~2.5 ms
of a hook process, for patterns it does not compile.
"""

from __future__ import annotations

import gc
import marshal
import os
import sys
from types import CodeType

from cortex.bytecode import Opened, framed, open_file, replace

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: the hook path need not import typing
if TYPE_CHECKING:  # pragma: no cover
    import re
    from typing import Any, TypeGuard

_sre: Any = __import__("_sre")  # (typeshed has no stub for ``re``'s engine)
_compiler: Any = None
"""``re``'s compiler once ``re`` is loaded (typeshed describes none of its inner modules)."""
_parser: Any = None

MAX_ENTRIES = 2048
"""Texts kept at most (the engine's classes need ~260)."""
MAX_PROGRAMS = 512
"""Regular expressions kept at most (a hook start, a search and a session start use ~60)."""
PROGRAMS = f"re:{_sre.MAGIC}"
"""The piece of the regular expressions' programs (another ``re`` engine: another piece)."""

PATH = os.path.join(
    os.path.dirname(__file__),
    "__pycache__",
    f"dataclass-methods.{sys.implementation.cache_tag}.bin",
)

FORMAT = b"CXM2"
"""After the magic number: this layout (a header of each module's place, then the pieces)."""

_pieces: dict[str, tuple[int, int]] = {}
"""The file's modules not decoded yet: {module: (start, end) of its marshalled codes}."""
_codes: dict[str, dict[str, CodeType]] = {}
"""The decoded modules' codes: {module: {source text: code}}."""
_used: dict[str, set[str]] = {}
_changed: set[str] = set()
"""Modules that compiled text they did not hold in this process."""
_added = 0

if TYPE_CHECKING:  # pragma: no cover
    Program = tuple[int, list[int], int, dict[str, int], tuple[str | None, ...]]
    """What ``_sre.compile`` takes after the pattern: flags, code, groups, their names."""
_programs: dict[tuple[str | bytes, int], bytes] | None = None
"""The regular expressions' programs, once the piece is decoded: {(pattern, flags): program,
marshalled}. Each program is decoded when its pattern is compiled: a full piece holds 512,
and decoding all their code lists took a process ~0.8 ms for the few dozen it uses."""
_programs_used: set[tuple[str | bytes, int]] = set()
_compile_pattern: Any = None
"""``re``'s own compiler (the cache's stands in for it)."""


_file = Opened()
"""The cache file this process opened: the modules not decoded yet are read from it."""


def load(path: str = PATH) -> tuple[Opened, dict[str, tuple[int, int]]]:
    """The cache in ``path``, open (``bytecode.open_file``), and the place of each module's
    marshalled codes in it; nothing when it is missing, damaged or was written by another
    interpreter version (or in another layout)."""
    found = open_file(path, FORMAT)
    if found is not None:
        opened, body, places = found
        pieces = _places(places, body, opened.size)
        if pieces is not None:
            return opened, pieces
        opened.close()
    return Opened(), {}


def _places(places: object, body: int, size: int) -> dict[str, tuple[int, int]] | None:
    """Each module's (start, end) in a file of ``size`` bytes whose body starts at ``body``,
    from its header; None when the header is not shaped so."""
    if not isinstance(places, dict):
        return None
    pieces: dict[str, tuple[int, int]] = {}
    for module, place in places.items():
        if type(module) is not str or type(place) is not tuple or len(place) != 2:
            return None
        start, end = place
        if type(start) is not int or type(end) is not int or not 0 <= start <= end:
            return None
        if body + end > size:
            return None
        pieces[module] = (body + start, body + end)
    return pieces


def decode(piece: memoryview | bytes) -> dict[str, CodeType]:
    """One module's {source text: code}; empty for a damaged piece."""
    codes = _unmarshal(piece)
    return {k: v for k, v in codes.items() if type(k) is str and type(v) is CodeType}


def _unmarshal(piece: memoryview | bytes) -> dict[Any, Any]:
    """The dict a piece holds; empty for a damaged one."""
    if not piece:
        return {}
    gc.disable()  # many new objects at once would start collections in the middle
    try:
        held = marshal.loads(piece)
    except (EOFError, ValueError, TypeError):
        return {}
    finally:
        gc.enable()
    return held if isinstance(held, dict) else {}


def dump(pieces: dict[str, bytes | memoryview]) -> bytes:
    """The file's bytes for {module: marshalled codes} (places counted from the pieces' start)."""
    places, start = {}, 0
    for module, piece in pieces.items():
        places[module] = (start, start + len(piece))
        start += len(piece)
    return framed(FORMAT, places, pieces.values())


def save(path: str = PATH) -> None:
    """Write the cache back when this process compiled text it did not hold (atomically: a
    process reading it meanwhile sees the old file or the new one).

    The file is read again first and what other processes saved since this one read it is
    kept: each module's piece comes from the file as it is now, but for the modules this
    process compiled text for (the file's version of those may lack it), and the patterns'
    programs are the union of both. Processes that save at the same time then lose nothing
    but what they both wrote, instead of the one that saves last dropping the other's
    additions (which the next process would compile, and save, again)."""
    global _added
    if not _added or sys.dont_write_bytecode:
        return
    current, places = load(path)
    pieces: dict[str, bytes | memoryview] = {m: current.piece(*p) for m, p in places.items()}
    current.close()
    for module, (start, end) in _pieces.items():  # not decoded here: as read, if still absent
        pieces.setdefault(module, _file.piece(start, end))
    for module, codes in _codes.items():
        if module in _changed:  # the texts it no longer makes are its earlier versions'
            codes = {text: code for text, code in codes.items() if text in _used[module]}
        elif module in pieces:
            continue  # the file's (the same texts, or more)
        if codes:
            pieces[module] = marshal.dumps(codes)
    if _programs:
        programs = dict(_programs)
        for key, program in _decode_programs(pieces.get(PROGRAMS, b"")).items():
            if len(programs) >= MAX_PROGRAMS:
                break
            programs.setdefault(key, program)
        pieces[PROGRAMS] = marshal.dumps(programs)
    if replace(path, dump(pieces)):  # (read-only: compile in every process, as without it)
        _added = 0


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
        globals = vars(sys.modules["dataclasses"])
    exec(source, globals, locals)


def _code(module: str, source: str) -> CodeType:
    """The code of ``source`` for a class of ``module``: held, or compiled and then held."""
    global _added
    codes = _codes.get(module)
    if codes is None:
        start, end = _pieces.pop(module, (0, 0))
        codes = _codes[module] = decode(_file.piece(start, end))
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


def compile_pattern(pattern: Any, flags: int = 0) -> re.Pattern[Any]:
    """``re._compiler.compile`` through the cache: a kept pattern's program goes straight to
    ``_sre.compile``; any other pattern (or a damaged program) is compiled by ``re``."""
    made: re.Pattern[Any] | None
    if type(pattern) not in (str, bytes) or flags & DEBUG or not _constant(sys._getframe(1)):
        made = _compile_pattern(pattern, flags)
        return made
    key = (pattern, int(flags))
    made = _from_program(key)
    if made is None:
        program = _program(pattern, flags)
        _keep(key, program)
        made = _sre.compile(pattern, *program)
    return made


def _from_program(key: tuple[str | bytes, int]) -> re.Pattern[Any] | None:
    """The pattern object of a held program (``_sre`` checks it); None when none is held or
    it is damaged (then it is dropped)."""
    programs = _held_programs()
    held = programs.get(key)
    if held is None:
        return None
    program = _unmarshal_program(held)
    made: re.Pattern[Any] | None = None
    if program is not None:
        try:
            made = _sre.compile(key[0], *program)
        except (RuntimeError, TypeError, ValueError, OverflowError):
            made = None
    if made is None:
        programs.pop(key, None)
        return None
    _programs_used.add(key)
    return made


def _held_programs() -> dict[tuple[str | bytes, int], bytes]:
    """The file's programs, decoded at the first pattern."""
    global _programs
    if _programs is None:
        start, end = _pieces.pop(PROGRAMS, (0, 0))
        _programs = _decode_programs(_file.piece(start, end))
    return _programs


def _decode_programs(piece: memoryview | bytes) -> dict[tuple[str | bytes, int], bytes]:
    """The piece's {(pattern, flags): marshalled program}; what is not shaped so is left out
    (each program is checked when it is decoded)."""
    out = {}
    for key, program in _unmarshal(piece).items():
        if (
            type(key) is tuple
            and len(key) == 2
            and type(key[0]) in (str, bytes)
            and type(key[1]) is int
            and type(program) is bytes
        ):
            out[key] = program
    return out


def _unmarshal_program(held: bytes) -> Program | None:
    """A held program; None when it is damaged or not shaped as ``_sre.compile`` takes it."""
    try:
        program = marshal.loads(held)
    except (EOFError, ValueError, TypeError):
        return None
    if (
        type(program) is tuple
        and len(program) == 5
        and type(program[0]) is int
        and type(program[1]) is list
        and type(program[2]) is int
        and type(program[3]) is dict
        and type(program[4]) is tuple
    ):
        return program
    return None


def _constant(frame: Any) -> bool:
    """Whether the pattern being compiled under ``frame`` (``re``'s own frames, then its
    caller's) is a constant: compiled by a Cortex module or by a module's top-level code."""
    while frame is not None and (
        frame.f_globals.get("__name__") in ("re", "re._compiler") or frame.f_code in _STAND_INS
    ):
        frame = frame.f_back
    if frame is None:
        return False
    return frame.f_code.co_name == "<module>" or _ours(frame.f_globals.get("__name__"))


def _program(pattern: str | bytes, flags: int) -> Program:
    """What ``re._compiler.compile`` hands ``_sre.compile`` for ``pattern``, made as it makes
    it."""
    parsed = _parser.parse(pattern, flags)
    code = _compiler._code(parsed, flags)
    groupindex = parsed.state.groupdict
    indexgroup: list[str | None] = [None] * parsed.state.groups
    for name, index in groupindex.items():
        indexgroup[index] = name
    # (the code's opcodes are ``int`` subclasses that ``marshal`` cannot write)
    code = list(map(int, code))
    program = (int(flags | parsed.state.flags), code, parsed.state.groups - 1, dict(groupindex))
    return (*program, tuple(indexgroup))


def _keep(key: tuple[str | bytes, int], program: Program) -> None:
    """Hold a new program for the file (a full piece first drops what this process did not
    use: patterns of earlier versions)."""
    global _added
    programs = _held_programs()
    if len(programs) >= MAX_PROGRAMS:  # (pop, on a copy: another thread may compile too)
        for old in [k for k in list(programs) if k not in _programs_used]:
            programs.pop(old, None)
        if len(programs) >= MAX_PROGRAMS:
            return
    programs[key] = marshal.dumps(program)
    _programs_used.add(key)
    if not _added:
        import atexit

        atexit.register(save)
    _added += 1


def _ours(module: object) -> TypeGuard[str]:
    return isinstance(module, str) and (module == "cortex" or module.startswith("cortex."))


# -- ``re`` as a stand-in ----------------------------------------------------------------------
FLAGS = {
    **{"A": 256, "ASCII": 256, "DEBUG": 128, "I": 2, "IGNORECASE": 2, "L": 4, "LOCALE": 4},
    **{"M": 8, "MULTILINE": 8, "NOFLAG": 0, "S": 16, "DOTALL": 16, "U": 32, "UNICODE": 32},
    **{"X": 64, "VERBOSE": 64},
}
"""``re``'s flags (``re.RegexFlag``'s values) as the stand-in has them: plain ints."""
DEBUG = FLAGS["DEBUG"]
_SPECIAL_CHARS = {i: "\\" + chr(i) for i in b"()[]{}?*+-|^$\\.&~# \t\n\r\v\f"}
"""What ``re.escape`` escapes (the same table as ``re``'s)."""
MAX_SERVED = 512
"""Patterns the stand-in keeps compiled at most (``re``'s own cache holds as many)."""
_served: dict[tuple[str | bytes, int], re.Pattern[Any]] = {}
_load_re: Any = None
"""The stand-in's loader of the real ``re`` (an attribute name -> its value there)."""


def _stand_in_re() -> None:
    """Stand a module in for ``re`` that compiles the held programs itself.

    ``re`` costs a process ~2.5 ms to import (``enum``, its flag classes, the parser and the
    compiler), and the hook path imports it only for constant patterns whose programs this
    file holds (``json``'s, ``dataclasses``' and Cortex's own): ``_sre.compile`` makes them
    without it. The stand-in (``cortex._defer``) has ``re``'s flags as ints, ``compile`` and
    the module-level ``match``, ``fullmatch``, ``search``, ``sub``, ``subn``, ``split``,
    ``findall``, ``finditer`` and ``escape``; a pattern whose program is not held, and any
    other name (``re.error``, ``re.Pattern``, what ``_sre`` calls back for a template), loads
    the real ``re``, which then takes the stand-in's place and names (its compiler routed
    through this cache)."""
    global _load_re
    from cortex import _defer

    load = _defer("re")
    if load is None:
        return
    module = sys.modules["re"]

    def load_real(attribute: str) -> object:
        if attribute == "__path__":  # a submodule imported by name: the real package's
            load("compile")
            _route_re()
            return sys.modules["re"].__path__
        value = load(attribute)
        _route_re()
        return value

    _load_re = load_real
    module.__getattr__ = load_real  # type: ignore[method-assign]
    vars(module).update(FLAGS)
    vars(module).update(
        compile=_re_compile,
        match=_re_match,
        fullmatch=_re_fullmatch,
        search=_re_search,
        sub=_re_sub,
        subn=_re_subn,
        split=_re_split,
        findall=_re_findall,
        finditer=_re_finditer,
        escape=_re_escape,
    )


def _served_pattern(pattern: Any, flags: Any, frame: Any) -> re.Pattern[Any]:
    """``re.compile(pattern, flags)``, called under ``frame``, while ``re`` is the stand-in: a
    constant pattern from its held program, anything else from the real ``re``."""
    if type(pattern) in (str, bytes) and type(flags) is int:
        key = (pattern, flags)
        made = _served.get(key)
        if made is None and not flags & DEBUG and _constant(frame):
            made = _from_program(key)
            if made is not None and len(_served) < MAX_SERVED:
                _served[key] = made
        if made is not None:
            return made
    real_compile = _load_re("compile")
    compiled: re.Pattern[Any] = real_compile(pattern, flags)
    return compiled


def _re_compile(pattern: Any, flags: int = 0) -> re.Pattern[Any]:
    return _served_pattern(pattern, flags, sys._getframe(1))


def _re_match(pattern: Any, string: Any, flags: int = 0) -> re.Match[Any] | None:
    return _served_pattern(pattern, flags, sys._getframe(1)).match(string)


def _re_fullmatch(pattern: Any, string: Any, flags: int = 0) -> re.Match[Any] | None:
    return _served_pattern(pattern, flags, sys._getframe(1)).fullmatch(string)


def _re_search(pattern: Any, string: Any, flags: int = 0) -> re.Match[Any] | None:
    return _served_pattern(pattern, flags, sys._getframe(1)).search(string)


def _re_sub(pattern: Any, repl: Any, string: Any, count: int = 0, flags: int = 0) -> Any:
    return _served_pattern(pattern, flags, sys._getframe(1)).sub(repl, string, count)


def _re_subn(pattern: Any, repl: Any, string: Any, count: int = 0, flags: int = 0) -> Any:
    return _served_pattern(pattern, flags, sys._getframe(1)).subn(repl, string, count)


def _re_split(pattern: Any, string: Any, maxsplit: int = 0, flags: int = 0) -> list[Any]:
    return _served_pattern(pattern, flags, sys._getframe(1)).split(string, maxsplit)


def _re_findall(pattern: Any, string: Any, flags: int = 0) -> list[Any]:
    return _served_pattern(pattern, flags, sys._getframe(1)).findall(string)


def _re_finditer(pattern: Any, string: Any, flags: int = 0) -> Any:
    return _served_pattern(pattern, flags, sys._getframe(1)).finditer(string)


def _re_escape(pattern: Any) -> Any:
    """``re.escape``, as ``re`` writes it."""
    if isinstance(pattern, str):
        return pattern.translate(_SPECIAL_CHARS)
    return str(pattern, "latin1").translate(_SPECIAL_CHARS).encode("latin1")


_STAND_INS = frozenset(
    function.__code__
    for function in (
        *(_served_pattern, _re_compile, _re_match, _re_fullmatch, _re_search, _re_sub),
        *(_re_subn, _re_split, _re_findall, _re_finditer),
    )
)
"""The stand-in's frames, skipped when telling who compiles a pattern."""


def _route_re() -> None:
    """Route the real ``re``'s compiler through the cache (once it is loaded)."""
    global _compiler, _parser, _compile_pattern
    compiler: Any = sys.modules.get("re._compiler")
    if compiler is not None and compiler.compile is not compile_pattern:
        _compiler, _parser = compiler, sys.modules["re._parser"]
        _compile_pattern = compiler.compile
        compiler.compile = compile_pattern


def install() -> None:
    """Route ``dataclasses``' and ``re``'s compilation through the cache (once per process):
    the file is read first, so that ``dataclasses``' own pattern comes from it."""
    global _file
    if getattr(sys.modules.get("dataclasses"), "exec", None) is cached_exec:
        return
    _file, pieces = load()
    _pieces.update(pieces)
    if "re" in sys.modules:
        _route_re()
    else:
        _stand_in_re()
    import dataclasses

    setattr(dataclasses, "exec", cached_exec)  # noqa: B010 - a module global, not a typo


if os.environ.get("CORTEX_CODECACHE") != "0":  # the hook server sets 0 for itself
    install()
