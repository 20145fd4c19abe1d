"""Adding, listing and removing the owner's rules (the ``rules`` table).

Listing is :mod:`.listing`'s (plain SQL, for the read path), re-exported here.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from mailroom.errors import NotFoundError
from mailroom.rules.listing import StoredRule as StoredRule  # re-exported
from mailroom.rules.listing import list_rules as list_rules  # re-exported
from mailroom.rules.model import RuleSpec
from mailroom.store.models import Rule


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


def remove_rule(session: Session, user_id: int, rule_id: int) -> None:
    """Delete one of the user's rules; NotFoundError if there is no such rule."""
    rule = session.get(Rule, rule_id)
    if rule is None or rule.user_id != user_id:
        raise NotFoundError(f"There is no rule {rule_id}; `mailroom rules list` shows the ids.")
    session.delete(rule)
    session.flush()
