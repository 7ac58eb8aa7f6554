"""Cortex: local-first session continuity and memory for AI agents.

The public Python API. Names are imported lazily so that ``import cortex`` (which every hook
process pays for) stays cheap.

    from cortex import SessionPersistenceManager, load_config
    cortex = SessionPersistenceManager.open(load_config())
    restored = cortex.on_session_start(project="api")
    print(restored.preamble)

``Services.open(config)`` opens one store for every service (``.sessions``, ``.memory``,
``.compaction``, ``.events``, ``.metrics``), which is what the adapters use.
"""

from __future__ import annotations

import sys
from types import ModuleType

import cortex.bytecode  # noqa: F401 - first: the package's modules come from one file

# Not ``from typing import TYPE_CHECKING``: importing typing costs a hook process ~8 ms, and
# mypy treats any name ``TYPE_CHECKING`` as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__version__ = "0.1.0"


def _import(name: str) -> ModuleType:
    """``importlib.import_module(name)`` for an absolute name, without importing ``importlib``
    (which imports ``warnings``: ~0.3 ms of every process)."""
    __import__(name)
    return sys.modules[name]


def _defer(name: str, *calls: str) -> Callable[[str], object] | None:
    """Stand a module in for ``name`` that imports the real one at its first attribute read;
    return the stand-in's loader (an attribute name -> the real module's attribute), or None
    when the module was imported already.

    Standard modules are imported by others for a use the engine never makes: ``dataclasses``
    imports ``inspect`` (and with it ``ast``, ``dis`` and ``tokenize``: ~4 ms of a hook
    process, ~1 MiB that the hook server would hold for hours) for the signature it writes as
    the docstring of a class that has none (Cortex's classes have one), and ``copy`` (with
    ``weakref``) for ``asdict``; ``pathlib`` imports ``urllib.parse`` (~1 ms, with
    ``ipaddress`` behind it) for ``Path.as_uri`` and ``ntpath`` (~0.5 ms, most of it failed
    imports of Windows modules) for ``PureWindowsPath``, and ``fnmatch`` and ``warnings``
    (~0.3 ms) for globbing and deprecation notices. The stand-in's ``__getattr__`` (PEP 562)
    imports the module and takes on all its names, so whoever imported the stand-in, or
    imports the module later, gets the real one.
    (``importlib.util.LazyLoader`` cannot do this: an ``import`` statement reads the lazy
    module's ``__spec__``, which loads it.) ``calls`` are functions that others import by name
    at their import (``from urllib.parse import quote_from_bytes``): the stand-in has them as
    functions that load the module when called. A submodule's stand-in is also its package's
    attribute, as an import would make it.
    """
    if name in sys.modules:
        return None
    stand_in = ModuleType(name)

    def load(attribute: str) -> object:
        if attribute == "__path__":  # what ``from name import x`` asks first: not a package
            raise AttributeError(attribute)
        if sys.modules.get(name) is stand_in:
            del sys.modules[name]
        real = _import(name)
        vars(stand_in).pop("__getattr__", None)  # (a second thread may have been first)
        vars(stand_in).update(vars(real))
        return getattr(real, attribute)

    def forward(call: str) -> object:
        def loaded(*args: object, **kwargs: object) -> object:
            return load(call)(*args, **kwargs)  # type: ignore[operator]

        loaded.__name__ = call
        return loaded

    stand_in.__getattr__ = load  # type: ignore[method-assign]
    for call in calls:
        setattr(stand_in, call, forward(call))
    sys.modules[name] = stand_in
    package, _, attribute = name.rpartition(".")
    if package:
        setattr(_import(package), attribute, stand_in)
    return load


def _datetime_in_c() -> None:
    """``datetime`` as Python 3.12 imports it: the C implementation alone.

    Python 3.11's ``datetime.py`` first defines the whole pure-Python implementation (~1.4 ms
    of every process here: ``sqlite3`` imports it) and then replaces all of it by ``_datetime``'s
    names; 3.12 moved the pure-Python one to ``_pydatetime``, imported only without the C one.
    The module made here holds exactly what 3.11's holds after its import (``_datetime``'s
    names and ``__all__``), and its classes are the same objects.
    """
    if "datetime" in sys.modules or sys.version_info >= (3, 12):
        return
    try:
        _datetime = _import("_datetime")
    except ImportError:  # an interpreter without it: its datetime.py is the only one
        return
    module = ModuleType("datetime", _datetime.__doc__)
    names = {k: v for k, v in vars(_datetime).items() if not k.startswith("__")}
    vars(module).update(names)
    module.__all__ = (  # type: ignore[attr-defined]
        *("date", "datetime", "time", "timedelta", "timezone", "tzinfo"),
        *("MINYEAR", "MAXYEAR", "UTC"),
    )
    sys.modules["datetime"] = module


def _class_annotations(
    obj: object,
    *,
    globals: dict[str, object] | None = None,  # noqa: A002 - ``inspect``'s own parameter names
    locals: dict[str, object] | None = None,  # noqa: A002
    eval_str: bool = False,
) -> dict[str, object]:
    """The ``inspect`` stand-in's ``get_annotations`` (Python 3.12 on), where it needs no
    ``inspect``: what ``dataclasses`` asks of every class (its own annotations, not
    evaluated), answered as ``inspect`` answers it; any other call loads ``inspect`` and goes
    to its function."""
    if not isinstance(obj, type) or eval_str:
        load = _load_inspect or (lambda name: getattr(_import("inspect"), name))
        real: Callable[..., dict[str, object]] = load("get_annotations")  # type: ignore[assignment]
        return real(obj, globals=globals, locals=locals, eval_str=eval_str)
    annotations = obj.__dict__.get("__annotations__")
    if annotations is None or type(annotations).__name__ == "getset_descriptor":
        return {}
    if not isinstance(annotations, dict):
        raise ValueError(f"{obj!r}.__annotations__ is neither a dict nor None")
    return dict(annotations)


_datetime_in_c()
_load_inspect = _defer("inspect")  # before anything imports ``dataclasses``
if _load_inspect is not None and sys.version_info >= (3, 12):
    # ``dataclasses`` reads every class's annotations with it from 3.12 on
    sys.modules["inspect"].get_annotations = _class_annotations  # type: ignore[attr-defined]
# ``dataclasses`` imports ``copy`` (and with it ``weakref``: ~0.5 ms of a hook process) for
# the ``deepcopy`` of ``asdict`` and ``astuple``, which a hook never calls.
_defer("copy")
# Before anything imports ``pathlib``. (Where ``ntpath`` is ``os.path`` it is imported at
# startup, and the stand-in is not made.)
_defer("ipaddress")
_defer("urllib.parse", "quote_from_bytes")
_defer("ntpath")
_defer("fnmatch")  # for ``Path.match`` and ``glob``
_defer("warnings")  # for two deprecated ``Path`` methods


_EXPORTS = {
    "AddBatch": "cortex.services.memory",
    "AddResult": "cortex.services.memory",
    "Checkpoint": "cortex.core.history_models",
    "Clock": "cortex.clock",
    "CompactionService": "cortex.services.compaction",
    "Config": "cortex.config",
    "ContextResult": "cortex.core.memory_models",
    "CortexError": "cortex.errors",
    "EventLog": "cortex.services.events",
    "FixedClock": "cortex.clock",
    "HotTopicExtractor": "cortex.core.topics",
    "ItemError": "cortex.services.memory",
    "Memory": "cortex.core.memory_models",
    "MemoryService": "cortex.services.memory",
    "NewMemory": "cortex.services.memory",
    "PendingTask": "cortex.core.models",
    "Pin": "cortex.core.models",
    "RestoredSessionContext": "cortex.core.models",
    "Services": "cortex.services.app",
    "SessionEvent": "cortex.core.history_models",
    "SessionPersistenceManager": "cortex.services.sessions.manager",
    "SessionSnapshot": "cortex.core.history_models",
    "SessionState": "cortex.core.models",
    "Store": "cortex.store",
    "SystemClock": "cortex.clock",
    "apply_decay": "cortex.core.decay",
    "compaction_due": "cortex.core.budgets",
    "format_preamble": "cortex.core.preamble",
    "load_config": "cortex.config",
    "open_store": "cortex.store",
    "redact": "cortex.core.redaction",
    "score": "cortex.core.scoring",
    "score_all": "cortex.core.scoring",
    "should_inherit": "cortex.core.decay",
}

__all__ = [
    "AddBatch",
    "AddResult",
    "Checkpoint",
    "Clock",
    "CompactionService",
    "Config",
    "ContextResult",
    "CortexError",
    "EventLog",
    "FixedClock",
    "HotTopicExtractor",
    "ItemError",
    "Memory",
    "MemoryService",
    "NewMemory",
    "PendingTask",
    "Pin",
    "RestoredSessionContext",
    "Services",
    "SessionEvent",
    "SessionPersistenceManager",
    "SessionSnapshot",
    "SessionState",
    "Store",
    "SystemClock",
    "apply_decay",
    "compaction_due",
    "format_preamble",
    "load_config",
    "open_store",
    "redact",
    "score",
    "score_all",
    "should_inherit",
]

if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

    from cortex.clock import Clock, FixedClock, SystemClock
    from cortex.config import Config, load_config
    from cortex.core.budgets import compaction_due
    from cortex.core.decay import apply_decay, should_inherit
    from cortex.core.history_models import Checkpoint, SessionEvent, SessionSnapshot
    from cortex.core.memory_models import ContextResult, Memory
    from cortex.core.models import PendingTask, Pin, RestoredSessionContext, SessionState
    from cortex.core.preamble import format_preamble
    from cortex.core.redaction import redact
    from cortex.core.scoring import score, score_all
    from cortex.core.topics import HotTopicExtractor
    from cortex.errors import CortexError
    from cortex.services.app import Services
    from cortex.services.compaction import CompactionService
    from cortex.services.events import EventLog
    from cortex.services.memory import (
        AddBatch,
        AddResult,
        ItemError,
        MemoryService,
        NewMemory,
    )
    from cortex.services.sessions.manager import SessionPersistenceManager
    from cortex.store import Store, open_store


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cortex' has no attribute {name!r}")
    value = getattr(_import(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*__all__, "__version__"])
