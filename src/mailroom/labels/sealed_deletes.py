"""What a delete-forever change keeps of a sealed message: its Message-ID, sealed.

Deleting a message forever removes its row at once; the pending change
``delete`` (:meth:`~mailroom.labels.operations.Operations.delete_forever`) is all
the propagator has left to find the provider's copies by, and it keeps the
provider id. The IMAP provider id of sealed mail is the owner's keyed hash of
the Message-ID (``providers.imap.namer``), which a server cannot be searched
for, and the message's sealed header list goes with the message. So the
change's payload carries the Message-ID too (:data:`PAYLOAD_KEY`), sealed
under the owner's key and bound to ``pending_changes``, the payload column
and the change's row id like every sealed value, written in the transaction
that records the delete, opened by the propagator. A clear message's provider
id says its Message-ID itself and gets none.

An owner key rotation re-seals these values under the new version in its last
pass (``crypto.provider_id_rotation``), before the old version goes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, update

from mailroom.crypto.fields import from_text, to_text
from mailroom.crypto.sealing import require_cipher

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from mailroom.crypto.fields import FieldCipher

__all__ = ["PAYLOAD_KEY", "TABLE", "open_message_id", "seal_message_id", "seal_message_ids"]

TABLE = "pending_changes"
COLUMN = "payload"
PAYLOAD_KEY = "sealed_message_id"
_WHAT = "A deleted message's Message-ID"


def seal_message_id(cipher: FieldCipher, owner: int, change_id: int, message_id: str) -> str:
    """The sealed text of a Message-ID for the payload of pending change ``change_id``."""
    return to_text(cipher.encrypt(owner, TABLE, COLUMN, change_id, message_id))


def seal_message_ids(
    session: Session, owner: int, payload: Mapping[str, Any], message_ids: Mapping[int, str]
) -> None:
    """Write ``payload`` plus the sealed Message-ID into each change (change id → Message-ID)."""
    if not message_ids:
        return
    from mailroom.store.models import PendingChange

    cipher = require_cipher(session, _WHAT)
    table = PendingChange.__table__
    session.connection().execute(
        update(table)  # type: ignore[arg-type]
        .where(table.c.id == bindparam("b_id"))
        .values(payload=bindparam("b_payload")),
        [
            {
                "b_id": change_id,
                "b_payload": {
                    **payload,
                    PAYLOAD_KEY: seal_message_id(cipher, owner, change_id, mid),
                },
            }
            for change_id, mid in message_ids.items()
        ],
    )


def open_message_id(
    session: Session, owner: int, change_id: int, payload: Mapping[str, Any]
) -> str | None:
    """The Message-ID a change's payload keeps sealed, or None when it keeps none."""
    sealed = payload.get(PAYLOAD_KEY)
    if not isinstance(sealed, str):
        return None
    cipher = require_cipher(session, _WHAT)
    return cipher.decrypt_text(owner, TABLE, COLUMN, change_id, from_text(sealed))
