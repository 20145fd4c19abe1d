"""The owner's rules: validation, matching in SQL after threading, actions on whole threads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from sqlalchemy import event, select

from mailroom.categories.recompute import backfill_categories
from mailroom.errors import RuleError
from mailroom.ingest import BatchResult, IncomingMessage, store_batch
from mailroom.labels.resolver import ensure_system_labels
from mailroom.owners import get_or_create_account, get_or_create_user
from mailroom.rules import add_rule, apply_rules, list_rules, parse_rule, remove_rule
from mailroom.rules.authentication import sender_authenticated
from mailroom.store.engine import Store
from mailroom.store.models import Label, Message, MessageLabel, Thread
from tests.factories import make_message

PASS = "mx.example.net; dkim=pass header.d=shop.example; spf=pass smtp.mailfrom=shop.example"


class Owner:
    """A user with one local account and the system labels."""

    def __init__(self, store: Store) -> None:
        self.store = store
        with store.session() as session:
            user = get_or_create_user(session, "me")
            account = get_or_create_account(session, user, "main", "local")
            self.roles = ensure_system_labels(session, user.id)
            self.user_id, self.account_id = user.id, account.id

    def rule(self, conditions: dict[str, Any], actions: list[dict[str, Any]]) -> int:
        """Store a rule and return its id."""
        with self.store.session() as session:
            return add_rule(session, self.user_id, parse_rule("r", conditions, actions))

    def ingest(self, items: Sequence[tuple[str, bytes]]) -> BatchResult:
        """Store raw messages as one batch in the inbox."""
        with self.store.session() as session:
            batch = [IncomingMessage(p, raw, label_ids=[self.roles["inbox"]]) for p, raw in items]
            return store_batch(session, self.account_id, self.user_id, batch)

    def labels(self, mid: str) -> set[str]:
        """Label paths of the message with this Message-ID."""
        with self.store.session() as session:
            return set(
                session.scalars(
                    select(Label.path)
                    .join(MessageLabel, MessageLabel.label_id == Label.id)
                    .join(Message, Message.id == MessageLabel.message_id)
                    .where(Message.message_id_header == mid)
                )
            )

    def message(self, mid: str) -> Message:
        """The stored message with this Message-ID."""
        with self.store.session() as session:
            found = session.scalars(select(Message).where(Message.message_id_header == mid)).one()
            session.expunge(found)
            return found


@pytest.mark.parametrize(
    ("conditions", "actions", "says"),
    [
        ({}, [{"type": "archive"}], "at least one condition"),
        ({"from": "  "}, [{"type": "archive"}], "at least one condition"),
        ({"from": "a"}, [], "at least one action"),
        ({"text": "!!!"}, [{"type": "archive"}], "no word to search for"),
        ({"from": "a"}, [{"type": "category", "category": "junk"}], "'junk' is not a tab"),
        ({"from": "a"}, [{"type": "label"}], "needs a label name"),
        ({"from": "a"}, [{"type": "archive"}, {"type": "trash"}], "both archive and trash"),
        ({"from": "a"}, [{"type": "explode"}], "action type must be one of"),
        ({"sender": "a"}, [{"type": "archive"}], "is not a rule condition"),
    ],
)
def test_invalid_rules_are_one_plain_sentence(
    conditions: dict[str, Any], actions: list[dict[str, Any]], says: str
) -> None:
    """Every invalid rule raises RuleError with a single sentence naming the problem."""
    with pytest.raises(RuleError) as caught:
        parse_rule("r", conditions, actions)
    message = str(caught.value)
    assert says in message and message.startswith("This rule is invalid: ")
    assert message.endswith(".") and "\n" not in message


def test_each_condition_matches_in_sql_with_one_query_per_rule(store: Store) -> None:
    """from, to, subject, list id and text each select their message, one SELECT per rule."""
    owner = Owner(store)
    rules = {
        "from": owner.rule({"from": "Jürgen"}, [{"type": "label", "label": "From"}]),
        "to": owner.rule({"to": "team@corp.example"}, [{"type": "label", "label": "To"}]),
        "subject": owner.rule({"subject": "INVOICE"}, [{"type": "label", "label": "Subject"}]),
        "list": owner.rule({"list_id": "ilug.linux.ie"}, [{"type": "label", "label": "List"}]),
        "text": owner.rule({"text": "walrus migr"}, [{"type": "label", "label": "Text"}]),
    }
    owner.ingest(
        [
            ("f", make_message("f@x", sender="Jürgen Müller <j@example.de>")),
            ("t", make_message("t@x", headers={"Cc": "Team <team@corp.example>"})),
            ("s", make_message("s@x", subject="Your invoice 42")),
            ("l", make_message("l@x", headers={"List-Id": "ILUG <ilug.linux.ie>"})),
            ("x", make_message("x@x", body="The walrus migration starts today.\n")),
        ]
    )
    assert owner.labels("f@x") == {"Inbox", "From"}
    assert owner.labels("t@x") == {"Inbox", "To"}
    assert owner.labels("s@x") == {"Inbox", "Subject"}
    assert owner.labels("l@x") == {"Inbox", "List"}
    assert owner.labels("x@x") == {"Inbox", "Text"}
    statements: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().startswith("SELECT messages.id, messages.thread_id"):
            statements.append(statement)

    event.listen(store.engine, "before_cursor_execute", count)
    try:
        with store.session() as session:
            ids = list(session.scalars(select(Message.id)))
            outcome = apply_rules(session, owner.user_id, ids)
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
    assert len(statements) == len(rules)
    assert sorted(outcome.matched) == sorted(rules.values())


def test_archive_and_trash_reach_the_whole_conversation(store: Store) -> None:
    """A rule matching a new reply archives the older messages of its conversation too."""
    owner = Owner(store)
    owner.ingest([("a", make_message("a@x", subject="Build failed")), ("z", make_message("z@x"))])
    owner.rule({"subject": "build failed"}, [{"type": "archive"}, {"type": "mark_read"}])
    reply = make_message("b@x", subject="Re: Build failed", in_reply_to="a@x", minutes=5)
    owner.ingest([("b", reply)])
    assert owner.labels("a@x") == owner.labels("b@x") == {"Archive"}
    assert owner.message("a@x").seen_at is not None
    assert owner.labels("z@x") == {"Inbox"}
    owner.rule({"from": "spam@"}, [{"type": "trash"}, {"type": "star"}])
    owner.ingest([("s", make_message("s@x", sender="spam@bad.example"))])
    assert owner.labels("s@x") == {"Trash", "Starred"}


def test_file_into_category_only_when_the_sender_authenticated(store: Store) -> None:
    """A rule's tab is applied on a pass, refused on a fail, and survives recomputation."""
    owner = Owner(store)
    owner.rule({"from": "shop.example"}, [{"type": "category", "category": "updates"}])
    good = {"Authentication-Results": PASS, "List-Unsubscribe": "<mailto:x@shop.example>"}
    bad = {"Authentication-Results": "mx.example.net; dkim=fail header.d=shop.example"}
    owner.ingest(
        [
            ("g", make_message("g@x", sender="news@shop.example", headers=good)),
            ("b", make_message("b@x", sender="news@shop.example", headers=bad, subject="Other")),
        ]
    )
    filed, refused = owner.message("g@x"), owner.message("b@x")
    assert (filed.rule_category, filed.category) == ("updates", "promotions")
    assert refused.rule_category is None
    with store.session() as session:
        backfill_categories(session, owner.user_id)
        tab = session.scalar(select(Thread.category).where(Thread.id == filed.thread_id))
    assert owner.message("g@x").rule_category == "updates" and tab == "updates"


def test_rules_are_listed_and_removed(store: Store) -> None:
    """Rules list in order with their description; removing an unknown id is a plain error."""
    owner = Owner(store)
    first = owner.rule({"from": "a@x"}, [{"type": "archive"}])
    owner.rule({"subject": "b"}, [{"type": "label", "label": "Work/B"}])
    with store.session() as session:
        listed = list_rules(session, owner.user_id)
        assert [r.spec.describe() for r in listed if r.spec] == [
            "if from contains 'a@x': archive",
            "if subject contains 'b': label Work/B",
        ]
        remove_rule(session, owner.user_id, first)
        assert len(list_rules(session, owner.user_id)) == 1
        with pytest.raises(Exception, match="There is no rule"):
            remove_rule(session, owner.user_id, first)


@pytest.mark.parametrize(
    ("results", "provider", "passed"),
    [
        ("mx.example.net; dmarc=pass header.from=shop.example", "local", True),
        ("mx.example.net; dkim=pass header.d=mail.shop.example", "local", True),
        ("mx.example.net; dkim=pass header.d=other.example", "local", False),
        ("mx.example.net; spf=pass smtp.mailfrom=bounce@shop.example", "local", True),
        ("mx.example.net; spf=softfail smtp.mailfrom=shop.example", "local", False),
        ("mx.google.com; dkim=pass (good) header.i=@shop.example", "gmail", True),
        ("evil.example; dmarc=pass", "gmail", False),
        ("spf=pass (sender IP) smtp.mailfrom=shop.example; dmarc=pass", "graph", True),
    ],
)
def test_authentication_results_of_the_receiving_provider(
    results: str, provider: str, passed: bool
) -> None:
    """dmarc pass, or an aligned dkim or spf pass, from a trusted authserv-id is a pass."""
    verdict = sender_authenticated(
        [("Authentication-Results", results)], "news@shop.example", provider
    )
    assert verdict.passed is passed, verdict.reason


def test_only_the_topmost_authentication_results_counts() -> None:
    """A pass written lower down (possibly by the sender) never outweighs the provider's fail."""
    headers = [
        ("Authentication-Results", "mx.example.net; dkim=fail header.d=shop.example"),
        ("Received", "from somewhere"),
        ("Authentication-Results", "mx.example.net; dmarc=pass"),
    ]
    assert not sender_authenticated(headers, "news@shop.example").passed
    assert not sender_authenticated([], "news@shop.example").passed
