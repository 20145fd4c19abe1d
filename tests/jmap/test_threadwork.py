"""in_thread: a cancelled caller ends only after its thread-pool work has returned."""

from __future__ import annotations

import asyncio
import threading

import pytest

from mailroom.jmap.threadwork import in_thread

# Loop turns given to a cancelled task: far more than a plain cancellation needs to end it.
TURNS = 20


async def _turns(count: int) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


@pytest.mark.parametrize("cancellations", [1, 3])
def test_a_cancelled_caller_waits_for_its_thread(cancellations: int) -> None:
    """However often it is cancelled, the caller ends (cancelled) once the work has returned."""
    started, go_on = threading.Event(), threading.Event()
    finished: list[str] = []

    def work() -> str:
        started.set()
        go_on.wait(timeout=60)
        finished.append("work")
        return "result"

    async def scenario() -> None:
        task = asyncio.create_task(in_thread(work))
        while not started.is_set():
            await asyncio.sleep(0.01)
        for _ in range(cancellations):
            task.cancel()
            await _turns(TURNS)
        assert not task.done()  # the thread still runs: the caller has not ended
        go_on.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert finished == ["work"]

    asyncio.run(scenario())


def test_results_and_errors_pass_through() -> None:
    """Without a cancellation it is simply the function's result or exception."""

    def fails() -> None:
        raise ValueError("no")

    async def scenario() -> None:
        assert await in_thread(divmod, 7, 2) == (3, 1)
        with pytest.raises(ValueError, match="no"):
            await in_thread(fails)

    asyncio.run(scenario())
