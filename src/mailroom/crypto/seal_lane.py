"""Sealing a batch's new values in a helper process while the writer goes on with the batch.

The values of new sealed mail are bound to their row ids (``crypto.fields``),
so they can be sealed only once the rows are inserted. A large import
(``providers.local.importer``) opens a *lane*, one helper process, with
:func:`sealing_lane`; :class:`SealedSoon` then hands the batch's values and the
owner's current data key to it and returns at once, and the writer goes on
with the stages that do not read those values. The sealed values are written
by the ``sealed`` stage (``ingest.pipeline``), before any stage reads them and
in the same transaction, so no reader sees a half-written message and no
clear value reaches the database. Without a lane (every other writer), or
when the helper fails, the values are sealed in the writer, the same way.

The data key reaches the helper through a pipe between two processes of the
same service user, as it would reach any thread of the writer; it is never
written anywhere.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from mailroom.crypto.datakey import DataKey
from mailroom.crypto.fields import key_sealer, to_text

if TYPE_CHECKING:
    from mailroom.crypto.fields import FieldCipher

log = logging.getLogger(__name__)

# One value to seal: table, column, row id, clear value.
SealJob = tuple[str, str, int | str, str | bytes]


class Lane(Protocol):
    """Where :class:`SealedSoon` runs the sealing: ``mime.pool.ParsePool`` fits."""

    def call(self, function: Callable[..., Any], *args: Any) -> Future[Any] | None:
        """Run ``function(*args)`` in a helper; None when no helper is up."""


Sealed = TypeVar("Sealed", str, bytes)

_lane: ContextVar[Lane | None] = ContextVar("mailroom_seal_lane", default=None)


@contextmanager
def sealing_lane(lane: Lane) -> Iterator[None]:
    """Seal the values of the batches stored inside this block in ``lane``."""
    token = _lane.set(lane)
    try:
        yield
    finally:
        _lane.reset(token)


def seal_tokens(key: DataKey, jobs: Sequence[SealJob]) -> list[bytes]:
    """The jobs' values sealed under ``key``, as bytes for a binary column (in the helper)."""
    seal = key_sealer(key)
    return [seal(table, column, row, value) for table, column, row, value in jobs]


def seal_texts(key: DataKey, jobs: Sequence[SealJob]) -> list[str]:
    """The jobs' values sealed under ``key``, as ``mrf1.`` text (runs in the helper)."""
    return [to_text(token) for token in seal_tokens(key, jobs)]


class SealedSoon(Generic[Sealed]):
    """The sealed values of a list of jobs, being made in the lane or made here already.

    ``seal``: :func:`seal_texts` for text columns, :func:`seal_tokens` for binary ones.
    """

    def __init__(
        self,
        cipher: FieldCipher,
        owner: int,
        jobs: list[SealJob],
        seal: Callable[[DataKey, Sequence[SealJob]], list[Sealed]],
    ) -> None:
        self._key, self._jobs = cipher.keys.current(owner), jobs
        self._seal: Callable[[DataKey, Sequence[SealJob]], list[Sealed]] = seal
        lane = _lane.get()
        self._future: Future[list[Sealed]] | None = (
            lane.call(seal, self._key, jobs) if lane and jobs else None
        )
        self._values: list[Sealed] | None = None
        if self._future is None:
            self._values = seal(self._key, jobs)

    def values(self) -> list[Sealed]:
        """The sealed values, in the jobs' order (sealed here if the helper failed)."""
        if self._values is None:
            assert self._future is not None
            try:
                self._values = self._future.result()
            except Exception:
                log.exception("The sealing helper failed; sealing the batch in this process")
                self._values = self._seal(self._key, self._jobs)
        return self._values
