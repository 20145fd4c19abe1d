"""Sort comparators of a Foo/query (RFC 8620 §5.5) and the collations they compare text under.

A ``sort`` argument is a list of comparators, each an object with a
``property``, ``isAscending`` (default true) and ``collation``; null or an
empty list is the data type's default order. A property the type cannot
sort by, or a collation not in :data:`COLLATIONS`, is ``unsupportedSort``; a
member of the wrong type is ``invalidArguments``. Other members are ignored,
not refused: RFC 8620 §5.5 lets a data type add comparator properties, and
jmapc puts ``anchorOffset``, ``position`` and ``calculateTotal`` into every
comparator it sends. The one such member read here is Email's ``keyword``
(RFC 8621 §4.4.2), required by the keyword sorts and refused by the others
of a type that has keyword sorts.

The collations (RFC 4790 names, all three advertised in the session's
``collationAlgorithms``): ``i;ascii-casemap`` (only A-Z fold),
``i;unicode-casemap`` (the default: Unicode case folding and compatibility
decomposition, RFC 5051) and ``i;octet`` (exact).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection
from dataclasses import dataclass

from mailroom.jmap.errors import MethodError, invalid_arguments
from mailroom.labels.keywords import parse_keyword

__all__ = [
    "COLLATIONS",
    "DEFAULT_COLLATION",
    "Comparator",
    "SortRules",
    "fold",
    "keyword_argument",
    "parse_sort",
]

COLLATIONS = ("i;ascii-casemap", "i;unicode-casemap", "i;octet")
DEFAULT_COLLATION = "i;unicode-casemap"

_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


@dataclass(frozen=True, slots=True)
class Comparator:
    """One validated comparator."""

    property: str
    ascending: bool
    collation: str = DEFAULT_COLLATION
    keyword: str | None = None


@dataclass(frozen=True, slots=True)
class SortRules:
    """What one data type's /query can sort by, and its order when no sort is given."""

    properties: Collection[str]
    default: tuple[Comparator, ...]
    keyword_sorts: frozenset[str] = frozenset()


def fold(text: str, collation: str) -> str:
    """``text`` mapped so that plain string order is the collation's order."""
    if collation == "i;ascii-casemap":
        return text.translate(_ASCII_UPPER)
    if collation == "i;unicode-casemap":
        return unicodedata.normalize("NFKD", text.casefold())
    return text


def keyword_argument(value: object) -> str:
    """A keyword argument (RFC 8621 §4.1.1), lower-cased; anything else is ``invalidArguments``."""
    keyword = parse_keyword(value)
    if keyword is None:
        raise invalid_arguments(
            'A keyword is 1-255 printable ASCII characters without spaces or ( ) { ] % * " \\.'
        )
    return keyword


def parse_sort(sort: object, rules: SortRules) -> list[Comparator]:
    """The comparators of a ``sort`` argument; null or none given is ``rules.default``."""
    if sort is None:
        return list(rules.default)
    if not isinstance(sort, list):
        raise invalid_arguments("sort must be a list of comparators.")
    if not sort:
        return list(rules.default)
    return [_comparator(item, rules) for item in sort]


def _comparator(item: object, rules: SortRules) -> Comparator:
    if not isinstance(item, dict) or not isinstance(item.get("property"), str):
        raise invalid_arguments("A comparator is an object with a property.")
    name = item["property"]
    if name not in rules.properties:
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
    if name in rules.keyword_sorts:
        if "keyword" not in item:
            raise invalid_arguments(f"Sorting by {name} needs a keyword.")
        keyword = keyword_argument(item["keyword"])
    elif rules.keyword_sorts and "keyword" in item:
        raise invalid_arguments(f"Sorting by {name} takes no keyword.")
    return Comparator(name, ascending, collation, keyword)
