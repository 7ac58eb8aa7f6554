"""The server's own worker threads for the direct routes' blocking work (the database).

A call goes to a thread through a queue and comes back to the event loop with one
``call_soon_threadsafe``: no executor future, no asyncio future wrapping it and no callbacks
between them, which ``run_in_executor`` costs the event loop's thread on every call (about
twice the hand-over itself; see "The server's CPU per request" in docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import functools
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
Then = Callable[[Any, BaseException | None], None]
"""Called in the event loop with the call's result, or None and what it raised."""


class Threads:
    """``size`` threads named ``name_0``, ``name_1``, ... (started with the first call), each
    running one call at a time, in the order they were given.

    Daemon threads: when the server stops, uvicorn first waits for the requests it holds,
    and they for their calls, so none is running at the exit; one a kill cuts off rolls its
    transaction back.
    """

    def __init__(self, size: int, name: str) -> None:
        self.size = size
        self.name = name
        self._jobs: queue.SimpleQueue[tuple[asyncio.AbstractEventLoop, Callable[[], Any], Then]]
        self._jobs = queue.SimpleQueue()
        self._started: list[threading.Thread] = []
        self._lock = threading.Lock()

    def call(self, loop: asyncio.AbstractEventLoop, work: Callable[[], Any], then: Then) -> None:
        """Run ``work()`` in a thread, then ``then`` with its outcome in ``loop`` (not at all
        if ``loop`` has closed by then)."""
        if len(self._started) < self.size:
            self._start_threads()
        self._jobs.put((loop, work, then))

    async def run(self, work: Callable[[], T]) -> T:
        """``work()``'s result, run in a thread (what it raised, raised here)."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self.call(future.get_loop(), work, functools.partial(_resolve, future))
        return await future

    def _start_threads(self) -> None:
        with self._lock:  # calls come from one event loop, but a test may use several
            while len(self._started) < self.size:
                name = f"{self.name}_{len(self._started)}"
                thread = threading.Thread(target=self._serve, name=name, daemon=True)
                thread.start()
                self._started.append(thread)

    def _serve(self) -> None:
        while True:
            loop, work, then = self._jobs.get()
            try:
                result, error = work(), None
            except BaseException as exc:  # never leave the caller waiting for ever
                result, error = None, exc
            try:
                loop.call_soon_threadsafe(then, result, error)
            except RuntimeError:  # that loop has closed: nobody waits for the outcome
                pass
            del work, then, result, error  # hold nothing of the call until the next one


def _resolve(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # its caller was cancelled meanwhile
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)
