"""Ingest: storing batches of provider messages exactly once, then the pipeline and the steps.

Providers build :mod:`mailroom.ingest.model` values and call
:func:`mailroom.ingest.commit.commit_batch`; :mod:`mailroom.ingest.mirror` writes
what a provider reports about messages already stored.
"""

from mailroom.ingest.batch import store_batch
from mailroom.ingest.commit import commit_batch
from mailroom.ingest.model import BatchResult, IncomingMessage, Location

__all__ = ["BatchResult", "IncomingMessage", "Location", "commit_batch", "store_batch"]
