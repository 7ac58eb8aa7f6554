"""Cortex's own modules' bytecode, read from one file instead of one ``.pyc`` a module.

A hook with the engine in-process, ``cortex session start`` and ``cortex memory search``
import 40 to 60 of Cortex's modules, and the standard path finder spends about 60 µs on each
before its code runs (on the project's machine: listing and checking the folder, building the
spec, finding, opening, reading and checking the ``.pyc``), against about 15 µs for a module
whose code is at hand: ~2.5 ms of such a process. Importing ``cortex`` puts a finder ahead of
the standard ones that serves Cortex's modules from ``__pycache__/modules.<cache tag>.bin``
in the package's folder: each module's code as its ``.pyc`` holds it, behind a header of
where each one is. A process reads the header once and keeps the file open; a module's code
is read from it (``os.pread``) when the module is imported, so that no process holds the
whole file (a long-lived one would hold it for its life). A rewrite replaces the file, and
a process that has it open goes on reading the version it opened.

A module is served from the file only while nothing it was made from changed: its source's
modification time (in nanoseconds) and size are what they were when its code was taken, and
so is the modification time of every folder from the package's down to the module's (a file
added or removed there could change what the module's name finds: a package folder of the
same name, say). Anything else, a module the file lacks or a damaged file, is imported the
standard way; a process that imported one of Cortex's modules that way writes the file again
at exit, from the ``.pyc`` files that the standard path checked against their sources
(atomically, keeping what the file held that is still current). Nothing is written, or read
for writing, where bytecode is not (``PYTHONDONTWRITEBYTECODE``, ``-B``) or the folder cannot
be written.

The modules served are the standard ones in every other respect: the same loader class
(``SourceFileLoader``, whose code comes from the file), ``__file__``, ``__cached__``,
``__path__`` and the package's resources; their code objects are the ``.pyc`` files', so
tracebacks name the sources. ``CORTEX_CODECACHE=0`` (what the hook server sets for itself)
leaves the standard path alone.
"""

from __future__ import annotations

import marshal
import os
import sys

TYPE_CHECKING = False  # mypy treats this name as true; the hook path does not import typing
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Iterable, Sequence
    from importlib.machinery import ModuleSpec, SourceFileLoader
    from types import CodeType, ModuleType
    from typing import Any, BinaryIO
else:  # the classes ``importlib.machinery`` names (importing it imports ``warnings``)
    ModuleSpec = sys.modules["_frozen_importlib"].ModuleSpec
    SourceFileLoader = sys.modules["_frozen_importlib_external"].SourceFileLoader

_external = sys.modules["_frozen_importlib_external"]
MAGIC_NUMBER: bytes = _external.MAGIC_NUMBER
FORMAT = b"CXB1"
"""After the magic number: this layout (a header of each module's place, then the codes)."""
ROOT = os.path.dirname(os.path.abspath(__file__))
"""The package's folder: the names in the file are relative to it."""
PATH = os.path.join(ROOT, "__pycache__", f"modules.{sys.implementation.cache_tag}.bin")
PACKAGE = __name__.rpartition(".")[0]

if TYPE_CHECKING:  # pragma: no cover
    Entry = tuple[int, int, str, int, int, bool]
    """(start, end) of the code in the file, the source relative to ``ROOT``, its
    modification time in nanoseconds and size, whether it is a package's ``__init__``."""

_file: Opened | None = None
"""The file, open: each module's code is read from it at the module's import."""
_entries: dict[str, Entry] = {}
"""The file's modules: {name: entry}."""
_folders: dict[str, int] = {}
"""Each folder's modification time (relative to ``ROOT``, "" for ``ROOT``) when the file was
written."""
_checked: dict[str, bool] = {}
"""Folders checked in this process: whether they are as they were."""
_missed = False
"""Whether one of the package's modules took the standard path here (the file is written again
at exit)."""


def _header(file: BinaryIO, layout: bytes) -> tuple[int, object] | None:
    """Where the body of such a file (open in ``file``, at its start) begins, and its header,
    decoded; None when it is damaged or was written by another interpreter version or in
    another ``layout``."""
    head = len(MAGIC_NUMBER) + len(layout) + 4
    start = file.read(head)
    if len(start) != head or start[:-4] != MAGIC_NUMBER + layout:
        return None
    size = int.from_bytes(start[-4:], "little")
    encoded = file.read(size)
    if len(encoded) != size:
        return None
    try:
        return head + size, marshal.loads(encoded)
    except (EOFError, ValueError, TypeError):
        return None


class Opened:
    """Such a file, open: its bytes read by place (``os.pread``) from a bare descriptor, which
    the process's end closes with no ``ResourceWarning``; where ``os.pread`` is missing
    (Windows), its bytes as read at once; no file: no bytes."""

    def __init__(self, descriptor: int | None = None, data: bytes = b"") -> None:
        self.descriptor = descriptor
        self.data = memoryview(data)
        self.size = len(data)  # (a descriptor's: its file's, set by ``open_file``)

    def piece(self, start: int, end: int) -> bytes | memoryview:
        """The bytes from ``start`` to ``end`` (empty when the file cannot be read)."""
        if self.descriptor is None:
            return self.data[start:end]
        try:
            return os.pread(self.descriptor, end - start, start)
        except OSError:
            return b""

    def close(self) -> None:
        descriptor, self.descriptor = self.descriptor, None
        if descriptor is not None:
            os.close(descriptor)


def open_file(path: str, layout: bytes) -> tuple[Opened, int, object] | None:
    """Such a file, open (``Opened``), where its body starts and its header, decoded; None
    when it is missing or as ``_header`` refuses it. Only the header is read: a piece is
    read when it is wanted, so that no process holds the whole file (a long-lived one would
    hold it for its life), and a rewrite, which replaces the file, leaves a process reading
    the version it opened."""
    try:
        descriptor = os.open(
            path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
        )
    except OSError:
        return None
    opened = Opened(descriptor)
    try:
        with open(descriptor, "rb", buffering=0, closefd=False) as file:
            found = _header(file, layout)
            opened.size = os.fstat(descriptor).st_size
            if found is not None and not hasattr(os, "pread"):
                file.seek(0)
                whole = Opened(None, file.readall())
                opened.close()
                opened = whole
    except OSError:
        found = None
    if found is None:
        opened.close()
        return None
    return (opened, *found)


def framed(
    layout: bytes, header: dict[str, Any] | tuple[Any, ...], pieces: Iterable[bytes | memoryview]
) -> bytes:
    """The bytes of such a file: the interpreter's magic number, ``layout``, the header's size
    and the header (marshalled), then the pieces."""
    encoded = marshal.dumps(header)
    return b"".join([MAGIC_NUMBER, layout, len(encoded).to_bytes(4, "little"), encoded, *pieces])


def replace(path: str, data: bytes) -> bool:
    """Write such a file atomically (a process reading it meanwhile sees the old file or the
    new one); False where it cannot be written (a read-only install)."""
    partial = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(partial, "wb") as file:
            file.write(data)
        os.replace(partial, path)
    except OSError:
        try:
            os.unlink(partial)
        except OSError:
            pass
        return False
    return True


def load(path: str = PATH) -> tuple[Opened, dict[str, Entry], dict[str, int]]:
    """The file at ``path``, open, its modules and its folders; nothing when it is missing,
    damaged or was written by another interpreter version."""
    found = open_file(path, FORMAT)
    if found is not None:
        opened, body, header = found
        held = _held(header, body, opened.size)
        if held is not None:
            return opened, *held
        opened.close()
    return Opened(), {}, {}


def _held(header: object, body: int, size: int) -> tuple[dict[str, Entry], dict[str, int]] | None:
    """The modules (placed in a file of ``size`` bytes whose body starts at ``body``) and the
    folders of a header; None when it is not shaped so."""
    if not (type(header) is tuple and len(header) == 2):
        return None
    entries, folders = header
    if not (isinstance(entries, dict) and isinstance(folders, dict)):
        return None
    out: dict[str, Entry] = {}
    for name, entry in entries.items():
        if not (type(name) is str and type(entry) is tuple and len(entry) == 6):
            return None
        start, end, source, mtime, size_, package = entry
        if not (
            type(start) is int
            and type(end) is int
            and 0 <= start <= end
            and body + end <= size
            and type(source) is str
            and type(mtime) is int
            and type(size_) is int
            and type(package) is bool
        ):
            return None
        out[name] = (body + start, body + end, source, mtime, size_, package)
    return out, folders


def dump(
    codes: dict[str, tuple[bytes | memoryview, str, int, int, bool]], folders: dict[str, int]
) -> bytes:
    """The file's bytes for {module: (marshalled code, source, mtime, size, package)}."""
    entries, start = {}, 0
    for name, (code, source, mtime, size, package) in codes.items():
        entries[name] = (start, start + len(code), source, mtime, size, package)
        start += len(code)
    return framed(FORMAT, (entries, folders), (c[0] for c in codes.values()))


_CODE = type(load.__code__)
"""``types.CodeType`` (``types`` is not imported on the hook path)."""


class CachedLoader(SourceFileLoader):
    """The standard source loader, with the module's code taken from the file."""

    def __init__(self, fullname: str, path: str, span: tuple[int, int]) -> None:
        super().__init__(fullname, path)
        self.span = span

    def get_code(self, fullname: str) -> CodeType:
        start, end = self.span
        try:  # (no file: it was closed since the spec was made)
            code = marshal.loads(_file.piece(start, end) if _file is not None else b"")
        except (EOFError, ValueError, TypeError):
            code = None
        if type(code) is _CODE:
            return code
        made = super().get_code(fullname)  # a damaged piece: the standard way
        if made is None:
            raise ImportError(f"no code for {fullname}", name=fullname)
        return made


class Finder:
    """Ahead of the standard finders: Cortex's modules that the file holds, while current."""

    @staticmethod
    def find_spec(
        name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        global _missed
        if not name.startswith(PACKAGE + "."):
            return None
        entry = _entries.get(name)
        spec = _spec(name, entry, path) if entry is not None else None
        if spec is None and not _missed:
            _missed = True
            import atexit

            atexit.register(_save_missed)
        return spec


def _spec(name: str, entry: Entry, path: Sequence[str] | None) -> ModuleSpec | None:
    start, end, source, mtime, size, package = entry
    origin = os.path.join(ROOT, source)
    folder = os.path.dirname(origin)
    parent = os.path.dirname(folder) if package else folder
    if path is not None and parent not in path:
        return None  # a package whose path was changed: the standard finders decide
    try:
        stat = os.stat(origin)
    except OSError:
        return None
    if (
        stat.st_mtime_ns != mtime
        or stat.st_size != size
        or not _unchanged(os.path.dirname(source), _folders, _checked)
    ):
        return None
    spec = ModuleSpec(name, CachedLoader(name, origin, (start, end)), origin=origin)
    spec.has_location = True
    spec.cached = _cached(origin)
    if package:
        spec.submodule_search_locations = [folder]
    return spec


def _cached(origin: str) -> str | None:
    try:
        return _external.cache_from_source(origin)  # type: ignore[no-any-return]
    except NotImplementedError:  # no cache tag: bytecode is not written at all
        return None


def _unchanged(folder: str, recorded: dict[str, int], checked: dict[str, bool]) -> bool:
    """Whether ``folder`` (relative to ``ROOT``, "" for it) and those above it have the
    modification times ``recorded``; ``checked`` keeps the answers."""
    known = checked.get(folder)
    if known is None:
        try:
            same = os.stat(os.path.join(ROOT, folder)).st_mtime_ns == recorded.get(folder)
        except OSError:
            same = False
        above = not folder or _unchanged(os.path.dirname(folder), recorded, checked)
        known = checked[folder] = same and above
    return known


def save(path: str = PATH) -> None:
    """Write the file again: the code of every module of the package imported in this process
    whose ``.pyc`` matches its source, and what the file holds that is still current."""
    if sys.dont_write_bytecode or not _writable(os.path.dirname(path)):
        return  # (a read-only install: not even the work of making the file, in every process)
    codes: dict[str, tuple[bytes | memoryview, str, int, int, bool]] = {}
    opened, entries, recorded = load(path)
    checked: dict[str, bool] = {}
    for name, (start, end, source, mtime, size, package) in entries.items():
        try:
            stat = os.stat(os.path.join(ROOT, source))
        except OSError:
            continue
        if (
            stat.st_mtime_ns == mtime
            and stat.st_size == size
            and _unchanged(os.path.dirname(source), recorded, checked)
        ):
            codes[name] = (opened.piece(start, end), source, mtime, size, package)
    opened.close()
    added = False
    for name, module in list(sys.modules.items()):
        if name.startswith(PACKAGE + ".") and name != __name__ and name not in codes:
            found = _from_pyc(module)
            if found is not None:
                codes[name], added = found, True
    if not added and len(codes) == len(entries):
        return  # (a module that is not to be had from the file, such as one that failed)
    folders = {}
    for _, source, *_ in codes.values():
        folder = os.path.dirname(source)
        while folder not in folders:
            try:
                folders[folder] = os.stat(os.path.join(ROOT, folder)).st_mtime_ns
            except OSError:
                folders[folder] = -1
            if not folder:
                break
            folder = os.path.dirname(folder)
    replace(path, dump(codes, folders))  # (read-only: the standard path in every process)


def _save_missed() -> None:
    """At the exit of a process that missed a module: ``save``, unless every one of the
    package's modules it imported came from the file. A module whose import fails (an
    extra's dependency missing) misses in every process and never reaches the file: such a
    process has nothing to add, and reading the file back would cost it ~1 ms."""
    if any(_unserved(name, module) for name, module in list(sys.modules.items())):
        save()


def _unserved(name: str, module: ModuleType | None) -> bool:
    """Whether ``name`` is one of the package's modules imported here other than from the
    file (the file lacked it, or held an earlier version): what saving could add."""
    if not name.startswith(PACKAGE + ".") or name == __name__ or module is None:
        return False
    return type(getattr(getattr(module, "__spec__", None), "loader", None)) is not CachedLoader


def _matches(pyc: bytes, origin: str, stat: os.stat_result) -> bool:
    """Whether a ``.pyc`` is of its source as it is now, as the standard loader checks it: by
    the source's modification time (seconds) and size, or (a hash-based ``.pyc``, as builds
    with ``SOURCE_DATE_EPOCH`` write them) by the source's hash; an unchecked one is taken, as
    the standard loader takes it."""
    flags = int.from_bytes(pyc[4:8], "little")
    if flags == 0:
        return (
            int.from_bytes(pyc[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
            and int.from_bytes(pyc[12:16], "little") == stat.st_size & 0xFFFFFFFF
        )
    if flags & ~0b11 or not flags & 0b10:
        return flags == 0b01  # (unknown flags: no; hash-based, unchecked: yes)
    from importlib.util import source_hash  # (only here: at exit, saving)

    try:
        with open(origin, "rb") as file:
            return source_hash(file.read()) == pyc[8:16]
    except OSError:
        return False


def _writable(folder: str) -> bool:
    """Whether a file can be made in ``folder`` (or in the folder that would hold it)."""
    while not os.path.isdir(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            return False
        folder = parent
    return os.access(folder, os.W_OK)


def _from_pyc(module: ModuleType) -> tuple[bytes, str, int, int, bool] | None:
    """A module's code from its ``.pyc``, when a source loader (the standard one or this file's)
    imported it from its source in the package's folder and the ``.pyc`` matches that source
    (timestamp-checked)."""
    spec = getattr(module, "__spec__", None)
    origin = getattr(spec, "origin", None)
    cached = getattr(spec, "cached", None)
    if (
        not isinstance(getattr(spec, "loader", None), SourceFileLoader)
        or not isinstance(origin, str)
        or not isinstance(cached, str)
        or not origin.startswith(ROOT + os.sep)
    ):
        return None
    try:
        stat = os.stat(origin)
        with open(cached, "rb") as file:
            pyc = file.read()
    except OSError:
        return None
    if pyc[:4] != MAGIC_NUMBER or not _matches(pyc, origin, stat):
        return None
    source = os.path.relpath(origin, ROOT)
    package = os.path.basename(origin).startswith("__init__.")
    return pyc[16:], source, stat.st_mtime_ns, stat.st_size, package


def uninstall() -> None:
    """Take the finder out and close the file: the hook server imports with the standard path
    (it imports once, and would keep the file open for its life)."""
    global _file, _entries
    while Finder in sys.meta_path:
        sys.meta_path.remove(Finder)
    if _file is not None:
        _file.close()
    _file, _entries = None, {}


def install(path: str = PATH) -> None:
    """Open the file, read its header and put the finder first (once per process). Where
    ``os.pread`` is missing (Windows) the standard path serves every module."""
    global _file, _entries, _folders
    if Finder in sys.meta_path or not hasattr(os, "pread"):
        return
    opened, entries, folders = load(path)  # (none yet: the standard way, written at exit)
    if entries:
        _file, _entries, _folders = opened, entries, folders
    else:
        opened.close()
    sys.meta_path.insert(0, Finder)


if os.environ.get("CORTEX_CODECACHE") != "0":  # the hook server sets 0 for itself
    install()
