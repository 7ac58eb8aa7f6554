"""Group commit of captured turns in a server process (PostgreSQL): the turns that arrive
while earlier ones are being written wait, and go together in the next batch, one
transaction (``cortex.services.turn_batch``). There is no fixed delay: a turn that finds
a free batch slot starts a batch of its own at once; only while every slot is writing do
turns gather, so batches grow with the load and stay single turns when the server is idle.
Each request still waits for the commit of the transaction that carries it: its batch's, or
its own for a turn the batch left to capture alone.

A batch goes to a writer thread of the batcher's own (``threads.Threads``) and comes back
with one call into the event loop that answers its turns and hands on the next batch: no
task waits for it.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Coroutine
from typing import Any

from cortex.adapters.server.threads import Threads
from cortex.services.hosting import ServiceHost
from cortex.services.turn_batch import Admit, Outcome, Turn, Written, write_batch

MAX_BATCH = 64
"""Most turns in one batch (one transaction); more wait for the next."""


class TurnBatcher:
    """Batches of turns for ``host``, at most ``slots`` of them writing at once, each in a
    writer thread of the batcher's own (``threads``, ``slots`` of them). The turns a batch
    leaves to be captured alone (see ``turn_batch``) are captured after it, while the slot
    writes the next batch, each in a thread of ``alone``: its chains (``Written.chains``) at
    the same time, so a turn waiting for a session another transaction holds holds up no
    other turn, and turns of several held sessions wait their bounds side by side rather
    than one after another. They take at most all but one of ``alone``'s threads, whatever
    the batches: ``alone`` is the share of the pool session starts and ends take too, and a
    start (someone waits for its restore) always finds a thread within one lock bound."""

    def __init__(
        self,
        host: ServiceHost,
        admit: Admit,
        *,
        slots: int,
        alone: Threads,
    ) -> None:
        self.host = host
        self.admit = admit
        self.slots = slots
        self.alone = alone
        self.held_at_once = max(1, alone.size - 1)
        """How many turns are captured alone at once (one thread of ``alone`` left over)."""
        self._held = asyncio.Semaphore(self.held_at_once)
        self._waiting: list[tuple[Turn, asyncio.Future[Outcome]]] = []
        self._writers = 0  # batches being written (or about to be)
        self._tasks: set[asyncio.Task[None]] = set()  # held, so that none is collected
        self._loop: asyncio.AbstractEventLoop | None = None
        self.threads = Threads(slots, "cortex-turns")

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
            self._hand_on(loop)
        return await answer

    def _hand_on(self, loop: asyncio.AbstractEventLoop) -> None:
        """Give a writer the next batch of the waiting turns, or free the slot when none
        waits: in one step of the event loop, so a turn queued from then on finds the slot
        free and starts a batch."""
        if not self._waiting:
            self._writers -= 1
            return
        batch, self._waiting = self._waiting[:MAX_BATCH], self._waiting[MAX_BATCH:]
        turns = [turn for turn, _ in batch]
        write = functools.partial(write_batch, self.host, turns, self.admit)
        self.threads.call(loop, write, functools.partial(self._written, loop, batch))

    def _written(
        self,
        loop: asyncio.AbstractEventLoop,
        batch: list[tuple[Turn, asyncio.Future[Outcome]]],
        written: Written | None,
        error: BaseException | None,
    ) -> None:
        """In the event loop: answer the batch's turns, start the capture of those it left
        alone, and hand on the next batch."""
        answers = [answer for _, answer in batch]
        try:
            if isinstance(error, Exception):  # a bug: never leave a request waiting for ever
                _settle(answers, [(i, error) for i in range(len(batch))])
            elif written is None:  # the writer was stopped (SystemExit): the process stops
                _cancel(answers)
            else:
                _settle(answers, written.settled())
                if written.left():
                    self._start(loop, self._alone(written, answers))
        finally:  # whatever happened, the slot goes on to the turns waiting
            if loop is self._loop:  # not an earlier event loop's (a test client's) batch
                self._hand_on(loop)

    def _start(self, loop: asyncio.AbstractEventLoop, work: Coroutine[Any, Any, None]) -> None:
        task = loop.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

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
                    outcome = await self.alone.run(functools.partial(written.alone, i))
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
