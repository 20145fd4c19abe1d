"""The owner's rules as stored, in the order they run, read with plain SQL.

Through a :class:`~mailroom.store.reader.Reader`, so ``mailroom rules list``
needs neither SQLAlchemy nor the ORM on the embedded store; in a session (the
web page, PostgreSQL) the same SQL runs there. Each stored rule is validated
again (:func:`~mailroom.rules.model.parse_rule`): one that no longer validates
is listed with its problem instead of a spec.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from mailroom.errors import RuleError
from mailroom.rules.model import RuleSpec, parse_rule
from mailroom.store.reader import Reader, as_reader, json_value

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


@dataclass(frozen=True, slots=True)
class StoredRule:
    """A rule as stored, with its id, order and whether it is on."""

    id: int
    position: int
    enabled: bool
    spec: RuleSpec | None  # None when the stored JSON no longer validates
    problem: str | None = None


def list_rules(source: Reader | Session, user_id: int) -> list[StoredRule]:
    """The user's rules in the order they run."""
    rows = as_reader(source).rows(
        "SELECT id, position, enabled, name, conditions, actions FROM rules "
        "WHERE user_id = :user ORDER BY position, id",
        {"user": user_id},
    )
    found = []
    for rule_id, position, enabled, name, conditions, actions in rows:
        try:
            spec = parse_rule(name, json_value(conditions), json_value(actions))
            problem = None
        except RuleError as exc:
            spec, problem = None, str(exc)
        found.append(StoredRule(rule_id, position, bool(enabled), spec, problem))
    return found
