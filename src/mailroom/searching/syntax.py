"""The search syntax: query text into a tree of terms.

What people type into Gmail's search box::

    invoice from:ann@example.org -is:read
    "quarterly report" (subject:draft OR label:work) after:2024/01/01
    {alice bob} has:attachment older_than:2w

* Words must all occur; ``"a quoted phrase"`` occurs as it is (``\\"`` and
  ``\\\\`` stand for the characters inside it).
* ``name:value`` narrows the search; the value may be quoted
  (``from:"Ann Lee"``). Names are :data:`OPERATORS`, in any case; a word
  with another name before a colon (``re:lunch``, ``http://x``) is a word.
* ``-term`` or ``-(…)`` leaves out what matches; ``a OR b`` (upper case,
  binding tighter than the implicit AND) and ``{a b}`` match either;
  parentheses group; ``AND`` may be written and means nothing more.

:func:`parse` returns the tree, or None when the query names nothing to
search for (empty, or only punctuation). Every mistake is a
:class:`QueryError` whose text is one sentence for the person who typed it.
Bounds keep one query cheap: :data:`MAX_LENGTH` characters,
:data:`MAX_TERMS` terms, :data:`MAX_NESTING` levels of brackets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

from mailroom.errors import MailroomError
from mailroom.store.search import query_terms

MAX_LENGTH = 1000  # characters
MAX_TERMS = 50  # terms (each free-text group, operator or phrase counts one)
MAX_NESTING = 5  # levels of ( ) and { }

ADDRESS_FIELDS = ("from", "to", "cc", "bcc")
IS_VALUES = ("unread", "read", "starred", "snoozed")
HAS_VALUES = ("attachment",)
IN_VALUES = ("inbox", "starred", "snoozed", "sent", "drafts", "archive", "spam", "trash")
IN_ANYWHERE = "anywhere"
DATE_FIELDS = ("before", "after")
AGE_FIELDS = ("older_than", "newer_than")
SIZE_FIELDS = ("larger", "smaller")
OPERATORS = frozenset(
    {*ADDRESS_FIELDS, "subject", "label", "is", "has", "in"}
    | {*DATE_FIELDS, *AGE_FIELDS, *SIZE_FIELDS}
)

_DAY = re.compile(r"(\d{4})[-/](\d{1,2})[-/](\d{1,2})")
_AGE = re.compile(r"([1-9]\d{0,3})([dwmy])")
_SIZE = re.compile(r"(\d{1,9})(k|kb|m|mb)?", re.IGNORECASE)  # under 2^53 bytes
_SIZE_UNITS = {"": 1, "k": 1024, "kb": 1024, "m": 1024 * 1024, "mb": 1024 * 1024}
_STOPS = '(){}"'  # a word ends at white space or one of these


class QueryError(MailroomError):
    """The search cannot be understood; the text says what to change."""


@dataclass(frozen=True, slots=True)
class Term:
    """A word, a phrase, or ``field:value`` (``field`` None: free text)."""

    field: str | None
    value: str
    phrase: bool = False  # written in quotes


@dataclass(frozen=True, slots=True)
class Not:
    """What matches ``node`` is left out."""

    node: Node


@dataclass(frozen=True, slots=True)
class All:
    """Every one of ``nodes`` must match (two or more)."""

    nodes: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Either:
    """At least one of ``nodes`` must match (two or more)."""

    nodes: tuple[Node, ...]


Node = Term | Not | All | Either


def day_of(value: str) -> date | None:
    """The calendar day of ``2024-03-01`` or ``2024/3/1``, or None if it is not one."""
    found = _DAY.fullmatch(value)
    if found is None:
        return None
    try:
        return date(*(int(part) for part in found.groups()))
    except ValueError:
        return None


def age_of(value: str) -> tuple[int, str] | None:
    """``(3, "d")`` for ``3d`` (days, weeks, months, years), or None."""
    found = _AGE.fullmatch(value.lower())
    return (int(found.group(1)), found.group(2)) if found else None


def size_of(value: str) -> int | None:
    """Bytes of ``500``, ``20k`` or ``5M`` (KB and MB of 1024), or None."""
    found = _SIZE.fullmatch(value)
    if found is None:
        return None
    return int(found.group(1)) * _SIZE_UNITS[(found.group(2) or "").lower()]


def _choice(field: str, value: str, allowed: tuple[str, ...]) -> str:
    if value.lower() in allowed:
        return value.lower()
    listed = ", ".join(allowed[:-1]) + " or " + allowed[-1] if len(allowed) > 1 else allowed[0]
    raise QueryError(f"{field}: takes {listed}, not {value!r}.")


def checked(field: str, value: str) -> str:
    """The value of ``field:value`` as the filter reads it; QueryError if it makes no sense."""
    if field == "is":
        return _choice(field, value, IS_VALUES)
    if field == "has":
        return _choice(field, "attachment" if value.lower() == "attachments" else value, HAS_VALUES)
    if field == "in":
        return _choice(field, value, (*IN_VALUES, IN_ANYWHERE))
    if field in DATE_FIELDS and day_of(value) is None:
        raise QueryError(f"{field}: takes a date like 2024-03-01 or 2024/03/01, not {value!r}.")
    if field in AGE_FIELDS and age_of(value) is None:
        raise QueryError(f"{field}: takes an age like 3d, 2w, 1m or 1y, not {value!r}.")
    if field in SIZE_FIELDS and size_of(value) is None:
        raise QueryError(f"{field}: takes a size in bytes like 500, 20k or 5M, not {value!r}.")
    return value


# -- tokens ---------------------------------------------------------------------

_OR, _AND, _NOT = "OR", "AND", "-"
Token = Term | str  # a term, or one of ( ) { } OR AND -


def _quoted(text: str, start: int) -> tuple[str, int]:
    """The phrase whose opening quote is at ``start``, and the index after its closing one."""
    chars: list[str] = []
    index = start + 1
    while index < len(text):
        char = text[index]
        if char == '"':
            return "".join(chars), index + 1
        if char == "\\" and index + 1 < len(text) and text[index + 1] in '"\\':
            index += 1
            char = text[index]
        chars.append(char)
        index += 1
    raise QueryError('A quote (") is not closed; add the closing one or leave the quote out.')


def _word_end(text: str, start: int) -> int:
    index = start
    while index < len(text) and not text[index].isspace() and text[index] not in _STOPS:
        index += 1
    return index


def _operator_term(text: str, word: str, end: int) -> tuple[Term, int] | None:
    """``field:value`` starting with ``word`` (which ends at ``end``), if the name is known."""
    name, colon, value = word.partition(":")
    if not colon or name.lower() not in OPERATORS:
        return None
    field = name.lower()
    if value:
        return Term(field, checked(field, value)), end
    if end < len(text) and text[end] == '"':
        phrase, end = _quoted(text, end)
        if phrase.strip():
            return Term(field, checked(field, phrase.strip()), phrase=True), end
    example = "from:ann@example.org" if field in ADDRESS_FIELDS else f"{field}:something"
    raise QueryError(f"{field}: needs a value right after the colon, like {example}.")


def tokens(text: str) -> list[Token]:
    """The tokens of a query, in order."""
    found: list[Token] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char.isspace():
            index += 1
        elif char in "(){}":
            found.append(char)
            index += 1
        elif char == "-" and index + 1 < len(text) and not text[index + 1].isspace():
            found.append(_NOT)
            index += 1
        elif char == '"':
            phrase, index = _quoted(text, index)
            found.append(Term(None, phrase, phrase=True))
        else:
            end = _word_end(text, index)
            word = text[index:end]
            operator = _operator_term(text, word, end)
            if operator is not None:
                term, index = operator
                found.append(term)
                continue
            found.append(word if word in (_OR, _AND) else Term(None, word))
            index = end
    return found


# -- the tree -------------------------------------------------------------------

_CLOSING = {"(": ")", "{": "}"}


class _Parser:
    """Recursive descent: all := either*; either := unary (OR unary)*; unary := -* atom."""

    def __init__(self, found: list[Token]) -> None:
        self.tokens = found
        self.index = 0
        self.terms = 0

    def peek(self) -> Token | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take(self) -> Token | None:
        token = self.peek()
        self.index += 1
        return token

    def query(self) -> Node | None:
        node = self.all(0)
        stray = self.peek()
        if stray is not None:  # only a closing bracket stops `all` early
            raise QueryError(f"There is a {stray} without its opening bracket.")
        return node

    def all(self, depth: int) -> Node | None:
        parts: list[Node | None] = []
        while self.peek() not in (None, ")", "}"):
            if self.peek() == _AND:
                self.take()
                continue
            parts.append(self.either(depth))
        return _combine(All, parts)

    def either(self, depth: int) -> Node | None:
        if self.peek() == _OR:
            raise _or_alone()
        options = [self.unary(depth)]
        while self.peek() == _OR:
            self.take()
            if self.peek() in (None, _OR, _AND, ")", "}"):
                raise _or_alone()
            options.append(self.unary(depth))
        return _combine(Either, options)

    def unary(self, depth: int) -> Node | None:
        negated = False
        while self.peek() == _NOT:
            self.take()
            negated = not negated
        node = self.atom(depth)
        return Not(node) if negated and node is not None else node

    def atom(self, depth: int) -> Node | None:
        token = self.take()
        if isinstance(token, Term):
            return self.term(token)
        if token == "(" or token == "{":
            if depth >= MAX_NESTING:
                raise QueryError(
                    f"The search nests brackets more than {MAX_NESTING} deep; simplify it."
                )
            node = self.all(depth + 1) if token == "(" else self.braces(depth + 1)
            if self.take() != _CLOSING[token]:
                raise QueryError(f"A {token} is not closed; add the {_CLOSING[token]}.")
            return node
        if token in (None, _OR, _AND):  # `-` before OR, AND or the end
            raise QueryError("A - must stand right before what to leave out, like -is:read.")
        raise QueryError(f"There is a {token} without its opening bracket.")

    def braces(self, depth: int) -> Node | None:
        """``{a b c}``: any of them."""
        parts: list[Node | None] = []
        while self.peek() not in (None, ")", "}"):
            if self.peek() in (_OR, _AND):
                self.take()
                continue
            parts.append(self.unary(depth))
        return _combine(Either, parts)

    def term(self, term: Term) -> Term | None:
        if term.field is None and not query_terms(term.value):
            return None  # punctuation alone: nothing the index could match
        self.terms += 1
        if self.terms > MAX_TERMS:
            raise QueryError(f"The search has more than {MAX_TERMS} terms; use fewer.")
        return term


def _or_alone() -> QueryError:
    return QueryError("OR needs a term on each side, like invoice OR receipt.")


def _combine(kind: type[All] | type[Either], parts: list[Node | None]) -> Node | None:
    nodes = tuple(part for part in parts if part is not None)
    if not nodes:
        return None
    return nodes[0] if len(nodes) == 1 else kind(nodes)


def parse(text: str) -> Node | None:
    """The tree of a query (None: nothing to search for); QueryError in plain words."""
    if len(text) > MAX_LENGTH:
        raise QueryError(f"The search is longer than {MAX_LENGTH} characters; shorten it.")
    return _Parser(tokens(text)).query()
