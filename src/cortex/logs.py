"""Loggers that import ``logging`` when something is logged, not when their module is imported.

A hook event and the hook server import the engine, and most events log nothing: ``logging``
(with ``traceback``, ``threading`` and ``string``) is about 0.6 MiB of the server's memory and
a few milliseconds of every process that imports it. A module says
``log = getLogger("cortex.store")``; its first call imports ``logging`` and hands the record to
``logging.getLogger(name)``, so levels, handlers, propagation and the caller's file and line
are logging's own (``basicConfig``, ``caplog`` and handlers on ``cortex`` see every record).

``routed`` sends the ``cortex`` loggers' warnings to a function for the length of a block (the
hook path's ``hooks.log``), and ``configure`` sets ``logging`` up for a process (the CLI's
``cortex: ...`` lines on stderr); both act only when a record may come.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # mypy treats this name as true; importing typing costs ~8 ms
if TYPE_CHECKING:
    import logging
    from collections.abc import Callable
    from typing import Any

ROOT = "cortex"
DEBUG, INFO, WARNING, ERROR = 10, 20, 30, 40
"""``logging``'s levels."""


class Logger:
    """``logging.getLogger(name)``, looked up (and ``logging`` imported) at the first record."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def real(self) -> logging.Logger:
        """The ``logging`` logger this one stands for (a ``routed`` block's handler attached)."""
        import logging

        while _setups:
            _setups.pop(0)()
        if _routes:
            _routes[-1].attach()
        return logging.getLogger(self.name)

    def debug(self, msg: str, *args: object, **kwargs: Any) -> None:
        self._log(DEBUG, msg, args, kwargs)

    def info(self, msg: str, *args: object, **kwargs: Any) -> None:
        self._log(INFO, msg, args, kwargs)

    def warning(self, msg: str, *args: object, **kwargs: Any) -> None:
        self._log(WARNING, msg, args, kwargs)

    def error(self, msg: str, *args: object, **kwargs: Any) -> None:
        self._log(ERROR, msg, args, kwargs)

    def _log(self, level: int, msg: str, args: tuple[object, ...], kwargs: dict[str, Any]) -> None:
        # ``stacklevel=3``: the record names the line that called ``debug``/``info``/..., as
        # a direct call to ``logging`` would.
        if kwargs or not _routed_only(level, msg, args):
            self.real().log(level, msg, *args, stacklevel=3, **kwargs)

    def exception(self, msg: str, *args: object, **kwargs: Any) -> None:
        self.real().exception(msg, *args, stacklevel=2, **kwargs)


def getLogger(name: str) -> Logger:  # noqa: N802 - logging's name, so call sites read the same
    """A logger for ``name`` (``cortex`` or a child of it) that costs nothing until used."""
    return Logger(name)


def configure(setup: Callable[[], None]) -> None:
    """Run ``setup`` (which configures ``logging``) before a Cortex logger's first record, or
    now when ``logging`` is imported already (a record may then come through it directly)."""
    if "logging" in sys.modules:
        setup()
    else:
        _setups.append(setup)


_setups: list[Callable[[], None]] = []


class routed:  # noqa: N801 - used as a function: ``with routed(emit):``
    """Within the block, each warning (or worse) of a ``cortex`` logger is ``emit(message)``
    instead of going to the root logger's handlers (stderr, by default)."""

    def __init__(self, emit: Callable[[str], None]) -> None:
        self.emit = emit
        self.detach: Callable[[], None] | None = None

    def attach(self) -> None:
        if self.detach is None:
            self.detach = _attach(self.emit)

    def __enter__(self) -> None:
        _routes.append(self)
        if "logging" in sys.modules:
            self.attach()  # a caller may log through ``logging`` itself: route it from the start

    def __exit__(self, *exc: object) -> None:
        _routes.remove(self)
        if self.detach is not None:
            self.detach()
            self.detach = None


_routes: list[routed] = []


def _routed_only(level: int, msg: str, args: tuple[object, ...]) -> bool:
    """Whether a ``routed`` block took the record, ``logging`` not imported; False: log it.

    Inside a block, with ``logging`` never imported (so nothing configured it) and no setup
    pending, a record of a ``cortex`` logger has one possible end: the block's handler (the
    logger does not propagate then) gets ``record.getMessage()`` when the level is WARNING or
    above, and a lower record is dropped (the root's level, WARNING, is the only one set). That
    is done here, message made as ``logging.LogRecord`` makes it; the hook path's incidents
    (a crashed session recovered at a start) then cost no ``logging``, ``traceback`` and
    ``threading`` imports, ~4 ms. A message that fails to format goes to ``logging``, which
    reports it as it always did.
    """
    if not _routes or _setups or "logging" in sys.modules:
        return False
    if level < WARNING:
        return True
    if len(args) == 1 and args[0] and _is_mapping(args[0]):
        args = args[0]  # type: ignore[assignment] # ``log.warning("%(a)s", {"a": 1})``, as logging
    try:
        message = str(msg) % args if args else str(msg)
    except Exception:  # noqa: BLE001 - logging's own report of a bad format, not ours
        return False
    _routes[-1].emit(message)
    return True


def _is_mapping(value: object) -> bool:
    from collections.abc import Mapping

    return isinstance(value, Mapping)


def _attach(emit: Callable[[str], None]) -> Callable[[], None]:
    """Hand the ``cortex`` records at WARNING and above to ``emit`` (and not to the root's
    handlers) until the returned function is called."""
    import logging

    class Handler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            emit(record.getMessage())

    logger = logging.getLogger(ROOT)
    handler, propagate = Handler(logging.WARNING), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False

    def detach() -> None:
        logger.removeHandler(handler)
        logger.propagate = propagate

    return detach
