"""When a snooze ends: the presets of the snooze menu and a time the user typed.

Times are the user's wall-clock time (``display.user_zone``): "Later today"
is 18:00 today (or three hours from now once it is past 15:00), "Tomorrow"
08:00, "This weekend" Saturday 08:00 and "Next week" Monday 08:00.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta, tzinfo

from mailroom.web.mailactions import ActionError

MORNING, EVENING = time(8, 0), time(18, 0)


def presets(now: datetime, zone: tzinfo) -> list[tuple[str, str, datetime]]:
    """(name, title, when) of each preset, in menu order."""
    local = now.astimezone(zone)
    today = local.date()

    def at(day_offset: int, moment: time) -> datetime:
        day = today + timedelta(days=day_offset)
        return datetime.combine(day, moment, tzinfo=zone)

    later = at(0, EVENING) if local.time() < time(15, 0) else local + timedelta(hours=3)
    saturday = (5 - today.weekday()) % 7 or 7
    monday = (7 - today.weekday()) % 7 or 7
    return [
        ("later", "Later today", later.replace(second=0, microsecond=0)),
        ("tomorrow", "Tomorrow", at(1, MORNING)),
        ("weekend", "This weekend", at(saturday, MORNING)),
        ("week", "Next week", at(monday, MORNING)),
    ]


def snooze_until(preset: str, typed: str, now: datetime, zone: tzinfo) -> datetime:
    """The end of a snooze from a preset name or a typed ``YYYY-MM-DDTHH:MM`` (user's time)."""
    if preset:
        for name, _, when in presets(now, zone):
            if name == preset:
                return when
        raise ActionError(f"There is no snooze choice {preset!r}.")
    try:
        when = datetime.fromisoformat(typed.strip())
    except ValueError as exc:
        raise ActionError("Give the snooze time as a date and a time.") from exc
    when = when.replace(tzinfo=zone) if when.tzinfo is None else when
    if when <= now:
        raise ActionError("Choose a time in the future to snooze until.")
    return when
