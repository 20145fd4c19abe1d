"""``Blob/copy`` (RFC 8620 §6.3): blobs from one account into another.

A user has exactly one JMAP account, so the only copy there is, is from
that account into itself: ``fromAccountId`` other than the user's account is
``fromAccountNotFound``, ``accountId`` other than it ``accountNotFound``.
Copying into the same account keeps the blob id (blob ids name content the
account already holds); copying an upload renews it, so it lives another
``UPLOAD_LIFETIME``. A blob id the account cannot read is ``notFound`` in
``notCopied``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from mailroom.jmap import ids
from mailroom.jmap.blobs import find_blob
from mailroom.jmap.dispatcher import Context
from mailroom.jmap.errors import MethodError, invalid_arguments, set_error
from mailroom.jmap.uploads import own_upload
from mailroom.store.models.base import utcnow


def blob_id_list(value: object, most: int, limit_name: str) -> list[str]:
    """A ``blobIds`` argument: distinct blob ids, at most ``most`` (``requestTooLarge``)."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid_arguments("blobIds must be a list of blob ids.")
    if len(value) > most:
        raise MethodError("requestTooLarge", f"At most {limit_name} ({most}) blobs per call.")
    return list(dict.fromkeys(value))


def from_account(context: Context, args: dict[str, Any]) -> str:
    """The ``fromAccountId`` of a copy: the caller's account, else ``fromAccountNotFound``."""
    source = args.get("fromAccountId")
    if not isinstance(source, str):
        raise invalid_arguments("fromAccountId is required and must be a string.")
    if ids.parse_account(source) != context.principal.user_id:
        raise MethodError("fromAccountNotFound", f"There is no account {source!r} to copy from.")
    return source


def blob_copy(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Blob/copy: every readable blob id maps to itself in the (same) target account."""
    source = from_account(context, args)
    user_id = context.check_account(args)
    copied: dict[str, str] = {}
    not_copied: dict[str, Any] = {}
    now = utcnow()
    blob_ids = blob_id_list(
        args.get("blobIds"), context.limits.max_objects_in_set, "maxObjectsInSet"
    )
    for blob_id in blob_ids:
        found = find_blob(session, user_id, blob_id)
        if found is None:
            not_copied[blob_id] = set_error("notFound", f"There is no blob {blob_id}.")
            continue
        uploaded = ids.parse_upload_blob(blob_id)  # the key of its bytes (sealed ones too)
        if uploaded is not None:
            own_upload(session, user_id, uploaded, found.size, found.media_type, now)
        copied[blob_id] = blob_id
    return {
        "fromAccountId": source,
        "accountId": context.account_id,
        "copied": copied or None,
        "notCopied": not_copied or None,
    }
