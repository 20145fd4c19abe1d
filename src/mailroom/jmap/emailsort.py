"""``Email/query`` sort comparators (RFC 8620 §5.5, RFC 8621 §4.4.2) and their keys.

A sort is a list of comparators, applied in order. Every RFC 8621 sort
property is supported: ``receivedAt``, ``size``, ``sentAt``, ``from`` and
``to`` (the name of the first address, or its email when the name is
empty), ``subject`` (the RFC 5256 base subject), and ``hasKeyword``,
``allInThreadHaveKeyword``, ``someInThreadHaveKeyword`` (false before true
when ascending; the ``keyword`` is required). Text compares under the
comparator's ``collation``: ``i;ascii-casemap`` (only A-Z fold),
``i;unicode-casemap`` (the default: Unicode case folding and compatibility
decomposition, RFC 5051) or ``i;octet`` (exact). A missing ``sentAt``
sorts before every date. Emails equal under every comparator are ordered
by id, in the direction of the last comparator.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from mailroom.jmap.basesubject import base_subject
from mailroom.jmap.errors import MethodError, invalid_arguments

SORT_PROPERTIES = (
    "receivedAt",
    "size",
    "from",
    "to",
    "subject",
    "sentAt",
    "hasKeyword",
    "allInThreadHaveKeyword",
    "someInThreadHaveKeyword",
)
KEYWORD_SORTS = frozenset({"hasKeyword", "allInThreadHaveKeyword", "someInThreadHaveKeyword"})
TEXT_SORTS = frozenset({"from", "to", "subject"})
COLLATIONS = ("i;ascii-casemap", "i;unicode-casemap", "i;octet")
DEFAULT_COLLATION = "i;unicode-casemap"
# Properties whose value never changes for an email (RFC 8620 §5.6 upToId).
IMMUTABLE_SORTS = frozenset({"receivedAt", "size", "from", "to", "subject", "sentAt"})

_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


@dataclass(frozen=True, slots=True)
class Comparator:
    """One validated comparator."""

    property: str
    ascending: bool
    collation: str = DEFAULT_COLLATION
    keyword: str | None = None


def fold(text: str, collation: str) -> str:
    """``text`` mapped so that plain string order is the collation's order."""
    if collation == "i;ascii-casemap":
        return text.translate(_ASCII_UPPER)
    if collation == "i;unicode-casemap":
        return unicodedata.normalize("NFKD", text.casefold())
    return text


@lru_cache(maxsize=65_536)
def subject_key(subject: str, collation: str) -> str:
    """The folded base subject (kept across queries: the same subjects sort again and again)."""
    return fold(base_subject(subject), collation)


def parse_sort(sort: object, check_keyword: Callable[[object], str]) -> list[Comparator]:
    """The comparators of a ``sort`` argument; none given means newest first."""
    if sort is None:
        return [Comparator("receivedAt", ascending=False)]
    if not isinstance(sort, list):
        raise invalid_arguments("sort must be a list of comparators.")
    if not sort:
        return [Comparator("receivedAt", ascending=False)]
    return [_comparator(item, check_keyword) for item in sort]


def _comparator(item: object, check_keyword: Callable[[object], str]) -> Comparator:
    if not isinstance(item, dict) or not isinstance(item.get("property"), str):
        raise invalid_arguments("A comparator is an object with a property.")
    # Other members are ignored, not refused: RFC 8620 section 5.5 lets a data type add
    # comparator properties, and jmapc puts anchorOffset, position and calculateTotal
    # into every comparator it sends.
    name = item["property"]
    if name not in SORT_PROPERTIES:
        raise MethodError("unsupportedSort", f"Sorting by {name!r} is not supported.")
    ascending = item.get("isAscending", True)
    if not isinstance(ascending, bool):
        raise invalid_arguments("isAscending must be true or false.")
    collation = item.get("collation", DEFAULT_COLLATION)
    if not isinstance(collation, str):
        raise invalid_arguments("collation must be a string.")
    if collation not in COLLATIONS:
        raise MethodError(
            "unsupportedSort",
            f"The collation {collation!r} is not supported (use one of {', '.join(COLLATIONS)}).",
        )
    keyword: str | None = None
    if name in KEYWORD_SORTS:
        if "keyword" not in item:
            raise invalid_arguments(f"Sorting by {name} needs a keyword.")
        keyword = check_keyword(item["keyword"])
    elif "keyword" in item:
        raise invalid_arguments(f"Sorting by {name} takes no keyword.")
    return Comparator(name, ascending, collation, keyword)


def newest_first_only(comparators: Sequence[Comparator]) -> bool | None:
    """For a sort by ``receivedAt`` alone: whether it is ascending; otherwise None."""
    if len(comparators) == 1 and comparators[0].property == "receivedAt":
        return comparators[0].ascending
    return None


def _first_address(addresses: object) -> str:
    if isinstance(addresses, list) and addresses:
        first = addresses[0]
        if isinstance(first, list) and len(first) == 2:
            name, email = first
            return str(name or email or "")
    return ""


def _raw_text(name: str, row: Any) -> str:
    if name == "from":
        return str(row.from_name or row.from_email or "")
    if name == "to":
        return _first_address((row.recipients or {}).get("to"))
    return str(row.subject or "")


def sort_keys(comparator: Comparator, index: int, rows: Sequence[Any]) -> list[Any]:
    """The sort key of every row for one comparator (``k<index>`` holds keyword values)."""
    name = comparator.property
    if name in TEXT_SORTS:
        raw = [_raw_text(name, row) for row in rows]
        key = subject_key if name == "subject" else fold
        folded = {value: key(value, comparator.collation) for value in set(raw)}
        return [folded[value] for value in raw]
    if name in KEYWORD_SORTS:
        column = f"k{index}"
        return [bool(getattr(row, column)) for row in rows]
    if name == "sentAt":
        return [(row.sent_at is not None, row.sent_at) for row in rows]
    if name == "size":
        return [row.size for row in rows]
    return [row.received_at for row in rows]


def order_rows(rows: Sequence[Any], comparators: Sequence[Comparator]) -> list[Any]:
    """``rows`` in the order of the comparators (stable, ties by id).

    One stable sort of row positions per comparator, last comparator first,
    each over a precomputed key list (every distinct text is folded once).
    """
    ids = [row.id for row in rows]
    order = sorted(range(len(rows)), key=ids.__getitem__, reverse=not comparators[-1].ascending)
    for index in range(len(comparators) - 1, -1, -1):
        comparator = comparators[index]
        keys = sort_keys(comparator, index, rows)
        order.sort(key=keys.__getitem__, reverse=not comparator.ascending)
    return [rows[position] for position in order]
