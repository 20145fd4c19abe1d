"""JMAP ids: mailroom's integer keys with a one-letter type prefix.

=========== ============================ ====================================
prefix      object                       example
=========== ============================ ====================================
``u``       account (one per user)       ``u1``
``M``       Email (a stored message)     ``M123``
``T``       Thread                       ``T45``; ``TM123`` for a message
                                         whose threading failed (a thread of
                                         its own)
``L``       Mailbox (a label)            ``L7``
``I``       Identity (a mail account)    ``I2``
``S``       EmailSubmission              ``S9`` (a row of ``submissions``)
``R``       blob: a message's raw bytes  ``R123``
``A``       blob: one MIME part          ``A123-2-1`` (message 123, IMAP part
                                         number 2.1; dots are not allowed in
                                         ids)
``B``       blob: an upload (by content) ``B`` + the SHA-256 of its bytes in
                                         hex (visible only to the users who
                                         uploaded those bytes); ``B<sha256>-2-1``
                                         is its MIME part 2.1 (``Email/parse``)
=========== ============================ ====================================

Ids are stable for the life of the object (they are primary keys) and use
only the characters RFC 8620 §1.2 allows. Parsing never raises: an id that
is not well-formed simply names nothing (``None``), which every method
reports as ``notFound`` — the same answer as another user's id.
"""

from __future__ import annotations

import re

_NUMBER = re.compile(r"[1-9][0-9]{0,17}")
_PART = re.compile(r"[1-9][0-9]{0,4}(?:-[1-9][0-9]{0,4}){0,31}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _number(text: str) -> int | None:
    return int(text) if _NUMBER.fullmatch(text) else None


def account_id(user_id: int) -> str:
    """The JMAP account id of a user."""
    return f"u{user_id}"


def parse_account(value: object) -> int | None:
    """The user id an account id names, or None."""
    return _number(value[1:]) if isinstance(value, str) and value.startswith("u") else None


def email_id(message_id: int) -> str:
    """The JMAP id of a message."""
    return f"M{message_id}"


def parse_email(value: object) -> int | None:
    """The message id an Email id names, or None."""
    return _number(value[1:]) if isinstance(value, str) and value.startswith("M") else None


def thread_id(thread: int | None, message_id: int) -> str:
    """The JMAP thread id of a message (its own pseudo-thread if threading failed)."""
    return f"T{thread}" if thread is not None else f"TM{message_id}"


def parse_thread(value: object) -> tuple[str, int] | None:
    """``("T", thread id)`` or ``("TM", message id)``, or None."""
    if not isinstance(value, str):
        return None
    if value.startswith("TM"):
        number = _number(value[2:])
        return ("TM", number) if number is not None else None
    if value.startswith("T"):
        number = _number(value[1:])
        return ("T", number) if number is not None else None
    return None


def mailbox_id(label_id: int) -> str:
    """The JMAP id of a label."""
    return f"L{label_id}"


def parse_mailbox(value: object) -> int | None:
    """The label id a Mailbox id names, or None."""
    return _number(value[1:]) if isinstance(value, str) and value.startswith("L") else None


def identity_id(account: int) -> str:
    """The JMAP id of the identity of a mail account."""
    return f"I{account}"


def parse_identity(value: object) -> int | None:
    """The account id an Identity id names, or None."""
    return _number(value[1:]) if isinstance(value, str) and value.startswith("I") else None


def submission_id(submission: int) -> str:
    """The JMAP id of an EmailSubmission (a ``submissions`` row)."""
    return f"S{submission}"


def parse_submission(value: object) -> int | None:
    """The submission row id an EmailSubmission id names, or None."""
    return _number(value[1:]) if isinstance(value, str) and value.startswith("S") else None


def raw_blob_id(message_id: int) -> str:
    """The blob id of a message's raw RFC 5322 bytes."""
    return f"R{message_id}"


def part_blob_id(message_id: int, part_path: str) -> str:
    """The blob id of one MIME part (IMAP part number ``part_path``) of a message."""
    return f"A{message_id}-{part_path.replace('.', '-')}"


def parse_blob(value: object) -> tuple[int, str | None] | None:
    """``(message id, None)`` for a raw blob, ``(message id, part path)`` for a part, or None."""
    if not isinstance(value, str):
        return None
    if value.startswith("R"):
        number = _number(value[1:])
        return (number, None) if number is not None else None
    if value.startswith("A"):
        head, _, tail = value[1:].partition("-")
        number = _number(head)
        if number is None or not _PART.fullmatch(tail):
            return None
        return number, tail.replace("-", ".")
    return None


def upload_blob_id(sha256: str) -> str:
    """The blob id of uploaded bytes: their key in ``blobs`` (``jmap.uploads.store_blob``:
    the SHA-256, or the owner's keyed hash of it for sealed mail; the same bytes of one
    owner, the same id)."""
    return f"B{sha256}"


def parse_upload_blob(value: object) -> str | None:
    """The key (64 hex digits) an upload blob id names, or None."""
    if isinstance(value, str) and value.startswith("B") and _SHA256.fullmatch(value[1:]):
        return value[1:]
    return None


def upload_part_blob_id(sha256: str, part_path: str) -> str:
    """The blob id of one MIME part (IMAP part number ``part_path``) of uploaded bytes."""
    return f"B{sha256}-{part_path.replace('.', '-')}"


def parse_upload_part(value: object) -> tuple[str, str] | None:
    """``(SHA-256, part path)`` of an upload part blob id, or None."""
    if not isinstance(value, str) or not value.startswith("B"):
        return None
    digest, _, tail = value[1:].partition("-")
    if not _SHA256.fullmatch(digest) or not _PART.fullmatch(tail):
        return None
    return digest, tail.replace("-", ".")
