"""Inbox tabs: deciding a message's category from stored data only."""

from mailroom.categories.cascade import (
    CATEGORIES,
    CategoryDecision,
    CategoryFacts,
    categorize,
)

__all__ = ["CATEGORIES", "CategoryDecision", "CategoryFacts", "categorize"]
