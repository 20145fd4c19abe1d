"""An owner key rotation re-hashes the lookup columns of the owner's sealed messages.

A sealed message stores its Message-ID (``messages.message_id_header``), the ids
it names (``message_refs.ref``) and its subject key (``messages.subject_key``)
as the owner's keyed hashes (``crypto.message_fields``), and so does a contact's
address (``contacts.email``, rebuilt from stored mail when the messages are
done). While a rotation runs,
look-ups try the hash under every stored key version; once the old version is
dropped, a hash made under it matches nothing, and a reply arriving later would
no longer thread onto its sealed parent. So the rotation's last pass, before
the old version goes, hashes these values again under the new version
(:func:`rehash_lookups`, in batches, its progress kept with the rotation's, so
a killed rotation resumes after the last committed batch).

Hashes cannot be re-hashed without their values, so the clear values are
rebuilt as ingest made them:

* the subject key from the opened subject
  (``conversations.subject.normalized_subject``);
* the ids from the sealed header list (``crypto.mail_reading.columns_of``):
  every id the Message-ID, In-Reply-To and References fields hold (a superset
  of what ``conversations.references.reference_chain`` kept), each as its
  index key (``store.keys.id_key``). A stored hash is replaced only when it is
  the hash of one of them under some version, so a value the headers cannot
  account for is left as it was (and counted in the log), never guessed.

A row already under the new version hashes to itself and is not written, so a
batch repeated after a kill changes nothing twice.

After the messages, the same pass re-hashes the keyed IMAP provider ids of the
owner's messages (``crypto.provider_id_rotation``) and the idempotency keys of
their sealed submissions (``crypto.submission_keys``), each with progress of
its own.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, MutableMapping
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session

from mailroom.conversations.references import ids_in_headers
from mailroom.conversations.subject import normalized_subject
from mailroom.crypto.fields import FieldCipher
from mailroom.crypto.mail_reading import columns_of
from mailroom.crypto.message_fields import ID_KIND, SUBJECT_KEY_CHARS, SUBJECT_KIND, open_rows
from mailroom.crypto.provider_id_rotation import rehash_provider_ids
from mailroom.crypto.rotation_progress import advance
from mailroom.crypto.sealing import require_cipher
from mailroom.crypto.submission_keys import rehash_submission_keys
from mailroom.store.chunks import in_chunks
from mailroom.store.models import Message, MessageRef

__all__ = ["PROGRESS_KEY", "rehash_lookup_batch", "rehash_lookups"]

log = logging.getLogger(__name__)

PROGRESS_KEY = "_lookup_keys"  # the last sealed message whose lookup columns were re-hashed


def rehash_lookups(
    session: Session, owner: int, progress: MutableMapping[str, Any], batch: int
) -> bool:
    """The next batch of the owner's lookup columns re-hashed; True when all are.

    ``progress`` is the rotation's: :data:`PROGRESS_KEY` holds the last message id
    done (-1 once finished; absent when the owner has no sealed mail); the keyed
    provider ids (``crypto.provider_id_rotation``) and the sealed submissions' keys
    (``crypto.submission_keys``) follow the messages.
    """
    if not _rehash_messages(session, owner, progress, batch):
        return False
    if not rehash_provider_ids(session, owner, progress, batch):
        return False
    return rehash_submission_keys(session, owner, progress, batch)


def _rehash_messages(
    session: Session, owner: int, progress: MutableMapping[str, Any], batch: int
) -> bool:
    """The next batch of the owner's messages' lookup columns re-hashed; True when all are."""
    before = progress.get(PROGRESS_KEY)
    if not advance(session, owner, progress, batch, PROGRESS_KEY, rehash_lookup_batch):
        return False
    if before != -1 and progress.get(PROGRESS_KEY) == -1:
        # Contacts of a sealing owner are keyed hashes of addresses too: written again
        # from the stored mail, under the newest version, in this last batch.
        from mailroom.categories.correspondents import rebuild_contacts

        rebuild_contacts(session, owner)
    return True


def rehash_lookup_batch(session: Session, owner: int, after: int, batch: int) -> int | None:
    """Re-hash the lookup columns of the next ``batch`` of ``owner``'s sealed messages.

    Returns the last message id done, or None when no sealed message after ``after`` is left.
    """
    rows = session.execute(
        select(
            Message.id,
            Message.user_id,
            Message.sealed,
            Message.subject,
            Message.subject_key,
            Message.message_id_header,
        )
        .where(Message.user_id == owner, Message.sealed, Message.id > after)
        .order_by(Message.id)
        .limit(batch)
    ).all()
    if not rows:
        return None
    cipher = require_cipher(session, "This owner's mail")
    ids = [int(row.id) for row in rows]
    refs: dict[int, list[str]] = defaultdict(list)
    for chunk in in_chunks(ids):
        for message_id, ref in session.execute(
            select(MessageRef.message_id, MessageRef.ref).where(MessageRef.message_id.in_(chunk))
        ):
            refs[int(message_id)].append(ref)
    headers = columns_of(session, ids, ["headers"], owner)
    messages: list[dict[str, Any]] = []
    ref_updates: list[dict[str, Any]] = []
    unaccounted = 0
    for row in open_rows(session, rows, ["subject"]):
        message_id = int(row["id"])
        renamed = _renames(
            cipher, owner, ids_in_headers(headers.get(message_id, {}).get("headers") or [])
        )
        values: dict[str, Any] = {}
        stored_id = row["message_id_header"]
        if stored_id is not None:
            fresh = renamed.get(stored_id)
            unaccounted += fresh is None
            if fresh is not None and fresh != stored_id:
                values["message_id_header"] = fresh
        if row["subject_key"] is not None:
            text = normalized_subject(row["subject"] or "")
            if text:
                key = cipher.lookup_hash(owner, SUBJECT_KIND, text)[:SUBJECT_KEY_CHARS]
                if key != row["subject_key"]:
                    values["subject_key"] = key
        if values:
            messages.append({"b_id": message_id, **values})
        for ref in refs.get(message_id, ()):
            fresh = renamed.get(ref)
            unaccounted += fresh is None
            if fresh is not None and fresh != ref:
                ref_updates.append({"b_message": message_id, "b_old": ref, "b_new": fresh})
    _write(session, messages, ref_updates)
    if unaccounted:
        log.warning(
            "Key rotation of owner %s: %d stored Message-ID hash(es) not found in their "
            "message's headers were left under the old key version",
            owner,
            unaccounted,
        )
    return ids[-1]


def _renames(cipher: FieldCipher, owner: int, clear_ids: Iterable[str]) -> dict[str, str]:
    """The hash of each id under every stored version → its hash under the newest."""
    renamed: dict[str, str] = {}
    for clear in clear_ids:
        fresh = cipher.lookup_hash(owner, ID_KIND, clear)
        for old in cipher.lookup_hashes(owner, ID_KIND, clear):
            renamed[old] = fresh
    return renamed


def _write(
    session: Session, messages: list[dict[str, Any]], ref_updates: list[dict[str, Any]]
) -> None:
    table = Message.__table__
    by_columns: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for values in messages:
        by_columns[tuple(sorted(k for k in values if k != "b_id"))].append(values)
    connection = session.connection()
    for columns, params in by_columns.items():
        connection.execute(
            update(table)  # type: ignore[arg-type]
            .where(table.c.id == bindparam("b_id"))
            .values({column: bindparam(column) for column in columns}),
            params,
        )
    if ref_updates:
        refs = MessageRef.__table__
        connection.execute(
            update(refs)  # type: ignore[arg-type]
            .where(refs.c.message_id == bindparam("b_message"), refs.c.ref == bindparam("b_old"))
            .values(ref=bindparam("b_new")),
            ref_updates,
        )
