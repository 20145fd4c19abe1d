"""Gmail's label folders coming and going: what discovery does about them.

A label folder of a Gmail account is a view (:mod:`.gmail_ext`): no message is
located in it, its messages carry its label through ``X-GM-LABELS``. So when
one disappears from LIST (the label was deleted or renamed at Gmail), no
location tells which messages lose the label: every message of the account
does (:func:`forget_label`), since Gmail no longer has it. And when label
folders appear or disappear, Gmail may not raise the messages' mod-sequences
(a rename touches every message of the label), so the next change scan of the
synced folders reads every message's labels once (:func:`rescan_labels`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from mailroom.ingest.mirror import AccountScope, ChangeSet
from mailroom.providers.imap.gmail_ext import STATE_KEY, synced
from mailroom.store.models import Folder, Message, MessageLabel

__all__ = ["forget_label", "rescan_labels", "view_state"]


def view_state() -> dict[str, Any]:
    """The state of a new label folder of a Gmail account: a view with no history."""
    return {"selectable": True, STATE_KEY: True, "import_floor_uid": 1}


def forget_label(session: Session, scope: AccountScope, changes: ChangeSet, label_id: int) -> None:
    """Take a label Gmail no longer has off every message of the account."""
    ids = sorted(
        session.scalars(
            select(MessageLabel.message_id)
            .join(Message, Message.id == MessageLabel.message_id)
            .where(MessageLabel.label_id == label_id, Message.account_id == scope.account_id)
        )
    )
    if not ids:
        return
    session.execute(
        delete(MessageLabel).where(
            MessageLabel.label_id == label_id, MessageLabel.message_id.in_(ids)
        )
    )
    changes.emails.update(ids)
    changes.mailboxes.add(label_id)


def rescan_labels(session: Session, account_id: int) -> None:
    """Make the next change scan of the synced folders read every message's labels.

    The scan asks ``CHANGEDSINCE 0``: every message of the folder, also those above
    the folder's last seen UID (moved there by the propagator).
    """
    for folder in session.scalars(select(Folder).where(Folder.account_id == account_id)):
        if synced(folder) and (folder.state or {}).get("highest_modseq") is not None:
            folder.state = {**(folder.state or {}), "highest_modseq": 0}
