"""One version of one owner's data key, unwrapped (``crypto.datakeys`` finds and makes them).

A module of its own, free of the database layer: the sealing lane's helper
process (``crypto.seal_lane``) receives one and imports only this and
``crypto.fields``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DataKey:
    """One version of one owner's data key, unwrapped."""

    owner: int
    version: int
    key: bytes
