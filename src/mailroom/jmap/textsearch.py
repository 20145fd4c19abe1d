"""The text of JMAP search conditions: tokens, phrases and full-text SQL.

RFC 8621 §4.4.1: white space divides tokens that must all occur; text in
single or double quotes is one phrase (``\\"``, ``\\'`` and ``\\\\`` stand for
the literal characters inside it). Tokens are matched case-insensitively.
For the full-text conditions (``text``, ``body``) each token becomes an
index phrase of its words (split as ``store.search`` indexes them); the
last unquoted word also matches as a prefix, as everywhere else in
mailroom. ``body`` searches only the body column (FTS5 column filter,
tsvector weight C). Sealed mail is searched in the blind index
(``crypto.blind_index``): whole words, a phrase as all its words, the last
unquoted word also as the start of the owner's words
(``crypto.blind_vocabulary``); a body query asks for the body's token words
only (their hash says their part).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mailroom.store.search import BlindTerms, blind_query_words, either, pg_match, query_terms

_TSQUERY_UNSAFE = re.compile(r"[^\w@.+-]")
# The column of the FTS5 table and the tsvector weight of each searchable part.
COLUMNS = {"subject": "A", "participants": "B", "body": "C"}


@dataclass(frozen=True, slots=True)
class Token:
    """One token of a search: its text, whether it was quoted, and its index words."""

    text: str
    phrase: bool

    @property
    def words(self) -> list[str]:
        """The words of the token as the full-text index splits them."""
        return query_terms(self.text)


def split_text(value: str) -> list[Token]:
    """The tokens of a search string (quoted phrases kept whole)."""
    tokens: list[Token] = []
    index, length = 0, len(value)
    while index < length:
        char = value[index]
        if char.isspace():
            index += 1
            continue
        if char in "\"'":
            quote, index, phrase = char, index + 1, []
            while index < length and value[index] != quote:
                if value[index] == "\\" and index + 1 < length and value[index + 1] in "\"'\\":
                    index += 1
                phrase.append(value[index])
                index += 1
            index += 1  # the closing quote (or the end of an unclosed phrase)
            if phrase:
                tokens.append(Token("".join(phrase), phrase=True))
            continue
        start = index
        while index < length and not value[index].isspace():
            index += 1
        tokens.append(Token(value[start:index], phrase=False))
    return tokens


def _fts5(tokens: list[Token], column: str | None) -> str | None:
    parts: list[str] = []
    for position, token in enumerate(tokens):
        words = token.words
        if not words:
            continue
        phrase = '"' + " ".join(words) + '"'
        if _is_prefix(tokens, position):
            phrase += "*"
        parts.append(phrase)
    if not parts:
        return None
    expression = " AND ".join(parts)
    return f"{column} : ({expression})" if column else expression


def _tsquery(tokens: list[Token], column: str | None) -> str | None:
    weight = COLUMNS[column] if column else ""
    parts: list[str] = []
    for position, token in enumerate(tokens):
        words = [w for w in (_TSQUERY_UNSAFE.sub("", word) for word in token.words) if w]
        if not words:
            continue
        prefix = not token.phrase and position == len(tokens) - 1 and len(words) == 1
        marks = ("*" if prefix else "") + weight
        lexemes = [f"'{word}'" + (f":{marks}" if marks else "") for word in words]
        parts.append("(" + " <-> ".join(lexemes) + ")")
    return " & ".join(parts) if parts else None


def _is_prefix(tokens: list[Token], position: int) -> bool:
    """Whether the token at ``position`` also matches as a prefix: the last, one unquoted word."""
    token = tokens[position]
    return position == len(tokens) - 1 and not token.phrase and len(token.words) == 1


def last_word_is_prefix(value: str) -> bool:
    """Whether the last token of ``value`` also matches as a prefix (see :func:`_is_prefix`)."""
    tokens = split_text(value)
    return bool(tokens) and _is_prefix(tokens, len(tokens) - 1)


def blind_words_of(value: str) -> list[str]:
    """The words of ``value`` as the blind index of sealed mail keeps them (all must occur)."""
    return blind_query_words([word for token in split_text(value) for word in token.words])


def fulltext_clause(
    dialect: str,
    value: str,
    column: str | None,
    param: str,
    blind: BlindTerms | None = None,
    owner: int | None = None,
) -> tuple[str, dict[str, str | int]] | None:
    """A SQL condition on ``messages.id`` for the tokens of ``value`` (None: no words).

    ``blind``: :func:`blind_words_of` hashed for the owner's sealed mail, OR-ed with the
    clear index (sealed mail matches phrases as all their words, in any order).
    ``owner`` narrows PostgreSQL's index to that owner's entries (``store.search.pg_match``).
    """
    clear = _clear_clause(dialect, value, column, param, owner)
    return either(dialect, clear, blind, f"{param}_b")


def _clear_clause(
    dialect: str, value: str, column: str | None, param: str, owner: int | None
) -> tuple[str, dict[str, str | int]] | None:
    tokens = split_text(value)
    if dialect == "sqlite":
        expression = _fts5(tokens, column)
        if expression is None:
            return None
        sql = (
            f"messages.id IN (SELECT rowid FROM message_search WHERE message_search MATCH :{param})"
        )
        return sql, {param: expression}
    expression = _tsquery(tokens, column)
    if expression is None:
        return None
    sql, params = pg_match(param, owner, f"{param}_owner")
    return sql, {param: expression, **params}
