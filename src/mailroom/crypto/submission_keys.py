"""An owner key rotation re-hashes the idempotency keys of the owner's sealed submissions.

A sealed submission (``outbound.sealed_queue``) stores its ``message_key`` as
the owner's keyed hash of its Message-ID (``lookup_hash("message-id",
id_key(id))``). Queueing the same message again finds it by the hash under
every stored key version, so during a rotation both match; once the old
version is dropped, a key made under it would match nothing, and the same
message queued again would be sent twice. So the rotation's last pass, after
the messages' lookup columns (``crypto.lookup_rotation``) and before the old
version goes, hashes each key again under the new version from the opened
``message_id`` (:func:`rehash_submission_keys`, in batches, its progress kept
with the rotation's).

A stored key is replaced only when it is the hash of the row's own Message-ID
under some version: a forgotten or replaced key (``forgotten:<id>``, JMAP) or
a clear one stays as it is. A row already under the new version hashes to
itself and is not written, so a batch repeated after a kill changes nothing
twice. Of two rows of one account that would end with the same key (the same
message queued at the same moment under two versions, as a rotation began)
only the first gets it; the other keeps its old hash and is logged.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.crypto.message_fields import ID_KIND
from mailroom.crypto.rotation_progress import advance
from mailroom.crypto.sealing import require_cipher
from mailroom.crypto.unique_rewrite import rewrite_unique
from mailroom.outbound.sealed_queue import SUBMISSIONS, read_value
from mailroom.store.keys import id_key
from mailroom.store.models import Submission

__all__ = ["PROGRESS_KEY", "rehash_submission_keys"]

log = logging.getLogger(__name__)

PROGRESS_KEY = "_submission_keys"  # the last sealed submission whose key was re-hashed


def rehash_submission_keys(
    session: Session, owner: int, progress: MutableMapping[str, Any], batch: int
) -> bool:
    """The next batch of the owner's submission keys re-hashed; True when all are.

    ``progress`` is the rotation's: :data:`PROGRESS_KEY` holds the last submission id
    done (-1 once finished; absent when the owner has no sealed submission).
    """
    return advance(session, owner, progress, batch, PROGRESS_KEY, _rehash_batch)


def _rehash_batch(session: Session, owner: int, after: int, batch: int) -> int | None:
    """Re-hash the keys of the next ``batch`` sealed submissions; the last id, or None if none."""
    rows = session.execute(
        select(Submission.id, Submission.account_id, Submission.message_id, Submission.message_key)
        .where(Submission.user_id == owner, Submission.sealed, Submission.id > after)
        .order_by(Submission.id)
        .limit(batch)
    ).all()
    if not rows:
        return None
    cipher = require_cipher(session, "This owner's outgoing mail")
    changes: list[dict[str, Any]] = []
    for row in rows:
        clear = id_key(
            read_value(session, owner, SUBMISSIONS, "message_id", row.id, row.message_id, True)
        )
        fresh = cipher.lookup_hash(owner, ID_KIND, clear)
        if row.message_key != fresh and row.message_key in cipher.lookup_hashes(
            owner, ID_KIND, clear
        ):
            changes.append({"b_id": row.id, "b_account": row.account_id, "b_value": fresh})
    rewrite_unique(session, "submissions", "message_key", changes, "submission")
    return int(rows[-1].id)
