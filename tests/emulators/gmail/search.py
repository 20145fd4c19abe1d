"""The subset of Gmail's search language (``q``) the client uses.

Terms are ANDed; a leading ``-`` negates one. Understood:
``in:inbox|sent|spam|trash|drafts|chats|anywhere``, ``label:NAME`` (Gmail
writes spaces and slashes in label names as ``-``; case does not matter),
``is:unread|read|starred|important``, ``category:primary|social|promotions|
updates|forums``, ``after:`` / ``before:`` (``YYYY/MM/DD`` as midnight UTC —
Gmail takes Pacific time, which is why clients send epoch seconds — or epoch
seconds), ``from:`` / ``to:`` / ``subject:`` (substring of that header)
and bare words (substring of the raw message, case-insensitive). Anything
else is a 400, as Gmail answers an invalid query.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from tests.emulators.gmail.errors import invalid_argument
from tests.emulators.gmail.payload import header

IN_LABELS = {
    "inbox": "INBOX",
    "sent": "SENT",
    "spam": "SPAM",
    "trash": "TRASH",
    "drafts": "DRAFT",
    "draft": "DRAFT",
    "chats": "CHAT",
}
IS_LABELS = {"unread": "UNREAD", "starred": "STARRED", "important": "IMPORTANT"}
CATEGORIES = {
    "primary": "CATEGORY_PERSONAL",
    "personal": "CATEGORY_PERSONAL",
    "social": "CATEGORY_SOCIAL",
    "promotions": "CATEGORY_PROMOTIONS",
    "updates": "CATEGORY_UPDATES",
    "forums": "CATEGORY_FORUMS",
}


@dataclass(frozen=True)
class Candidate:
    """What a query looks at: labels, internal date (ms) and the raw bytes."""

    labels: frozenset[str]
    internal_date: int
    raw: bytes


Predicate = Callable[[Candidate], bool]


@dataclass(frozen=True)
class Query:
    """A parsed query: one predicate, and whether it names spam or trash itself."""

    matches: Predicate
    names_spam_or_trash: bool


def _date_ms(value: str) -> int:
    if value.isdigit():
        return int(value) * 1000
    match = re.fullmatch(r"(\d{4})[/-](\d{1,2})[/-](\d{1,2})", value)
    if match is None:
        raise invalid_argument("Invalid query")
    year, month, day = (int(group) for group in match.groups())
    return int(datetime(year, month, day, tzinfo=UTC).timestamp() * 1000)


def _label_key(name: str) -> str:
    return re.sub(r"[\s/]+", "-", name.strip()).casefold()


def _term(key: str, value: str, label_names: Mapping[str, str]) -> Predicate:
    value_lower = value.casefold()
    if key == "in":
        if value_lower == "anywhere":
            return lambda c: True
        label = IN_LABELS.get(value_lower)
        if label is None:
            raise invalid_argument("Invalid query")
        return lambda c: label in c.labels
    if key == "is":
        if value_lower == "read":
            return lambda c: "UNREAD" not in c.labels
        label = IS_LABELS.get(value_lower)
        if label is None:
            raise invalid_argument("Invalid query")
        return lambda c: label in c.labels
    if key == "category":
        label = CATEGORIES.get(value_lower)
        if label is None:
            raise invalid_argument("Invalid query")
        return lambda c: label in c.labels
    if key == "label":
        wanted = {
            label_id
            for label_id, name in label_names.items()
            if _label_key(name) == _label_key(value) or label_id.casefold() == value_lower
        }
        return lambda c: bool(wanted & c.labels)
    if key == "after":
        after = _date_ms(value)
        return lambda c: c.internal_date >= after
    if key == "before":
        before = _date_ms(value)
        return lambda c: c.internal_date < before
    if key in ("from", "to", "subject"):
        name = key.capitalize()
        return lambda c: value_lower in header(c.raw, name).casefold()
    raise invalid_argument("Invalid query")


def parse_query(q: str, label_names: Mapping[str, str]) -> Query:
    """Parse ``q``; ``label_names`` maps label ids to names (for ``label:``)."""
    try:
        words = shlex.split(q)
    except ValueError:
        raise invalid_argument("Invalid query") from None
    predicates: list[Predicate] = []
    names_spam_or_trash = False
    for word in words:
        negate = word.startswith("-") and len(word) > 1
        text = word[1:] if negate else word
        key, sep, value = text.partition(":")
        if sep and value:
            predicate = _term(key.casefold(), value, label_names)
            if key.casefold() == "in" and value.casefold() in ("spam", "trash", "anywhere"):
                names_spam_or_trash = True
        else:
            needle = text.casefold().encode()
            predicate = _contains(needle)
        predicates.append(_negated(predicate) if negate else predicate)
    return Query(lambda c: all(p(c) for p in predicates), names_spam_or_trash)


def _contains(needle: bytes) -> Predicate:
    return lambda c: needle in c.raw.lower()


def _negated(predicate: Predicate) -> Predicate:
    return lambda c: not predicate(c)
