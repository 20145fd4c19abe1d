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

Validation is pydantic's; every failure becomes a ``RuleError`` with one
plain sentence.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from mailroom.categories.tabs import CATEGORIES
from mailroom.errors import RuleError
from mailroom.store.search import query_terms

ACTION_TYPES = ("label", "archive", "trash", "mark_read", "star", "category")
MAX_VALUE = 500


def _clean(value: object) -> object:
    if isinstance(value, str):
        value = " ".join(value.split())
        return value or None
    return value


class Conditions(BaseModel):
    """What a message must look like for the rule to apply (all given conditions hold)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    from_: str | None = Field(default=None, alias="from", max_length=MAX_VALUE)
    to: str | None = Field(default=None, max_length=MAX_VALUE)
    subject: str | None = Field(default=None, max_length=MAX_VALUE)
    list_id: str | None = Field(default=None, max_length=MAX_VALUE)
    text: str | None = Field(default=None, max_length=MAX_VALUE)

    @field_validator("from_", "to", "subject", "list_id", "text", mode="before")
    @classmethod
    def _strip(cls, value: object) -> object:
        return _clean(value)

    @field_validator("text")
    @classmethod
    def _searchable(cls, value: str | None) -> str | None:
        if value is not None and not query_terms(value):
            raise ValueError("the text condition has no word to search for")
        return value

    @model_validator(mode="after")
    def _at_least_one(self) -> Conditions:
        if not self.as_json():
            raise ValueError(
                "a rule needs at least one condition (from, to, subject, list id, text)"
            )
        return self

    def as_json(self) -> dict[str, str]:
        """The stored JSON object (only the conditions that are set)."""
        return {k: v for k, v in self.model_dump(by_alias=True).items() if v is not None}


class Action(BaseModel):
    """One thing the rule does."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["label", "archive", "trash", "mark_read", "star", "category"]
    label: str | None = Field(default=None, max_length=MAX_VALUE)
    category: str | None = None

    @field_validator("label", mode="before")
    @classmethod
    def _strip_label(cls, value: object) -> object:
        if isinstance(value, str):
            value = "/".join(part.strip() for part in value.split("/") if part.strip())
            return value or None
        return value

    @field_validator("category", mode="before")
    @classmethod
    def _known_category(cls, value: object) -> object:
        if value is None:
            return None
        name = str(value).strip().lower()
        if name not in CATEGORIES:
            raise ValueError(f"{value!r} is not a tab; use one of {', '.join(CATEGORIES)}")
        return name

    @model_validator(mode="after")
    def _arguments(self) -> Action:
        if self.type == "label" and not self.label:
            raise ValueError("the label action needs a label name")
        if self.type == "category" and not self.category:
            raise ValueError("the category action needs a tab")
        if self.type != "label" and self.label is not None:
            raise ValueError(f"the {self.type} action takes no label")
        if self.type != "category" and self.category is not None:
            raise ValueError(f"the {self.type} action takes no tab")
        return self

    def as_json(self) -> dict[str, str]:
        """The stored JSON object of this action."""
        return {k: v for k, v in self.model_dump().items() if v is not None}

    def describe(self) -> str:
        """A short human description (``label Receipts``, ``archive``)."""
        argument = self.label or self.category
        return (
            f"{self.type.replace('_', ' ')} {argument}" if argument else self.type.replace("_", " ")
        )


class RuleSpec(BaseModel):
    """A validated rule: a name, its conditions and its actions."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=200)
    conditions: Conditions
    actions: list[Action] = Field(min_length=1)

    @field_validator("name", mode="before")
    @classmethod
    def _strip_name(cls, value: object) -> object:
        return _clean(value) or ""

    @model_validator(mode="after")
    def _consistent(self) -> RuleSpec:
        kinds = [action.type for action in self.actions]
        repeated = {kind for kind in kinds if kinds.count(kind) > 1 and kind != "label"}
        if repeated:
            raise ValueError(f"the {sorted(repeated)[0]} action is given twice")
        if "archive" in kinds and "trash" in kinds:
            raise ValueError("a rule cannot both archive and trash; trash already leaves the inbox")
        return self

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


def _sentence(error: ValidationError) -> str:
    first = error.errors()[0]
    message = str(first.get("msg", "invalid value"))
    message = message.removeprefix("Value error, ")
    where = ".".join(str(part) for part in first.get("loc", ()) if not isinstance(part, int))
    if first.get("type") == "extra_forbidden":
        message = f"{where or 'this field'} is not a rule condition or action"
    elif first.get("type") == "too_short" and where == "actions":
        message = (
            "a rule needs at least one action (label, archive, trash, mark read, star, category)"
        )
    elif first.get("type") == "literal_error":
        message = f"the action type must be one of {', '.join(ACTION_TYPES)}"
    elif first.get("type") == "string_too_long":
        message = f"the {where or 'value'} is too long"
    elif first.get("type") in ("missing", "string_too_short") and where == "name":
        message = "a rule needs a name"
    return f"This rule is invalid: {message}."


def parse_rule(name: str, conditions: dict[str, Any], actions: list[dict[str, Any]]) -> RuleSpec:
    """Validate a rule; raises RuleError with one plain sentence when it is not valid."""
    try:
        return RuleSpec.model_validate({"name": name, "conditions": conditions, "actions": actions})
    except ValidationError as exc:
        raise RuleError(_sentence(exc)) from None
