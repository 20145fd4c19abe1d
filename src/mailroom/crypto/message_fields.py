"""A message's own columns, sealed or clear, and the lookup keys that find them.

When a session seals new mail (:func:`~mailroom.crypto.sealing.seals_new_mail`),
a ``messages`` row says ``sealed`` and holds:

* its **mail columns** (:data:`SEALED_COLUMNS`: subject, preview, sender name
  and address, recipients, list id, and the category signal and assistant
  reason that quote them) as sealed values, ``mrf1.`` text, bound to the
  table, column, message id and owner. The row is inserted with empty
  placeholders and the sealed values are written in the same transaction
  once the id is known (:func:`seal_inserted`): the clear text never reaches
  the database, not even its write-ahead log;
* its **lookup columns** as the owner's keyed hashes (:class:`LookupKeys`):
  ``message_id_header`` and ``message_refs.ref`` hold
  ``lookup_hash("message-id", id)``, ``subject_key`` the first 40 hex digits
  of ``lookup_hash("subject", normalized subject)``, so threading and
  dedup still match by equality while nobody without the key can test a
  guess.

Readers never see ciphertext: an ORM ``Message`` is opened as it loads
(:func:`open_loaded`, registered on the model), and code that selects
columns opens them with :func:`open_value` / :func:`open_rows`. A clear row
(written before sealing was switched on, or while it is off) passes through
unchanged; so does a store opened without keys, until it meets a sealed row
(one sentence, :class:`~mailroom.errors.SealedWithoutKeys`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from mailroom.crypto.fields import FieldCipher, Sealer, from_text, to_text
from mailroom.crypto.seal_lane import SealedSoon, SealJob, seal_texts
from mailroom.crypto.sealing import mail_cipher, require_cipher, seals_new_mail
from mailroom.errors import SealedWithoutKeys

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from mailroom.store.models import Message

__all__ = [
    "ADDRESS_KIND",
    "ID_KIND",
    "JSON_COLUMNS",
    "MESSAGES",
    "PLACEHOLDERS",
    "SEALED_COLUMNS",
    "SUBJECT_KIND",
    "TEXT_COLUMNS",
    "LookupKeys",
    "open_loaded",
    "open_rows",
    "open_value",
    "seal_inserted",
    "has_sealed",
    "seal_value",
    "sealed_updates",
]

MESSAGES = "messages"
TEXT_COLUMNS = (
    "subject",
    "preview",
    "from_name",
    "from_email",
    "list_id",
    "category_signal",
    "assistant_reason",
)
JSON_COLUMNS = ("recipients",)
SEALED_COLUMNS = (*TEXT_COLUMNS, *JSON_COLUMNS)
# What a sealed row holds in its mail columns between its insert and its sealed update.
PLACEHOLDERS: Mapping[str, Any] = {
    "subject": "",
    "preview": "",
    "from_name": "",
    "from_email": "",
    "recipients": {},
    "list_id": None,
}
ID_KIND = "message-id"  # message_id_header and message_refs.ref
SUBJECT_KIND = "subject"  # subject_key
ADDRESS_KIND = "address"  # contacts.email: a lower-cased mail address
SUBJECT_KEY_CHARS = 40  # messages.subject_key is VARCHAR(40), as the SHA-1 it replaces
_WHAT = "This message"


def seal_value(
    cipher: FieldCipher, owner: int, message_id: int, column: str, value: Any
) -> str | None:
    """One mail column's value sealed for the row ``message_id`` of ``owner`` (None stays None)."""
    if value is None:
        return None
    return seal_with(cipher.sealer(owner), message_id, column, value)


def seal_with(seal: Sealer, message_id: int, column: str, value: Any) -> str | None:
    """:func:`seal_value` with a sealer already made for the owner (many values of one owner)."""
    if value is None:
        return None
    plain = json.dumps(value, ensure_ascii=False) if column in JSON_COLUMNS else str(value)
    return to_text(seal(MESSAGES, column, message_id, plain))


def _sealed_text(value: Any) -> str:
    """The ``mrf1.`` text of a sealed value, also when a JSON column gave its JSON string."""
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if isinstance(value, str) and value.startswith('"'):
        value = json.loads(value)
    return value if isinstance(value, str) else ""


def open_value(
    session: Session | None, owner: int, message_id: int, column: str, value: Any, sealed: bool
) -> Any:
    """One mail column of one message as readers see it (opened when the row is sealed).

    ``recipients`` gives its dictionary whichever way it was read (ORM, or raw SQL that
    returns JSON text); ``session`` None (a reader without keys) reads clear rows only.
    """
    if not sealed or value is None:
        if column in JSON_COLUMNS and isinstance(value, str | bytes):
            return json.loads(value)
        return value
    if session is None:
        raise SealedWithoutKeys(
            f"{_WHAT} is sealed and this store was opened without its keys; read it through "
            "mailroom with MAILROOM_MASTER_KEY_FILE set."
        )
    text = _sealed_text(value)
    memo = _opened_memo.get()
    plain = None if memo is None else memo.get((owner, message_id, column, text))
    if plain is None:
        cipher = require_cipher(session, _WHAT)
        plain = cipher.decrypt_text(owner, MESSAGES, column, message_id, from_text(text))
        if memo is not None:
            if len(memo) >= _MEMO_LIMIT:
                memo.clear()
            memo[(owner, message_id, column, text)] = plain
    return json.loads(plain) if column in JSON_COLUMNS else plain


# Values opened inside :func:`remembering_opened`, by owner, row, column and sealed text: the
# text names its nonce, so an equal text is the same value of the same row (its associated
# data, checked when it was first opened, binds it there).
_opened_memo: ContextVar[dict[tuple[int, int, str, str], str] | None] = ContextVar(
    "mailroom_opened_memo", default=None
)
_MEMO_LIMIT = 200_000  # values (a few hundred bytes each); a full memo starts again


@contextmanager
def remembering_opened() -> Iterator[None]:
    """Open each sealed value once inside this block (an import: every batch threads its
    new mail against the same recent messages, and would open them again)."""
    token = _opened_memo.set({})
    try:
        yield
    finally:
        _opened_memo.reset(token)


def open_rows(
    session: Session | None, rows: Iterable[Any], columns: Sequence[str]
) -> list[dict[str, Any]]:
    """Rows carrying ``id``, ``user_id``, ``sealed`` and ``columns``, as dicts with them opened.

    Every other attribute of a row is copied unchanged (a SQLAlchemy ``Row`` or a mapping).
    """
    opened: list[dict[str, Any]] = []
    for row in rows:
        values = dict(row._mapping) if hasattr(row, "_mapping") else dict(row)
        if values.get("sealed"):
            owner, message_id = int(values["user_id"]), int(values["id"])
            for column in columns:
                values[column] = open_value(
                    session, owner, message_id, column, values.get(column), True
                )
        else:
            for column in JSON_COLUMNS:
                if column in columns and isinstance(values.get(column), str | bytes):
                    values[column] = json.loads(values[column])
        opened.append(values)
    return opened


def open_loaded(
    message: Message, session: Session | None, attrs: Iterable[str] | None = None
) -> None:
    """Open a sealed ``Message`` just loaded (or ``attrs`` of it refreshed) by the ORM, in place.

    The clear values become the loaded state (``set_committed_value``): nothing is
    written back unless code changes them, and then :func:`seal_changes` seals them.
    """
    from sqlalchemy.orm.attributes import set_committed_value

    loaded = message.__dict__
    wanted = SEALED_COLUMNS if attrs is None else [c for c in attrs if c in SEALED_COLUMNS]
    for column in wanted:
        if column in loaded:
            value = open_value(session, message.user_id, message.id, column, loaded[column], True)
            set_committed_value(message, column, value)


def seal_changes(session: Session, messages: Iterable[Message]) -> list[tuple[Any, str, Any]]:
    """Seal the changed mail columns of sealed messages before a flush writes them.

    Returns what was replaced, so the clear values can be put back after the flush.
    """
    from mailroom.store.models.sealed_rows import reseal_changed

    def seal(message: Message, changed: dict[str, Any]) -> dict[str, Any]:
        cipher = require_cipher(session, _WHAT)
        owner, row_id = message.user_id, message.id
        return {c: seal_value(cipher, owner, row_id, c, v) for c, v in changed.items()}

    return reseal_changed(messages, SEALED_COLUMNS, seal)


def seal_inserted(
    session: Session, owner: int, clear_values: Mapping[int, Mapping[str, Any]]
) -> Callable[[], None]:
    """Start sealing the mail columns of rows just inserted with :data:`PLACEHOLDERS`.

    ``clear_values``: message id → its clear mail columns. The values are sealed in the
    import's sealing lane, or here (``crypto.seal_lane``); the returned write puts them
    in place, one UPDATE per row, and must run in the inserting transaction before
    anything reads these rows (the pipeline's ``sealed`` stage), so no reader ever sees
    a half-written sealed message. The driver's own executemany with tuples
    (SQLAlchemy's ``update()`` with bound dicts cost a third of the sealing); values as
    SQLAlchemy would bind them (:func:`seal_value`, the JSON column's value dumped as JSON).
    """
    columns = tuple(PLACEHOLDERS)
    jobs: list[SealJob] = []
    for message_id, values in clear_values.items():
        for column in columns:
            value = values.get(column)
            if value is not None:
                plain = json.dumps(value, ensure_ascii=False) if column in JSON_COLUMNS else value
                jobs.append((MESSAGES, column, message_id, str(plain)))
    soon = SealedSoon(require_cipher(session, "New mail"), owner, jobs, seal_texts)

    def write() -> None:
        if not clear_values:
            return
        texts = iter(soon.values())
        params: list[tuple[Any, ...]] = []
        for message_id, values in clear_values.items():
            row: list[Any] = []
            for column in columns:
                sealed = None if values.get(column) is None else next(texts)
                row.append(json.dumps(sealed) if column in JSON_COLUMNS else sealed)
            row.append(message_id)
            params.append(tuple(row))
        connection = session.connection()
        if connection.dialect.name == "sqlite":
            marker, cast = "?", "{}"
        else:
            marker, cast = "%s", "CAST({} AS JSON)"
        assignments = ", ".join(
            f"{column} = {cast.format(marker) if column in JSON_COLUMNS else marker}"
            for column in columns
        )
        connection.exec_driver_sql(
            f"UPDATE {MESSAGES} SET {assignments} WHERE id = {marker}", params
        )

    return write


def sealed_updates(
    session: Session, owner: int, rows: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Update rows (each with ``id``) of ``owner``'s messages, mail columns sealed where sealed.

    For the writers that change a mail column after ingest (the category signal, the
    assistant's reason) with a bulk UPDATE instead of through ORM objects.
    """
    from sqlalchemy import select

    from mailroom.store.chunks import in_chunks
    from mailroom.store.models import Message

    ids = [int(row["id"]) for row in rows]
    sealed: set[int] = set()
    for chunk in in_chunks(ids):
        sealed.update(
            session.scalars(select(Message.id).where(Message.id.in_(chunk), Message.sealed))
        )
    if not sealed:
        return [dict(row) for row in rows]
    seal = require_cipher(session, _WHAT).sealer(owner)
    out = []
    for row in rows:
        values = dict(row)
        if values["id"] in sealed:
            for column in SEALED_COLUMNS:
                if column in values:
                    values[column] = seal_with(seal, int(values["id"]), column, values[column])
        out.append(values)
    return out


def has_sealed(session: Session, owner: int, candidates: Collection[int] | None = None) -> bool:
    """Whether the owner has a sealed message (among ``candidates`` when given).

    Cheap either way: an owner without a data key has no sealed mail (one look at
    ``owner_keys``); otherwise the newest sealed row, found through the owner's
    ``received_at`` index since sealed mail is the recent mail, or the candidates by id.
    """
    from sqlalchemy import select

    from mailroom.store.chunks import in_chunks
    from mailroom.store.models import Message, OwnerKey

    if session.scalar(select(OwnerKey.id).where(OwnerKey.user_id == owner).limit(1)) is None:
        return False
    if candidates is not None:
        return any(
            session.scalar(
                select(Message.id)
                .where(Message.user_id + 0 == owner, Message.sealed, Message.id.in_(chunk))
                .limit(1)
            )
            is not None
            for chunk in in_chunks(sorted(candidates))
        )
    newest = (
        select(Message.id)
        .where(Message.user_id == owner, Message.sealed)
        .order_by(Message.received_at.desc())
        .limit(1)
    )
    return session.scalar(newest) is not None


class LookupKeys:
    """How one owner's Message-IDs and subject keys are stored, and every form to look them up by.

    Sealing: new rows store the keyed hash under the owner's newest key version. Look-ups
    try the clear value too (mail written before sealing was switched on) and the hash
    under every stored version (during an owner key rotation). Without sealing and
    without keys, every form is the clear value itself.
    """

    def __init__(self, session: Session, owner: int) -> None:
        self.owner = owner
        self.seals = seals_new_mail(session)
        self._cipher = mail_cipher(session)
        has_keys = self._cipher is not None and (self.seals or self._cipher.keys.versions(owner))
        self._looks_up = bool(has_keys)

    def stored_id(self, message_id: str) -> str:
        """The form a new row stores a Message-ID (or a reference) in."""
        return self._stored(ID_KIND, message_id)

    def stored_subject_key(self, normalized: str) -> str:
        """The form a new row stores the key of a normalized subject in."""
        from mailroom.conversations.subject import key_hash

        if not self.seals:
            return key_hash(normalized)
        return self._stored(SUBJECT_KIND, normalized)[:SUBJECT_KEY_CHARS]

    def id_forms(self, message_ids: Iterable[str]) -> dict[str, str]:
        """Every stored form of these Message-IDs → the id it stands for."""
        return self._forms(ID_KIND, message_ids)

    def stored_address(self, address: str) -> str:
        """The form a new ``contacts`` row stores a (lower-cased) mail address in."""
        return self._stored(ADDRESS_KIND, address.lower())

    def address_forms(self, addresses: Iterable[str]) -> dict[str, str]:
        """Every stored form of these mail addresses → the lower-cased address."""
        return self._forms(ADDRESS_KIND, (address.lower() for address in addresses))

    def subject_forms(self, normalized: Iterable[str]) -> dict[str, str]:
        """Every stored form of these normalized subjects' keys → the subject's clear key."""
        from mailroom.conversations.subject import key_hash

        forms: dict[str, str] = {}
        for text in normalized:
            clear = key_hash(text)
            forms[clear] = clear
            for hashed in self._hashes(SUBJECT_KIND, text):
                forms[hashed[:SUBJECT_KEY_CHARS]] = clear
        return forms

    def _stored(self, kind: str, value: str) -> str:
        if not self.seals or self._cipher is None:
            return value
        return self._cipher.lookup_hash(self.owner, kind, value)

    def _hashes(self, kind: str, value: str) -> list[str]:
        if not self._looks_up or self._cipher is None:
            return []
        return self._cipher.lookup_hashes(self.owner, kind, value)

    def _forms(self, kind: str, values: Iterable[str]) -> dict[str, str]:
        forms: dict[str, str] = {}
        for value in values:
            forms[value] = value
            for hashed in self._hashes(kind, value):
                forms[hashed] = value
        return forms
