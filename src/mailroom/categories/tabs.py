"""The inbox tabs, by name: the closed set every part of mailroom agrees on."""

from __future__ import annotations

PRIMARY = "primary"
CATEGORIES = (PRIMARY, "promotions", "social", "updates", "forums")
