"""Creating one EmailSubmission (RFC 8621 §7.5): the client's properties, then ``Submitter``.

1. Only ``identityId``, ``emailId`` and ``envelope`` are the client's (the
   server-set properties may be given as null, ``undoStatus`` as
   ``pending``); anything else is ``invalidProperties``.
2. ``identityId`` must be one of the user's identities and ``emailId`` one of
   their emails (``#creationId`` references allowed), else
   ``invalidProperties`` naming it. The bytes sent are the email's stored raw
   message.
3. :meth:`mailroom.jmap.submitting.Submitter.submit` makes the checks every
   way of submitting shares (size, From, envelope, transport, Message-ID) and
   queues it ``scheduled`` until the undo window or the FUTURERELEASE hold ends.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.jmap import ids
from mailroom.jmap.blobs import read_blob
from mailroom.jmap.dispatcher import Context
from mailroom.jmap.errors import Refused, set_error
from mailroom.jmap.submission_objects import submission_object
from mailroom.jmap.submission_policy import SubmissionPolicy
from mailroom.jmap.submitting import KIND, Submitter
from mailroom.store.models import Identity, Message

__all__ = ["KIND", "SubmissionCall", "SubmissionCreator"]

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
        self.submitter = Submitter(session, user_id, policy)

    def _reference(self, value: object) -> object:
        if isinstance(value, str) and value.startswith("#"):
            return self.context.created_ids.get(value[1:], value)
        return value

    def _identity(self, values: dict[str, Any]) -> Identity:
        number = ids.parse_identity(self._reference(values.get("identityId")))
        identity = self.submitter.identities.get(number) if number is not None else None
        if identity is None:
            raise _invalid(["identityId"], "There is no such identity of yours.")
        return identity

    def _email(self, values: dict[str, Any]) -> tuple[int, bytes]:
        number = ids.parse_email(self._reference(values.get("emailId")))
        found = read_blob(self.session, self.user_id, ids.raw_blob_id(number)) if number else None
        if number is None or found is None:
            raise _invalid(["emailId"], "There is no such email of yours.")
        return number, found[0]

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
        row = self.submitter.submit(identity, email_id, raw, values.get("envelope"))
        thread = self.session.scalar(select(Message.thread_id).where(Message.id == email_id))
        full = submission_object(row, thread, [])
        keep = _SERVER_SET | ({"envelope"} if values.get("envelope") is None else set())
        return {name: value for name, value in full.items() if name in keep}
