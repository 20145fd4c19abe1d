"""Rules on sealed mail: from / to / subject / list id match the opened values, at ingest
and when a rule is run again over mail already stored (some of it clear, some sealed)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select, text

from mailroom.crypto.sealing import MailSealing
from mailroom.ingest import BatchResult, IncomingMessage, store_batch
from mailroom.labels.resolver import ensure_system_labels
from mailroom.owners import get_or_create_account, get_or_create_user
from mailroom.rules import add_rule, apply_rules, parse_rule
from mailroom.rules.engine import condition_clauses
from mailroom.rules.model import Conditions
from mailroom.store.engine import Store
from mailroom.store.models import Label, Message, MessageLabel
from tests.factories import make_message

PASS = "mx.example.net; dkim=pass header.d=shop.example; spf=pass smtp.mailfrom=shop.example"


class Owner:
    """A user with one local account and the system labels; messages found by provider id."""

    def __init__(self, store: Store) -> None:
        self.store = store
        with store.session() as session:
            user = get_or_create_user(session, "me")
            account = get_or_create_account(session, user, "main", "local")
            self.roles = ensure_system_labels(session, user.id)
            self.user_id, self.account_id = user.id, account.id

    def rule(self, conditions: dict[str, Any], actions: list[dict[str, Any]]) -> int:
        with self.store.session() as session:
            return add_rule(session, self.user_id, parse_rule("r", conditions, actions))

    def ingest(self, items: Sequence[tuple[str, bytes]]) -> BatchResult:
        with self.store.session() as session:
            batch = [IncomingMessage(p, raw, label_ids=[self.roles["inbox"]]) for p, raw in items]
            return store_batch(session, self.account_id, self.user_id, batch)

    def labels(self, provider_id: str) -> set[str]:
        with self.store.session() as session:
            return set(
                session.scalars(
                    select(Label.path)
                    .join(MessageLabel, MessageLabel.label_id == Label.id)
                    .join(Message, Message.id == MessageLabel.message_id)
                    .where(Message.provider_id == provider_id)
                )
            )

    def ids(self) -> dict[str, int]:
        with self.store.session() as session:
            return {p: i for i, p in session.execute(select(Message.id, Message.provider_id))}


MAIL = [
    ("f", make_message("f@x", sender="Jürgen Müller <j@example.de>", subject="Hallo")),
    ("t", make_message("t@x", headers={"Cc": "Team <team@corp.example>"}, subject="Plan")),
    ("s", make_message("s@x", subject="Your invoice 42")),
    ("l", make_message("l@x", headers={"List-Id": "ILUG <ilug.linux.ie>"}, subject="List")),
    ("o", make_message("o@x", subject="Nothing to see", sender="Other <other@example.com>")),
]
RULES = {
    "From": {"from": "jürgen"},
    "To": {"to": "TEAM@corp.example"},
    "Subject": {"subject": "INVOICE"},
    "List": {"list_id": "ilug.linux.ie"},
}
EXPECTED = {"f": "From", "t": "To", "s": "Subject", "l": "List"}


def _sealed_columns(store: Store) -> list[Any]:
    with store.session() as session:
        return list(session.execute(text("SELECT subject, from_email FROM messages")).all())


def test_rules_match_sealed_mail_at_ingest(sealed_store: Store) -> None:
    owner = Owner(sealed_store)
    for label, conditions in RULES.items():
        owner.rule(conditions, [{"type": "label", "label": label}])
    owner.ingest(MAIL)
    for row in _sealed_columns(sealed_store):  # really sealed: SQL alone cannot match them
        assert str(row.subject).startswith("mrf1.") and str(row.from_email).startswith("mrf1.")
    for provider_id, label in EXPECTED.items():
        assert owner.labels(provider_id) == {"Inbox", label}, provider_id
    assert owner.labels("o") == {"Inbox"}


def test_a_rule_run_again_on_stored_mail_moves_the_right_clear_and_sealed_messages(
    store: Store, sealing: MailSealing
) -> None:
    owner = Owner(store)
    owner.ingest([("clear-s", make_message("cs@x", subject="Old invoice 7")), *MAIL[4:]])
    store.sealing = sealing  # sealing switched on: mail stored from now on is sealed
    owner.ingest(MAIL[:4])
    owner.rule({"subject": "invoice"}, [{"type": "archive"}])
    owner.rule({"from": "example.de", "subject": "hallo"}, [{"type": "star"}])
    ids = owner.ids()
    with store.session() as session:
        outcome = apply_rules(session, owner.user_id, sorted(ids.values()))
    assert sorted(outcome.matched.values()) == sorted(
        [sorted([ids["clear-s"], ids["s"]]), [ids["f"]]]
    )
    assert owner.labels("s") == owner.labels("clear-s") == {"Archive"}
    assert owner.labels("f") == {"Inbox", "Starred"}
    for other in ("t", "l", "o"):
        assert owner.labels(other) == {"Inbox"}, other


def test_condition_clauses_over_the_whole_mailbox_count_sealed_matches(
    store: Store, sealing: MailSealing
) -> None:
    """What the settings page's rule test counts: every match, clear or sealed, by SQL."""
    owner = Owner(store)
    owner.ingest([("clear-s", make_message("cs@x", subject="Old invoice 7"))])
    store.sealing = sealing
    owner.ingest(MAIL)
    with store.session() as session:
        for conditions, wanted in [
            (Conditions(subject="invoice"), {"clear-s", "s"}),
            (Conditions(to="team@corp"), {"t"}),
            (Conditions(from_="MÜLLER"), {"f"}),
            (Conditions(list_id="ilug"), {"l"}),
            (Conditions(subject="invoice", text="invoice"), {"clear-s", "s"}),
            (Conditions(subject="nothing here"), set()),
        ]:
            where = [Message.user_id == owner.user_id]
            where += condition_clauses(session, conditions, owner.user_id)
            found = set(session.scalars(select(Message.provider_id).where(*where)))
            assert found == wanted, conditions
            count = session.scalar(select(func.count()).select_from(Message).where(*where))
            assert count == len(wanted)


def test_a_category_rule_files_sealed_mail_when_the_sender_authenticated(
    sealed_store: Store,
) -> None:
    owner = Owner(sealed_store)
    owner.rule({"from": "shop.example"}, [{"type": "category", "category": "updates"}])
    good = {"Authentication-Results": PASS}
    bad = {"Authentication-Results": "mx.example.net; dkim=fail header.d=shop.example"}
    owner.ingest(
        [
            ("g", make_message("g@x", sender="news@shop.example", headers=good)),
            ("b", make_message("b@x", sender="news@shop.example", headers=bad)),
        ]
    )
    with sealed_store.session() as session:
        filed = dict(session.execute(select(Message.provider_id, Message.rule_category)).all())
    assert filed == {"g": "updates", "b": None}
