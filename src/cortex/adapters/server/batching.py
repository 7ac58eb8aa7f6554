"""Group commit of captured turns in a server process (PostgreSQL): the turns that arrive
while earlier ones are being written wait, and go together in the next batch, one
transaction (``cortex.services.turn_batch``). There is no fixed delay: a turn that finds
a free batch slot starts a batch of its own at once; only while every slot is writing do
turns gather, so batches grow with the load and stay single turns when the server is idle.
Each request still waits for the commit of the batch that carries it.
"""

from __future__ import annotations

import asyncio

import anyio
import anyio.to_thread

from cortex.services.hosting import ServiceHost
from cortex.services.turn_batch import Admit, Outcome, Turn, capture_turns

MAX_BATCH = 64
"""Most turns in one batch (one transaction); more wait for the next."""


class TurnBatcher:
    """Batches of turns for ``host``, at most ``slots`` of them writing at once, each in a
    worker thread that ``limiter`` admits."""

    def __init__(
        self,
        host: ServiceHost,
        admit: Admit,
        *,
        slots: int,
        limiter: anyio.CapacityLimiter,
    ) -> None:
        self.host = host
        self.admit = admit
        self.slots = slots
        self.limiter = limiter
        self._waiting: list[tuple[Turn, asyncio.Future[Outcome]]] = []
        self._running: set[asyncio.Task[None]] = set()

    async def submit(self, turn: Turn) -> Outcome:
        """The outcome of ``turn``, once the batch that carries it committed."""
        answer: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._waiting.append((turn, answer))
        if len(self._running) < self.slots:
            task = asyncio.create_task(self._drain())
            self._running.add(task)
            task.add_done_callback(self._running.discard)
        return await answer

    async def _drain(self) -> None:
        """Write batches of the waiting turns until none is left."""
        while self._waiting:
            batch, self._waiting = self._waiting[:MAX_BATCH], self._waiting[MAX_BATCH:]
            turns = [turn for turn, _ in batch]
            try:
                outcomes = await anyio.to_thread.run_sync(
                    capture_turns, self.host, turns, self.admit, limiter=self.limiter
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
