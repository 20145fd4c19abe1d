"""Full-text search over subject, participants and body.

SQLite uses an FTS5 table whose rowid is the message id; PostgreSQL a
``tsvector`` table with a GIN index (``simple`` configuration, no stemming,
because mail comes in every language). Both are written in the same
transaction as the message, so a flushed batch is searchable at once.

Sealed mail (``crypto.sealing.seals_new_mail``) writes no clear word here:
its entry holds the blind index instead (``crypto.blind_index``: one *token
word*, a keyed hash of each distinct word, spelled so that no clear text or
query can produce it, see :data:`TOKEN_MARK`), and a query of an owner with
a data key is matched against both (:class:`BlindTerms`). The helpers that
split and fold words for the blind index live here, free of SQLAlchemy and
cryptography, so the plain-SQL read path (``store.reader``) can use them.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

# SQLAlchemy is imported where the index is written: the read commands use
# match_clause only and must not pay for it (store.reader).
if TYPE_CHECKING:
    from collections.abc import Mapping

    from sqlalchemy.orm import Session

BODY_LIMIT = 200_000  # characters of body indexed per message; the rest is rarely searched
_WORD = re.compile(r"\w[\w.@+-]*\w|\w", re.UNICODE)
# A word of the blind index: a run of letters and digits, as FTS5's unicode61 tokenizer splits
# (an address "ann@example.com" is the three words ann, example and com).
_BLIND_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# The first character of every token word of the blind index (``crypto.blind_index.token_word``):
# a private-use character. FTS5's unicode61 tokenizer keeps it inside a word (category Co),
# PostgreSQL's parser drops it (a token word is written as a lexeme, not parsed), and no query
# term has it (``_WORD``'s ``\w`` is letters, digits and ``_`` only), so a clear query, even a
# one-letter prefix query, never reaches a token word. Clear text indexed on SQLite has it
# replaced by a space, so no clear word starts with it either (see :func:`_index_clear`).
TOKEN_MARK = "\ue000"
# Whether an owner may have sealed mail: only an owner with a data key can (one indexed look-up).
OWNER_HAS_KEY = "SELECT 1 FROM owner_keys WHERE user_id = :owner LIMIT 1"


@dataclass(frozen=True, slots=True)
class SearchDocument:
    """The searchable text of one message."""

    message_id: int
    subject: str
    participants: str
    body: str
    # The blind index entry a parse worker made (``crypto.blind_tokens.BlindEntry``), or None
    # to make it when the entry is written.
    blind_entry: tuple[int, str, str, str] | None = field(default=None, compare=False)


def index_documents(
    session: Session, documents: list[SearchDocument], owner: int | None = None
) -> None:
    """Add (or replace) the search entries of these messages (all of ``owner``, when given).

    When the session seals new mail, the entry holds the blind index's token
    words instead of the words (``crypto.blind_index``); either replaces the other.
    """
    from mailroom.crypto.blind_index import index_sealed_by_owner
    from mailroom.crypto.sealing import seals_new_mail

    if not documents:
        return
    if seals_new_mail(session):
        index_sealed_by_owner(session, documents, owner)
        return
    _index_clear(session, documents)


def remove_entries(session: Session, message_ids: list[int]) -> None:
    """Delete the ``message_search`` entries (clear or sealed) of these messages."""
    from sqlalchemy import text

    if not message_ids:
        return
    if session.get_bind().dialect.name != "sqlite":  # one statement for the batch
        ids = list(message_ids)
        session.execute(
            text("DELETE FROM message_search WHERE message_id = ANY(:ids)"), {"ids": ids}
        )
        return
    session.execute(
        text("DELETE FROM message_search WHERE rowid = :id"),
        [{"id": message_id} for message_id in message_ids],
    )


def _unmarked(value: str) -> str:
    """``value`` without :data:`TOKEN_MARK` (a C-level scan; it is almost never there)."""
    return value.replace(TOKEN_MARK, " ") if TOKEN_MARK in value else value


def _index_clear(session: Session, documents: list[SearchDocument]) -> None:
    from sqlalchemy import text

    dialect = session.get_bind().dialect.name
    rows = [
        {
            "id": doc.message_id,
            "subject": _unmarked(doc.subject),
            "participants": _unmarked(doc.participants),
            "body": _unmarked(doc.body[:BODY_LIMIT]),
        }
        for doc in documents
    ]
    if dialect == "sqlite":
        session.execute(text("DELETE FROM message_search WHERE rowid = :id"), rows)
        session.execute(
            text(
                "INSERT INTO message_search (rowid, subject, participants, body) "
                "VALUES (:id, :subject, :participants, :body)"
            ),
            rows,
        )
    else:
        session.execute(  # the owner from the message: one index serves one owner's queries
            text(
                "INSERT INTO message_search (message_id, user_id, document) "
                "SELECT id, user_id, "
                "setweight(to_tsvector('simple', :subject), 'A') || "
                "setweight(to_tsvector('simple', :participants), 'B') || "
                "setweight(to_tsvector('simple', :body), 'C') FROM messages WHERE id = :id "
                "ON CONFLICT (message_id) DO UPDATE SET document = EXCLUDED.document"
            ),
            rows,
        )


def query_terms(query: str) -> list[str]:
    """The words of a user's query, as both engines will match them (all must occur)."""
    return [word.lower() for word in _WORD.findall(query)]


def _without_diacritics(word: str) -> str:
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(char for char in decomposed if not unicodedata.combining(char))


def _blind_split(text: str) -> list[str]:
    """The words of ``text`` for the blind index, in order, repeats kept.

    Casefolded, and without diacritics as FTS5's ``remove_diacritics`` matches
    them; only non-ASCII words pay for the Unicode decomposition.
    """
    folded = text.casefold()
    if folded.isascii():
        return _BLIND_WORD.findall(folded)
    words: list[str] = []
    for word in _BLIND_WORD.findall(unicodedata.normalize("NFC", folded)):
        if word.isascii():
            words.append(word)
        else:
            words.extend(_BLIND_WORD.findall(_without_diacritics(word)))
    return words


def blind_words(text: str) -> set[str]:
    """The distinct words of ``text`` for the blind index."""
    return set(_blind_split(text))


# ASCII text's words for the blind index with two C calls: letters folded to lower case,
# every other byte that is not a letter or digit made a space (what _BLIND_WORD keeps).
_ASCII_FOLD = bytes.maketrans(
    bytes(range(128)),
    bytes(
        (byte | 0x20 if chr(byte).isalpha() else byte) if chr(byte).isalnum() else 0x20
        for byte in range(128)
    ),
)


def blind_word_bytes(text: str) -> set[bytes]:
    """:func:`blind_words` as UTF-8 bytes: what the hash takes, and for ASCII text (nearly
    all mail) split by ``bytes.translate`` and ``bytes.split`` a third faster than the regex.

    Other text is split the same way at its ASCII separators first (UTF-8 leaves
    every other byte as it is), and only its distinct pieces with non-ASCII
    characters go through the Unicode rules, each once: most such mail is ASCII
    but for a few quotes or accented names.
    """
    if text.isascii():
        return set(text.encode("ascii").translate(_ASCII_FOLD).split())
    found: set[bytes] = set()
    for piece in set(text.encode("utf-8", "surrogatepass").translate(_ASCII_FOLD).split()):
        if piece.isascii():
            found.add(piece)
        else:
            clear = piece.decode("utf-8", "surrogatepass")
            found.update(word.encode("utf-8") for word in _blind_split(clear))
    return found


def blind_query_words(terms: list[str]) -> list[str]:
    """The blind index words of a query's terms, in order (all must occur)."""
    return [word for term in terms for word in _blind_split(term)]


@dataclass(frozen=True, slots=True)
class BlindTerms:
    """A query hashed for one owner's blind index (made by ``crypto.blind_index.blind_terms``).

    ``words`` holds, per query word, every token word that matches it (each key
    version during a rotation, both kinds unless the query is for the body alone):
    a message matches when, for every word, one of its token words is in its entry.
    """

    owner: int
    words: tuple[tuple[str, ...], ...]

    def clause(
        self, dialect: str, prefix: str = "blind"
    ) -> tuple[str, dict[str, str | int]] | None:
        """The SQL condition on ``messages.id`` (parameter names start with ``prefix``).

        One full-text match: on SQLite an FTS5 expression (an OR of the versions per
        word, an AND over the words), on PostgreSQL the same as a ``tsquery`` taken
        as written (``to_tsquery`` would parse the token words apart).
        """
        if not self.words or not all(self.words):
            return None
        if dialect == "sqlite":
            expression = " AND ".join(
                "(" + " OR ".join(f'"{word}"' for word in hashes) + ")" for hashes in self.words
            )
            sql = (
                "messages.id IN (SELECT rowid FROM message_search "
                f"WHERE message_search MATCH :{prefix})"
            )
            return sql, {prefix: expression}
        expression = " & ".join(
            "(" + " | ".join(f"'{word}'" for word in hashes) + ")" for hashes in self.words
        )
        sql = (
            "messages.id IN (SELECT message_id FROM message_search "
            f"WHERE user_id = CAST(:{prefix}_owner AS BIGINT) "
            f"AND document @@ CAST(:{prefix} AS tsquery))"
        )
        return sql, {prefix: expression, f"{prefix}_owner": self.owner}


def either(
    dialect: str,
    clear: tuple[str, Mapping[str, str | int]] | None,
    blind: BlindTerms | None,
    prefix: str = "blind",
) -> tuple[str, dict[str, str | int]] | None:
    """The clear full-text condition OR-ed with the blind one (either may be missing)."""
    sealed = blind.clause(dialect, prefix) if blind is not None else None
    if sealed is None:
        return (clear[0], dict(clear[1])) if clear is not None else None
    if clear is None:
        return f"({sealed[0]})", sealed[1]
    return f"(({clear[0]}) OR ({sealed[0]}))", {**clear[1], **sealed[1]}


def match_clause(
    dialect: str, query: str, blind: BlindTerms | None = None, owner: int | None = None
) -> tuple[str, dict[str, str | int]] | None:
    """A SQL condition on ``messages.id`` matching ``query``, or None for an empty query.

    Every word must occur (AND); the last word also matches as a prefix. With
    ``blind`` (the same query hashed for the owner, when they have sealed mail)
    the blind index is searched too, OR-ed with the clear index. ``owner``
    narrows PostgreSQL's index to that owner's entries (:func:`pg_match`).
    """
    return either(dialect, _clear_clause(dialect, query, owner), blind)


def pg_match(
    tsquery_param: str, owner: int | None, owner_param: str
) -> tuple[str, dict[str, str | int]]:
    """PostgreSQL's condition on ``messages.id`` for a tsquery bound to ``tsquery_param``.

    ``message_search`` there carries the owner, indexed with the document
    (migration 0021): with ``owner`` the index reads that owner's matches only,
    not the whole store's (the caller still filters ``messages.user_id``). The cast
    matters: the driver binds a small id as ``smallint``, and btree_gin's ``bigint``
    operator class does not take a cross-type equality, so the index would filter the
    owner after the fact instead.
    """
    where = f"document @@ to_tsquery('simple', :{tsquery_param})"
    if owner is None:
        return f"messages.id IN (SELECT message_id FROM message_search WHERE {where})", {}
    return (
        "messages.id IN (SELECT message_id FROM message_search "
        f"WHERE user_id = CAST(:{owner_param} AS BIGINT) AND {where})",
        {owner_param: owner},
    )


def _clear_clause(
    dialect: str, query: str, owner: int | None
) -> tuple[str, dict[str, str | int]] | None:
    terms = query_terms(query)
    if not terms:
        return None
    if dialect == "sqlite":
        quoted = ['"' + term.replace('"', '""') + '"' for term in terms]
        quoted[-1] += "*"
        return (
            "messages.id IN (SELECT rowid FROM message_search WHERE message_search MATCH :fts)",
            {"fts": " AND ".join(quoted)},
        )
    parts = [re.sub(r"[^\w@.+-]", "", term) for term in terms]
    parts = [part for part in parts if part]
    if not parts:
        return None
    tsquery = " & ".join("'" + part + "'" for part in parts[:-1])
    last = "'" + parts[-1] + "':*"
    tsquery = f"{tsquery} & {last}" if tsquery else last
    sql, params = pg_match("fts", owner, "search_owner")
    return sql, {"fts": tsquery, **params}
