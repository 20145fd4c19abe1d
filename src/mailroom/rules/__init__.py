"""The owner's rules: filters stored in the database, matched in SQL after threading.

The names below are imported on first use, so that a read command that needs
only the listing (``rules.listing``) does not load the engine, the label
operations or SQLAlchemy.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mailroom.rules.engine import RulesOutcome, apply_rules
    from mailroom.rules.listing import StoredRule, list_rules
    from mailroom.rules.model import RuleSpec, parse_rule
    from mailroom.rules.service import add_rule, remove_rule

# name -> the module that defines it
_HOMES = {
    "RuleSpec": "model",
    "RulesOutcome": "engine",
    "StoredRule": "listing",
    "add_rule": "service",
    "apply_rules": "engine",
    "list_rules": "listing",
    "parse_rule": "model",
    "remove_rule": "service",
}

__all__ = [
    "RuleSpec",
    "RulesOutcome",
    "StoredRule",
    "add_rule",
    "apply_rules",
    "list_rules",
    "parse_rule",
    "remove_rule",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'mailroom.rules' has no attribute {name!r}")
    return getattr(import_module(f"mailroom.rules.{_HOMES[name]}"), name)
