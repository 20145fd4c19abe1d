"""Zones by IANA name: a bad name is no zone, never an error."""

from __future__ import annotations

from zoneinfo import ZoneInfo

import pytest

from mailroom.timezones import known_zone


def test_a_known_name_is_its_zone() -> None:
    """Europe/Berlin and UTC are zones."""
    assert known_zone("Europe/Berlin") == ZoneInfo("Europe/Berlin")
    assert known_zone("UTC") == ZoneInfo("UTC")


@pytest.mark.parametrize(
    "name", [None, "", 5, "Mars/Olympus", "America", "../etc/passwd", "/etc/localtime", "UTC\0"]
)
def test_a_bad_name_is_no_zone(name: object) -> None:
    """Unknown, empty, not text, a folder of zones, a path: None, and nothing raised."""
    assert known_zone(name) is None
