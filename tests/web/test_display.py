"""How rows write times and senders."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from mailroom.web.display import sender_names, short_time, user_zone

NOW = datetime(2024, 6, 15, 10, 30, tzinfo=UTC)


def test_short_time_is_the_time_today_the_day_this_year_the_date_before() -> None:
    """Today: 14:05; earlier this year: 4 Mar; an earlier year: 2023-12-31."""
    assert short_time(datetime(2024, 6, 15, 0, 5, tzinfo=UTC), NOW) == "00:05"
    assert short_time(datetime(2024, 6, 14, 23, 59, tzinfo=UTC), NOW) == "14 Jun"
    assert short_time(datetime(2024, 3, 4, 12, 0, tzinfo=UTC), NOW) == "4 Mar"
    assert short_time(datetime(2023, 12, 31, 12, 0, tzinfo=UTC), NOW) == "2023-12-31"


def test_short_time_uses_the_users_zone() -> None:
    """23:30 UTC yesterday is 01:30 today in Berlin; an unknown zone name means UTC."""
    late = datetime(2024, 6, 14, 23, 30, tzinfo=UTC)
    berlin = user_zone({"timezone": "Europe/Berlin"})
    assert berlin == ZoneInfo("Europe/Berlin")
    assert short_time(late, NOW, berlin) == "01:30"
    assert short_time(late, NOW, user_zone({"timezone": "Mars/Olympus"})) == "14 Jun"
    assert user_zone({}) == UTC and user_zone({"timezone": 5}) == UTC
    assert user_zone({"timezone": "America"}) == UTC  # a folder of zones, not a zone


def test_sender_names_shorten_as_rows_need() -> None:
    """One sender in full; several by first name (or the address's local part); more
    than three as the first, an ellipsis and the last two; unread marks kept."""
    assert sender_names([("Alice Example", True)]) == [("Alice Example", True)]
    assert sender_names([("Alice Example", False), ("bob@x.org", True)]) == [
        ("Alice", False),
        ("bob", True),
    ]
    many = [(f"P{i} Surname", i == 3) for i in range(5)]
    assert sender_names(many) == [("P0", False), ("…", False), ("P3", True), ("P4", False)]
    assert sender_names([]) == []
