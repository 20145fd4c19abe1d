"""Splitting long lists for ``IN (...)`` clauses and multi-row statements.

SQLite binds a limited number of parameters per statement (999 before 3.32)
and very long ``IN`` lists plan poorly on both stores, so every query over an
open-ended list of ids runs in chunks of :data:`IN_LIST_SIZE`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

__all__ = ["IN_LIST_SIZE", "in_chunks"]

IN_LIST_SIZE = 500

T = TypeVar("T")


def in_chunks(items: Sequence[T], size: int = IN_LIST_SIZE) -> Iterator[list[T]]:
    """``items`` in consecutive lists of at most ``size``, in order."""
    for start in range(0, len(items), size):
        yield list(items[start : start + size])
