"""Group commit of captured turns in a server process (PostgreSQL): the turns that arrive
while earlier ones are being written wait, and go together in the next batch, one
transaction (``cortex.services.turn_batch``). There is no fixed delay: a turn that finds
a free batch slot starts a batch of its own at once; only while every slot is writing do
turns gather, so batches grow with the load and stay single turns when the server is idle.
Each request still waits for the commit of the transaction that carries it: its batch's, or
its own for a turn the batch left to capture alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import Executor
from typing import Any

from cortex.services.hosting import ServiceHost
from cortex.services.turn_batch import Admit, Outcome, Turn, Written, write_batch

MAX_BATCH = 64
"""Most turns in one batch (one transaction); more wait for the next."""


class TurnBatcher:
    """Batches of turns for ``host``, at most ``slots`` of them writing at once, each in a
    thread of ``threads``. The turns a batch leaves to be captured alone (see ``turn_batch``)
    are captured after it, while the slot writes the next batch, each in a thread of
    ``alone`` (``alone_threads`` of them): its chains (``Written.chains``) at the same time, so a
    turn waiting for a session another transaction holds holds up no other turn, and turns
    of several held sessions wait their bounds side by side rather than one after another.
    They take at most all but one of ``alone``'s threads, whatever the batches: ``alone`` is
    the share of the pool session starts and ends take too, and a start (someone waits for
    its restore) always finds a thread within one lock bound."""

    def __init__(
        self,
        host: ServiceHost,
        admit: Admit,
        *,
        slots: int,
        threads: Executor,
        alone: Executor | None = None,
        alone_threads: int = 1,
    ) -> None:
        self.host = host
        self.admit = admit
        self.slots = slots
        self.threads = threads
        self.alone = alone or threads
        self.held_at_once = max(1, alone_threads - 1)
        """How many turns are captured alone at once (one thread of ``alone`` left over)."""
        self._held = asyncio.Semaphore(self.held_at_once)
        self._waiting: list[tuple[Turn, asyncio.Future[Outcome]]] = []
        self._writers = 0  # batches being written (or about to be)
        self._tasks: set[asyncio.Task[None]] = set()  # held, so that none is collected
        self._loop: asyncio.AbstractEventLoop | None = None

    async def submit(self, turn: Turn) -> Outcome:
        """The outcome of ``turn``, once the transaction that carries it committed."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new event loop (a test client's): start afresh
            self._loop, self._waiting, self._writers = loop, [], 0
            self._held = asyncio.Semaphore(self.held_at_once)
        answer: asyncio.Future[Outcome] = loop.create_future()
        self._waiting.append((turn, answer))
        if self._writers < self.slots:
            self._writers += 1
            self._start(loop, self._drain())
        return await answer

    def _start(self, loop: asyncio.AbstractEventLoop, work: Coroutine[Any, Any, None]) -> None:
        task = loop.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drain(self) -> None:
        """Write batches of the waiting turns until none is left."""
        loop = self._loop
        try:
            await self._write_all(loop)
        finally:
            # In the same step as the last look at the queue (no await between them), so a
            # turn queued from now on finds a free slot and starts a batch.
            if self._loop is loop:
                self._writers -= 1

    async def _write_all(self, loop: asyncio.AbstractEventLoop | None) -> None:
        while self._waiting and self._loop is loop:
            batch, self._waiting = self._waiting[:MAX_BATCH], self._waiting[MAX_BATCH:]
            answers = [answer for _, answer in batch]
            try:
                written = await asyncio.get_running_loop().run_in_executor(
                    self.threads, write_batch, self.host, [t for t, _ in batch], self.admit
                )
            except asyncio.CancelledError:  # the server is stopping
                _cancel(answers)
                raise
            except Exception as exc:  # a bug: never leave a request waiting for ever
                _settle(answers, [(i, exc) for i in range(len(batch))])
                continue
            _settle(answers, written.settled())
            if written.left() and loop is not None:
                self._start(loop, self._alone(written, answers))

    async def _alone(self, written: Written, answers: list[asyncio.Future[Outcome]]) -> None:
        """Capture the turns ``written`` left: its chains at the same time."""
        await asyncio.gather(*(self._chain(written, c, answers) for c in written.chains()))

    async def _chain(
        self, written: Written, chain: list[int], answers: list[asyncio.Future[Outcome]]
    ) -> None:
        """Capture the turns of one chain, one by one in their order."""
        for n, i in enumerate(chain):
            try:
                async with self._held:
                    outcome = await asyncio.get_running_loop().run_in_executor(
                        self.alone, written.alone, i
                    )
            except asyncio.CancelledError:  # the server is stopping
                _cancel([answers[k] for k in chain[n:]])
                raise
            except Exception as exc:  # a bug: never leave a request waiting for ever
                outcome = exc
            _settle(answers, [(i, outcome)])


def _settle(answers: list[asyncio.Future[Outcome]], found: list[tuple[int, Outcome]]) -> None:
    for i, outcome in found:
        if not answers[i].done():  # its client went away meanwhile
            answers[i].set_result(outcome)


def _cancel(answers: list[asyncio.Future[Outcome]]) -> None:
    for answer in answers:
        answer.cancel()
