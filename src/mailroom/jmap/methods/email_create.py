"""``Email/set`` create (RFC 8621 §4.6): drafts and other new emails, stored like any mail.

Each creation is checked and translated by :mod:`mailroom.jmap.email_form`,
written as RFC 5322 bytes by :func:`mailroom.mime.compose.compose` and then
stored through the ingest pipeline (``ingest.batch.store_batch``: raw blob,
bodies, search index, change log "created", categories, threading — a reply
joins its parent's thread through ``inReplyTo``/``references``, Mailbox counts
follow by trigger) in its own savepoint of the call's transaction; the ingest
steps run only after the transaction commits, as ``commit_batch`` does.

Which mail account owns the email: the account whose address (its own or
an alias, ``jmap.identities.owned_addresses``, or an identity row of it)
matches the first ``from`` address, otherwise the user's first mail
account; a user without any gets the ``JMAP`` account. Its ``Message-ID``
(generated when absent) is on that account's domain.

Exactly once: the provider id is the IMAP one, ``mid:<Message-ID>:<size>``
or, for an owner whose mail is sealed, its keyed form (``providers.imap.namer``),
so when the email is appended to the IMAP server the next sync recognises it
as this message instead of storing it a second time; an email stored under
any form of that id already is ``alreadyExists``, and ``UNIQUE(provider_id,
account_id)`` holds its own form in any case. A
client that sends the same creation twice gets two emails (each gets a
fresh Message-ID): JMAP has no idempotency key for ``create``.

Carrying it to the provider: one pending change ``append`` per created
email (``jmap.stored_email.queue_append``), for providers with a
propagator; the IMAP propagator appends it (``providers.imap.append``) with
``\\Draft`` when it has ``$draft``, into the Drafts folder when it is in
Drafts.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from mailroom.ingest.mirror import known_messages
from mailroom.ingest.model import IncomingMessage
from mailroom.jmap import ids
from mailroom.jmap.blobs import read_blob
from mailroom.jmap.dispatcher import Context
from mailroom.jmap.email_form import CONVENIENCE, EmailForm, FormError, read_email_form
from mailroom.jmap.errors import set_error
from mailroom.jmap.identities import owned_addresses, user_accounts
from mailroom.jmap.stored_email import (
    JMAP_PROVIDER,
    InvalidMailboxes,
    NewEmails,
    created_email,
    jmap_account,
    queue_append,
    store_email,
)
from mailroom.labels.keywords import SEEN
from mailroom.mime.compose import ComposeError, Mailbox, compose
from mailroom.mime.msgids import normalize_message_id
from mailroom.providers.imap.identity import hash_id
from mailroom.providers.imap.namer import ImapNamer
from mailroom.store.models import Account, Identity, utcnow

__all__ = ["EmailCreator", "create_emails"]


class EmailCreator(NewEmails):
    """Creates the emails of one ``Email/set`` call inside its transaction."""

    def store_one(self, obj: object) -> dict[str, Any]:
        """Create one email; its id, blobId, threadId and size (``FormError`` if refused)."""
        form = read_email_form(obj, lambda blob_id: read_blob(self.session, self.user_id, blob_id))
        labels = self._labels(form)
        account = self._owner(form)
        try:
            composed = compose(form.headers, form.body, domain=_domain(account, form))
        except ComposeError as exc:
            props = _properties_of(exc.header, obj)
            raise FormError(set_error("invalidProperties", str(exc), props)) from None
        raw = composed.raw
        mid = normalize_message_id(f"<{composed.message_id}>")
        # Stored under the owner's name for it, and refused when stored under any form.
        forms = ImapNamer.of(self.session, self.user_id).forms(mid, len(raw)) or [hash_id(raw)]
        item = IncomingMessage(
            provider_id=forms[0],
            raw=raw,
            label_ids=labels,
            received_at=form.received_at or utcnow().replace(microsecond=0),
            seen=SEEN in form.keywords,
        )
        stored = known_messages(self.session, account.id, forms)
        result = (
            None
            if stored
            else store_email(self.session, account.id, self.user_id, item, form.keywords)
        )
        if result is None:
            error = set_error("alreadyExists", "An email with this Message-ID and size exists.")
            existing = min(known_messages(self.session, account.id, forms).values(), default=None)
            error["existingId"] = ids.email_id(existing) if existing is not None else None
            raise FormError(error)
        (message_id,) = result.created_ids
        queue_append(self.session, account, message_id, item.provider_id)
        self.results.append(result)
        return created_email(self.session, message_id)

    def _labels(self, form: EmailForm) -> list[int]:
        try:
            return self.targets.labels(form.mailbox_ids, self.context.created_ids, form.keywords)
        except InvalidMailboxes as exc:
            raise FormError(set_error("invalidProperties", str(exc), ["mailboxIds"])) from None

    def _owner(self, form: EmailForm) -> Account:
        """The mail account the email belongs to (module docstring)."""
        accounts = user_accounts(self.session, self.user_id)
        sender = _first_from(form)
        if sender:
            for account in accounts.values():
                if sender in (a.lower() for a in owned_addresses(account)):
                    return account
            owner = self.session.scalar(
                select(Identity.account_id)
                .where(Identity.user_id == self.user_id, func.lower(Identity.email) == sender)
                .order_by(Identity.id)
                .limit(1)
            )
            if owner is not None and owner in accounts:
                return accounts[owner]
        mail = [a for a in accounts.values() if a.provider != JMAP_PROVIDER]
        if mail or accounts:
            return (mail or list(accounts.values()))[0]
        return jmap_account(self.session, self.user_id)


def _first_from(form: EmailForm) -> str:
    for header in form.headers:
        if header.name.lower() != "from" or not isinstance(header.value, tuple):
            continue
        for item in header.value:
            addresses = item.addresses if hasattr(item, "addresses") else (item,)
            for address in addresses:
                if isinstance(address, Mailbox) and address.email:
                    return address.email.lower()
    return ""


def _domain(account: Account, form: EmailForm) -> str:
    """The domain of the Message-ID: the account's, else the sender's."""
    for address in [*owned_addresses(account), _first_from(form)]:
        domain = address.rpartition("@")[2].lower()
        if domain and domain.isascii():
            return domain
    return "localhost"


def _properties_of(header: str | None, obj: object) -> list[str]:
    """The creation properties a value the composer refused came from."""
    for prop, (name, _form) in CONVENIENCE.items():
        if header is not None and name.lower() == header.lower():
            return [prop]
    given = set(obj) if isinstance(obj, dict) else set()
    if header is not None and not header.lower().startswith("content-"):
        named = [p for p in given if p.lower().startswith(f"header:{header.lower()}")]
        if named:
            return sorted(named)
    body = [p for p in ("bodyStructure", "textBody", "htmlBody", "attachments") if p in given]
    return body or ["bodyStructure"]


def create_emails(
    context: Context, session: Session, create: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(created, notCreated) of an ``Email/set`` ``create`` argument, in the call's session."""
    if not create:
        return {}, {}
    return EmailCreator(context, session, context.principal.user_id).store_all(create)
