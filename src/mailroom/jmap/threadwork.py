"""Blocking work in the thread pool that a cancellation waits for, instead of leaving it behind.

``run_in_threadpool`` awaited by a task that is cancelled with ``task.cancel()``
returns at once while the thread goes on: its database session then outlives
the request, the push loop or the server that started it (and a store
disposed meanwhile leaves that connection to the garbage collector).
:func:`in_thread` runs the same work, but a cancellation — however often it
comes — first waits for the thread to return and then goes on as usual.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import suppress
from typing import ParamSpec, TypeVar

import anyio
from starlette.concurrency import run_in_threadpool

P = ParamSpec("P")
T = TypeVar("T")


async def in_thread(func: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``func(*args, **kwargs)`` in the thread pool; on cancellation, wait for it to return."""
    work = asyncio.ensure_future(run_in_threadpool(func, *args, **kwargs))
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        with anyio.CancelScope(shield=True):  # no anyio re-delivery while we wait
            while not work.done():
                with suppress(asyncio.CancelledError):
                    await asyncio.wait({work})
        if not work.cancelled():
            work.exception()  # retrieved: a failure after the cancellation is not logged
        raise
