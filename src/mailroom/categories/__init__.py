"""Inbox tabs: deciding a message's category from stored data only.

The tab names come from ``mailroom.categories.tabs``; the cascade's names are
imported on first use, so a read command that needs only the names does not
load the cascade.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mailroom.categories.tabs import CATEGORIES

if TYPE_CHECKING:
    from mailroom.categories.cascade import CategoryDecision, CategoryFacts, categorize

__all__ = ["CATEGORIES", "CategoryDecision", "CategoryFacts", "categorize"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'mailroom.categories' has no attribute {name!r}")
    from mailroom.categories import cascade

    return getattr(cascade, name)
