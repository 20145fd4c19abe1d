"""The operator's rules for JMAP sending (RFC 8621 §7) and the capability that shows them.

``undo``: every EmailSubmission waits this long ``scheduled`` before its lane
may take it (``MAILROOM_SEND_UNDO_SECONDS``, 0 by default), so a client can
still cancel it (``undoStatus`` → ``canceled``). ``max_delayed_send``: the
longest FUTURERELEASE hold (RFC 4865 ``HOLDFOR``/``HOLDUNTIL`` in the
envelope's ``mailFrom`` parameters), advertised as ``maxDelayedSend`` and in
``submissionExtensions``. ``max_recipients`` and ``max_size``: what one message
may carry (``tooManyRecipients``; ``tooLarge`` above the submission port's
``MAILROOM_SUBMISSION_MAX_BYTES``, one size for both ways in). ``clock`` is
injectable so tests decide what "now" is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from mailroom.config import Settings
from mailroom.jmap.methods.common import utc_date
from mailroom.store.models import utcnow

__all__ = ["FUTURERELEASE", "SubmissionPolicy", "submission_capability"]

FUTURERELEASE = "FUTURERELEASE"


@dataclass(frozen=True)
class SubmissionPolicy:
    """How JMAP submissions are queued: the settings, the undo window, the limits, the clock."""

    settings: Settings = field(default_factory=Settings)
    clock: Callable[[], datetime] = utcnow

    @property
    def undo(self) -> timedelta:
        """How long a new submission stays cancellable before its lane may send it."""
        return timedelta(seconds=max(0, self.settings.send_undo_seconds))

    @property
    def max_delayed_send(self) -> int:
        """The longest FUTURERELEASE hold in seconds (0: none allowed)."""
        return max(0, self.settings.send_max_delay_seconds)

    @property
    def max_recipients(self) -> int:
        """The most envelope recipients of one submission."""
        return max(1, self.settings.send_max_recipients)

    @property
    def max_size(self) -> int:
        """The largest message in octets that may be sent."""
        return max(1, self.settings.submission_max_bytes)


def submission_capability(policy: SubmissionPolicy) -> dict[str, Any]:
    """The account's ``urn:ietf:params:jmap:submission`` object (RFC 8621 §1.3.2).

    ``FUTURERELEASE`` carries RFC 4865's two EHLO arguments: the longest hold in
    seconds and the latest date-time a hold may reach (now plus that).
    """
    longest = policy.max_delayed_send
    extensions: dict[str, list[str]] = {}
    if longest:
        latest = utc_date(policy.clock() + timedelta(seconds=longest)) or ""
        extensions[FUTURERELEASE] = [str(longest), latest]
    return {"maxDelayedSend": longest, "submissionExtensions": extensions}
