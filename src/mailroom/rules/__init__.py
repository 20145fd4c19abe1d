"""The owner's rules: filters stored in the database, matched in SQL after threading."""

from mailroom.rules.engine import RulesOutcome, apply_rules
from mailroom.rules.model import RuleSpec, parse_rule
from mailroom.rules.service import StoredRule, add_rule, list_rules, remove_rule

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
