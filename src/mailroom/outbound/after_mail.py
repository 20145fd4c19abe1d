"""What runs after mail moves: filing what was sent, reading bounces, answering on vacation.

One :class:`AfterMail` per job runtime installs, and on shutdown removes:

* :func:`mailroom.outbound.filing.file_sent` in
  :data:`mailroom.outbound.hooks.AFTER_SENT` (called by the sender after a
  submission is committed as ``sent``);
* :func:`mailroom.outbound.bounces.recognise_bounces` and a
  :class:`mailroom.outbound.vacation.VacationResponder` in
  :data:`mailroom.jobs.tasks.ENRICHERS`: the ingest step ``follow_up``
  (:class:`mailroom.jobs.tasks.FollowUpStep`) routes every committed batch's
  new messages to the follow-up queues — live mail first, a backlog last —
  and the follow-up job runs the enrichers there, never inside the ingest
  transaction and never failing it.

Installing twice adds nothing twice (a second runtime in the same process,
tests); each part stays callable on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from mailroom.config import Settings
from mailroom.jobs.tasks import ENRICHERS
from mailroom.outbound.bounces import recognise_bounces
from mailroom.outbound.filing import file_sent
from mailroom.outbound.hooks import AFTER_SENT
from mailroom.outbound.vacation import VacationResponder
from mailroom.store.models import utcnow

__all__ = ["AfterMail"]


class AfterMail:
    """The after-sending hook and the two enrichers of one runtime (module docstring)."""

    def __init__(self, settings: Settings, clock: Callable[[], datetime] = utcnow) -> None:
        self.vacation = VacationResponder(settings, clock)

    def install(self) -> AfterMail:
        """Register the hook and the enrichers (once); returns self."""
        if file_sent not in AFTER_SENT:
            AFTER_SENT.append(file_sent)
        if recognise_bounces not in ENRICHERS:
            ENRICHERS.append(recognise_bounces)
        if not any(isinstance(e, VacationResponder) for e in ENRICHERS):
            ENRICHERS.append(self.vacation)
        return self

    def uninstall(self) -> None:
        """Remove what :meth:`install` registered."""
        if file_sent in AFTER_SENT:
            AFTER_SENT.remove(file_sent)
        if recognise_bounces in ENRICHERS:
            ENRICHERS.remove(recognise_bounces)
        if self.vacation in ENRICHERS:
            ENRICHERS.remove(self.vacation)
