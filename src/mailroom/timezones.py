"""Time zones by IANA name, where a bad name means "no zone" rather than an error.

A user's setting, an event's ``TZID`` or a schema.org offset may name a zone
this machine does not know (``Mars/Olympus``), a folder of zones (``America``)
or a path (``../etc``); each caller then falls back to UTC in its own form.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def known_zone(name: object) -> ZoneInfo | None:
    """The zone of this IANA name; None when the name is empty, not text or no zone known here."""
    if not isinstance(name, str) or not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a folder such as "America"
        return None
