"""The blind index moves into the full-text index (issue 19 item 3, sealed ingest speed).

Until now a sealed message's words were rows of ``search_tokens`` (owner,
signed 64-bit token, message): a B-tree insert of a random key and an index
entry per distinct word, about 171 per message, which held sealed ingest to
half the clear rate. From now on a sealed message's ``message_search`` entry
holds one *token word* per distinct word instead (``crypto.blind_index``): a
private-use character (U+E000, which no clear text indexed and no query term
can start a word with) and the same 64 bits in 16 hex digits.

This migration moves every ``search_tokens`` row into its message's entry
(no key is needed: the tokens are already computed) and drops the table.
The kind of a token (subject and participants, or body) is not stored in a
row, but it is part of the hash itself (the two kinds are hashed under
different keys), so where the word lands does not change what a query finds:
on SQLite all of a message's old token words go to the ``body`` column, on
PostgreSQL into the ``tsvector`` (no positions, no weights, as new ones).
A ``body`` query asks for body-kind hashes only, a ``text`` query for both,
exactly as before.

Messages are moved 500 at a time, in message id order, through the
``message_id`` index of ``search_tokens``.

The downgrade puts the token words of sealed messages back into a new
``search_tokens`` table and removes those entries from ``message_search``.

Revision ID: 0023
Revises: 0022
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import groupby

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
MARK = "\ue000"  # crypto.blind_index's TOKEN_MARK, written out: a migration stays as it was
CHUNK = 500  # messages per round


def _word(token: int) -> str:
    """A ``search_tokens`` token as the token word ``crypto.blind_index.token_word`` writes."""
    return MARK + token.to_bytes(8, "big", signed=True).hex()


def _token(word: str) -> int:
    """The signed 64-bit token of a token word (the downgrade)."""
    return int.from_bytes(bytes.fromhex(word[1:]), "big", signed=True)


def _message_chunks(bind: sa.Connection) -> Iterator[list[int]]:
    after = 0
    while True:
        ids = [
            int(row[0])
            for row in bind.execute(
                sa.text(
                    "SELECT DISTINCT message_id FROM search_tokens WHERE message_id > :after "
                    "ORDER BY message_id LIMIT :chunk"
                ),
                {"after": after, "chunk": CHUNK},
            )
        ]
        if not ids:
            return
        yield ids
        after = ids[-1]


def upgrade() -> None:
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    for ids in _message_chunks(bind):
        rows = bind.execute(
            sa.text(
                "SELECT message_id, user_id, token FROM search_tokens "
                "WHERE message_id IN :ids ORDER BY message_id"
            ).bindparams(sa.bindparam("ids", expanding=True)),
            {"ids": ids},
        ).all()
        entries = [
            {
                "id": message_id,
                "owner": group[0][1],
                "words": " ".join(sorted(_word(int(row[2])) for row in group)),
            }
            for message_id, group in (
                (key, list(rows)) for key, rows in groupby(rows, lambda r: r[0])
            )
        ]
        if sqlite:
            bind.execute(sa.text("DELETE FROM message_search WHERE rowid = :id"), entries)
            bind.execute(
                sa.text(
                    "INSERT INTO message_search (rowid, subject, participants, body) "
                    "VALUES (:id, '', '', :words)"
                ),
                entries,
            )
        else:
            bind.execute(
                sa.text(
                    "INSERT INTO message_search (message_id, user_id, document) "
                    "VALUES (:id, :owner, CAST(:words AS tsvector)) ON CONFLICT (message_id) "
                    "DO UPDATE SET document = EXCLUDED.document, user_id = EXCLUDED.user_id"
                ),
                entries,
            )
    op.drop_index("ix_search_tokens_message_id", table_name="search_tokens")
    op.drop_table("search_tokens")


def downgrade() -> None:
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    op.create_table(
        "search_tokens",
        sa.Column("user_id", ID, nullable=False),
        sa.Column("token", sa.BigInteger(), nullable=False),
        sa.Column("message_id", ID, nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_search_tokens_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["messages.id"],
            name=op.f("fk_search_tokens_message_id_messages"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("user_id", "token", "message_id", name=op.f("pk_search_tokens")),
        sqlite_with_rowid=False,
    )
    op.create_index("ix_search_tokens_message_id", "search_tokens", ["message_id"])
    if sqlite:
        found = "SELECT s.rowid, m.user_id, s.subject || ' ' || s.participants || ' ' || s.body"
        source = "message_search AS s JOIN messages AS m ON m.id = s.rowid"
    else:
        found = "SELECT s.message_id, m.user_id, array_to_string(tsvector_to_array(document), ' ')"
        source = "message_search AS s JOIN messages AS m ON m.id = s.message_id"
    sealed = bind.execute(
        sa.text(
            f"{found} FROM {source} JOIN message_bodies AS b ON b.message_id = m.id WHERE b.sealed"
        )
    ).all()
    rows = [
        {"owner": owner, "token": _token(word), "id": message_id}
        for message_id, owner, words in sealed
        for word in set(str(words).split())
        if word.startswith(MARK)
    ]
    if rows:
        bind.execute(
            sa.text(
                "INSERT INTO search_tokens (user_id, token, message_id) "
                "VALUES (:owner, :token, :id)"
            ),
            rows,
        )
    column = "rowid" if sqlite else "message_id"
    bind.execute(
        sa.text(f"DELETE FROM message_search WHERE {column} = :id"),
        [{"id": message_id} for message_id in {row[0] for row in sealed}] or [{"id": -1}],
    )
