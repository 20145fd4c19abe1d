"""The offline assistant: sentence embeddings plus a linear classifier per owner.

Nothing leaves the machine. Each message is a vector: its MiniLM embedding
(:mod:`.embedding`) of sender, subject and the start of the body, plus a few
bulk-mail signs from its stored headers. Per owner, a multinomial logistic
regression (:mod:`.linear`) is trained on the mail whose tab is known well:

* the senders the owner corrected (``users.settings["tab_corrections"]``),
  with the tab the owner chose;
* mail the cascade sorted confidently — a Gmail label, a correction, a
  correspondent, and the forum, social, updates and promotions rules — but
  never the ``default`` guess nor an earlier verdict of the assistant itself.

Too little to learn from (fewer than :data:`MIN_EXAMPLES` messages, or no
Primary mail among them: a model that cannot say Primary would move every
person's mail the rules left in Primary) is no verdict. A model is retrained
after :data:`RETRAIN_AFTER`, so new corrections count within minutes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from sqlalchemy import ColumnElement, and_, not_, or_, select
from sqlalchemy.orm import Session

from mailroom.assistant.base import MailFacts, Verdict
from mailroom.assistant.embedding import MiniLM
from mailroom.assistant.linear import LinearModel, train
from mailroom.assistant.mail import load_mail
from mailroom.categories.learned import corrections_of
from mailroom.categories.sealed_rows import (
    from_candidates,
    has_sealed,
    id_in,
    sealed_matching,
)
from mailroom.categories.tabs import CATEGORIES, PRIMARY
from mailroom.crypto.message_fields import open_rows
from mailroom.store.engine import Store
from mailroom.store.models import Message, User

log = logging.getLogger(__name__)

CONFIDENT_STAGES = (
    "provider_label",
    "correction",
    "correspondent",
    "forums",
    "social",
    "updates",
    "promotions",
)
MIN_EXAMPLES = 20
MAX_EXAMPLES = 1500  # the newest; enough for a linear model, and training stays quick
RETRAIN_AFTER = 600.0  # seconds
BODY_CHARS = 600
_ROLE_WORDS = ("noreply", "no-reply", "donotreply", "notification", "newsletter", "info")
_ESP_HEADERS = (
    "feedback-id",
    "x-campaign",
    "x-sg-eid",
    "x-mailgun-tag",
    "x-mc-user",
    "x-ses-outgoing",
)


def text_of(mail: MailFacts) -> str:
    """What is embedded: sender, subject and the start of the body."""
    return f"{mail.from_name} <{mail.from_email}>\n{mail.subject}\n{mail.text[:BODY_CHARS]}"


def signs_of(mail: MailFacts) -> list[float]:
    """Bulk-mail signs from the stored headers and the cascade's tab, as 0/1 features.

    The cascade's tab is one of them: where the owner agrees with the rules the
    model learns to follow them, and where the owner corrected them, not to.
    """
    headers = mail.headers
    local = mail.from_email.partition("@")[0].lower()
    precedence = headers.get("precedence", "").lower()
    return [
        float("list-unsubscribe" in headers),
        float("list-id" in headers or "list-post" in headers),
        float(precedence in ("bulk", "list", "junk")),
        float(headers.get("auto-submitted", "no").lower() != "no"),
        float(any(word in local for word in _ROLE_WORDS)),
        float(any(name in headers for name in _ESP_HEADERS)),
        float(mail.stage == "default"),
        *(float(mail.cascade == tab) for tab in CATEGORIES),
    ]


def training_examples(session: Session, user_id: int) -> list[tuple[int, str]]:
    """(message id, tab) of the owner's corrected and confidently sorted mail, newest first."""
    corrected = corrections_of(session.scalar(select(User.settings).where(User.id == user_id)))
    senders = sorted(corrected)
    by_sender: ColumnElement[bool] = (
        Message.from_email.in_(senders) if senders else Message.id.is_(None)
    )
    if senders and has_sealed(session, user_id):  # a sealed sender is compared once opened
        wanted = set(senders)
        opened = sealed_matching(
            session,
            user_id,
            ["from_email"],
            lambda row: row["from_email"] in wanted,
            where=from_candidates(session, user_id, senders),  # narrowed by the blind index
        )
        by_sender = or_(and_(not_(Message.sealed), by_sender), id_in(opened))
    rows = session.execute(
        select(
            Message.id,
            Message.user_id,
            Message.sealed,
            Message.from_email,
            Message.category,
            Message.category_stage,
        )
        .where(
            Message.user_id == user_id,
            or_(Message.category_stage.in_(CONFIDENT_STAGES), by_sender),
        )
        .order_by(Message.received_at.desc(), Message.id.desc())
        .limit(MAX_EXAMPLES)
    )
    examples = []
    for row in open_rows(session, rows, ["from_email"]):
        tab = corrected.get((row["from_email"] or "").lower()) or row["category"]
        if tab:
            examples.append((int(row["id"]), str(tab)))
    return examples


@dataclass(frozen=True)
class Trained:
    """One owner's model and when it was trained."""

    model: LinearModel | None  # None: too little to learn from
    at: float
    examples: int


class OfflineClassifier:
    """The offline adapter: trains per owner from the store, then classifies locally."""

    name = "offline"

    def __init__(
        self,
        store: Store | None = None,
        embedder: MiniLM | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.embedder = embedder or MiniLM()
        self.clock = clock
        self._models: dict[int, Trained] = {}
        self._lock = threading.Lock()

    def features(self, mails: Sequence[MailFacts]) -> npt.NDArray[np.float64]:
        """The feature rows of these messages (embedding, then the signs)."""
        vectors = self.embedder.embed([text_of(mail) for mail in mails])
        signs = np.array([signs_of(mail) for mail in mails], dtype=np.float64).reshape(
            len(mails), -1
        )
        return np.hstack([vectors.astype(np.float64), signs])

    def fit(self, examples: Sequence[tuple[MailFacts, str]]) -> LinearModel | None:
        """A model from labelled messages (None when there is too little to learn from)."""
        tabs = {tab for _, tab in examples}
        if len(examples) < MIN_EXAMPLES or len(tabs) < 2 or PRIMARY not in tabs:
            return None
        return train(self.features([mail for mail, _ in examples]), [tab for _, tab in examples])

    def _model_for(self, user_id: int) -> Trained:
        with self._lock:
            known = self._models.get(user_id)
            if known is not None and self.clock() - known.at < RETRAIN_AFTER:
                return known
            if self.store is None:
                raise RuntimeError("an offline classifier without a store cannot train")
            with self.store.session() as session:
                labelled = training_examples(session, user_id)
                mails = load_mail(session, [message_id for message_id, _ in labelled])
            examples = [(mails[mid], tab) for mid, tab in labelled if mid in mails]
            trained = Trained(self.fit(examples), self.clock(), len(examples))
            self._models[user_id] = trained
            return trained

    def classify(self, mail: MailFacts) -> Verdict | None:
        """The owner's model's tab for this message, or None with too little to learn from."""
        trained = self._model_for(mail.user_id)
        if trained.model is None:
            log.info(
                "The offline assistant has too little to learn from for user %s (%s messages).",
                mail.user_id,
                trained.examples,
            )
            return None
        tab, probability = trained.model.predict(self.features([mail]))[0]
        reason = f"offline model, {probability:.0%} like your {tab.capitalize()} mail"
        return Verdict(tab, probability, reason)

    def close(self) -> None:
        """Forget the trained models (the embedding model stays loaded for reuse)."""
        with self._lock:
            self._models.clear()
