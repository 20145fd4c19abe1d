"""Pruning expired uploads never deletes bytes a submission still sends (a foreign key to blobs)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from sqlalchemy import select

from mailroom.jmap.uploads import prune_uploads, store_upload
from mailroom.outbound.sender import Sender
from mailroom.store.engine import Store
from mailroom.store.models import Account, Blob, utcnow
from tests.factories import make_message
from tests.outbound.core_support import (
    Clock,
    account_for,
    queue,
    sending_settings,
    subjects,
    submission,
)
from tests.support.smtp_sink import SmtpSink


def _blobs(store: Store) -> set[str]:
    with store.session() as session:
        return set(session.scalars(select(Blob.sha256)))


def test_prune_keeps_the_bytes_of_a_queued_submission(
    store: Store, sink: SmtpSink, tmp_path: Path
) -> None:
    """An expired upload whose bytes a submission sends goes; the bytes stay and are sent."""
    settings = sending_settings(tmp_path)
    clock = Clock(utcnow())
    account_id = account_for(store, sink)
    with store.session() as session:
        account = session.get(Account, account_id)
        assert account is not None
        user_id = account.user_id
    raw = make_message("1@core.test", subject="n1")  # no Bcc: queued byte for byte
    shared = store_upload(store, user_id, raw, "message/rfc822")
    alone = store_upload(store, user_id, b"nothing else uses these bytes", "text/plain")
    submission_id = queue(store, settings, account_id, 1, clock, lane="direct")
    assert submission(store, submission_id).raw_sha256 == shared.sha256
    assert prune_uploads(store, utcnow() + timedelta(hours=25)) == 2
    left = _blobs(store)
    assert shared.sha256 in left
    assert alone.sha256 not in left
    sender = Sender(store, settings, clock=clock)
    try:
        assert sender.run_lane("direct") == 1
    finally:
        sender.close()
    assert subjects(sink) == ["n1"]
