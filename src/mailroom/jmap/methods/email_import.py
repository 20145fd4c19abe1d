"""``Email/import`` (RFC 8621 §4.8): messages from blobs into mailboxes, exactly once.

Each EmailImport (``blobId``, ``mailboxIds``, ``keywords``, ``receivedAt``)
goes through the ingest pipeline like any other mail (``jmap.stored_email``:
``store_batch`` with threading, categories, rules and the change log in the
call's transaction, the ingest steps after it commits).

Which account owns it: the mail account bound to the first of its
``mailboxIds`` that a folder of an account with a propagator holds (in the
client's order; an IMAP account's INBOX for the inbox, the folder of a user
label), else the next mailbox's; with none, the user's ``JMAP`` account
(provider ``jmap``: nothing syncs or propagates it). In a provider account
the provider id is the one its sync will compute for the same bytes
(``mid:<Message-ID>:<size>``, or its keyed form for an owner whose mail is
sealed, else the SHA-256 of the bytes; ``providers.imap.namer``) and a
pending change ``append`` carries the email to the server (IMAP APPEND into
that folder, ``providers.imap.append``), so the next sync recognises it
instead of storing it again. In ``JMAP`` the
provider id is ``jmap-import:<SHA-256 of the bytes>``.

Exactly once: ``UNIQUE(provider_id, account_id)`` lets the same bytes into an
account once, also under concurrent requests (``INSERT … ON CONFLICT DO
NOTHING``, no check-then-insert); an import whose bytes already are an Email
of the user under any of these provider ids (every form of the IMAP one:
clear, or keyed under any key version), in any account, is refused first. A
second import is ``alreadyExists`` with ``existingId`` (RFC 8621 §4.8 lets a
server forbid two Emails with the same content, or just the same
Message-ID, and then requires that error); its savepoint is rolled back, so it
changes nothing — not even the existing Email's mailboxes.

Keywords (``labels.keywords``): ``$seen`` is the read state, ``$flagged`` the
Starred label, every other keyword a ``message_keywords`` row.
``receivedAt`` defaults to the most recent ``Received`` header's date, or the
time of import when there is none.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.ingest.model import IncomingMessage
from mailroom.jmap import ids
from mailroom.jmap.blobs import blob_data, find_blob
from mailroom.jmap.changes import current_states
from mailroom.jmap.dispatcher import Context
from mailroom.jmap.errors import MethodError, Refused, invalid_arguments, set_error
from mailroom.jmap.methods.common import parse_utc_date
from mailroom.jmap.methods.object_state import check_if_in_state
from mailroom.jmap.stored_email import (
    JMAP_PROVIDER,
    InvalidMailboxes,
    NewEmails,
    created_email,
    jmap_account,
    propagates,
    queue_append,
    store_email,
)
from mailroom.labels.keywords import SEEN, parse_keyword
from mailroom.mime import ParsedMessage, parse_message
from mailroom.mime.msgids import normalize_message_id
from mailroom.providers.imap.identity import hash_id
from mailroom.providers.imap.namer import ImapNamer
from mailroom.store.models import Account, Folder, Message
from mailroom.store.models.base import utcnow

PROVIDER_ID_PREFIX = "jmap-import:"
EMAIL_IMPORT_PROPERTIES = frozenset({"blobId", "mailboxIds", "keywords", "receivedAt"})


def _invalid(name: str, description: str) -> Refused:
    return Refused(set_error("invalidProperties", description, [name]))


def _true_map(value: object, name: str) -> list[str]:
    if not isinstance(value, dict) or not all(v is True for v in value.values()):
        raise _invalid(name, f"{name} must map ids to true.")
    return [str(key) for key in value]


def _keywords(value: object) -> set[str]:
    if value is None:
        return set()
    keywords = {k: parse_keyword(k) for k in _true_map(value, "keywords")}
    bad = [k for k, parsed in keywords.items() if parsed is None]
    if bad:
        raise _invalid("keywords", f"{bad[0]!r} is not a valid keyword (RFC 8621 §4.1.1).")
    return {parsed for parsed in keywords.values() if parsed is not None}


def _received_at(value: object) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_utc_date(value, "receivedAt")
    except MethodError as exc:
        raise _invalid("receivedAt", exc.description or "receivedAt must be a UTCDate.") from None


def _parse(data: bytes, received_at: datetime | None) -> ParsedMessage:
    """The parsed message, or invalidEmail when the bytes are no message at all."""
    parsed = parse_message(data, received_at=received_at)
    if not data.strip() or not parsed.headers:
        raise Refused(
            set_error(
                "invalidEmail",
                "The blob is not an RFC 5322 message: it has no header fields.",
            )
        )
    return parsed


class EmailImporter(NewEmails):
    """Imports EmailImport objects of one user within one call's transaction."""

    def owner(self, label_ids: list[int]) -> Account:
        """The account an import into these mailboxes belongs to (see the module docstring)."""
        rows = self.session.execute(
            select(Folder.label_id, Account)
            .join(Account, Account.id == Folder.account_id)
            .where(
                Account.user_id == self.user_id,
                Account.status != "disconnected",
                Folder.label_id.in_(label_ids),
            )
            .order_by(Account.id)
        ).all()
        for label_id in label_ids:
            for bound, account in rows:
                if bound == label_id and propagates(account):
                    return account
        return jmap_account(self.session, self.user_id)

    def _identities(self, data: bytes, parsed: ParsedMessage) -> tuple[list[str], str]:
        """(provider ids in a provider account, provider id in ``JMAP``) of these bytes.

        The first provider account id is the one a new message is stored under (keyed for
        an owner whose mail is sealed); the others are the forms it may be stored under.
        """
        message_id = normalize_message_id(f"<{parsed.message_id}>") if parsed.message_id else None
        native = ImapNamer.of(self.session, self.user_id).forms(message_id, len(data))
        return native or [hash_id(data)], PROVIDER_ID_PREFIX + hashlib.sha256(data).hexdigest()

    def _mailboxes(self, value: object, keywords: set[str]) -> list[int]:
        try:
            return self.targets.labels(
                _true_map(value, "mailboxIds"), self.context.created_ids, keywords
            )
        except InvalidMailboxes as exc:
            raise _invalid("mailboxIds", str(exc)) from None

    def _blob(self, value: object) -> bytes:
        if not isinstance(value, str):
            raise _invalid("blobId", "blobId is required and must be a blob id.")
        found = find_blob(self.session, self.user_id, value)
        data = blob_data(self.session, found) if found is not None else None
        if found is None or data is None:
            raise _invalid("blobId", f"There is no blob {value} in this account.")
        limit = self.context.limits.max_size_upload
        if found.size > limit:
            raise Refused(
                set_error("tooLarge", f"The message is larger than {limit} octets.", ["blobId"])
            )
        return data

    def store_one(self, spec: object) -> dict[str, Any]:
        """Import one EmailImport; the created Email's id, blobId, threadId and size."""
        if not isinstance(spec, dict):
            raise Refused(set_error("invalidProperties", "An EmailImport must be an object."))
        unknown = sorted(set(spec) - EMAIL_IMPORT_PROPERTIES)
        if unknown:
            raise _invalid(unknown[0], f"{unknown[0]} is not an EmailImport property.")
        keywords = _keywords(spec.get("keywords"))
        mailboxes = self._mailboxes(spec.get("mailboxIds"), keywords)
        received_at = _received_at(spec.get("receivedAt"))
        data = self._blob(spec.get("blobId"))
        parsed = _parse(data, received_at)
        if received_at is None and parsed.header("received") is None:
            received_at = utcnow()  # RFC 8621: the time of import when there is no Received
        native, imported = self._identities(data, parsed)
        account = self.owner(mailboxes)
        pid = imported if account.provider == JMAP_PROVIDER else native[0]
        existing = self._existing([*native, imported])
        if existing is not None:
            raise _already_exists(existing)
        item = IncomingMessage(
            provider_id=pid,
            raw=data,
            label_ids=sorted(mailboxes),
            received_at=received_at,
            fallback_time=utcnow(),
            seen=SEEN in keywords,
            parsed=parsed,
        )
        result = store_email(self.session, account.id, self.user_id, item, keywords)
        if result is None:  # a concurrent import of the same bytes won
            raise _already_exists(self._existing([pid], account.id))
        message_id = result.created_ids[0]
        queue_append(self.session, account, message_id, pid)
        self.results.append(result)
        return created_email(self.session, message_id)

    def _existing(self, provider_ids: list[str], account_id: int | None = None) -> int | None:
        """The user's Email stored under one of these provider ids (in ``account_id`` if given)."""
        query = select(Message.id).where(
            Message.user_id == self.user_id, Message.provider_id.in_(provider_ids)
        )
        if account_id is not None:
            query = query.where(Message.account_id == account_id)
        found: int | None = self.session.scalar(query.order_by(Message.id).limit(1))
        return found


def _already_exists(existing: int | None) -> Refused:
    """alreadyExists naming the Email these bytes were imported as (``existingId``)."""
    error = set_error("alreadyExists", "These bytes are already an Email of this account.")
    if existing is not None:
        error["existingId"] = ids.email_id(existing)
    return Refused(error)


def email_import(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Email/import: store each EmailImport's blob as an Email, once per content."""
    user_id = context.check_account(args)
    emails = args.get("emails")
    if not isinstance(emails, dict):
        raise invalid_arguments("emails must map creation ids to EmailImport objects.")
    if len(emails) > context.limits.max_objects_in_set:
        raise MethodError(
            "requestTooLarge",
            f"At most maxObjectsInSet ({context.limits.max_objects_in_set}) emails per call.",
        )
    old_state = current_states(session, user_id).email
    check_if_in_state(args.get("ifInState"), old_state, "Email")
    created, not_created = EmailImporter(context, session, user_id).store_all(emails)
    session.flush()
    return {
        "accountId": context.account_id,
        "oldState": str(old_state),
        "newState": str(current_states(session, user_id).email),
        "created": created or None,
        "notCreated": not_created or None,
    }
