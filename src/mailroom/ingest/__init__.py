"""Ingest: storing batches of provider messages exactly once, then the pipeline."""

from mailroom.ingest.batch import BatchResult, IncomingMessage, Location, store_batch

__all__ = ["BatchResult", "IncomingMessage", "Location", "store_batch"]
