"""Tabs learned from corrections: after the owner moves a sender's mail, new mail follows."""

from __future__ import annotations

from mailroom.categories.corrections import move_to_tab
from mailroom.categories.recompute import explain, recategorize
from mailroom.store.engine import Store
from tests.categories.test_tabs import ME, Mailbox, newsletter
from tests.factories import make_message


def test_moving_a_sender_teaches_the_cascade_on_both_stores(store: Store) -> None:
    """A moved newsletter sender's next mail lands in the chosen tab, explained as a correction."""
    box = Mailbox(store)
    box.ingest([newsletter("n1", sender="news@paper.example")])
    assert box.message("n1@x").category == "promotions"
    with store.session() as session:
        move_to_tab(session, box.user_id, [box.thread("n1@x").id], "updates")
    box.ingest([newsletter("n2", sender="news@paper.example", subject="Tomorrow's paper")])
    later = box.message("n2@x")
    assert (later.category, later.category_stage) == ("updates", "correction")
    with store.session() as session:
        first = explain(session, box.user_id, later.id).lines()[0]
        assert first == (
            "Updates: decided by correction (you moved mail from news@paper.example to Updates)."
        )
        assert recategorize(session, box.user_id, [later.id]).changed_messages == 0


def test_a_domain_is_learned_only_from_agreeing_corrections(store: Store) -> None:
    """Two senders of one domain moved to one tab teach the domain; a third sender follows."""
    box = Mailbox(store)
    raws = [
        newsletter("a", sender="alerts@bank.example"),
        newsletter("b", sender="offers@bank.example"),
        newsletter("c", sender="deals@other.example"),
    ]
    box.ingest(raws)
    with store.session() as session:
        threads = [box.thread("a@x").id, box.thread("b@x").id]
        move_to_tab(session, box.user_id, threads, "primary")
    box.ingest(
        [
            newsletter("d", sender="statements@bank.example"),
            newsletter("e", sender="deals@other.example"),
            ("f", make_message("f@x", sender="Bank <offers@bank.example>", to=ME)),
        ]
    )
    domain = box.message("d@x")
    assert (domain.category, domain.category_stage) == ("primary", "correction")
    with store.session() as session:
        assert explain(session, box.user_id, domain.id).lines()[0] == (
            "Primary: decided by correction "
            "(you moved mail from senders at bank.example to Primary)."
        )
    assert box.message("e@x").category == "promotions"  # nobody corrected other.example
    assert box.message("f@x").category_stage == "correction"
