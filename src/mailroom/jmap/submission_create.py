"""Creating one EmailSubmission (RFC 8621 §7.5): every check, then ``queue_message``.

In order, each refusal a SetError with a description:

1. Only ``identityId``, ``emailId`` and ``envelope`` are the client's (the
   server-set properties may be given as null, ``undoStatus`` as
   ``pending``); anything else is ``invalidProperties``.
2. ``identityId`` must be one of the user's identities and ``emailId`` one of
   their emails (``#creationId`` references allowed), else
   ``invalidProperties`` naming it. The bytes sent are the email's stored raw
   message.
3. Larger than ``maxSize`` is ``tooLarge``; no From address or no Message-ID
   is ``invalidEmail`` (``from`` / ``messageId``).
4. ``forbiddenFrom`` unless the identity's address is among the From
   addresses and every From address is one the user sends as
   (:func:`mailroom.outbound.sending_as.sending_identities`).
5. The envelope, given or derived (:mod:`mailroom.jmap.submission_envelope`):
   its ``mailFrom`` must be one of the user's addresses
   (``forbiddenMailFrom``), its recipients mailboxes and not too many.
6. The identity's account must be able to send (it has a transport:
   ``forbiddenToSend`` with the sentence saying how to give it one).
7. The same Message-ID already submitted from that account is
   ``alreadyExists`` with ``existingId``; a canceled one stays canceled and
   lets the message be submitted again.

It is then queued (``kind`` :data:`KIND`) ``scheduled`` until the undo window
or the FUTURERELEASE hold ends.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.errors import MailroomError
from mailroom.jmap import ids
from mailroom.jmap.blobs import read_blob
from mailroom.jmap.dispatcher import Context
from mailroom.jmap.errors import Refused, set_error
from mailroom.jmap.identities import identities_of
from mailroom.jmap.submission_envelope import (
    check_recipients,
    derived_envelope,
    given_envelope,
    release_time,
)
from mailroom.jmap.submission_objects import free_message_key, submission_object
from mailroom.jmap.submission_policy import SubmissionPolicy
from mailroom.mime.addresses import parse_address_list
from mailroom.outbound.envelope import Envelope, OutboundError, header_fields, message_id_of
from mailroom.outbound.queueing import queue_message
from mailroom.outbound.sending_as import sending_identities
from mailroom.outbound.transports import transport_for
from mailroom.store.keys import id_key
from mailroom.store.models import Account, Identity, Message, Submission, User

__all__ = ["KIND", "SubmissionCall", "SubmissionCreator"]

KIND = "personal"  # the kind of mail a JMAP client sends (MAILROOM_LANE_KINDS picks its lane)
_CLIENT = frozenset({"identityId", "emailId", "envelope"})
_SERVER_SET = frozenset(
    {"id", "threadId", "sendAt", "undoStatus", "deliveryStatus", "dsnBlobIds", "mdnBlobIds"}
)


def _invalid(properties: list[str], description: str) -> Refused:
    return Refused(set_error("invalidProperties", description, properties))


def _not_given(name: str, value: object) -> bool:
    """Whether a server-set property in a creation says nothing (null, or its start value)."""
    return value is None or (name == "undoStatus" and value == "pending")


class SubmissionCall:
    """One EmailSubmission/set call: who asks, in which transaction, under which policy."""

    def __init__(
        self, context: Context, session: Session, user_id: int, policy: SubmissionPolicy
    ) -> None:
        self.context = context
        self.session = session
        self.user_id = user_id
        self.policy = policy


class SubmissionCreator(SubmissionCall):
    """The creates of one EmailSubmission/set call for one user."""

    def __init__(
        self, context: Context, session: Session, user_id: int, policy: SubmissionPolicy
    ) -> None:
        super().__init__(context, session, user_id, policy)
        user = session.get(User, user_id)
        assert user is not None  # the principal's own row
        self.addresses = set(sending_identities(session, user))
        self.identities = {row.id: row for row in identities_of(session, user_id, None)}

    def _reference(self, value: object) -> object:
        if isinstance(value, str) and value.startswith("#"):
            return self.context.created_ids.get(value[1:], value)
        return value

    def _identity(self, values: dict[str, Any]) -> Identity:
        number = ids.parse_identity(self._reference(values.get("identityId")))
        identity = self.identities.get(number) if number is not None else None
        if identity is None:
            raise _invalid(["identityId"], "There is no such identity of yours.")
        return identity

    def _email(self, values: dict[str, Any]) -> tuple[int, bytes]:
        number = ids.parse_email(self._reference(values.get("emailId")))
        found = read_blob(self.session, self.user_id, ids.raw_blob_id(number)) if number else None
        if number is None or found is None:
            raise _invalid(["emailId"], "There is no such email of yours.")
        return number, found[0]

    def _check_message(self, raw: bytes, identity: Identity) -> str:
        """The Message-ID, after the size, From and Message-ID checks."""
        most = self.policy.max_size
        if len(raw) > most:
            error = set_error("tooLarge", f"The message is larger than {most} octets.")
            raise Refused({**error, "maxSize": most})
        authors = [
            address.email.lower()
            for name, value in header_fields(raw)
            if name == "from"
            for address in parse_address_list(value)
        ]
        if not authors:
            raise Refused(set_error("invalidEmail", "The email has no From address.", ["from"]))
        try:
            message_id = message_id_of(raw)
        except OutboundError as error:
            raise Refused(set_error("invalidEmail", str(error), ["messageId"])) from None
        strangers = [a for a in authors if a not in self.addresses]
        if not identity.email:
            why = "This identity has no address to send from; give its account one."
        elif strangers:
            why = f"{strangers[0]} is not one of your addresses, so mailroom does not send as it."
        elif identity.email.lower() not in authors:
            why = f"The From address must be this identity's address, {identity.email}."
        else:
            return message_id
        raise Refused(set_error("forbiddenFrom", why))

    def _envelope(self, values: dict[str, Any], raw: bytes) -> Envelope:
        given = values.get("envelope")
        envelope = given_envelope(given) if given is not None else derived_envelope(raw)
        sender = envelope["mailFrom"]["email"]
        if sender.lower() not in self.addresses:
            raise Refused(
                set_error(
                    "forbiddenMailFrom",
                    f"The envelope sender must be one of your addresses, not {sender or '<>'}.",
                )
            )
        check_recipients([r["email"] for r in envelope["rcptTo"]], self.policy.max_recipients)
        return envelope

    def _can_send(self, account: Account) -> None:
        try:
            transport = transport_for(self.session, account, self.policy.settings)
        except MailroomError as error:
            raise Refused(set_error("forbiddenToSend", str(error))) from None
        transport.close()

    def _free_message_id(self, account_id: int, message_id: str) -> None:
        """Refuse a Message-ID this account already submitted; a canceled one makes room."""
        earlier = self.session.scalar(
            select(Submission).where(
                Submission.account_id == account_id, Submission.message_key == id_key(message_id)
            )
        )
        if earlier is None:
            return
        if earlier.state != "canceled" or earlier.user_id != self.user_id:
            error = set_error("alreadyExists", "This message was submitted already.")
            raise Refused({**error, "existingId": ids.submission_id(earlier.id)})
        free_message_key(earlier)
        self.session.flush()

    def create(self, values: object) -> dict[str, Any]:
        """Check and queue one creation; its server-set properties, or raise Refused."""
        if not isinstance(values, dict):
            raise _invalid([], "An EmailSubmission to create is an object.")
        wrong = sorted(
            name
            for name, value in values.items()
            if name not in _CLIENT and not (name in _SERVER_SET and _not_given(name, value))
        )
        if wrong:
            raise _invalid(wrong, "Only identityId, emailId and envelope are set by the client.")
        identity = self._identity(values)
        email_id, raw = self._email(values)
        message_id = self._check_message(raw, identity)
        envelope = self._envelope(values, raw)
        now = self.policy.clock()
        release = release_time(envelope, now, self.policy.max_delayed_send)
        send_at = max(now + self.policy.undo, release or now)
        account = self.session.get(Account, identity.account_id)
        assert account is not None  # identities go with their account
        self._can_send(account)
        self._free_message_id(account.id, message_id)
        row = self._queue(account, identity, email_id, raw, envelope, send_at, now)
        thread = self.session.scalar(select(Message.thread_id).where(Message.id == email_id))
        full = submission_object(row, thread, [])
        keep = _SERVER_SET | ({"envelope"} if values.get("envelope") is None else set())
        return {name: value for name, value in full.items() if name in keep}

    def _queue(
        self,
        account: Account,
        identity: Identity,
        email_id: int,
        raw: bytes,
        envelope: Envelope,
        send_at: datetime,
        now: datetime,
    ) -> Submission:
        try:
            return queue_message(
                self.session,
                settings=self.policy.settings,
                account_id=account.id,
                raw=raw,
                envelope=dict(envelope),
                kind=KIND,
                identity_id=identity.id,
                email_id=email_id,
                send_at=send_at,
                now=now,
            )
        except OutboundError as error:  # the operator's lane settings are wrong
            raise Refused(set_error("forbiddenToSend", str(error))) from None
