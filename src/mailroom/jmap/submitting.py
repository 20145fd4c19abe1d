"""Submitting a stored email: the checks every way in shares, then ``queue_message``.

JMAP's ``EmailSubmission/set`` create (:mod:`mailroom.jmap.submission_create`)
and the web page's Send (:mod:`mailroom.web.pages.compose`) both hand a
stored email and an identity to :meth:`Submitter.submit`, which refuses with
a :class:`~mailroom.jmap.errors.Refused` SetError (its ``description`` one
sentence) or queues it:

1. Larger than ``maxSize`` is ``tooLarge``; no From address or no Message-ID
   is ``invalidEmail`` (``from`` / ``messageId``).
2. ``forbiddenFrom`` unless the identity's address is among the From
   addresses and every From address is one the user sends as
   (:func:`mailroom.outbound.sending_as.sending_identities`).
3. The envelope, given or derived (:mod:`mailroom.jmap.submission_envelope`):
   its ``mailFrom`` must be one of the user's addresses
   (``forbiddenMailFrom``), its recipients mailboxes and not too many.
4. The identity's account must be able to send (it has a transport:
   ``forbiddenToSend`` with the sentence saying how to give it one).
5. The same Message-ID already submitted from that account is
   ``alreadyExists`` with ``existingId``; a canceled one stays canceled and
   lets the message be submitted again.

It is then queued (``kind`` :data:`KIND`) ``scheduled`` until the undo window
(the policy's, or a longer one the caller asks for) or the FUTURERELEASE hold
ends.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.orm import Session

from mailroom.errors import MailroomError
from mailroom.jmap import ids
from mailroom.jmap.errors import Refused, set_error
from mailroom.jmap.identities import identities_of
from mailroom.jmap.submission_envelope import (
    check_recipients,
    derived_envelope,
    given_envelope,
    release_time,
)
from mailroom.jmap.submission_objects import free_message_key
from mailroom.jmap.submission_policy import SubmissionPolicy
from mailroom.mime.addresses import parse_address_list
from mailroom.outbound.envelope import Envelope, OutboundError, header_fields, message_id_of
from mailroom.outbound.queueing import find_submission, queue_message
from mailroom.outbound.sending_as import sending_identities
from mailroom.outbound.transports import transport_for
from mailroom.store.models import Account, Identity, Submission, User

__all__ = ["KIND", "Submitter"]

KIND = "personal"  # the kind of mail a person sends (MAILROOM_LANE_KINDS picks its lane)


class Submitter:
    """Checks and queues stored emails of one user in one transaction, under one policy."""

    def __init__(self, session: Session, user_id: int, policy: SubmissionPolicy) -> None:
        self.session = session
        self.user_id = user_id
        self.policy = policy
        user = session.get(User, user_id)
        assert user is not None  # the signed-in user's own row
        self.addresses = set(sending_identities(session, user))
        self.identities = {row.id: row for row in identities_of(session, user_id, None)}

    def submit(
        self,
        identity: Identity,
        email_id: int,
        raw: bytes,
        envelope: object = None,
        *,
        undo: timedelta = timedelta(0),
    ) -> Submission:
        """Check and queue ``raw`` (the stored email ``email_id``); Refused when it may not go.

        ``envelope`` is a client's Envelope object (None: derived from the
        headers); ``undo`` lengthens the policy's undo window.
        """
        message_id = self._check_message(raw, identity)
        checked = self._envelope(envelope, raw)
        now = self.policy.clock()
        release = release_time(checked, now, self.policy.max_delayed_send)
        send_at = max(now + max(self.policy.undo, undo), release or now)
        account = self.session.get(Account, identity.account_id)
        assert account is not None  # identities go with their account
        self._can_send(account)
        self._free_message_id(account, message_id)
        try:
            return queue_message(
                self.session,
                settings=self.policy.settings,
                account_id=account.id,
                raw=raw,
                envelope=dict(checked),
                kind=KIND,
                identity_id=identity.id,
                email_id=email_id,
                send_at=send_at,
                now=now,
            )
        except OutboundError as error:  # the operator's lane settings are wrong
            raise Refused(set_error("forbiddenToSend", str(error))) from None

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

    def _envelope(self, given: object, raw: bytes) -> Envelope:
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

    def _free_message_id(self, account: Account, message_id: str) -> None:
        """Refuse a Message-ID this account already submitted; a canceled one makes room."""
        # In any form its key is stored in (a sealed owner's is a keyed hash of the id).
        earlier = find_submission(self.session, account.id, account.user_id, message_id)
        if earlier is None:
            return
        if earlier.state != "canceled" or earlier.user_id != self.user_id:
            error = set_error("alreadyExists", "This message was submitted already.")
            raise Refused({**error, "existingId": ids.submission_id(earlier.id)})
        free_message_key(earlier)
        self.session.flush()
