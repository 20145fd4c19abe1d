"""Timestamps as the plain-SQL reader gives them: aware UTC, whichever store kept them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from mailroom.store.reader import required_stamp


def test_a_stored_time_is_aware_utc_from_text_naive_or_offset() -> None:
    """SQLite's naive UTC text, a naive datetime and one with an offset are the same instant."""
    moment = datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    assert required_stamp("2024-01-02 03:04:05.000006") == moment
    assert required_stamp(datetime(2024, 1, 2, 3, 4, 5, 6)) == moment
    east = moment.astimezone(timezone(timedelta(hours=2)))
    assert required_stamp(east).tzinfo is UTC and required_stamp(east) == moment


def test_a_missing_required_time_is_a_sentence_not_a_none() -> None:
    """NULL where the column is NOT NULL is refused in a sentence."""
    with pytest.raises(ValueError, match="NOT NULL was read as NULL"):
        required_stamp(None)
