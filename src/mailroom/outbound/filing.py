"""Filing what was sent: the Sent copy, its conversation, ``$answered``, the provider's Sent.

:func:`file_sent` is the ``AFTER_SENT`` hook (:mod:`mailroom.outbound.hooks`):
the sender calls it with a submission's id once it committed the submission
as ``sent``. In one transaction, each step safe to repeat:

1. **The Sent copy.** A submission that names a stored email (a JMAP draft)
   makes *that* message the sent one: out of Drafts, into Sent, read, its
   ``$draft`` keyword gone — through :class:`~mailroom.labels.operations.Operations`,
   so the provider follows (IMAP: moved to the Sent folder, ``\\Draft``
   cleared). Any other submission (the submission port, ``mailroom send``, a
   vacation reply) has its transmitted bytes (the submission's blob, Bcc
   already stripped) stored through the ingest path
   (:func:`mailroom.ingest.batch.store_batch`: bodies, search, the "created"
   change, threading by In-Reply-To/References, rules) in the account's Sent,
   read. Its provider id is the IMAP one (``mid:<Message-ID>:<size>``, or its
   keyed form for an owner whose mail is sealed,
   :mod:`mailroom.providers.imap.namer`), so a second run finds the first copy
   under any form of that id (and ``UNIQUE(provider_id, account_id)`` under
   its own) instead of storing another, and the next IMAP sync recognises the
   appended copy as this one.
2. **The provider's Sent folder.** A new copy gets the pending change
   ``append`` (:func:`mailroom.jmap.stored_email.queue_append`): the IMAP
   propagator APPENDs it to the Sent folder, finds it there by Message-ID
   instead of appending twice, and records its UID as the message's location.
   A server that is down costs nothing but time: propagation retries with its
   backoff (the after-commit waker, then the periodic sweep), and the copy in
   the store is never at risk.
3. **``$answered``** on each of the user's messages whose Message-ID the sent
   message's In-Reply-To names (a keyword row and a pending change: IMAP
   ``\\Answered``).
4. ``submissions.email_id`` names the Sent copy; an ``EmailSubmission``
   "updated" change tells JMAP clients.

After the commit the ingest steps run for a stored copy, as
:func:`mailroom.ingest.commit.commit_batch` does.

A provider that files sent mail itself (``files_sent_mail`` in
:mod:`mailroom.providers.registry`: Gmail API send, Graph sendMail) gets
neither step 1 nor step 2 — its own copy arrives with the next sync, and a
second one from mailroom would be a duplicate there; steps 3 and 4 still run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.crypto.mail_reading import open_blob
from mailroom.crypto.message_fields import LookupKeys
from mailroom.ingest.batch import store_batch
from mailroom.ingest.mirror import known_messages
from mailroom.ingest.model import BatchResult, IncomingMessage
from mailroom.ingest.steps import run_steps
from mailroom.labels.operations import Operations
from mailroom.mime import ParsedMessage, parse_message
from mailroom.outbound.queueing import record_submission_change
from mailroom.providers.imap.identity import hash_id
from mailroom.providers.imap.namer import ImapNamer
from mailroom.providers.registry import files_sent_mail
from mailroom.store.engine import Store
from mailroom.store.keys import id_key
from mailroom.store.models import Account, Blob, Message, Submission, utcnow

__all__ = ["ANSWERED", "DRAFT", "file_sent"]

ANSWERED = "$answered"
DRAFT = "$draft"
_LINE_END = re.compile(rb"\r?\n")


@dataclass(frozen=True, slots=True)
class _Sent:
    """What filing needs of a sent submission, read in the filing session."""

    user_id: int
    account: Account
    email_id: int | None
    raw: bytes
    sent_at: datetime


def file_sent(store: Store, submission_id: int) -> None:
    """File the Sent copy of a sent submission (module docstring); idempotent."""
    stored: BatchResult | None = None
    with store.session() as session:
        sent = _load(session, submission_id)
        if sent is None:
            return
        parsed = parse_message(sent.raw, received_at=sent.sent_at)
        email_id = sent.email_id
        if not files_sent_mail(sent.account.provider):
            if email_id is not None:
                _make_sent(session, sent.user_id, email_id)
            else:
                email_id, stored = _store_copy(session, sent, parsed)
        _mark_answered(session, sent.user_id, parsed, email_id)
        submission = session.get(Submission, submission_id)
        if submission is not None and submission.email_id != email_id and email_id is not None:
            submission.email_id = email_id
            session.flush()
            record_submission_change(session, sent.user_id, [submission_id])
    if stored is not None:
        run_steps(stored)


def _load(session: Session, submission_id: int) -> _Sent | None:
    """The sent submission with its bytes and account, or None when it is not (yet) sent."""
    row = session.execute(
        select(Submission, Blob.data, Blob.user_id)
        .join(Blob, Blob.sha256 == Submission.raw_sha256)
        .where(Submission.id == submission_id)
    ).one_or_none()
    if row is None or row.Submission.state != "sent":
        return None
    submission: Submission = row.Submission
    account = session.get(Account, submission.account_id)
    if account is None:
        return None
    email_id = submission.email_id
    if email_id is not None and session.get(Message, email_id) is None:
        email_id = None  # the draft was destroyed meanwhile: file the transmitted bytes
    return _Sent(
        submission.user_id,
        account,
        email_id,
        # IMAP servers count CRLF line ends in RFC822.SIZE, which the provider id holds.
        _LINE_END.sub(
            b"\r\n", open_blob(session, submission.raw_sha256, row.data, row.user_id) or b""
        ),
        (submission.sent_at or utcnow()).replace(microsecond=0),
    )


def _make_sent(session: Session, user_id: int, email_id: int) -> None:
    """The stored draft becomes the sent message: Drafts → Sent, read, no ``$draft``."""
    ops = Operations(session, user_id)
    ops.change_labels([email_id], [ops.role("sent")], [ops.role("drafts")], "move")
    ops.set_keywords([email_id], add=[], remove=[DRAFT])
    ops.mark_read([email_id])


def _store_copy(
    session: Session, sent: _Sent, parsed: ParsedMessage
) -> tuple[int, BatchResult | None]:
    """Store the transmitted bytes in Sent; the copy's id and its batch (None: stored before)."""
    from mailroom.jmap.stored_email import queue_append  # jmap imports outbound, not back

    raw = sent.raw
    forms = ImapNamer.of(session, sent.user_id).forms(parsed.message_id, len(raw))
    forms = forms or [hash_id(raw)]
    filed = _filed(session, sent.account.id, forms)
    if filed is not None:
        return filed, None
    key = forms[0]
    ops = Operations(session, sent.user_id)
    item = IncomingMessage(
        provider_id=key,
        raw=raw,
        label_ids=[ops.role("sent")],
        received_at=sent.sent_at,
        seen=True,
        parsed=parsed,
    )
    result = store_batch(session, sent.account.id, sent.user_id, [item])
    if result.created_ids:
        (message_id,) = result.created_ids
        queue_append(session, sent.account, message_id, key)
        return message_id, result
    found = _filed(session, sent.account.id, forms)
    assert found is not None, "the Sent copy is neither new nor stored"
    return found, None


def _filed(session: Session, account_id: int, forms: list[str]) -> int | None:
    """The Sent copy stored under one of these forms of its provider id, if there is one."""
    return min(known_messages(session, account_id, forms).values(), default=None)


def _mark_answered(
    session: Session, user_id: int, parsed: ParsedMessage, sent_id: int | None
) -> None:
    """``$answered`` on the user's messages the sent one replied to (its In-Reply-To)."""
    keys = [id_key(ref) for ref in parsed.in_reply_to]
    if not keys:
        return
    forms = LookupKeys(session, user_id).id_forms(keys)  # sealed rows store keyed hashes
    replied = [
        message_id
        for message_id in session.scalars(
            select(Message.id).where(
                Message.user_id == user_id, Message.message_id_header.in_(sorted(forms))
            )
        )
        if message_id != sent_id
    ]
    if replied:
        Operations(session, user_id).set_keywords(replied, add=[ANSWERED], remove=[])
