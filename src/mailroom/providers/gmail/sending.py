"""Sending through Gmail: ``messages.send`` with the raw MIME (SPEC §11, issue 16 item 9).

:class:`GmailTransport` is the outbound :class:`~mailroom.outbound.base.Transport`
of Gmail accounts without SMTP settings (registered for ``"gmail"`` by
:mod:`.provider`). It hands the lane's raw bytes to ``messages.send``; a reply
(its ``In-Reply-To`` names a message stored in the account) carries that
message's Gmail ``threadId``, so Gmail files it in the same conversation.
Gmail keeps its own Sent copy (the entry declares ``files_sent_mail``); the next
sync brings it.

Gmail answers for every recipient at once: an accepted message is accepted
for all of them. Gmail's sending limit (429 "Retry after …") is a
:class:`RateLimitError` with the wait, a refused request (400) a
:class:`RefusedError`; the lane decides what follows.
"""

from __future__ import annotations

from collections.abc import Sequence
from email.parser import BytesHeaderParser
from email.policy import compat32

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.config import Settings
from mailroom.crypto.message_fields import LookupKeys
from mailroom.mime.msgids import normalize_message_id
from mailroom.outbound.base import RefusedError, SendResult
from mailroom.providers.gmail.connection import GmailAccount, open_account
from mailroom.providers.gmail.errors import GmailRequestError
from mailroom.store.engine import Store
from mailroom.store.keys import id_key
from mailroom.store.models import Account, Message

__all__ = ["GmailTransport", "gmail_transport", "reply_thread"]


def reply_thread(session: Session, account_id: int, raw: bytes) -> str | None:
    """The Gmail threadId of the stored message ``raw`` replies to, if there is one."""
    headers = BytesHeaderParser(policy=compat32).parsebytes(raw, headersonly=True)
    parent = headers["In-Reply-To"]
    if not parent:
        return None
    wanted = normalize_message_id(str(parent).strip())
    if not wanted:
        return None
    owner = session.scalar(select(Account.user_id).where(Account.id == account_id))
    if owner is None:
        return None
    forms = LookupKeys(session, owner).id_forms([id_key(wanted)])  # sealed: keyed hashes
    return session.scalar(
        select(Message.provider_thread_id)
        .where(
            Message.account_id == account_id,
            Message.message_id_header.in_(sorted(forms)),
            Message.provider_thread_id.is_not(None),
        )
        .limit(1)
    )


class GmailTransport:
    """Sends one account's mail through the Gmail API."""

    def __init__(self, store: Store, settings: Settings | None, account_id: int) -> None:
        self.store = store
        self.settings = settings
        self.account_id = account_id
        self._gmail: GmailAccount | None = None

    def send(
        self, envelope_from: str, recipients: Sequence[str], raw: bytes, *, message_id: str
    ) -> SendResult:
        """Hand ``raw`` to ``messages.send``; every recipient is accepted with it."""
        if self._gmail is None:
            self._gmail = open_account(self.store, self.settings, self.account_id)
        with self.store.session() as session:
            thread_id = reply_thread(session, self.account_id, raw)
        try:
            sent = self._gmail.api.send(raw, thread_id=thread_id)
        except GmailRequestError as exc:
            raise RefusedError(str(exc), code=400, reply=str(exc)) from None
        reply = f"accepted by Gmail as {sent.get('id', '')}".strip()
        return SendResult(message_id, {recipient: reply for recipient in recipients})

    def close(self) -> None:
        """Close the API client; a later send opens it again."""
        if self._gmail is not None:
            self._gmail.close()
            self._gmail = None


def gmail_transport(session: Session, account: Account, settings: Settings) -> GmailTransport:
    """The transport factory ``outbound.transports`` calls for Gmail accounts."""
    bind = session.get_bind()
    return GmailTransport(Store(bind.engine, settings.data_dir), settings, account.id)
