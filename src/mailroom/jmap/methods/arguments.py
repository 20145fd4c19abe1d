"""The standard arguments of each kind of method (RFC 8620 §5), for the method table.

A method refuses an argument it does not take (``invalidArguments``); these
sets are what ``Foo/get``, ``/changes``, ``/query``, ``/queryChanges`` and
``/set`` take, to which a type adds its own.
"""

from __future__ import annotations

__all__ = ["CHANGES", "GET", "QUERY", "QUERY_CHANGES", "SET"]

GET = frozenset({"accountId", "ids", "properties"})
CHANGES = frozenset({"accountId", "sinceState", "maxChanges"})
QUERY = frozenset(
    {"accountId", "filter", "sort", "position", "anchor", "anchorOffset", "limit", "calculateTotal"}
)
QUERY_CHANGES = frozenset(
    {"accountId", "filter", "sort", "sinceQueryState", "maxChanges", "upToId", "calculateTotal"}
)
SET = frozenset({"accountId", "ifInState", "create", "update", "destroy"})
