"""The columns that hold values sealed by :class:`~mailroom.crypto.fields.FieldCipher`.

An owner key rotation re-encrypts exactly these; field encryption of mail
(subjects, addresses, bodies, raw bytes — issue 19 item 2) adds its columns
here as it lands. Each column's rows are found by the table's integer id
and its owner column; a value is bytes (``LargeBinary``) or the text form
(``mrf1.`` + base64, :func:`~mailroom.crypto.fields.to_text`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class EncryptedColumn:
    """A column of sealed values: its table, name, owner column and whether it holds text."""

    table: str
    column: str
    owner_column: str = "user_id"
    id_column: str = "id"
    text: bool = False

    @property
    def name(self) -> str:
        """``table.column``, the key of a rotation's progress."""
        return f"{self.table}.{self.column}"


# None yet: the first field encryption (item 2) registers its columns here.
ENCRYPTED_COLUMNS: tuple[EncryptedColumn, ...] = ()
