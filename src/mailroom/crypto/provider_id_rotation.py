"""An owner key rotation re-hashes the keyed IMAP provider ids of the owner's messages.

While the store seals new mail, an IMAP message's provider id is the owner's
keyed hash of its Message-ID (``midk:``, ``providers.imap.namer``). A sync
recognises a moved or re-numbered message by that id under every stored key
version; once the old version is dropped, an id made under it would match
nothing, and the message would be downloaded and stored a second time. So the
rotation's last pass, before the old version goes, names each such message
again under the new version (:func:`rehash_provider_ids`, in batches, its
progress kept with the rotation's under :data:`PROGRESS_KEY`, so a killed
rotation resumes after the last committed batch).

A keyed id cannot be re-hashed without its Message-ID, which comes from the
message's sealed header list (``namer.stored_message_ids``); an id is replaced
only when it is that Message-ID's name under some version, so an id the
headers cannot account for is left as it was and counted in the log. An id
already under the new version names itself and is not written, so a batch
repeated after a kill changes nothing twice. A new id another message of the
account holds already (``UNIQUE(provider_id, account_id)``) is not taken: that
row keeps its id and is logged.

The same pass re-seals the Message-IDs that pending delete-forever changes
keep (``labels.sealed_deletes``, under :data:`DELETES_KEY`): the propagator
must still open them after the old version is gone.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from mailroom.crypto.fields import FieldTampered, from_text, version_of
from mailroom.crypto.rotation_progress import advance
from mailroom.crypto.sealing import require_cipher
from mailroom.crypto.unique_rewrite import rewrite_unique
from mailroom.labels.sealed_deletes import PAYLOAD_KEY, open_message_id, seal_message_id
from mailroom.providers.imap.identity import KEYED_PREFIX, size_of
from mailroom.providers.imap.namer import ImapNamer, stored_message_ids
from mailroom.store.models import Account, Message, PendingChange

__all__ = ["DELETES_KEY", "PROGRESS_KEY", "rehash_provider_ids"]

log = logging.getLogger(__name__)

PROGRESS_KEY = "_provider_ids"  # the last message whose keyed provider id was re-hashed
DELETES_KEY = "_sealed_deletes"  # the last pending delete whose sealed Message-ID was re-sealed


def rehash_provider_ids(
    session: Session, owner: int, progress: MutableMapping[str, Any], batch: int
) -> bool:
    """The next batch of the owner's keyed provider ids (then pending deletes); True when done.

    ``progress`` is the rotation's: each key holds the last row id done, -1 once
    finished, and is absent while nothing of its kind was found.
    """
    return advance(session, owner, progress, batch, PROGRESS_KEY, _rehash_batch) and advance(
        session, owner, progress, batch, DELETES_KEY, _reseal_batch
    )


def _rehash_batch(session: Session, owner: int, after: int, batch: int) -> int | None:
    """Re-name the next ``batch`` keyed provider ids; the last message id, or None if none."""
    rows = session.execute(
        select(Message.id, Message.account_id, Message.provider_id)
        .where(
            Message.user_id == owner,
            Message.provider_id.startswith(KEYED_PREFIX, autoescape=True),
            Message.id > after,
        )
        .order_by(Message.id)
        .limit(batch)
    ).all()
    if not rows:
        return None
    namer = ImapNamer.of(session, owner, keyed=True)
    clear = stored_message_ids(session, owner, {int(r.id): r.provider_id for r in rows}, namer)
    changes: list[dict[str, Any]] = []
    unaccounted = 0
    for row in rows:
        mid, size = clear.get(int(row.id)), size_of(row.provider_id)
        if mid is None or size is None:
            unaccounted += 1
            continue
        fresh = namer.name(mid, size)
        if fresh is not None and fresh != row.provider_id:
            changes.append({"b_id": row.id, "b_account": row.account_id, "b_value": fresh})
    rewrite_unique(session, "messages", "provider_id", changes, "message")
    if unaccounted:
        log.warning(
            "Key rotation of owner %s: %d keyed provider id(s) not named by their message's "
            "stored Message-ID were left under the old key version",
            owner,
            unaccounted,
        )
    return int(rows[-1].id)


def _reseal_batch(session: Session, owner: int, after: int, batch: int) -> int | None:
    """Re-seal the Message-IDs of the next ``batch`` delete changes; the last id, or None."""
    rows = session.execute(
        select(PendingChange.id, PendingChange.payload)
        .join(Account, Account.id == PendingChange.account_id)
        .where(
            Account.user_id == owner,
            PendingChange.operation == "delete",
            PendingChange.state != "done",
            PendingChange.id > after,
        )
        .order_by(PendingChange.id)
        .limit(batch)
    ).all()
    if not rows:
        return None
    cipher = require_cipher(session, "A deleted message's Message-ID")
    newest = cipher.keys.current(owner).version
    for change_id, payload in rows:
        sealed = (payload or {}).get(PAYLOAD_KEY)
        if not isinstance(sealed, str) or version_of(from_text(sealed)) >= newest:
            continue
        try:
            mid = open_message_id(session, owner, int(change_id), payload)
        except FieldTampered:
            log.warning(
                "Key rotation: pending change %s keeps a value that does not open", change_id
            )
            continue
        if mid is None:
            continue
        fresh = {**payload, PAYLOAD_KEY: seal_message_id(cipher, owner, int(change_id), mid)}
        session.execute(
            update(PendingChange).where(PendingChange.id == change_id).values(payload=fresh)
        )
    return int(rows[-1][0])
