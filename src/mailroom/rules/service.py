"""Adding, listing and removing the owner's rules (the ``rules`` table)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from mailroom.errors import NotFoundError, RuleError
from mailroom.rules.model import RuleSpec, parse_rule
from mailroom.store.models import Rule


@dataclass(frozen=True, slots=True)
class StoredRule:
    """A rule as stored, with its id, order and whether it is on."""

    id: int
    position: int
    enabled: bool
    spec: RuleSpec | None  # None when the stored JSON no longer validates
    problem: str | None = None


def add_rule(session: Session, user_id: int, spec: RuleSpec) -> int:
    """Store a validated rule after the user's others; returns its id."""
    last = session.scalar(select(func.max(Rule.position)).where(Rule.user_id == user_id))
    rule = Rule(
        user_id=user_id,
        name=spec.name,
        conditions=spec.conditions.as_json(),
        actions=spec.actions_json(),
        position=(last or 0) + 1,
        enabled=True,
    )
    session.add(rule)
    session.flush()
    return rule.id


def list_rules(session: Session, user_id: int) -> list[StoredRule]:
    """The user's rules in the order they run."""
    found = []
    for rule in session.scalars(
        select(Rule).where(Rule.user_id == user_id).order_by(Rule.position, Rule.id)
    ):
        try:
            spec, problem = parse_rule(rule.name, rule.conditions, rule.actions), None
        except RuleError as exc:
            spec, problem = None, str(exc)
        found.append(StoredRule(rule.id, rule.position, rule.enabled, spec, problem))
    return found


def remove_rule(session: Session, user_id: int, rule_id: int) -> None:
    """Delete one of the user's rules; NotFoundError if there is no such rule."""
    rule = session.get(Rule, rule_id)
    if rule is None or rule.user_id != user_id:
        raise NotFoundError(f"There is no rule {rule_id}; `mailroom rules list` shows the ids.")
    session.delete(rule)
    session.flush()
