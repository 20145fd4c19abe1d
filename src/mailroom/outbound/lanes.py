"""The outgoing lanes (SPEC §11) and the one function that picks a lane for a kind of mail.

* ``urgent`` — password resets, invoices: throttled, but ahead of ``calm``.
* ``calm`` — bulk: throttled.
* ``direct`` — never throttled.

**One queue per lane**: ``send_urgent``, ``send_calm``, ``send_direct`` in
:data:`mailroom.jobs.queues.QUEUES` (the name is ``send_`` + the lane). The
queue a job sits in *is* its lane: its pace and its retry rule (throttled: a
deferral is not an attempt, retry until 6 hours after queueing; unthrottled: 3
attempts with backoff, then the failed-sends table) follow from the queue, never
from looking the kind up again at run time — an operator who moves a kind to
another lane while 200 of its mails wait must not re-pace the waiting ones
against the wrong budget. Separate queues also let urgent mail overtake queued
calm mail, and let an operator give each lane its own workers
(``mailroom worker --queues send_urgent``).

:func:`lane_for` is therefore called once, when a message is queued: by a JMAP
submission, the submission port and ``mailroom send`` alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from mailroom.errors import ConfigError

__all__ = ["CALM", "DIRECT", "LANES", "URGENT", "WAITING", "lane_for"]

URGENT: Final = "urgent"
CALM: Final = "calm"
DIRECT: Final = "direct"
LANES: Final = (URGENT, CALM, DIRECT)
# The states of a submission waiting in its lane (``scheduled``: for a later send time).
WAITING: Final = ("scheduled", "queued")


def lane_for(kind: str | None, kinds: Mapping[str, str]) -> str:
    """The lane for a kind of mail per the configured ``kinds`` map; unknown kinds go ``calm``.

    ``calm`` is the fallback because mail sent too slowly is a smaller fault than an
    unthrottled burst nobody planned for. A configured lane that does not exist is
    the operator's mistake and raises :class:`~mailroom.errors.ConfigError` rather
    than being paced by a guess.
    """
    if kind is None or kind not in kinds:
        return CALM
    lane = kinds[kind]
    if lane not in LANES:
        raise ConfigError(
            f"The kind of mail {kind!r} is sent in lane {lane!r}, which does not exist; "
            f"the lanes are {', '.join(LANES)}."
        )
    return lane
