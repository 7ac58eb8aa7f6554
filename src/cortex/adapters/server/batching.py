"""Group commit of captured turns in a server process (PostgreSQL): the turns that arrive
while earlier ones are being written wait, and go together in the next batch, one
transaction (``cortex.services.turn_batch``). There is no fixed delay: a turn that finds
a free batch slot starts a batch of its own at once; only while every slot is writing do
turns gather, so batches grow with the load and stay single turns when the server is idle.
Each request still waits for the commit of the batch that carries it.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor

from cortex.services.hosting import ServiceHost
from cortex.services.turn_batch import Admit, Outcome, Turn, capture_turns

MAX_BATCH = 64
"""Most turns in one batch (one transaction); more wait for the next."""


class TurnBatcher:
    """Batches of turns for ``host``, at most ``slots`` of them writing at once, each in a
    thread of ``threads``."""

    def __init__(
        self,
        host: ServiceHost,
        admit: Admit,
        *,
        slots: int,
        threads: Executor,
    ) -> None:
        self.host = host
        self.admit = admit
        self.slots = slots
        self.threads = threads
        self._waiting: list[tuple[Turn, asyncio.Future[Outcome]]] = []
        self._writers = 0  # batches being written (or about to be)
        self._tasks: set[asyncio.Task[None]] = set()  # held, so that none is collected
        self._loop: asyncio.AbstractEventLoop | None = None

    async def submit(self, turn: Turn) -> Outcome:
        """The outcome of ``turn``, once the batch that carries it committed."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new event loop (a test client's): start afresh
            self._loop, self._waiting, self._writers = loop, [], 0
        answer: asyncio.Future[Outcome] = loop.create_future()
        self._waiting.append((turn, answer))
        if self._writers < self.slots:
            self._writers += 1
            task = loop.create_task(self._drain())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return await answer

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
            turns = [turn for turn, _ in batch]
            try:
                outcomes = await asyncio.get_running_loop().run_in_executor(
                    self.threads, capture_turns, self.host, turns, self.admit
                )
            except asyncio.CancelledError:  # the server is stopping
                for _, answer in batch:
                    answer.cancel()
                raise
            except Exception as exc:  # a bug: never leave a request waiting for ever
                outcomes = [exc] * len(batch)
            for (_, answer), outcome in zip(batch, outcomes, strict=True):
                if not answer.done():  # its client went away meanwhile
                    answer.set_result(outcome)
