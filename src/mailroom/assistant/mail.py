"""Loading the stored facts a model sees (:class:`~mailroom.assistant.base.MailFacts`)."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.assistant.base import MailFacts
from mailroom.categories.explaining import first_headers
from mailroom.crypto.mail_reading import columns_of
from mailroom.crypto.message_fields import open_rows
from mailroom.store.chunks import in_chunks
from mailroom.store.models import Message

_OPENED = ("from_name", "from_email", "subject", "preview")  # clear text for the model
TEXT_CHARS = 2000  # of the body: enough to tell a newsletter from a note, and a bounded prompt


def load_mail(session: Session, message_ids: Sequence[int]) -> dict[int, MailFacts]:
    """The facts of these stored messages, by id (messages that are gone are left out)."""
    found: dict[int, MailFacts] = {}
    for chunk in in_chunks(sorted(set(message_ids))):
        selected = session.execute(
            select(
                Message.id,
                Message.user_id,
                Message.sealed,
                Message.from_name,
                Message.from_email,
                Message.subject,
                Message.preview,
                Message.category,
                Message.category_stage,
            ).where(Message.id.in_(chunk))
        )
        rows = [SimpleNamespace(**row) for row in open_rows(session, selected, _OPENED)]
        bodies = columns_of(session, chunk, ["text_body", "headers"])
        for row in rows:
            body = bodies.get(row.id, {})
            found[row.id] = MailFacts(
                message_id=row.id,
                user_id=row.user_id,
                from_name=row.from_name or "",
                from_email=row.from_email or "",
                subject=row.subject or "",
                text=(body.get("text_body") or row.preview or "")[:TEXT_CHARS],
                headers=first_headers(body.get("headers") or []),
                cascade=row.category or "",
                stage=row.category_stage or "",
            )
    return found
