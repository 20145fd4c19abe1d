"""``Email/query`` sort comparators (RFC 8620 §5.5, RFC 8621 §4.4.2) and their keys.

A sort is a list of comparators, applied in order. Every RFC 8621 sort
property is supported: ``receivedAt``, ``size``, ``sentAt``, ``from`` and
``to`` (the name of the first address, or its email when the name is
empty), ``subject`` (the RFC 5256 base subject), and ``hasKeyword``,
``allInThreadHaveKeyword``, ``someInThreadHaveKeyword`` (false before true
when ascending; the ``keyword`` is required). Text compares under the
comparator's ``collation`` (:mod:`mailroom.jmap.comparators`, which also
checks each comparator). A missing ``sentAt`` sorts before every date.
Emails equal under every comparator are ordered by id, in the direction of
the last comparator.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from mailroom.jmap.basesubject import base_subject
from mailroom.jmap.comparators import Comparator, SortRules, fold

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
# Properties whose value never changes for an email (RFC 8620 §5.6 upToId).
IMMUTABLE_SORTS = frozenset({"receivedAt", "size", "from", "to", "subject", "sentAt"})
# What Email/query sorts by; no sort given means newest first.
EMAIL_SORTS = SortRules(
    SORT_PROPERTIES, (Comparator("receivedAt", ascending=False),), KEYWORD_SORTS
)


@lru_cache(maxsize=65_536)
def subject_key(subject: str, collation: str) -> str:
    """The folded base subject (kept across queries: the same subjects sort again and again)."""
    return fold(base_subject(subject), collation)


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
