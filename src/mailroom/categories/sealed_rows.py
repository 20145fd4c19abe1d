"""An owner's sealed ``messages`` rows matched in Python, where SQL cannot see their columns.

A sealed row's mail columns (``crypto.message_fields``) are ciphertext: ``from_email
IN (...)``, ``subject ILIKE ...`` never match them. The readers that match on those
columns (rules, correspondents, the offline assistant's training set) keep their SQL
for clear rows (``NOT messages.sealed AND <condition>``) and, only when the owner has
sealed rows, open those rows' columns here, narrowed in SQL by everything else first,
match them in Python and give the matching ids back to SQL (``messages.id IN (...)``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Integer, TextClause, bindparam, or_, select, text
from sqlalchemy.orm import Session

from mailroom.crypto.message_fields import has_sealed, open_rows
from mailroom.store.chunks import in_chunks
from mailroom.store.models import Message

__all__ = ["from_candidates", "has_sealed", "id_in", "sealed_matching", "sealed_rows"]

Where = ColumnElement[bool] | TextClause


def sealed_rows(
    session: Session,
    owner: int,
    columns: Sequence[str],
    *,
    candidates: Collection[int] | None = None,
    where: Iterable[Where] = (),
    also: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The owner's sealed rows (among ``candidates``, meeting ``where``), ``columns`` opened.

    Each row is a dict with ``id``, ``user_id``, ``sealed``, the columns and the
    columns named in ``also`` (not mail columns: as stored).
    """
    selected = [Message.id, Message.user_id, Message.sealed]
    selected += [getattr(Message, column) for column in (*columns, *also)]
    conditions = [Message.user_id == owner, Message.sealed, *where]
    if candidates is None:
        return open_rows(session, session.execute(select(*selected).where(*conditions)), columns)
    opened: list[dict[str, Any]] = []
    for chunk in in_chunks(sorted(set(candidates))):
        rows = session.execute(select(*selected).where(*conditions, Message.id.in_(chunk)))
        opened += open_rows(session, rows, columns)
    return opened


def sealed_matching(
    session: Session,
    owner: int,
    columns: Sequence[str],
    keep: Callable[[dict[str, Any]], bool],
    *,
    candidates: Collection[int] | None = None,
    where: Iterable[Where] = (),
) -> list[int]:
    """Ids of the owner's sealed rows whose opened ``columns`` ``keep`` accepts (sorted)."""
    rows = sealed_rows(session, owner, columns, candidates=candidates, where=where)
    return sorted(int(row["id"]) for row in rows if keep(row))


def id_in(ids: Collection[int]) -> ColumnElement[bool]:
    """``messages.id IN (ids)`` with the ids written into the SQL: no bound-parameter limit,
    however many sealed rows matched."""
    return Message.id.in_(
        bindparam(
            "sealed_ids",
            sorted(ids),
            type_=Integer,
            expanding=True,
            literal_execute=True,
            unique=True,
        )
    )


def from_candidates(session: Session, user_id: int, emails: Sequence[str]) -> list[Where]:
    """SQL narrowing the owner's sealed rows to those that may be from these addresses.

    A sealed message's participants are in the blind index (``crypto.blind_index``):
    the rows holding every word of one of the addresses, a small superset checked
    exactly once opened. Without a blind index (or an address without words) no
    narrowing: every sealed row is opened.
    """
    from mailroom.crypto.blind_index import blind_terms_for_words
    from mailroom.store.search import blind_query_words, query_terms

    dialect = session.get_bind().dialect.name
    clauses: list[Where] = []
    for number, email in enumerate(emails):
        words = blind_query_words(query_terms(email))
        terms = blind_terms_for_words(session, user_id, words) if words else None
        found = terms.clause(dialect, f"sender{number}_") if terms is not None else None
        if found is None:
            return []
        sql, params = found
        clauses.append(text(f"({sql})").bindparams(**params))
    return [or_(*clauses)]
