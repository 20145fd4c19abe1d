"""Inbox tabs: deciding a message's category from stored data only.

The names below are imported on first use: ``mailroom.categories.tabs`` (the
tab names) must not load the cascade for a read command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mailroom.categories.cascade import (
        CATEGORIES,
        CategoryDecision,
        CategoryFacts,
        categorize,
    )

__all__ = ["CATEGORIES", "CategoryDecision", "CategoryFacts", "categorize"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'mailroom.categories' has no attribute {name!r}")
    from mailroom.categories import cascade

    return getattr(cascade, name)
