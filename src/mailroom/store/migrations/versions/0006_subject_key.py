"""messages.subject_key: an indexed key of the normalized subject for the subject rescue

Existing rows are filled in batches with the key ingest computed when this
migration was written (``conversations.subject.subject_key``), copied here
frozen: a migration must give the same result whatever the live code later
becomes, so it imports none of it.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import hashlib
import re

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

BATCH = 2000

# Frozen copy of mailroom.conversations.subject (reply prefixes, tags, key) as of 0006.
_REPLY_PREFIXES = (
    "re", "fwd", "fw", "aw", "wg", "antw", "sv", "vs", "res", "rif", "tr", "doorst"
)  # fmt: skip
_PREFIX = re.compile(
    r"^\s*(?:" + "|".join(_REPLY_PREFIXES) + r")"
    r"\s*(?:\[\s*\d+\s*\]|\(\s*\d+\s*\)|\^\s*\d+)?\s*[:：]",
    re.IGNORECASE,
)
_TAG = re.compile(r"^\s*\[[^\[\]]*\]")
_TRAILING_FWD = re.compile(r"\s*\((?:fwd|fw)\)\s*$", re.IGNORECASE)
_SPACE = re.compile(r"\s+")


def _normalized_subject(subject: str) -> str:
    """The subject without reply prefixes and leading tags, whitespace collapsed, case-folded."""
    rest = subject or ""
    while True:
        match = _PREFIX.match(rest)
        if match:
            rest = rest[match.end() :]
            continue
        tag = _TAG.match(rest)
        if tag and rest[tag.end() :].strip():
            rest = rest[tag.end() :]
            continue
        break
    trailing = _TRAILING_FWD.search(rest)
    if trailing and rest[: trailing.start()].strip():
        rest = rest[: trailing.start()]
    return _SPACE.sub(" ", rest).strip().casefold()


def subject_key(subject: str) -> str | None:
    """SHA-1 hex of the normalized subject; None when nothing is left."""
    text = _normalized_subject(subject)
    return hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest() if text else None


def upgrade() -> None:
    op.add_column("messages", sa.Column("subject_key", sa.String(40), nullable=True))
    op.create_index(
        "ix_messages_subject_key_received_at", "messages", ["subject_key", "received_at"]
    )
    connection = op.get_bind()
    last = 0
    while True:
        rows = connection.execute(
            sa.text("SELECT id, subject FROM messages WHERE id > :last ORDER BY id LIMIT :n"),
            {"last": last, "n": BATCH},
        ).all()
        if not rows:
            break
        keyed = [{"id": mid, "key": subject_key(subject or "")} for mid, subject in rows]
        connection.execute(
            sa.text("UPDATE messages SET subject_key = :key WHERE id = :id"),
            [row for row in keyed if row["key"] is not None] or [{"id": 0, "key": None}],
        )
        last = rows[-1][0]


def downgrade() -> None:
    op.drop_index("ix_messages_subject_key_received_at", table_name="messages")
    op.drop_column("messages", "subject_key")
