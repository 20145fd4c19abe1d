"""The blind index: search over sealed mail by keyed hashes of its words.

A sealed message's words never reach ``message_search``. Each distinct word
(``store.search.blind_words``: letters and digits, casefolded, without
diacritics; the body's first ``BODY_LIMIT`` characters) becomes one row of
``search_tokens``: the owner, the message, and the word's lookup hash
(:meth:`~mailroom.crypto.fields.FieldCipher.lookup_hash`, its first 8 bytes as
a signed 64-bit integer: compact keys compared as integers, see
:func:`token_of`). Words of the subject and participants are hashed with kind
``token``, words of the body with kind ``token.body``, so JMAP's ``body``
filter can ask for the body alone; a ``text`` query asks for either.

A query hashes its words the same way under every stored key version (both
versions during an owner key rotation) and needs, for every word, one of its
hashes among the message's tokens. Whole words only: hashing prefixes too
(3 characters and up) would have tripled the rows (x3.27 on the SpamAssassin
corpus), so the last word of a query matches sealed mail as a whole word,
while clear mail still matches it as a prefix. A phrase matches sealed mail
when all its words occur, in any order.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import text

from mailroom.crypto.sealing import require_cipher, seals_new_mail
from mailroom.store.search import (
    BODY_LIMIT,
    BlindTerms,
    SearchDocument,
    blind_query_words,
    blind_words,
    query_terms,
)

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from mailroom.crypto.fields import FieldCipher

TOKEN_BYTES = 8  # of each HMAC-SHA256 lookup hash: one signed 64-bit integer
HEADER_KIND = "token"  # words of the subject and the participants
BODY_KIND = "token.body"  # words of the body

# SQLite's page cache (KiB) on a connection that writes sealed mail, instead of 2 MiB: each
# batch's sorted tokens land all over the B-tree (37 MiB for 6,000 messages), whose pages then
# stay cached between batches (sealed import of 6,046 messages, paired runs on a loaded machine:
# 19.1 and 20.6 s against 21.3 and 22.6 s). Memory is taken only as pages are read.
SQLITE_CACHE_KIB = 65_536

RunQuery = Callable[[str, Mapping[str, Any]], Sequence[Sequence[Any]]]


def seals_search(session: Session) -> bool:
    """True when documents indexed in this session go to the blind index."""
    return seals_new_mail(session)


def token_of(digest: bytes) -> int:
    """The blind index token of a lookup hash: its first 8 bytes, a signed 64-bit integer.

    64 bits keep collisions negligible: among an owner's distinct words (a few
    hundred thousand at most), the chance that any two share a token is about
    n**2 / 2**65, under 1e-8 for 500,000 words; and a collision could only make
    a query find one message too many, never miss one.
    """
    return int.from_bytes(digest[:TOKEN_BYTES], "big", signed=True)


class _Hashers:
    """One owner's keyed HMACs of both kinds, set up once for a batch of documents.

    Each word is hashed once per batch: most words of a message occur in others
    of the batch too, and a dictionary look-up costs far less than an HMAC.
    """

    def __init__(self, cipher: FieldCipher, owner: int) -> None:
        self._header = cipher.lookup_hasher(owner, HEADER_KIND)
        self._body = cipher.lookup_hasher(owner, BODY_KIND)
        self._header_tokens: dict[str, int] = {}
        self._body_tokens: dict[str, int] = {}

    def tokens(self, document: SearchDocument) -> set[int]:
        """The blind index tokens of one message."""
        header_words = blind_words(document.subject) | blind_words(document.participants)
        tokens = _looked_up(self._header_tokens, self._header, header_words)
        body_words = blind_words(document.body[:BODY_LIMIT])
        return tokens | _looked_up(self._body_tokens, self._body, body_words)


def _looked_up(found: dict[str, int], hasher: Callable[[str], bytes], words: set[str]) -> set[int]:
    """The tokens of ``words``, hashing only those not ``found`` yet (and keeping them there)."""
    for word in [word for word in words if word not in found]:
        found[word] = token_of(hasher(word))
    return set(map(found.__getitem__, words))


def index_sealed(session: Session, documents: Iterable[SearchDocument], owner: int) -> None:
    """Write (or replace) the blind index rows of these messages of ``owner``."""
    documents = list(documents)
    hashers = _Hashers(require_cipher(session, "New mail"), owner)
    remove_blind_entries(session, [doc.message_id for doc in documents])
    # In key order: inserting the batch's (random) tokens sorted costs a third less on SQLite.
    rows = sorted(
        (owner, token, doc.message_id) for doc in documents for token in hashers.tokens(doc)
    )
    if not rows:
        return
    connection = session.connection()
    if connection.dialect.name == "sqlite":
        connection.exec_driver_sql(f"PRAGMA cache_size = -{SQLITE_CACHE_KIB}")
        # The driver's own executemany with tuples: through text() and dicts, binding the
        # parameters of a million rows took a third of the time of inserting them.
        connection.exec_driver_sql(
            "INSERT INTO search_tokens (user_id, token, message_id) VALUES (?, ?, ?)", rows
        )
        return
    # PostgreSQL: COPY, in this transaction (a million rows: 10 s against executemany's 34 s).
    driver: Any = connection.connection.driver_connection
    copying = "COPY search_tokens (user_id, token, message_id) FROM STDIN"
    with driver.cursor() as cursor, cursor.copy(copying) as copy:
        for row in rows:
            copy.write_row(row)


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


def remove_blind_entries(session: Session, message_ids: Sequence[int]) -> None:
    """Delete the blind index rows of these messages."""
    if message_ids:
        session.execute(
            text("DELETE FROM search_tokens WHERE message_id = :id"),
            [{"id": message_id} for message_id in message_ids],
        )


def has_blind_index(run: RunQuery, owner: int) -> bool:
    """Whether ``owner`` has sealed mail in the blind index (one indexed look-up)."""
    rows = run("SELECT 1 FROM search_tokens WHERE user_id = :owner LIMIT 1", {"owner": owner})
    return bool(rows)


def hash_words(
    cipher: FieldCipher, owner: int, words: Sequence[str], *, body_only: bool = False
) -> BlindTerms:
    """``words`` (already split and folded) hashed for ``owner``: every version, both kinds."""
    kinds = (BODY_KIND,) if body_only else (HEADER_KIND, BODY_KIND)
    hashed: list[tuple[int, ...]] = []
    for word in words:
        hashes = [
            token_of(bytes.fromhex(digest[: 2 * TOKEN_BYTES]))
            for kind in kinds
            for digest in cipher.lookup_hashes(owner, kind, word)
        ]
        hashed.append(tuple(dict.fromkeys(hashes)))
    return BlindTerms(owner, tuple(hashed))


def blind_terms(session: Session, owner: int, query: str) -> BlindTerms | None:
    """A search query hashed for ``owner``'s blind index, or None when they have none."""
    words = blind_query_words(query_terms(query))
    return blind_terms_for_words(session, owner, words)


def blind_terms_for_words(
    session: Session, owner: int, words: Sequence[str], *, body_only: bool = False
) -> BlindTerms | None:
    """:func:`blind_terms` for words already split (JMAP tokens and phrases)."""
    if not words:
        return None

    def run(sql: str, params: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
        return list(session.execute(text(sql), dict(params)).all())

    if not has_blind_index(run, owner):
        return None
    # Without the key, a search would quietly leave the sealed mail out: say so instead.
    cipher = require_cipher(session, "Part of this owner's mail")
    return hash_words(cipher, owner, words, body_only=body_only)


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

    For an owner key rotation: tokens cannot be re-hashed without their words, so
    each message is indexed again from its opened body, under the newest key version.
    Returns the last message id done, or None when no message after ``after`` is left.
    """
    from mailroom.crypto.mail_reading import bodies_of

    rows = session.execute(
        text(
            "SELECT id, subject, from_name, from_email, recipients FROM messages "
            "WHERE user_id = :owner AND id > :after AND EXISTS "
            "(SELECT 1 FROM search_tokens WHERE search_tokens.message_id = messages.id) "
            "ORDER BY id LIMIT :batch"
        ),
        {"owner": owner, "after": after, "batch": batch},
    ).all()
    if not rows:
        return None
    bodies = bodies_of(session, [int(row[0]) for row in rows], owner)
    documents = []
    for message_id, subject, from_name, from_email, recipients in rows:
        stored = json.loads(recipients) if isinstance(recipients, str) else recipients
        participants = " ".join([from_name or "", from_email or "", *_strings(stored)])
        body = bodies.get(int(message_id))
        documents.append(
            SearchDocument(
                int(message_id), subject or "", participants, body.text_body if body else ""
            )
        )
    index_sealed(session, documents, owner)
    return int(rows[-1][0])
