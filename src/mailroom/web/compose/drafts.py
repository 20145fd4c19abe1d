"""Drafts of the compose page, stored the way JMAP ``Email/set`` stores them.

An email is immutable, so saving a draft is what a JMAP client does: create
the new draft (``Email/set`` create — composed, stored through the ingest
path, appended to the provider's Drafts) and, once that succeeded, destroy
the one it replaces (``Email/set`` destroy), in the caller's transaction.
A compose window therefore has exactly one draft, whose id changes with
every save. Only one of the user's own drafts (keyword ``$draft``) is ever
replaced: a form naming any other message creates a new draft instead.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.errors import MailroomError
from mailroom.jmap import ids
from mailroom.jmap.auth import Principal
from mailroom.jmap.blobs import read_blob
from mailroom.jmap.bodies import parse_structure, part_content
from mailroom.jmap.dispatcher import Context, Limits
from mailroom.jmap.errors import MethodError
from mailroom.jmap.methods.email_set import email_set
from mailroom.labels.operations import Operations
from mailroom.mime import parse_message
from mailroom.store.engine import Store
from mailroom.store.models import Identity, Message, MessageKeyword
from mailroom.web.compose.form import Attached, Composition, addresses_text

__all__ = ["DraftError", "attachments_of", "load_draft", "raw_of", "save_draft"]


class DraftError(MailroomError):
    """The draft could not be stored (one sentence)."""


def _context(store: Store, user_id: int, name: str) -> Context:
    return Context(store, Principal(user_id, name), frozenset(), Limits())


def is_draft(session: Session, user_id: int, email_id: int) -> bool:
    """Whether ``email_id`` is one of the user's drafts (it has ``$draft``)."""
    found = session.scalar(
        select(Message.id)
        .join(MessageKeyword, MessageKeyword.message_id == Message.id)
        .where(
            Message.id == email_id, Message.user_id == user_id, MessageKeyword.keyword == "$draft"
        )
    )
    return found is not None


def raw_of(session: Session, user_id: int, email_id: int) -> bytes | None:
    """The stored bytes of one of the user's emails, or None."""
    found = read_blob(session, user_id, ids.raw_blob_id(email_id))
    return None if found is None else found[0]


def save_draft(
    session: Session,
    store: Store,
    principal: Principal,
    composition: Composition,
    identity: Identity,
) -> int:
    """Store ``composition`` as the user's draft, replacing its earlier one; the new id."""
    context = _context(store, principal.user_id, principal.name)
    drafts = Operations(session, principal.user_id).role("drafts")
    creation = composition.email(identity, drafts)
    try:
        answer = email_set(
            context, session, {"accountId": context.account_id, "create": {"draft": creation}}
        )
    except MethodError as error:
        raise DraftError(error.description or "The draft could not be saved.") from None
    refused = (answer.get("notCreated") or {}).get("draft")
    if refused is not None:
        raise DraftError(str(refused.get("description") or "The draft could not be saved."))
    new_id = ids.parse_email(answer["created"]["draft"]["id"])
    assert new_id is not None  # the id Email/set just gave
    old = composition.draft
    if old is not None and old != new_id and is_draft(session, principal.user_id, old):
        email_set(
            context, session, {"accountId": context.account_id, "destroy": [ids.email_id(old)]}
        )
    return new_id


def attachments_of(session: Session, user_id: int, email_id: int) -> list[Attached]:
    """The attachments of a stored email, as parts of it (``A<id>-<part>`` blob ids)."""
    raw = raw_of(session, user_id, email_id)
    if raw is None:
        return []
    structure = parse_structure(email_id, raw)
    return [
        Attached(
            ids.part_blob_id(email_id, part.path),
            part.filename or "attachment",
            part.ctype,
            len(part_content(structure, part)),
        )
        for part in structure.attachments
    ]


def load_draft(
    session: Session, user_id: int, email_id: int, identities: dict[str, Identity]
) -> Composition | None:
    """The composition of one of the user's drafts, or None when it is none of theirs."""
    if not is_draft(session, user_id, email_id):
        return None
    raw = raw_of(session, user_id, email_id)
    if raw is None:
        return None
    parsed = parse_message(raw)
    sender = parsed.from_[0].email.lower() if parsed.from_ else ""
    identity = identities.get(sender)
    return Composition(
        draft=email_id,
        identity=identity.id if identity is not None else None,
        to=addresses_text(parsed.to),
        cc=addresses_text(parsed.cc),
        bcc=addresses_text(parsed.bcc),
        subject=parsed.subject,
        body=parsed.text_body,
        in_reply_to=tuple(parsed.in_reply_to),
        references=tuple(parsed.references),
        attachments=tuple(attachments_of(session, user_id, email_id)),
    )
