"""A rule of the owner: conditions matched in SQL, actions applied to whole threads.

Stored in the ``rules`` table: ``conditions`` is a JSON object, ``actions`` a
JSON list, so a rule reads the same in the database, in ``mailroom rules
list`` and here::

    conditions  {"from": "news@shop.example", "subject": "invoice", "text": "paid"}
    actions     [{"type": "label", "label": "Receipts"}, {"type": "archive"},
                 {"type": "category", "category": "updates"}]

Conditions (all given must hold; text comparisons ignore case):

============ ================================================================
``from``     the From address or name contains the value
``to``       a To or Cc address or name contains the value
``subject``  the subject contains the value
``list_id``  the List-Id header contains the value
``text``     full-text search over subject, participants and body: every
             word must occur, the last also as a prefix (``store.search``)
============ ================================================================

Actions: ``label`` (a label path, created when missing), ``archive``,
``trash``, ``mark_read``, ``star`` and ``category`` (file into a tab,
stored in ``messages.rule_category``; applied only when the sender's
authentication passed, see ``rules.authentication``).

Validation is plain Python (no pydantic: ``mailroom rules list`` validates every
stored rule again, and importing pydantic cost it more than the rest of the
command); every failure is a ``RuleError`` with one plain sentence naming the
first problem, in the order name, conditions, actions.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, fields
from typing import Any

from mailroom.categories.tabs import CATEGORIES
from mailroom.errors import RuleError
from mailroom.store.search import query_terms

ACTION_TYPES = ("label", "archive", "trash", "mark_read", "star", "category")
MAX_VALUE = 500
MAX_NAME = 200

# Stored condition key -> field of Conditions ("from_" is accepted for "from" too).
_CONDITION_KEYS = {
    "from": "from_",
    "to": "to",
    "subject": "subject",
    "list_id": "list_id",
    "text": "text",
}


class _Invalid(ValueError):
    """One problem of a rule, in words (parse_rule makes it a RuleError sentence)."""


@dataclass(frozen=True, slots=True)
class Conditions:
    """What a message must look like for the rule to apply (all given conditions hold)."""

    from_: str | None = None
    to: str | None = None
    subject: str | None = None
    list_id: str | None = None
    text: str | None = None

    def as_json(self) -> dict[str, str]:
        """The stored JSON object (only the conditions that are set)."""
        return {
            key: value
            for key, attribute in _CONDITION_KEYS.items()
            if (value := getattr(self, attribute)) is not None
        }


@dataclass(frozen=True, slots=True)
class Action:
    """One thing the rule does."""

    type: str
    label: str | None = None
    category: str | None = None

    def as_json(self) -> dict[str, str]:
        """The stored JSON object of this action."""
        return {
            field.name: value
            for field in fields(self)
            if (value := getattr(self, field.name)) is not None
        }

    def describe(self) -> str:
        """A short human description (``label Receipts``, ``archive``)."""
        argument = self.label or self.category
        return (
            f"{self.type.replace('_', ' ')} {argument}" if argument else self.type.replace("_", " ")
        )


@dataclass(frozen=True, slots=True)
class RuleSpec:
    """A validated rule: a name, its conditions and its actions."""

    name: str
    conditions: Conditions
    actions: tuple[Action, ...]

    def actions_json(self) -> list[dict[str, str]]:
        """The stored JSON list of actions."""
        return [action.as_json() for action in self.actions]

    def describe(self) -> str:
        """One line: ``if from contains x and subject contains y: label Z, archive``."""
        parts = [
            f"{name.replace('_', ' ')} {'matches' if name == 'text' else 'contains'} {value!r}"
            for name, value in self.conditions.as_json().items()
        ]
        return "if " + " and ".join(parts) + ": " + ", ".join(a.describe() for a in self.actions)


def _text(value: object, where: str, limit: int = MAX_VALUE) -> str | None:
    """A text value with its runs of white space made one space; None when nothing is left."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise _Invalid(f"the {where} must be text")
    cleaned = " ".join(value.split())
    if len(cleaned) > limit:
        raise _Invalid(f"the {where} is too long")
    return cleaned or None


def _unknown(values: Mapping[str, Any], known: Collection[str], where: str) -> None:
    for key in values:
        if key not in known:
            raise _Invalid(f"{where}.{key} is not a rule condition or action")


def _conditions(values: object) -> Conditions:
    if not isinstance(values, Mapping):
        raise _Invalid("the conditions must be an object (from, to, subject, list_id, text)")
    found: dict[str, str | None] = {}
    for key, attribute in _CONDITION_KEYS.items():
        value = values.get(key, values.get("from_")) if key == "from" else values.get(key)
        found[attribute] = _text(value, f"conditions.{key}")
    if found["text"] is not None and not query_terms(found["text"]):
        raise _Invalid("the text condition has no word to search for")
    _unknown(values, {*_CONDITION_KEYS, "from_"}, "conditions")
    if not any(found.values()):
        raise _Invalid("a rule needs at least one condition (from, to, subject, list id, text)")
    return Conditions(**found)


def _label(value: object) -> str | None:
    if isinstance(value, str):  # a path: parts trimmed, empty parts dropped
        value = "/".join(part.strip() for part in value.split("/") if part.strip()) or None
    return _text(value, "actions.label")


def _category(value: object) -> str | None:
    if value is None:
        return None
    name = str(value).strip().lower()
    if name not in CATEGORIES:
        raise _Invalid(f"{value!r} is not a tab; use one of {', '.join(CATEGORIES)}")
    return name


def _action(values: object) -> Action:
    if not isinstance(values, Mapping):
        raise _Invalid("each action must be an object with a type")
    kind = values.get("type")
    if kind not in ACTION_TYPES:
        raise _Invalid(f"the action type must be one of {', '.join(ACTION_TYPES)}")
    label, category = _label(values.get("label")), _category(values.get("category"))
    _unknown(values, ("type", "label", "category"), "actions")
    if kind == "label" and not label:
        raise _Invalid("the label action needs a label name")
    if kind == "category" and not category:
        raise _Invalid("the category action needs a tab")
    if kind != "label" and label is not None:
        raise _Invalid(f"the {kind} action takes no label")
    if kind != "category" and category is not None:
        raise _Invalid(f"the {kind} action takes no tab")
    return Action(str(kind), label, category)


def _actions(values: object) -> tuple[Action, ...]:
    if not isinstance(values, list | tuple):
        raise _Invalid("the actions must be a list")
    if not values:
        raise _Invalid(
            "a rule needs at least one action (label, archive, trash, mark read, star, category)"
        )
    actions = tuple(_action(value) for value in values)
    kinds = [action.type for action in actions]
    repeated = {kind for kind in kinds if kinds.count(kind) > 1 and kind != "label"}
    if repeated:
        raise _Invalid(f"the {sorted(repeated)[0]} action is given twice")
    if "archive" in kinds and "trash" in kinds:
        raise _Invalid("a rule cannot both archive and trash; trash already leaves the inbox")
    return actions


def parse_rule(name: str, conditions: dict[str, Any], actions: list[dict[str, Any]]) -> RuleSpec:
    """Validate a rule; raises RuleError with one plain sentence when it is not valid."""
    try:
        cleaned = _text(name, "name", MAX_NAME)
        if cleaned is None:
            raise _Invalid("a rule needs a name")
        return RuleSpec(cleaned, _conditions(conditions), _actions(actions))
    except _Invalid as exc:
        raise RuleError(f"This rule is invalid: {exc}.") from None
