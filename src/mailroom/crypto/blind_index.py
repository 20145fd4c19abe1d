"""The blind index: search over sealed mail by keyed hashes of its words.

A sealed message's words never reach ``message_search``. Its entry there
holds, instead, one *token word* per distinct word (``store.search.blind_words``:
letters and digits, casefolded, without diacritics; the body's first
``BODY_LIMIT`` characters): :data:`~mailroom.store.search.TOKEN_MARK` and the
first 64 bits of the word's keyed lookup hash
(:meth:`~mailroom.crypto.fields.FieldCipher.lookup_hash`) in 16 hex digits
(:func:`token_word`). Words of the subject and participants are
hashed with kind ``token``, words of the body with kind ``token.body``; the
hash itself says which part a word came from, so JMAP's ``body`` filter asks
for ``token.body`` words only and a ``text`` query for either. On SQLite the
header's token words fill the ``subject`` column and the body's the ``body``
column; on PostgreSQL the ``tsvector`` holds them without positions. Each
message's token words are written once each, sorted: their order and count
say nothing of the text's.

The full-text index is an inverted index (posting lists built in memory and
merged), so a token word costs far less than the ``search_tokens`` row per
word that held the blind index until migration 0023 (a B-tree insert of a
random key, plus its ``message_id`` index).

A query hashes its words the same way under every stored key version (both
versions during an owner key rotation) and needs, for every word, one of its
token words in the message's entry: one full-text match, OR-ed with the clear
match so a store with clear and sealed mail finds both. Entries hold whole
words only (hashing prefixes of 3 characters and up too would have tripled
the words, x3.27 on the SpamAssassin corpus); the last word of a query still
matches as a prefix, as in clear mail: the owner's sealed word list
(``crypto.blind_vocabulary``) gives the words it starts, and their token
words are alternatives of it. Each batch's entries add their new words to
that list. A phrase matches sealed mail when all its words occur, in any
order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import event, text

from mailroom.crypto.blind_tokens import TOKEN_BYTES, BlindEntry, TokenKeys, forget, token_word
from mailroom.crypto.blind_vocabulary import completions, record_words
from mailroom.crypto.sealing import mail_cipher, require_cipher
from mailroom.store.search import (
    OWNER_HAS_KEY,
    BlindTerms,
    SearchDocument,
    blind_query_words,
    query_terms,
    remove_entries,
)

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from mailroom.crypto.fields import FieldCipher

HEADER_KIND = "token"  # words of the subject and the participants
BODY_KIND = "token.body"  # words of the body
# Whether an owner has sealed mail, when no key is there to hash a query (a rare path: it
# reads the owner's messages until the first sealed one).
OWNER_HAS_SEALED_MAIL = (
    "SELECT 1 FROM messages JOIN message_bodies ON message_bodies.message_id = messages.id "
    "WHERE messages.user_id = :owner AND message_bodies.sealed LIMIT 1"
)

RunQuery = Callable[[str, Mapping[str, Any]], Sequence[Sequence[Any]]]


def token_word_of(token: int) -> str:
    """The token word of a ``search_tokens`` row's signed 64-bit token (migration 0023)."""
    return token_word(token.to_bytes(TOKEN_BYTES, "big", signed=True))


def token_keys(cipher: FieldCipher, owner: int) -> TokenKeys:
    """``owner``'s token keys under their current data key version."""
    key = cipher.keys.current(owner)
    return TokenKeys(
        key.version, cipher.lookup_key(key, HEADER_KIND), cipher.lookup_key(key, BODY_KIND)
    )


def _entry(keys: TokenKeys, document: SearchDocument) -> BlindEntry:
    """The document's entry: the one a parse worker made, when under the current key version."""
    made = document.blind_entry
    if made is not None and made[0] == keys.version:
        return made
    return keys.entry_of(document.subject, document.participants, document.body)


def index_sealed(session: Session, documents: Iterable[SearchDocument], owner: int) -> None:
    """Write (or replace) the ``message_search`` entries of these messages of ``owner``."""
    documents = list(documents)
    keys = token_keys(require_cipher(session, "New mail"), owner)
    entries: list[tuple[int, str, str]] = []
    new_words: list[str] = []
    for doc in documents:
        _version, header, body, new = _entry(keys, doc)
        entries.append((doc.message_id, header, body))
        if new:
            new_words.extend(new.split("\n"))
    if not entries:
        return
    record_words(session, owner, new_words)
    # Should this transaction roll back, these words were reported new and stored nowhere.
    event.listen(session, "after_rollback", lambda _session: forget(keys), once=True)
    remove_entries(session, [doc.message_id for doc in documents])
    connection = session.connection()
    if connection.dialect.name == "sqlite":
        # The driver's own executemany with tuples (binding through text() and dicts costs more).
        connection.exec_driver_sql(
            "INSERT INTO message_search (rowid, subject, participants, body) VALUES (?, ?, '', ?)",
            entries,
        )
        return
    # PostgreSQL: COPY, in this transaction; the text form of a tsvector is its lexemes
    # separated by spaces (a token word has no quote, backslash or space to escape).
    driver: Any = connection.connection.driver_connection
    copying = "COPY message_search (message_id, user_id, document) FROM STDIN"
    with driver.cursor() as cursor, cursor.copy(copying) as copy:
        for message_id, header, body in entries:
            copy.write_row((message_id, owner, f"{header} {body}"))


def index_sealed_by_owner(
    session: Session, documents: Sequence[SearchDocument], owner: int | None
) -> None:
    """:func:`index_sealed` for messages of ``owner``, or of the owners the store names."""
    if owner is not None:
        index_sealed(session, documents, owner)
        return
    owners = _owners_of(session, [doc.message_id for doc in documents])
    by_owner: dict[int, list[SearchDocument]] = {}
    for doc in documents:
        by_owner.setdefault(owners[doc.message_id], []).append(doc)
    for each, docs in by_owner.items():
        index_sealed(session, docs, each)


def _owners_of(session: Session, message_ids: Sequence[int]) -> dict[int, int]:
    found: dict[int, int] = {}
    for start in range(0, len(message_ids), 500):
        chunk = message_ids[start : start + 500]
        names = ", ".join(f":m{index}" for index in range(len(chunk)))
        params = {f"m{index}": message_id for index, message_id in enumerate(chunk)}
        rows = session.execute(
            text(f"SELECT id, user_id FROM messages WHERE id IN ({names})"), params
        )
        found.update({int(row[0]): int(row[1]) for row in rows})
    return found


def has_blind_index(run: RunQuery, owner: int) -> bool:
    """Whether ``owner`` may have sealed mail: only an owner with a data key can."""
    return bool(run(OWNER_HAS_KEY, {"owner": owner}))


def hash_words(
    cipher: FieldCipher,
    owner: int,
    words: Sequence[str],
    *,
    body_only: bool = False,
    last_completions: Sequence[str] = (),
) -> BlindTerms:
    """``words`` (already split and folded) hashed for ``owner``: every version, both kinds.

    ``last_completions``: words the last word also stands for (a prefix search).
    """
    kinds = (BODY_KIND,) if body_only else (HEADER_KIND, BODY_KIND)
    hashed: list[tuple[str, ...]] = []
    for position, word in enumerate(words):
        alternatives = [word, *last_completions] if position == len(words) - 1 else [word]
        hashes = [
            token_word(bytes.fromhex(digest[: 2 * TOKEN_BYTES]))
            for each in alternatives
            for kind in kinds
            for digest in cipher.lookup_hashes(owner, kind, each)
        ]
        hashed.append(tuple(dict.fromkeys(hashes)))
    return BlindTerms(owner, tuple(hashed))


def blind_terms(session: Session, owner: int, query: str) -> BlindTerms | None:
    """A search query hashed for ``owner``'s blind index, or None when they have none.

    The last word also matches as a prefix, as in the clear index (``store.search``).
    """
    words = blind_query_words(query_terms(query))
    return blind_terms_for_words(session, owner, words, prefix_last=True)


def blind_terms_for_words(
    session: Session,
    owner: int,
    words: Sequence[str],
    *,
    body_only: bool = False,
    prefix_last: bool = False,
) -> BlindTerms | None:
    """:func:`blind_terms` for words already split (JMAP tokens and phrases).

    ``prefix_last``: the last word also stands for the owner's words it starts
    (``crypto.blind_vocabulary``).
    """
    if not words:
        return None

    def run(sql: str, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
        return list(session.execute(text(sql), dict(params)).all())

    if not has_blind_index(run, owner):
        return None
    cipher = mail_cipher(session)
    if cipher is None:
        if not run(OWNER_HAS_SEALED_MAIL, {"owner": owner}):
            return None
        # Without the key, a search would quietly leave the sealed mail out: say so instead.
        cipher = require_cipher(session, "Part of this owner's mail")
    more = completions(session, owner, words[-1]) if prefix_last else []
    return hash_words(cipher, owner, words, body_only=body_only, last_completions=more)


def _strings(value: Any) -> list[str]:
    """Every string inside a stored JSON value (the recipients' names and addresses)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list | tuple):
        return [s for item in value for s in _strings(item)]
    return []


def reindex_owner_batch(session: Session, owner: int, after: int, batch: int) -> int | None:
    """Re-hash the blind index of the next ``batch`` of ``owner``'s sealed messages.

    For an owner key rotation: token words cannot be re-hashed without their words,
    so each sealed message is indexed again from its opened body, under the newest key
    version (its entry is replaced).
    Returns the last message id done, or None when no message after ``after`` is left.
    """
    from mailroom.crypto.mail_reading import bodies_of
    from mailroom.crypto.message_fields import open_rows

    columns = ("subject", "from_name", "from_email", "recipients")
    rows = session.execute(
        text(
            f"SELECT id, user_id, sealed, {', '.join(columns)} FROM messages "
            "WHERE user_id = :owner AND id > :after AND EXISTS (SELECT 1 FROM message_bodies "
            "WHERE message_bodies.message_id = messages.id AND message_bodies.sealed) "
            "ORDER BY id LIMIT :batch"
        ),
        {"owner": owner, "after": after, "batch": batch},
    ).all()
    if not rows:
        return None
    bodies = bodies_of(session, [int(row[0]) for row in rows], owner)
    documents = []
    for row in open_rows(session, rows, columns):  # mail columns sealed since migration 0022
        participants = " ".join(
            [row["from_name"] or "", row["from_email"] or "", *_strings(row["recipients"])]
        )
        body = bodies.get(int(row["id"]))
        documents.append(
            SearchDocument(
                int(row["id"]), row["subject"] or "", participants, body.text_body if body else ""
            )
        )
    index_sealed(session, documents, owner)
    return int(rows[-1][0])
