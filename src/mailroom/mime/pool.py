"""Parsing batches in worker processes while the caller stores the previous batch.

Parsing is CPU-bound pure Python; storing is mostly database work. With a
look-ahead of one batch the two overlap, and with several cores the parsing
itself spreads over them.

Cheap to start: the workers fork from a forkserver that has imported only
:mod:`mailroom.mime` (not the database layer), so they start in a fraction
of a second and share most of their memory. They are also kept from
re-running the main script (multiprocessing does that to find functions
defined there; ours live here): for the ``mailroom`` command that would
import the whole CLI into every worker. They start in the background (a
thread waits for the forkserver); until they are up, batches are parsed in
the calling process, which would otherwise wait. Small imports
parse inline throughout (starting processes costs more than it saves). A
worker failure never loses a message: the batch is simply parsed inline
instead.
"""

from __future__ import annotations

import importlib
import logging
import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager, suppress
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

from mailroom.crypto.blind_tokens import TokenKeys
from mailroom.mime.model import ParsedMessage
from mailroom.mime.parse import parse_message

log = logging.getLogger(__name__)

PARALLEL_FROM = 1000  # messages; below this, parse inline
WORKER_NICENESS = 10  # added to a worker's niceness (see _yield_to_the_caller)

T = TypeVar("T")


def parse_all(
    items: Sequence[tuple[bytes, datetime | None]], tokens: TokenKeys | None = None
) -> list[ParsedMessage]:
    """Parse (raw, received time) pairs; runs in a worker process.

    ``tokens``: the import seals mail for the owner of these keys; each message's blind
    index entry is made here too (``ParsedMessage.blind_entry``), off the writer's process.
    """
    parsed = [parse_message(raw, received_at=received) for raw, received in items]
    if tokens is not None:
        for message in parsed:
            message.blind_entry = tokens.entry_of(
                message.subject, message.participants(), message.text_body
            )
    return parsed


def _ready(modules: Sequence[str]) -> bool:
    """Start a worker: import what it needs (when the forkserver did not), then report."""
    for module in modules:
        importlib.import_module(module)
    return True


def _yield_to_the_caller() -> None:
    """Start a worker at a lower CPU priority than the process it works for.

    The caller (an import's writer) is the one busy process the others feed:
    when the workers, a sealing lane and the writer all want the CPU, the writer
    should not wait for it. A worker still gets every core the writer leaves.
    """
    with suppress(OSError):  # not permitted here: run at the caller's priority
        os.nice(WORKER_NICENESS)


@contextmanager
def _main_script_hidden() -> Iterator[None]:
    """Keep new worker processes from importing ``__main__``'s file as ``__mp_main__``."""
    main = sys.modules["__main__"]
    path = main.__dict__.pop("__file__", None)
    try:
        yield
    finally:
        if path is not None:
            main.__file__ = path


class ParsePool:
    """Worker processes for parsing and the IMAP look-ahead (or none, for small jobs)."""

    def __init__(
        self,
        expected_messages: int,
        workers: int | None = None,
        preload: Sequence[str] = (),
        warm: Sequence[str] = (),
        yielding: bool = True,
    ) -> None:
        """``preload``: modules the workers need besides :mod:`mailroom.mime` (imported once,
        in the forkserver, if this pool is the first to start it). ``warm``: modules each
        worker imports itself before it reports ready, leaving the forkserver (which other
        pools' workers fork from) as it is. ``yielding``: the workers run at a lower CPU
        priority than the caller (:func:`_yield_to_the_caller`); False for a helper whose
        results the caller waits for at once."""
        count = workers or min(4, (os.cpu_count() or 1) - 1)
        self._pool: ProcessPoolExecutor | None = None
        self._started: list[Future[bool]] = []
        self._launcher: threading.Thread | None = None
        self._launched = threading.Event()
        if expected_messages >= PARALLEL_FROM and count >= 1:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["mailroom.mime", *preload])
            self._pool = ProcessPoolExecutor(
                count, mp_context=context, initializer=_yield_to_the_caller if yielding else None
            )
            # Starting the workers waits for the forkserver to import its modules (0.3 s
            # on a quiet machine, over a second on a busy one): a thread waits for it, so
            # the caller gets on with its first batches meanwhile.
            self._launcher = threading.Thread(
                target=self._launch,
                args=(self._pool, count, [*preload, *warm]),
                name="parse-pool-start",
                daemon=True,
            )
            self._launcher.start()

    def _launch(self, pool: ProcessPoolExecutor, count: int, preload: list[str]) -> None:
        try:
            with _main_script_hidden():  # the workers start on these submits
                self._started = [pool.submit(_ready, preload) for _ in range(count)]
        except Exception:  # no workers then (``up`` stays False): everything is parsed inline
            log.warning("The parse workers could not be started; parsing in this process")
        finally:
            self._launched.set()

    def up(self) -> bool:
        """Whether the workers have started (until then :meth:`call` returns None)."""
        started = self._started
        return self._launched.is_set() and bool(started) and all(f.done() for f in started)

    def __enter__(self) -> ParsePool:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._launcher is not None:
            self._launcher.join()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def submit(
        self, items: Sequence[tuple[bytes, datetime | None]], tokens: TokenKeys | None = None
    ) -> Future[list[ParsedMessage]]:
        """Start parsing a batch (here, when no worker is up); the result keeps the order.

        ``tokens``: see :func:`parse_all`.
        """
        future = self.call(parse_all, list(items), tokens)
        if future is None:
            future = Future()
            future.set_result(parse_all(items, tokens))
        return future

    def call(self, function: Callable[..., T], *args: Any) -> Future[T] | None:
        """Run ``function(*args)`` in a worker; None while no worker is up (or none at all)."""
        if self._pool is None or not self.up():
            return None
        try:
            return self._pool.submit(function, *args)
        except RuntimeError:  # BrokenProcessPool: a worker died; work here from now on
            log.warning("The worker processes stopped; parsing in this process from now on")
            self._pool = None
            return None

    @staticmethod
    def result(
        future: Future[list[ParsedMessage]], items: Sequence[tuple[bytes, datetime | None]]
    ) -> list[ParsedMessage]:
        """The parsed batch, parsing inline if the worker failed."""
        try:
            return future.result()
        except Exception:
            log.exception("A parsing worker failed; parsing the batch in this process")
            return parse_all(items)
