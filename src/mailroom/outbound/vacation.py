"""The vacation response answering new mail (RFC 8621 §8, RFC 3834): once per sender per period.

:class:`VacationResponder` is an enricher of newly stored mail (the follow-up
job after the ingest commit, registered by :mod:`mailroom.outbound.after_mail`).
A message is answered when all of this holds:

* it is in the user's Inbox (after the rules ran: archived, trashed or spam
  mail is not answered) and the user's VacationResponse is enabled, with now
  and the message's arrival both in ``[fromDate, toDate)``;
* it **arrived live**: it was received at most :data:`LIVE_WINDOW` ago and not
  before the response took effect (``fromDate``, or when it was last set when
  that is null) — a backlog import of old mail answers nobody;
* :func:`refusal` finds nothing against it (RFC 3834 §2): no
  ``Auto-Submitted`` other than ``no``, no ``List-*`` header, no
  ``Precedence: bulk|list|junk``, no ``X-Auto-Response-Suppress`` asking for
  none, a valid sender to answer (the ``Return-Path``, else ``From``; a null
  ``Return-Path`` is a bounce), which is neither a mailer-daemon, no-reply
  or list address nor one of the user's own, and one of the user's own
  addresses among its direct recipients (To, Cc, Bcc and their Resent-*);
* the sender was not answered in this period: ``vacation_replies`` holds the
  last reply per (user, sender). A reply is due when there is none since the
  period began and none in the last :data:`RESEND_AFTER` (RFC 3834 suggests
  a week). Claiming the row and queueing the reply are one transaction (an
  upsert that only overwrites an older row), so two workers on the same mail
  answer once. While the store seals new mail the row names the sender by
  the owner's keyed hash of the address (``crypto.message_fields.ADDRESS_KIND``),
  not the address; a reply under an older key version (an owner key rotation
  running) still counts. Once a rotation drops that version, a sender answered
  under it may be answered once more in the same period.

The reply: ``From`` the account's default identity, ``To`` the sender,
subject the configured one or ``Auto: <original>``, ``In-Reply-To`` and
``References`` of the original, ``Auto-Submitted: auto-replied``, the
configured text and/or HTML body; it is queued through
:func:`mailroom.outbound.queueing.queue_message` with ``kind="vacation"``
(whose lane the operator's kind map decides, ``calm`` by default). Its
envelope sender is the identity's address rather than the null one RFC 3834
§3.3 allows, because submission servers refuse ``MAIL FROM:<>`` from
signed-in users; the ``Auto-Submitted`` header is what stops loops.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from mailroom.categories.correspondents import owner_addresses
from mailroom.config import Settings
from mailroom.crypto.mail_reading import columns_of
from mailroom.crypto.message_fields import ADDRESS_KIND
from mailroom.crypto.sealing import sealing_cipher
from mailroom.ingest.mirror import insert_for
from mailroom.mime import html_to_text, parse_address_list, parse_id_list
from mailroom.mime.compose import BodyPart, Header, Mailbox, compose
from mailroom.mime.msgids import normalize_message_id
from mailroom.outbound.queueing import queue_message
from mailroom.store.engine import Store
from mailroom.store.keys import id_key
from mailroom.store.models import (
    Identity,
    Label,
    Message,
    MessageLabel,
    User,
    VacationReply,
    VacationResponse,
    utcnow,
)

__all__ = [
    "KIND",
    "LIVE_WINDOW",
    "RESEND_AFTER",
    "VacationResponder",
    "refusal",
    "reply_address",
]

log = logging.getLogger(__name__)

KIND = "vacation"
LIVE_WINDOW = timedelta(days=7)
RESEND_AFTER = timedelta(days=7)
DEFAULT_TEXT = "I am away at the moment and will read your message when I am back.\n"

_NO_REPLY = re.compile(
    r"^(mailer[-_]?daemon|mail[-_]?daemon|postmaster|no[-_.]?reply|do[-_.]?not[-_.]?reply|"
    r"bounces?|bounce[-_.].*|listserv|majordomo|mailman|owner-.*|.*-owner|.*-request|"
    r".*-bounces?|root|nobody|noreply[-_.].*)(\+.*)?@",
    re.IGNORECASE,
)
_RECIPIENT_FIELDS = ("to", "cc", "bcc", "resent-to", "resent-cc", "resent-bcc")
_BULK = frozenset({"bulk", "list", "junk"})

Headers = Sequence[Sequence[str]]


def _values(headers: Headers, name: str) -> list[str]:
    return [str(pair[1]) for pair in headers if len(pair) == 2 and str(pair[0]).lower() == name]


def _first(headers: Headers, name: str) -> str | None:
    found = _values(headers, name)
    return found[0] if found else None


def reply_address(headers: Headers) -> str | None:
    """Whom an automatic reply goes to: the Return-Path, else From; None for no valid one."""
    return_path = _first(headers, "return-path")
    if return_path is not None:
        text = return_path.strip()
        if text.replace(" ", "") in ("<>", ""):
            return None  # a null reverse path: a bounce or another automatic message
        found = parse_address_list(text)
    else:
        found = [a for value in _values(headers, "from") for a in parse_address_list(value)]
    address = found[0].email.lower() if found else ""
    local, at, domain = address.rpartition("@")
    if not (at and local and "." in domain) or any(c.isspace() for c in address):
        return None
    return address


def refusal(headers: Headers, own: frozenset[str]) -> str | None:
    """Why this message must get no vacation reply (RFC 3834 §2), or None when it may."""
    auto = (_first(headers, "auto-submitted") or "no").split(";")[0].strip().lower()
    if auto != "no":
        return "it was sent automatically (Auto-Submitted)"
    if (_first(headers, "precedence") or "").strip().lower() in _BULK:
        return "it was sent in bulk or to a list (Precedence)"
    if any(str(pair[0]).lower().startswith("list-") for pair in headers if len(pair) == 2):
        return "it came through a mailing list (List-*)"
    suppress = (_first(headers, "x-auto-response-suppress") or "").lower()
    if "oof" in suppress or "all" in suppress:
        return "its sender asked for no automatic replies"
    address = reply_address(headers)
    if address is None:
        return "it has no valid sender to answer"
    senders = [a.email.lower() for v in _values(headers, "from") for a in parse_address_list(v)]
    if any(_NO_REPLY.match(a) for a in [address, *senders]):
        return "its sender does not read replies (mailer-daemon, no-reply, list)"
    if address in own or any(a in own for a in senders):
        return "it is from one of the user's own addresses"
    recipients = {
        a.email.lower()
        for name in _RECIPIENT_FIELDS
        for value in _values(headers, name)
        for a in parse_address_list(value)
    }
    if not recipients & own:
        return "the user is not among its direct recipients"
    return None


@dataclass(frozen=True, slots=True)
class _Arrival:
    """A new Inbox message of a user whose vacation response is on (plain values)."""

    message_id: int
    user_id: int
    account_id: int
    received_at: datetime


class VacationResponder:
    """Answers new Inbox mail while the user's vacation response is on (module docstring)."""

    def __init__(self, settings: Settings, clock: Callable[[], datetime] = utcnow) -> None:
        self.settings = settings
        self.clock = clock

    def __call__(self, store: Store, message_ids: Sequence[int]) -> None:
        """Queue the replies due for these stored messages (the enricher)."""
        now = self.clock()
        with store.session() as session:
            arrivals = _arrivals(session, message_ids)
        for arrival in arrivals:
            try:
                with store.session() as session:
                    self._answer(session, arrival, now)
            except Exception:  # one message's reply must not cost the others theirs
                log.exception("The vacation reply to message %s failed", arrival.message_id)

    def _answer(self, session: Session, arrival: _Arrival, now: datetime) -> None:
        vacation = session.get(VacationResponse, arrival.user_id)
        if vacation is None or not vacation.is_enabled:
            return
        start = vacation.from_date or vacation.updated_at
        live = now - LIVE_WINDOW <= arrival.received_at
        if not (live and _within(now, vacation.from_date, vacation.to_date)):
            return
        if not _within(arrival.received_at, start, vacation.to_date):
            return
        body = columns_of(session, [arrival.message_id], ["headers"]).get(arrival.message_id)
        headers = body["headers"] if body is not None else []
        why = refusal(headers, _own_addresses(session, arrival.user_id))
        if why is not None:
            log.debug("No vacation reply to message %s: %s", arrival.message_id, why)
            return
        address = reply_address(headers)
        identity = _default_identity(session, arrival.user_id, arrival.account_id)
        if address is None or identity is None:
            return
        if not _claim(session, arrival.user_id, address, now, max(start, now - RESEND_AFTER)):
            return
        raw = _reply(vacation, identity, address, headers)
        queue_message(
            session,
            settings=self.settings,
            account_id=arrival.account_id,
            raw=raw,
            kind=KIND,
            identity_id=identity.id,
            now=now,
        )


def _within(moment: datetime, start: datetime | None, end: datetime | None) -> bool:
    return (start is None or moment >= start) and (end is None or moment < end)


def _arrivals(session: Session, message_ids: Sequence[int]) -> list[_Arrival]:
    """The messages among ``message_ids`` in their user's Inbox, of users on vacation."""
    if not message_ids:
        return []
    rows = session.execute(
        select(Message.id, Message.user_id, Message.account_id, Message.received_at)
        .join(VacationResponse, VacationResponse.user_id == Message.user_id)
        .join(MessageLabel, MessageLabel.message_id == Message.id)
        .join(Label, Label.id == MessageLabel.label_id)
        .where(
            Message.id.in_(sorted(set(message_ids))),
            VacationResponse.is_enabled,
            Label.role == "inbox",
        )
        .order_by(Message.received_at, Message.id)
    )
    return [_Arrival(*row) for row in rows]


def _own_addresses(session: Session, user_id: int) -> frozenset[str]:
    """The user's addresses: those of accounts and user settings, and of every identity."""
    identities = session.scalars(
        select(func.lower(Identity.email)).where(Identity.user_id == user_id)
    )
    return owner_addresses(session, user_id) | {email for email in identities if email}


def _default_identity(session: Session, user_id: int, account_id: int) -> Identity | None:
    """The account's default identity (made on first use, as JMAP does); None without address."""
    from mailroom.jmap.identities import sync_identities  # jmap imports outbound, not back

    user = session.get(User, user_id)
    if user is None:
        return None
    sync_identities(session, user_id, user.name)
    identity = session.scalar(
        select(Identity).where(Identity.account_id == account_id, Identity.is_default)
    )
    return identity if identity is not None and "@" in identity.email else None


def _sender_keys(session: Session, user_id: int, address: str) -> list[str]:
    """The keys ``vacation_replies`` may name ``address`` by, the one to write first."""
    cipher = sealing_cipher(session)
    if cipher is None:
        return [id_key(address)]
    return cipher.lookup_hashes(user_id, ADDRESS_KIND, address)  # newest version first


def _claim(session: Session, user_id: int, address: str, now: datetime, since: datetime) -> bool:
    """Record a reply to ``address`` now, unless one was recorded at or after ``since``."""
    key, *older = _sender_keys(session, user_id, address)
    if older and session.scalar(
        select(VacationReply.sender_key).where(
            VacationReply.user_id == user_id,
            VacationReply.sender_key.in_(older),
            VacationReply.sent_at >= since,
        )
    ):
        return False
    insert = insert_for(session, VacationReply).values(user_id=user_id, sender_key=key, sent_at=now)
    upsert = insert.on_conflict_do_update(
        index_elements=["user_id", "sender_key"],
        set_={"sent_at": now},
        where=VacationReply.sent_at < since,
    )
    return session.execute(upsert.returning(VacationReply.sender_key)).first() is not None


def _reply(
    vacation: VacationResponse, identity: Identity, address: str, headers: Sequence[Sequence[str]]
) -> bytes:
    """The RFC 5322 bytes of the automatic reply."""
    original = normalize_message_id(_first(headers, "message-id") or "")
    references = parse_id_list(_first(headers, "references"))
    subject = vacation.subject or f"Auto: {_first(headers, 'subject') or ''}".rstrip()
    fields = [
        Header("From", "addresses", (Mailbox(identity.name or None, identity.email),)),
        Header("To", "addresses", (Mailbox(None, address),)),
        Header("Subject", "text", " ".join(subject.split())),
        Header("Auto-Submitted", "raw", "auto-replied"),
        Header("X-Auto-Response-Suppress", "raw", "All"),
    ]
    if original:
        chain = tuple(dict.fromkeys([*references, original]))
        fields.append(Header("In-Reply-To", "messageIds", (original,)))
        fields.append(Header("References", "messageIds", chain))
    domain = identity.email.rpartition("@")[2]
    return compose(fields, _body(vacation), domain=domain).raw


def _body(vacation: VacationResponse) -> BodyPart:
    """Plain text, HTML with a plain alternative, or both as given."""
    text, html = vacation.text_body, vacation.html_body
    if not html:
        return BodyPart("text/plain", text or DEFAULT_TEXT)
    plain = text or html_to_text(html)
    return BodyPart(
        "multipart/alternative",
        parts=(BodyPart("text/plain", plain), BodyPart("text/html", html)),
    )
