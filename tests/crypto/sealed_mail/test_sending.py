"""Outgoing mail with sealing on: the queued bytes are sealed, the sink gets them clear."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from mailroom.outbound.sender import Sender
from mailroom.store.engine import Store
from mailroom.store.models import Blob, Submission
from tests.outbound.core_support import Clock, account_for, queue, sending_settings
from tests.support.smtp_sink import SmtpSink


@pytest.fixture
def sink() -> Iterator[SmtpSink]:
    """A plain SMTP sink on loopback."""
    with SmtpSink() as running:
        yield running


def test_queued_bytes_are_sealed_and_sent_clear(
    sealed_store: Store, sink: SmtpSink, tmp_path: Path
) -> None:
    settings = sending_settings(tmp_path)
    clock = Clock()
    account_id = account_for(sealed_store, sink)
    queue(sealed_store, settings, account_id, 7, clock)
    with sealed_store.session() as session:
        key = session.scalar(select(Submission.raw_sha256))
        blob = session.get(Blob, key)
        assert blob is not None and blob.user_id is not None
        assert b"Subject: n7" not in blob.data and b"7@core.test" not in blob.data
    sender = Sender(sealed_store, settings, clock=clock)
    try:
        assert sender.run_lane("calm") == 1
    finally:
        sender.close()
    (sent,) = sink.messages
    assert b"Subject: n7" in sent.data
