"""Steps: the extension point run once after a batch has committed.

A step gets the batch result and *enqueues* follow-up work; it never does
the work itself and can never fail an ingest: a step that raises is logged
and the next one runs. Register steps in ``STEPS`` (order is kept).
"""

from __future__ import annotations

import logging
from typing import Protocol

from mailroom.ingest.model import BatchResult

log = logging.getLogger(__name__)


class Step(Protocol):
    """A named piece of follow-up run after commit."""

    name: str

    def run(self, result: BatchResult) -> None:
        """Enqueue follow-up work for the batch."""


STEPS: list[Step] = []


def run_steps(result: BatchResult, steps: list[Step] | None = None) -> list[str]:
    """Run every step; returns the names of steps that failed (already logged)."""
    failed: list[str] = []
    for step in STEPS if steps is None else steps:
        try:
            step.run(result)
        except Exception:
            log.exception("Step %s failed for a batch of account %s", step.name, result.account_id)
            failed.append(step.name)
    return failed
