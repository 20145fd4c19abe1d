"""The outbound queue of owners whose mail is sealed: addresses, Message-IDs and replies sealed.

Who an owner writes to is as private as what they receive. While a store seals
new mail (``crypto.sealing.seals_new_mail``), :func:`~mailroom.outbound.queueing.queue_message`
writes a submission that says ``sealed`` (migration 0025) and holds

* ``message_id`` (the Message-ID), ``envelope`` (the RFC 8621 Envelope with
  every address), ``delivery_status`` (keyed by recipient address, with the
  servers' replies) and ``last_error`` (an SMTP reply quotes addresses) as
  ``mrf1.`` values under the owner's data key, bound to ``submissions``, the
  column and the row id (a JSON column holds the sealed text as a JSON
  string);
* ``message_key``, the idempotency key, as the owner's keyed hash of the
  Message-ID (``lookup_hash("message-id", id_key(id))``, the form a sealed
  message's ``message_id_header`` takes), found by the hash under every stored
  key version and the clear id (:func:`key_forms`).

The submission's ``failed_sends.reason`` and ``bounces.recipients`` are sealed
exactly when it is (bound to their own table and row id): every reader of them
has the submission at hand for its owner anyway, so they need no flag of
their own that could disagree with it. Ids, states, lane, kind, times,
attempts, deferrals and reply codes stay clear: the lanes claim, order and
pace by them in SQL, and a code or a time names nobody.

The ids come from the inserts, so a sealed row is inserted with placeholders
and its values written sealed by id in the same transaction
(``crypto.sealed_rows``): the clear text reaches neither the table nor the
write-ahead log. Later writes seal the values they change (:func:`seal_values`
for the lanes' UPDATEs, :func:`seal_changes` before a flush of a changed ORM
``Submission``). Readers never see ciphertext: an ORM ``Submission`` opens as
it loads (:func:`open_loaded`), and SQL readers open what they select
(:func:`read_value`). ``crypto.columns`` registers the columns for owner key
rotations, which re-hash ``message_key`` in their last pass
(``crypto.submission_keys``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Table

from mailroom.crypto.fields import TEXT_PREFIX, from_text, to_text
from mailroom.crypto.sealed_rows import write_sealed_rows
from mailroom.crypto.sealing import require_cipher
from mailroom.errors import SealedWithoutKeys

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from mailroom.store.models import Submission
    from mailroom.store.models.base import Base

__all__ = [
    "BOUNCES",
    "FAILED_SENDS",
    "OF_OWNER",
    "PLACEHOLDERS",
    "SEALED_COLUMNS",
    "SUBMISSIONS",
    "key_forms",
    "open_loaded",
    "read_value",
    "seal_changes",
    "seal_values",
    "sealed_where",
    "stored_key",
    "write_sealed",
]

SUBMISSIONS = "submissions"
FAILED_SENDS = "failed_sends"
BOUNCES = "bounces"
# The sealed columns of each table, and which of them are JSON columns.
SEALED_COLUMNS: Mapping[str, tuple[str, ...]] = {
    SUBMISSIONS: ("message_id", "last_error", "envelope", "delivery_status"),
    FAILED_SENDS: ("reason",),
    BOUNCES: ("recipients",),
}
_JSON = frozenset(
    {(SUBMISSIONS, "envelope"), (SUBMISSIONS, "delivery_status"), (BOUNCES, "recipients")}
)
# What a sealed submission holds between its insert and its sealed update.
PLACEHOLDERS: Mapping[str, Any] = {"message_id": "", "envelope": {}, "sealed": True}
# failed_sends and bounces rows of an owner, and of sealed submissions (SQL, ``:owner``).
OF_OWNER = "submission_id IN (SELECT id FROM submissions WHERE user_id = :owner)"
OF_SEALED = "submission_id IN (SELECT id FROM submissions WHERE sealed)"
_WHAT = "This outgoing message"


def sealed_where(table: str, column: str) -> str:
    """SQL choosing the rows of ``table`` whose ``column`` holds a sealed value.

    The rows of sealed submissions; of a JSON column only those holding a value, since
    None in a JSON column is stored as JSON ``null``, which SQL's IS NOT NULL lets through.
    """
    rows = "sealed" if table == SUBMISSIONS else OF_SEALED
    if (table, column) not in _JSON:
        return rows
    return f"{rows} AND CAST({column} AS TEXT) LIKE '\"{TEXT_PREFIX}%'"


def stored_key(session: Session, owner: int, message_id: str) -> str:
    """The ``message_key`` a new submission of ``message_id`` stores (hashed when sealing)."""
    from mailroom.crypto.message_fields import LookupKeys
    from mailroom.store.keys import id_key

    return LookupKeys(session, owner).stored_id(id_key(message_id))


def key_forms(session: Session, owner: int, message_ids: Iterable[str]) -> list[str]:
    """Every ``message_key`` these Message-IDs may be stored as: clear, or hashed by any version."""
    from mailroom.crypto.message_fields import LookupKeys
    from mailroom.store.keys import id_key

    return sorted(LookupKeys(session, owner).id_forms({id_key(m) for m in message_ids}))


def seal_values(
    session: Session, owner: int, table: str, row_id: int, values: Mapping[str, Any]
) -> dict[str, Any]:
    """``values`` of one row with its sealed columns sealed (None stays None; others as given)."""
    sealed = dict(values)
    seal = None
    for column in SEALED_COLUMNS[table]:
        value = values.get(column)
        if value is None:
            continue
        seal = seal or require_cipher(session, _WHAT).sealer(owner)
        plain = json.dumps(value, ensure_ascii=False) if (table, column) in _JSON else str(value)
        sealed[column] = to_text(seal(table, column, row_id, plain))
    return sealed


def write_sealed(
    session: Session, model: type[Base], owner: int, rows: Mapping[int, Mapping[str, Any]]
) -> None:
    """Seal the clear ``rows`` (row id → values) of ``model`` rows inserted with placeholders."""
    table = cast(Table, model.__table__).name
    json_columns = [column for name, column in _JSON if name == table]
    write_sealed_rows(session, model, owner, rows, json_columns)


def _token(value: Any) -> bytes:
    """The sealed bytes of a stored value: ``mrf1.`` text, or a JSON column's string as read
    (the string itself, or its JSON text when raw SQL on SQLite returns the column's text)."""
    stored = value.decode("utf-8") if isinstance(value, bytes) else str(value)
    return from_text(json.loads(stored) if stored.startswith('"') else stored)


def read_value(
    session: Session | None,
    owner: int,
    table: str,
    column: str,
    row_id: int,
    value: Any,
    sealed: bool,
) -> Any:
    """One stored value as readers see it: opened when its row is sealed, JSON parsed.

    ``session`` None (a bare file reader, no keys) reads clear rows only.
    """
    is_json = (table, column) in _JSON
    if not sealed or value is None:
        return json.loads(value) if is_json and isinstance(value, str | bytes) else value
    if session is None:  # the caller reads again through a store session, which has the keys
        raise SealedWithoutKeys(f"{_WHAT} is sealed, and this reader of the store has no keys.")
    cipher = require_cipher(session, _WHAT)
    plain = cipher.decrypt_text(owner, table, column, row_id, _token(value))
    return json.loads(plain) if is_json else plain


def open_loaded(
    submission: Submission, session: Session | None, attrs: Iterable[str] | None
) -> None:
    """Open a sealed ``Submission`` just loaded (or ``attrs`` of it refreshed), in place.

    The clear values become the loaded state: nothing is written back unless code
    changes them, and then :func:`seal_changes` seals them.
    """
    from sqlalchemy.orm.attributes import set_committed_value

    if session is None:
        return
    columns = SEALED_COLUMNS[SUBMISSIONS]
    loaded = submission.__dict__
    for column in columns if attrs is None else [c for c in attrs if c in columns]:
        if column in loaded:
            value = read_value(
                session,
                submission.user_id,
                SUBMISSIONS,
                column,
                submission.id,
                loaded[column],
                True,
            )
            set_committed_value(submission, column, value)


def seal_changes(session: Session, submissions: Iterable[Submission]) -> list[tuple[Any, str, Any]]:
    """Seal the changed sealed columns of sealed submissions before a flush writes them.

    Returns what was replaced, so the clear values can be put back after the flush.
    """
    from mailroom.store.models.sealed_rows import reseal_changed

    def seal(submission: Submission, changed: dict[str, Any]) -> dict[str, Any]:
        return seal_values(session, submission.user_id, SUBMISSIONS, submission.id, changed)

    return reseal_changed(submissions, SEALED_COLUMNS[SUBMISSIONS], seal)
