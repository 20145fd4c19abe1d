"""JMAP over sealed ``messages`` rows: columns opened for reading, matching and sorting.

A sealed row's mail columns (``crypto.message_fields``) are ``mrf1.`` text and its
``message_id_header`` a keyed hash, so SQL can neither show, match nor sort them.
Email/get opens the rows it selected (:func:`opened`); Email/query's address and
subject filters and its text sorts match and sort the opened values in Python
(:class:`SealedMail`) and hand the matching ids back to SQL. Every function here
costs one cheap query, or nothing, for an owner without sealed mail: clear mode is
unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from types import SimpleNamespace
from typing import Any

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import Session

from mailroom.crypto.mail_reading import columns_of
from mailroom.crypto.message_fields import has_sealed, open_rows
from mailroom.mime.msgids import normalize_message_id
from mailroom.store.keys import id_key
from mailroom.store.models import Message

__all__ = ["SealedMail", "message_ids_of", "opened", "sql_lower"]


def opened(session: Session, rows: Iterable[Any], columns: Sequence[str]) -> list[Any]:
    """Rows (each with ``id``, ``user_id``, ``sealed`` and ``columns``) with those opened.

    Attribute access as on the SQLAlchemy rows they replace.
    """
    return [SimpleNamespace(**values) for values in open_rows(session, rows, columns)]


def message_ids_of(session: Session, message_ids: Sequence[int]) -> dict[int, str | None]:
    """The Message-ID of sealed messages as ``messages.message_id_header`` of a clear row holds it.

    A sealed row stores only its keyed hash: the clear id comes from the sealed header
    list (its first Message-ID field, normalized and index-keyed as ingest does).
    """
    found: dict[int, str | None] = {}
    for message_id, columns in columns_of(session, message_ids, ["headers"]).items():
        pairs = [p for p in columns["headers"] or [] if len(p) >= 2]
        values = [str(value) for name, value, *_ in pairs if str(name).lower() == "message-id"]
        ident = normalize_message_id(values[0]) if values else None
        found[message_id] = id_key(ident) if ident else None
    return found


def sql_lower(dialect: str, value: str) -> str:
    """``lower(value)`` as the store's SQL computes it (SQLite folds ASCII letters only)."""
    if dialect != "sqlite":
        return value.lower()
    return value.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


class SealedMail:
    """The owner's sealed messages with the columns a condition tests opened, each read once.

    For Email/query's ``from``, ``to``, ``cc``, ``bcc`` and ``subject`` conditions on sealed
    rows: each condition is tested on the opened values exactly as the SQL tests a clear
    row (lower-cased substrings, as the store folds case), and the matching ids go back
    into the SQL condition. Only the columns a condition needs are opened (a subject
    filter opens subjects alone), once per query however many conditions use them.
    """

    def __init__(self, session: Session, owner: int) -> None:
        self.session = session
        self.owner = owner
        self.dialect = session.get_bind().dialect.name
        self._present: bool | None = None
        self._opened: dict[str, dict[int, Any]] = {}
        self.opened_values = 0  # how many sealed values this query opened (its cost)

    @property
    def present(self) -> bool:
        """Whether the owner has sealed mail (asked once)."""
        if self._present is None:
            self._present = has_sealed(self.session, self.owner)
        return self._present

    def column(self, name: str, narrow: ColumnElement[bool] | None = None) -> dict[int, Any]:
        """Message id → the opened ``name`` of the owner's sealed messages (those ``narrow``
        allows, when given); each value is opened once per query."""
        if not self.present:
            return {}
        query = select(Message.id, Message.user_id, Message.sealed, getattr(Message, name)).where(
            Message.user_id == self.owner, Message.sealed
        )
        if narrow is not None:
            query = query.where(narrow)
        rows = self.session.execute(query.order_by(Message.id)).all()
        cache = self._opened.setdefault(name, {})
        fresh = [row for row in rows if row.id not in cache]
        self.opened_values += len(fresh)
        cache.update({int(r["id"]): r[name] for r in open_rows(self.session, fresh, [name])})
        return {int(row.id): cache[int(row.id)] for row in rows}

    def _lower(self, value: str) -> str:
        return sql_lower(self.dialect, value)

    def substring_matches(
        self, name: str, tokens: Sequence[str], narrow: ColumnElement[bool] | None = None
    ) -> list[int]:
        """Sealed ids (among those ``narrow`` allows) whose ``from`` or ``subject`` holds
        every token (lower-cased)."""
        wanted = [token.lower() for token in tokens]
        if name == "from":
            names, emails = self.column("from_name", narrow), self.column("from_email", narrow)
            texts = {
                mid: f"{names.get(mid) or ''} <{email or ''}>" for mid, email in emails.items()
            }
        else:
            subjects = self.column("subject", narrow)
            texts = {mid: str(subject or "") for mid, subject in subjects.items()}
        found = []
        for message_id, value in texts.items():
            lowered = self._lower(value)
            if all(token in lowered for token in wanted):
                found.append(message_id)
        return found

    def address_matches(
        self, key: str, tokens: Sequence[str], narrow: ColumnElement[bool] | None = None
    ) -> list[int]:
        """Sealed ids (among those ``narrow`` allows) whose recipients ``key`` (to, cc, bcc)
        hold every token.

        The clear SQL matches the lower-cased JSON text of the list as the store returns
        it (the serializer's ASCII escapes kept; SQLite's without spaces), with either
        spelling of a non-ASCII token: so does this, on that text of the opened list.
        """
        wanted = [(token.lower(), json.dumps(token)[1:-1].lower()) for token in tokens]
        separators = (",", ":") if self.dialect == "sqlite" else (", ", ": ")
        found = []
        for message_id, recipients in self.column("recipients", narrow).items():
            listed = (recipients or {}).get(key)
            if listed is None:
                continue
            spelled = self._lower(json.dumps(listed, separators=separators))
            if all(plain in spelled or escaped in spelled for plain, escaped in wanted):
                found.append(message_id)
        return found
