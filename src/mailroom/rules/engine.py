"""Applying the owner's rules to a batch: one SQL query per rule, actions on whole threads.

Runs in the post-ingest pipeline after threading (stage ``rules``), so the
messages are stored, flushed, searchable and in their conversations: an
archive or trash reaches every message of the conversation, not only the
new one (otherwise the conversation would stay in the Inbox through its
older messages).

Per rule, in ``position`` order, one ``SELECT`` over the batch's message
ids with the rule's conditions as SQL (``text`` through
``store.search.match_clause`` on the full-text index). Actions go through
``labels.operations.Operations`` — the one owner of what an action means,
with change log and pending changes in the same transaction:

- ``label``, ``archive``, ``trash``, ``mark_read`` on every message of the
  matched threads;
- ``star`` on the matched messages (a star marks a message, not a thread);
- ``category`` sets ``messages.rule_category`` on the matched messages
  whose sender's authentication passed (``rules.authentication``); nothing
  recomputes that column, and the thread's tab follows its newest message.

A stored rule that no longer validates is skipped with a warning; it never
costs the batch.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace

from sqlalchemy import (
    ColumnElement,
    String,
    Text,
    TextClause,
    and_,
    cast,
    not_,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.orm import Session

from mailroom.categories.sealed_rows import id_in
from mailroom.crypto.blind_index import blind_terms
from mailroom.crypto.message_fields import open_rows
from mailroom.errors import RuleError
from mailroom.labels.operations import Operations
from mailroom.labels.resolver import resolve_path
from mailroom.rules.authentication import sender_authenticated
from mailroom.rules.model import Conditions, RuleSpec, parse_rule
from mailroom.rules.sealed import SealedRuleRows
from mailroom.store import changelog
from mailroom.store.headers import stored_headers
from mailroom.store.models import Account, Message, Rule
from mailroom.store.search import match_clause

log = logging.getLogger(__name__)


def _like(value: str) -> str:
    escaped = value.replace("!", "!!").replace("%", "!%").replace("_", "!_")
    return f"%{escaped}%"


def _json_like(value: str) -> str:
    # Addresses are stored as JSON text with non-ASCII escaped (\u00fc); search the same way.
    return _like(json.dumps(value)[1:-1])


def condition_clauses(
    session: Session,
    conditions: Conditions,
    owner: int | None = None,
    sealed: SealedRuleRows | None = None,
) -> list[ColumnElement[bool] | TextClause]:
    """The SQL conditions on ``messages`` of a rule's conditions (all must hold).

    ``owner``: whose messages are matched, so that a text condition searches their
    sealed mail too (the blind index) and the from / to / subject / list id conditions
    match their sealed rows (opened in Python, ``rules.sealed``; ``sealed`` gives the
    rows a batch looks at, opened once for all its rules); without it only clear mail
    is matched.
    """
    clauses: list[ColumnElement[bool] | TextClause] = []
    if conditions.from_:
        pattern = _like(conditions.from_)
        clauses.append(
            or_(
                Message.from_email.ilike(pattern, escape="!"),
                Message.from_name.ilike(pattern, escape="!"),
            )
        )
    if conditions.to:
        pattern = _json_like(conditions.to)
        clauses.append(
            or_(
                cast(Message.recipients["to"], Text).ilike(pattern, escape="!"),
                cast(Message.recipients["cc"], Text).ilike(pattern, escape="!"),
            )
        )
    if conditions.subject:
        clauses.append(Message.subject.ilike(_like(conditions.subject), escape="!"))
    if conditions.list_id:
        clauses.append(cast(Message.list_id, String).ilike(_like(conditions.list_id), escape="!"))
    if owner is not None and clauses:
        sealed = sealed or SealedRuleRows(session, owner)
        if sealed.any():  # clear rows by SQL, sealed rows by their opened columns
            narrowing = (  # fewer rows to open when the whole mailbox is looked at
                condition_clauses(session, Conditions(text=conditions.text), owner)
                if conditions.text and sealed.candidates is None
                else []
            )
            opened = sealed.matching(conditions, narrowing)
            clauses = [or_(and_(not_(Message.sealed), *clauses), id_in(opened))]
    if conditions.text:
        blind = blind_terms(session, owner, conditions.text) if owner is not None else None
        found = match_clause(session.get_bind().dialect.name, conditions.text, blind, owner)
        if found is None:  # validation keeps this from happening; match nothing rather than all
            clauses.append(text("1 = 0"))
        else:
            sql, params = found
            clauses.append(text(sql).bindparams(**params))
    return clauses


def matching(
    session: Session,
    user_id: int,
    spec: RuleSpec,
    message_ids: Collection[int],
    sealed: SealedRuleRows | None = None,
) -> list[tuple[int, int | None]]:
    """(message id, thread id) of the given messages the rule matches — one query
    (and, when some of them are sealed, the query opening them: ``sealed``)."""
    if not message_ids:
        return []
    query = (
        select(Message.id, Message.thread_id)
        .where(
            Message.user_id + 0 == user_id,  # the id index, not a scan of the user's mail
            Message.id.in_(sorted(message_ids)),
            *condition_clauses(
                session,
                spec.conditions,
                user_id,
                sealed or SealedRuleRows(session, user_id, message_ids),
            ),
        )
        .order_by(Message.id)
    )
    return [(row.id, row.thread_id) for row in session.execute(query)]


@dataclass
class RulesOutcome:
    """What the rules did to a batch."""

    matched: dict[int, list[int]] = field(default_factory=dict)  # rule id -> message ids
    threads: set[int] = field(default_factory=set)
    filed: list[int] = field(default_factory=list)
    not_filed: list[int] = field(default_factory=list)  # authentication did not pass


def enabled_rules(session: Session, user_id: int) -> list[tuple[int, RuleSpec]]:
    """The user's enabled rules in order, validated; invalid stored ones are skipped."""
    rules = []
    for rule in session.scalars(
        select(Rule).where(Rule.user_id == user_id, Rule.enabled).order_by(Rule.position, Rule.id)
    ):
        try:
            rules.append((rule.id, parse_rule(rule.name, rule.conditions, rule.actions)))
        except RuleError as exc:
            log.warning("Skipping rule %s of user %s: %s", rule.id, user_id, exc)
    return rules


def apply_rules(
    session: Session,
    user_id: int,
    message_ids: Sequence[int],
    rules: Sequence[tuple[int, RuleSpec]] | None = None,
) -> RulesOutcome:
    """Run the user's rules (one query each) over these messages and apply their actions."""
    outcome = RulesOutcome()
    if not message_ids:
        return outcome
    rules = enabled_rules(session, user_id) if rules is None else rules
    if not rules:
        return outcome
    operations = Operations(session, user_id)
    sealed = SealedRuleRows(session, user_id, message_ids)  # opened once for every rule
    for rule_id, spec in rules:
        try:
            with session.begin_nested():
                _apply_one(
                    session, user_id, operations, (rule_id, spec), message_ids, outcome, sealed
                )
        except Exception:  # one broken rule must cost only itself, never the batch
            log.exception("Rule %s of user %s failed on a batch", rule_id, user_id)
    return outcome


def _apply_one(
    session: Session,
    user_id: int,
    operations: Operations,
    rule: tuple[int, RuleSpec],
    message_ids: Sequence[int],
    outcome: RulesOutcome,
    sealed: SealedRuleRows,
) -> None:
    rule_id, spec = rule
    matched = matching(session, user_id, spec, message_ids, sealed)
    if not matched:
        return
    outcome.matched[rule_id] = [m for m, _ in matched]
    threads = sorted({t for _, t in matched if t is not None})
    whole = sorted(
        {*operations.messages_of_threads(threads), *(m for m, t in matched if t is None)}
    )
    only = [m for m, _ in matched]
    outcome.threads.update(threads)
    for action in spec.actions:
        if action.type == "label" and action.label:
            label = resolve_path(session, user_id, action.label.split("/"))
            operations.label(whole, label.id)
        elif action.type == "archive":
            operations.archive(whole)
        elif action.type == "trash":
            operations.trash(whole)
        elif action.type == "mark_read":
            operations.mark_read(whole)
        elif action.type == "star":
            operations.star(only)
        elif action.type == "category" and action.category:
            filed, refused = file_into_category(session, user_id, only, action.category)
            outcome.filed += filed
            outcome.not_filed += refused


def file_into_category(
    session: Session, user_id: int, message_ids: Sequence[int], category: str
) -> tuple[list[int], list[int]]:
    """Set ``rule_category`` on messages whose sender authenticated; returns (filed, refused)."""
    selected = session.execute(
        select(
            Message.id,
            Message.user_id,
            Message.sealed,
            Message.from_email,
            Message.rule_category,
            Account.provider,
            Account.settings,
        )
        .join(Account, Account.id == Message.account_id)
        .where(Message.id.in_(message_ids), Message.user_id + 0 == user_id)
    ).all()
    rows = [SimpleNamespace(**row) for row in open_rows(session, selected, ["from_email"])]
    headers = stored_headers(session, message_ids)
    filed: list[int] = []
    refused: list[int] = []
    for row in rows:
        settings = row.settings if isinstance(row.settings, dict) else {}
        trusted = settings.get("authserv_ids")
        verdict = sender_authenticated(
            headers.get(row.id) or [],
            row.from_email or "",
            provider=row.provider,
            trusted_ids=[str(t) for t in trusted] if isinstance(trusted, list) else None,
        )
        if not verdict.passed:
            refused.append(row.id)
            log.info("Not filing message %s into %s: %s", row.id, category, verdict.reason)
            continue
        if row.rule_category != category:
            filed.append(row.id)
    if filed:
        session.execute(update(Message).where(Message.id.in_(filed)).values(rule_category=category))
        changelog.record(session, user_id, "Email", filed, "updated")
    return filed, refused
