"""The inbox tabs, by name: the closed set every part of mailroom agrees on."""

from __future__ import annotations

PRIMARY = "primary"
CATEGORIES = (PRIMARY, "promotions", "social", "updates", "forums")
# The tab of a thread whose only messages are held for the assistant's verdict
# (mailroom.assistant.hold): not a tab, so no tab query lists it until it is released.
HELD = "held"
