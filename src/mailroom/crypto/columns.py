"""The columns that hold values sealed by :class:`~mailroom.crypto.fields.FieldCipher`.

An owner key rotation re-encrypts exactly these. Each column's rows are
found by the table's id and its owner (an owner column, or for a table
without one, an SQL condition through another table), optionally only the
rows that say they are sealed; a value is bytes (``LargeBinary``), the text
form (``mrf1.`` + base64, :func:`~mailroom.crypto.fields.to_text`) or that
text as a JSON string (a JSON column). Sealed mail (issue 19 item 2,
:mod:`~mailroom.crypto.mail_writing`) registers its columns here: the
bodies, header and attachment lists of ``message_bodies`` (owner through
``messages``, sealed rows only), ``blobs.data`` (row id: the blob's key) and
the mail columns of sealed ``messages`` rows (:mod:`~mailroom.crypto.message_fields`)
the summary, location and source of sealed ``message_events``
(:mod:`~mailroom.events.sealed_events`), sealed webhook delivery bodies
(:mod:`~mailroom.webhooks.sealed_bodies`) and the outbound queue of sealed
submissions (:mod:`~mailroom.outbound.sealed_queue`): their Message-ID,
envelope, delivery status and last error, and the ``failed_sends.reason`` and
``bounces.recipients`` of those submissions (owner and sealing through
``submissions``), and the headers and reason of a sealing owner's skipped-ledger
rows (:mod:`~mailroom.providers.sealed_ledger`: owner through ``accounts``, rows
whose headers are sealed), and a sealing owner's word list
(:mod:`~mailroom.crypto.blind_vocabulary`). A JSON column's rows are taken only
when they hold a sealed value: a sealed submission's empty delivery status is
JSON ``null``, not SQL NULL.
"""

from __future__ import annotations

from dataclasses import dataclass

from mailroom.crypto.blind_vocabulary import COLUMN as VOCABULARY_WORDS
from mailroom.crypto.blind_vocabulary import TABLE as VOCABULARY
from mailroom.crypto.mail_writing import (
    BLOB_COLUMN,
    BLOBS,
    BODIES,
    BODY_JSON_COLUMNS,
    BODY_TEXT_COLUMNS,
)
from mailroom.crypto.message_fields import MESSAGES, SEALED_COLUMNS
from mailroom.events.sealed_events import SEALED_COLUMNS as EVENT_COLUMNS
from mailroom.events.sealed_events import TABLE as EVENTS
from mailroom.outbound.sealed_queue import OF_OWNER, SUBMISSIONS, sealed_where
from mailroom.outbound.sealed_queue import SEALED_COLUMNS as QUEUE_COLUMNS
from mailroom.providers.sealed_ledger import OWNER_WHERE as LEDGER_OF_OWNER
from mailroom.providers.sealed_ledger import SEALED_COLUMNS as LEDGER_COLUMNS
from mailroom.providers.sealed_ledger import SEALED_WHERE as SEALED_LEDGER
from mailroom.providers.sealed_ledger import TABLE as LEDGER
from mailroom.webhooks.sealed_bodies import COLUMN as DELIVERY_BODY
from mailroom.webhooks.sealed_bodies import OWNER_WHERE as DELIVERIES_OF_OWNER
from mailroom.webhooks.sealed_bodies import SEALED_WHERE as SEALED_DELIVERY
from mailroom.webhooks.sealed_bodies import TABLE as DELIVERIES


@dataclass(frozen=True, slots=True)
class EncryptedColumn:
    """A column of sealed values: its table, name, how its owner's rows are found, its form.

    ``owner_where`` (SQL with ``:owner``) replaces ``owner_column = :owner`` for a table
    without an owner column; ``sealed_where`` (SQL) keeps only rows holding sealed values.
    ``text``: the value is the ``mrf1.`` text form (in a JSON column: as a JSON string).
    """

    table: str
    column: str
    owner_column: str = "user_id"
    id_column: str = "id"
    text: bool = False
    owner_where: str | None = None
    sealed_where: str | None = None

    @property
    def name(self) -> str:
        """``table.column``, the key of a rotation's progress."""
        return f"{self.table}.{self.column}"

    @property
    def rows_of_owner(self) -> str:
        """The SQL condition (parameter ``:owner``) choosing the owner's sealed rows."""
        where = self.owner_where or f"{self.owner_column} = :owner"
        return f"{where} AND {self.sealed_where}" if self.sealed_where else where


_BODY_OWNER = "message_id IN (SELECT id FROM messages WHERE user_id = :owner)"

ENCRYPTED_COLUMNS: tuple[EncryptedColumn, ...] = (
    *(
        EncryptedColumn(
            BODIES,
            column,
            id_column="message_id",
            text=True,
            owner_where=_BODY_OWNER,
            sealed_where="sealed",
        )
        for column in (*BODY_TEXT_COLUMNS, *BODY_JSON_COLUMNS)
    ),
    EncryptedColumn(BLOBS, BLOB_COLUMN, id_column="sha256"),
    *(
        EncryptedColumn(MESSAGES, column, text=True, sealed_where="sealed")
        for column in SEALED_COLUMNS
    ),
    *(
        EncryptedColumn(EVENTS, column, text=True, sealed_where="sealed")
        for column in EVENT_COLUMNS
    ),
    EncryptedColumn(
        DELIVERIES,
        DELIVERY_BODY,
        text=True,
        owner_where=DELIVERIES_OF_OWNER,
        sealed_where=SEALED_DELIVERY,
    ),
    *(
        EncryptedColumn(
            table,
            column,
            text=True,
            owner_where=None if table == SUBMISSIONS else OF_OWNER,
            sealed_where=sealed_where(table, column),
        )
        for table, columns in QUEUE_COLUMNS.items()
        for column in columns
    ),
    *(
        EncryptedColumn(
            LEDGER,
            column,
            text=True,
            owner_where=LEDGER_OF_OWNER,
            sealed_where=SEALED_LEDGER,
        )
        for column in LEDGER_COLUMNS
    ),
    EncryptedColumn(VOCABULARY, VOCABULARY_WORDS),
)
