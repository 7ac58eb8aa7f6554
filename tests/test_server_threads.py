"""``Threads``: the direct routes' worker threads, each call's outcome handed back to the
event loop that asked for it."""

from __future__ import annotations

import asyncio
import threading

import pytest

from cortex.adapters.server.threads import Threads


def test_a_call_answers_with_its_result_or_raises_its_error_in_the_caller() -> None:
    threads = Threads(2, "work")
    assert [t for t in threading.enumerate() if t.name.startswith("work_")] == []

    def fail() -> None:
        raise KeyError("gone")

    async def main() -> tuple[list[str], str]:
        names = await asyncio.gather(
            *(threads.run(lambda: threading.current_thread().name) for _ in range(6))
        )
        with pytest.raises(KeyError, match="gone"):
            await threads.run(fail)
        return names, await threads.run(lambda: "after a failure")

    names, after = asyncio.run(main())
    assert set(names) <= {"work_0", "work_1"} and after == "after a failure"


def test_calls_of_one_thread_run_in_their_order_and_a_closed_loops_outcome_is_dropped() -> None:
    threads, gate, order = Threads(1, "one"), threading.Event(), []

    def step(n: int) -> int:
        gate.wait(10)
        order.append(n)
        return n

    async def abandon() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(threads.run(lambda: step(1)), 0.1)

    asyncio.run(abandon())  # its loop closes while the call waits at the gate
    gate.set()
    assert asyncio.run(threads.run(lambda: step(2))) == 2  # the same thread, the next loop
    assert order == [1, 2]
