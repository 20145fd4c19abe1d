"""Whether new mail waits for the assistant's verdict: a list of reasons not to.

For an owner who lets the model sort their mail, the rule cascade's tab is a
guess about to be replaced; shown at once, the mail would appear in Primary
and jump to Promotions seconds later. So, where the verdict can still change
the answer, the message is held: ``messages.category_held_at`` is set before
its thread's tab is derived, and :mod:`mailroom.conversations.refresh` leaves
held messages out of that — a new thread gets the ``held`` tab, which no tab
query lists, and a reply into an existing thread leaves that thread where it is.

Not held (each a reason, checked in this order):

* ``inactive`` — no assistant runs in this process (:data:`ACTIVE` is unset:
  only a runtime with a configured model and its releasers holds mail);
* ``owner_off`` — the owner has not switched the assistant on;
* ``tabs_off`` — every tab but Primary is switched off: a verdict changes nothing;
* ``importing`` — the account is still importing (old mail is not new mail);
* ``old`` — the message arrived more than :data:`OLD_AFTER` ago;
* ``own`` — it is the account's own sent copy;
* ``decided`` — the answer already stands: a user rule filed it, a Gmail
  ``CATEGORY_*`` label, the owner's own mail, a correction, a known correspondent
  (:func:`verdict_could_decide`, the same condition the catch-up asks by).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from mailroom.categories.tabs import CATEGORIES, PRIMARY
from mailroom.ingest.routing import account_finished_importing
from mailroom.store.chunks import in_chunks
from mailroom.store.models import Message

# The cascade's stages above the assistant's: their answer stands whatever the model says.
DECIDED_STAGES = frozenset({"provider_label", "own_message", "correction", "correspondent"})
OLD_AFTER = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class HoldPolicy:
    """Set by a runtime that has a model and the releasers: mail may be held."""

    hold_max_seconds: int


ACTIVE: list[HoldPolicy] = []  # the runtime appends its policy; empty: nothing is held


def verdict_could_decide() -> ColumnElement[bool]:
    """SQL: a model's verdict could still change the message's tab.

    No user rule filed it and no stage above the assistant's decided it; a message
    without a stage (sorted before stages were kept) is undecided. Holding new mail
    and the catch-up both select by this, so they never disagree about a message.
    """
    return Message.rule_category.is_(None) & or_(
        Message.category_stage.is_(None),
        Message.category_stage.not_in(sorted(DECIDED_STAGES)),
    )


def held_condition() -> ColumnElement[bool]:
    """SQL: the message is held (held and not yet released)."""
    return Message.category_held_at.is_not(None) & Message.category_released_at.is_(None)


def hold_new_mail(
    session: Session,
    user_id: int,
    account_id: int,
    message_ids: Collection[int],
    now: datetime,
    switched_off: Collection[str],
) -> tuple[list[int], str | None]:
    """Hold the messages among these that the verdict could still change.

    Returns the held ids and, when the whole batch is not held, the reason.
    """
    if not ACTIVE:
        return [], "inactive"
    from mailroom.assistant.config import owner_enabled

    if not owner_enabled(session, user_id):
        return [], "owner_off"
    if set(CATEGORIES) - {PRIMARY} <= set(switched_off):
        return [], "tabs_off"
    if not message_ids:
        return [], None
    if not account_finished_importing(session, account_id):
        return [], "importing"
    held: list[int] = []
    for chunk in in_chunks(sorted(message_ids)):
        held += session.scalars(
            select(Message.id).where(
                Message.id.in_(chunk),
                Message.user_id == user_id,
                Message.received_at >= now - OLD_AFTER,
                verdict_could_decide(),
            )
        )
    for chunk in in_chunks(held):
        session.execute(update(Message).where(Message.id.in_(chunk)).values(category_held_at=now))
    return held, None
