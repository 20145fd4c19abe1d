"""Each sealing owner's word list, sealed: the last word of a search matches as a prefix.

The blind index (``crypto.blind_index``) holds keyed hashes of whole words:
a hash of ``conf`` says nothing about ``conference``, so by itself a search
for the start of a word finds no sealed mail, while clear mail's full-text
index matches the last word of a query as a prefix. ``blind_vocabulary``
keeps the owner's words instead, sealed under their data key like any other
value (``words``: sorted, newline-separated, compressed and sealed, bound to
its row; only ``word_count`` is clear). A search opens the list, takes the
words that start with the query's last word (at most :data:`EXPANSIONS`, in
alphabetical order) and asks the blind index for their token words as
alternatives of that word.

Writing: every batch of sealed mail adds one row holding the words whose
token words it made and its process had not hashed before under that key
(``crypto.blind_tokens``: the fourth part of an entry), so an import writes
each word about once. Rows repeat words across processes and imports; once
an owner has more than :data:`MERGE_FROM` rows they are merged into one, in
the writing transaction. A word stays in the list after its last message is
deleted: it then expands to a token word nothing holds.

Opened lists are kept in this process, keyed by the rows' ids and the random
nonces of their sealed values, so a search opens the list only when it
changed, and then only the rows added since. An owner key rotation re-seals
the rows (``crypto.columns``); deleting the owner deletes them
(``crypto.shredding``).
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Collection, Iterable

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.orm import Session

from mailroom.crypto.fields import NONCE_END, FieldCipher
from mailroom.crypto.sealing import require_cipher
from mailroom.store.models import BlindVocabulary

__all__ = ["COLUMN", "EXPANSIONS", "MERGE_FROM", "TABLE", "completions", "record_words"]

TABLE = "blind_vocabulary"
COLUMN = "words"
MERGE_FROM = 32  # rows of one owner; more are merged into one
EXPANSIONS = 200  # words the last word of a query may stand for
_KEPT_LISTS = 4  # opened lists kept in this process (a few MiB each)
_INSERTED = 1_000  # added words put in place one by one; more: the list is sorted again

# Opened lists by the (id, sealed head) pairs of the rows they were opened from.
_opened: dict[frozenset[tuple[int, bytes]], list[str]] = {}
_lock = threading.Lock()


def record_words(session: Session, owner: int, words: Iterable[str]) -> None:
    """Add ``words`` to ``owner``'s sealed list (in the session's transaction)."""
    fresh = sorted({word for word in words if word})
    if not fresh:
        return
    cipher = require_cipher(session, "New mail")
    _insert(session, cipher, owner, fresh)
    rows = session.scalar(
        select(func.count()).select_from(BlindVocabulary).where(BlindVocabulary.user_id == owner)
    )
    if int(rows or 0) > MERGE_FROM:
        _merge(session, cipher, owner)


def completions(session: Session, owner: int, prefix: str, limit: int = EXPANSIONS) -> list[str]:
    """The owner's words that start with ``prefix`` (not ``prefix`` itself), alphabetically."""
    if not prefix:
        return []
    words = _owner_words(session, owner)
    found: list[str] = []
    for word in words[bisect_left(words, prefix) :]:
        if not word.startswith(prefix) or len(found) >= limit:
            break
        if word != prefix:
            found.append(word)
    return found


def _insert(session: Session, cipher: FieldCipher, owner: int, words: list[str]) -> None:
    # The sealed value is bound to the row id, which only the insert makes.
    row_id = session.execute(
        insert(BlindVocabulary)
        .values(user_id=owner, words=b"", word_count=len(words))
        .returning(BlindVocabulary.id)
    ).scalar_one()
    sealed = cipher.encrypt(owner, TABLE, COLUMN, row_id, "\n".join(words))
    session.execute(
        update(BlindVocabulary).where(BlindVocabulary.id == row_id).values(words=sealed)
    )


def _merge(session: Session, cipher: FieldCipher, owner: int) -> None:
    ids, words = _opened_rows(session, cipher, owner)
    session.execute(delete(BlindVocabulary).where(BlindVocabulary.id.in_(ids)))
    _insert(session, cipher, owner, sorted(words))


def _opened_rows(
    session: Session, cipher: FieldCipher, owner: int, only: Collection[int] | None = None
) -> tuple[list[int], set[str]]:
    """The ids of the owner's rows (``only`` these, when given) and every word they hold."""
    query = select(BlindVocabulary.id, BlindVocabulary.words).where(
        BlindVocabulary.user_id == owner
    )
    if only is not None:
        query = query.where(BlindVocabulary.id.in_(list(only)))
    ids: list[int] = []
    words: set[str] = set()
    for row_id, sealed in session.execute(query):
        ids.append(int(row_id))
        text = cipher.decrypt(owner, TABLE, COLUMN, int(row_id), sealed).decode("utf-8")
        words.update(text.split("\n") if text else [])
    return ids, words


def _owner_words(session: Session, owner: int) -> list[str]:
    """The owner's whole list, sorted (rows opened again only when they changed).

    The rows are known by their ids and sealed heads: a head holds the value's random
    nonce, so a row written or sealed again (a merge, a rotation) has a new one, and
    the look-up reads a few bytes per row instead of the lists. When rows were only
    added since a list was opened (the batches of a sync), only those are opened and
    their words put in place.
    """
    heads = session.execute(
        select(BlindVocabulary.id, func.substr(BlindVocabulary.words, 1, NONCE_END)).where(
            BlindVocabulary.user_id == owner
        )
    ).all()
    if not heads:
        return []
    rows = frozenset((int(row_id), bytes(head)) for row_id, head in heads)
    with _lock:
        kept = _opened.get(rows)
        if kept is not None:
            return kept
        earlier = max(
            (state for state in _opened.items() if state[0] < rows),
            key=lambda state: len(state[0]),
            default=None,
        )
    cipher = require_cipher(session, "Part of this owner's mail")
    if earlier is None:
        ordered = sorted(_opened_rows(session, cipher, owner)[1])
    else:
        added_rows = {row_id for row_id, _head in rows - earlier[0]}
        added = _opened_rows(session, cipher, owner, added_rows)[1]
        if len(added) > _INSERTED:  # an import's rows: one sort beats many list inserts
            ordered = sorted(added.union(earlier[1]))
        else:
            ordered = list(earlier[1])
            for word in added:
                at = bisect_left(ordered, word)
                if at == len(ordered) or ordered[at] != word:
                    ordered.insert(at, word)
    with _lock:
        if earlier is not None:  # superseded by this one
            _opened.pop(earlier[0], None)
        while len(_opened) >= _KEPT_LISTS:
            _opened.pop(next(iter(_opened)))
        _opened[rows] = ordered
    return ordered
