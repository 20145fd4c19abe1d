"""Events found in sealed mail: summary, location and source sealed, read as if clear."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import text

from mailroom.crypto import MasterKeyWrapper
from mailroom.crypto.datakeys import OwnerKeys
from mailroom.crypto.fields import from_text, version_of
from mailroom.crypto.owner_rotation import Rotator, start_rotation
from mailroom.crypto.sealing import MailSealing
from mailroom.events.extract import extract_events
from mailroom.events.feed import calendar_feed
from mailroom.events.stored import events_of_messages
from mailroom.store.engine import Store
from tests.events.support import store_samples


def _events(store: Store, owner: int, ids: dict[str, int]) -> list[tuple[Any, ...]]:
    with store.session() as session:
        return [
            (e.position, e.kind, e.summary, e.location, e.starts_at, e.source)
            for e in events_of_messages(session, owner, sorted(ids.values()))
        ]


def test_sealed_events_read_like_clear_ones_and_hold_no_clear_text(store: Store) -> None:
    wrapper = MasterKeyWrapper(os.urandom(32))
    store.sealing = MailSealing(wrapper, seal_new_mail=False)
    (clear_owner, _, _), clear_ids = store_samples(store, owner="clara")
    extract_events(store, sorted(clear_ids.values()))
    store.sealing = MailSealing(wrapper, seal_new_mail=True)
    (sealed_owner, _, _), sealed_ids = store_samples(store, owner="sam")
    extract_events(store, sorted(sealed_ids.values()))

    clear = _events(store, clear_owner, clear_ids)
    assert len(clear) == 5
    assert _events(store, sealed_owner, sealed_ids) == clear
    with store.engine.connect() as conn:
        sealed_rows = conn.execute(text("SELECT * FROM message_events WHERE sealed")).all()
    assert len(sealed_rows) == 5
    stored = "\n".join(str(value) for row in sealed_rows for value in row)
    for _position, _kind, summary, location, _starts, _source in clear:
        assert summary and summary not in stored
        assert location is None or location not in stored

    # The calendar feed (ORM rows, opened as they load) reads the same for both owners.
    now = datetime(2020, 1, 1, tzinfo=UTC)
    with store.session() as session:
        feeds = [calendar_feed(session, owner, now) for owner in (clear_owner, sealed_owner)]
    assert feeds[0].count(b"BEGIN:VEVENT") > 0
    assert feeds[0].count(b"SUMMARY") == feeds[1].count(b"SUMMARY")
    assert clear[0][2].encode() in feeds[1]

    # An owner key rotation re-encrypts them; they still read the same.
    with store.session() as session:
        rotation = start_rotation(session, OwnerKeys(session, wrapper), sealed_owner)
        session.flush()
        rotation_id = rotation.id
    Rotator(store, wrapper, batch=2).run(rotation_id)
    with store.engine.connect() as conn:
        summaries = conn.execute(text("SELECT summary FROM message_events WHERE sealed")).all()
    assert {version_of(from_text(str(row[0]))) for row in summaries} == {2}
    assert _events(store, sealed_owner, sealed_ids) == clear
