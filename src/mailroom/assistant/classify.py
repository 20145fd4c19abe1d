"""Asking the model once per message and applying its verdict.

The verdict is a stage of the category cascade (``assistant``: below the
answers that already stand — a Gmail label, the owner's own mail, a
correction, a correspondent — and above the bulk-mail rules), stored in
``messages.assistant_category`` so a later recomputation keeps it. Applying
it re-sorts the message (:func:`mailroom.categories.recompute.recategorize`,
which records the Email and Thread changes), then ends its hold through the
one releaser. A late verdict — the hold already ended by the delayed job or
the sweep — still moves the mail, and the move is recorded for push.

``assistant_at`` marks a message as asked, verdict or not: the model is asked
about a message once. The model is called outside any transaction (an answer
may take seconds); a message is claimed when its answer is written, so of two
workers that asked at once only the first answer counts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from mailroom.assistant.base import Classifier, Verdict
from mailroom.assistant.mail import load_mail
from mailroom.assistant.release import release
from mailroom.crypto.message_fields import sealed_updates
from mailroom.store.engine import Store
from mailroom.store.models import Message

log = logging.getLogger(__name__)

MIN_CONFIDENCE = 0.5  # below this a verdict is no verdict: the cascade's tab stays


@dataclass
class ClassifyOutcome:
    """What one run did: messages given a verdict, asked without one, left for later."""

    verdicts: list[int] = field(default_factory=list)
    no_verdict: list[int] = field(default_factory=list)
    left: list[int] = field(default_factory=list)  # yielded to live mail, not asked yet


def usable(verdict: Verdict | None) -> bool:
    """Whether an answer is a verdict: one confident enough to replace the cascade's tab."""
    return verdict is not None and verdict.confidence >= MIN_CONFIDENCE


def apply_verdict(
    session: Session, message_id: int, verdict: Verdict | None, now: datetime
) -> bool:
    """Record the answer (once), re-sort the message, end its hold; False if already asked."""
    values: dict[str, object] = {"assistant_at": now}
    if verdict is not None and usable(verdict):
        values |= {"assistant_category": verdict.tab, "assistant_reason": verdict.reason[:500]}
    if "assistant_reason" in values:
        owner = session.scalar(select(Message.user_id).where(Message.id == message_id))
        if owner is not None:  # the reason quotes the mail: sealed with a sealed message
            (values,) = sealed_updates(session, owner, [{"id": message_id, **values}])
            del values["id"]
    claimed = session.execute(
        update(Message)
        .where(Message.id == message_id, Message.assistant_at.is_(None))
        .values(**values)
    )
    if not getattr(claimed, "rowcount", 0):
        return False
    if usable(verdict):
        from mailroom.categories.recompute import recategorize

        user_id = session.scalar(select(Message.user_id).where(Message.id == message_id))
        if user_id is not None:
            recategorize(session, user_id, [message_id])
    release(session, [message_id], now)
    return True


def not_asked(session: Session, message_ids: Sequence[int]) -> list[int]:
    """Those of these messages the model was never asked about."""
    return sorted(
        session.scalars(
            select(Message.id).where(
                Message.id.in_(list(message_ids)), Message.assistant_at.is_(None)
            )
        )
    )


def classify_messages(
    store: Store,
    classifier: Classifier,
    message_ids: Sequence[int],
    now: Callable[[], datetime],
    should_yield: Callable[[], bool] | None = None,
) -> ClassifyOutcome:
    """Ask about each message not asked yet and apply the answer; see the module."""
    outcome = ClassifyOutcome()
    with store.session() as session:
        todo = not_asked(session, message_ids) if message_ids else []
    for position, message_id in enumerate(todo):
        if should_yield is not None and should_yield():
            outcome.left = todo[position:]
            return outcome
        with store.session() as session:
            mail = load_mail(session, [message_id]).get(message_id)
        if mail is None:
            continue
        try:
            verdict = classifier.classify(mail)
        except Exception:  # an adapter bug costs this message's verdict, never the job
            log.exception("The assistant failed on message %s", message_id)
            verdict = None
        with store.session() as session:
            if apply_verdict(session, message_id, verdict, now()):
                done = outcome.verdicts if usable(verdict) else outcome.no_verdict
                done.append(message_id)
    return outcome
