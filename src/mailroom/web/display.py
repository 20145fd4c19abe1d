"""How the pages write times and senders (Jinja filters, plain functions).

Times are shown in the user's time zone (``users.settings["timezone"]``, an
IANA name; UTC when unset or unknown): today's as the time, this year's as
the day, older ones as the date.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, tzinfo
from typing import Any

from mailroom.timezones import known_zone

MAX_SENDERS = 3  # a row names at most this many; more become "first … last two"


def user_zone(settings: Mapping[str, Any]) -> tzinfo:
    """The time zone the user chose, or UTC."""
    return known_zone(settings.get("timezone")) or UTC


def short_time(moment: datetime, now: datetime, zone: tzinfo = UTC) -> str:
    """``14:05`` today, ``4 Mar`` this year, ``2023-03-04`` before."""
    local, today = moment.astimezone(zone), now.astimezone(zone)
    if local.date() == today.date():
        return local.strftime("%H:%M")
    if local.year == today.year:
        return f"{local.day} {local:%b}"
    return local.strftime("%Y-%m-%d")


def full_time(moment: datetime, zone: tzinfo = UTC) -> str:
    """The whole time, for a tooltip: ``2023-03-04 14:05 CET``."""
    return moment.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")


def sender_names(senders: Sequence[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """A row's senders to show: the one name in full, several by first name, and more
    than :data:`MAX_SENDERS` as the first, ``…`` and the last two."""
    if len(senders) <= 1:
        return list(senders)
    short = [(_first_name(name), unread) for name, unread in senders]
    if len(short) > MAX_SENDERS:
        short = [short[0], ("…", False), *short[-2:]]
    return short


def _first_name(name: str) -> str:
    if "@" in name and " " not in name:
        return name.split("@", 1)[0]
    return name.split()[0] if name.split() else name
