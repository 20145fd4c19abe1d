"""Inbox tabs: the cascade on stored data, correspondents, switched-off tabs, backfill, explain."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select, update

from mailroom.categories.recompute import backfill_categories, explain, recategorize
from mailroom.ingest import BatchResult, IncomingMessage, store_batch
from mailroom.labels.resolver import ensure_system_labels
from mailroom.owners import get_or_create_account, get_or_create_user
from mailroom.store.engine import Store
from mailroom.store.models import Change, Contact, Message, Thread, User
from tests.factories import make_message

ME = "Me <me@example.org>"
FRIEND = "Fred <fred@example.net>"
UNSUBSCRIBE = {"List-Unsubscribe": "<mailto:leave@news.example>"}


class Mailbox:
    """An owner with one account (address me@example.org) and its system labels."""

    def __init__(self, store: Store) -> None:
        self.store = store
        with store.session() as session:
            user = get_or_create_user(session, "me")
            account = get_or_create_account(
                session, user, "main", "local", {"email": "me@example.org"}
            )
            self.roles = ensure_system_labels(session, user.id)
            self.user_id, self.account_id = user.id, account.id

    def ingest(self, items: Sequence[tuple[str, bytes]], folder: str = "inbox") -> BatchResult:
        """Store raw messages as one batch in a folder (inbox or sent)."""
        with self.store.session() as session:
            batch = [IncomingMessage(p, raw, label_ids=[self.roles[folder]]) for p, raw in items]
            return store_batch(session, self.account_id, self.user_id, batch)

    def message(self, mid: str) -> Message:
        """The stored message with this Message-ID."""
        with self.store.session() as session:
            found = session.scalars(select(Message).where(Message.message_id_header == mid)).one()
            session.expunge(found)
            return found

    def thread(self, mid: str) -> Thread:
        """The thread of the message with this Message-ID."""
        with self.store.session() as session:
            thread_id = session.scalar(
                select(Message.thread_id).where(Message.message_id_header == mid)
            )
            found = session.get(Thread, thread_id)
            assert found is not None
            session.expunge(found)
            return found


def newsletter(mid: str, sender: str = "deals@news.example", **kwargs: object) -> tuple[str, bytes]:
    """A marketing mail with List-Unsubscribe (keyword arguments go to make_message)."""
    options: dict[str, object] = {
        "subject": "Weekly deals",
        "sender": sender,
        "to": ME,
        "headers": UNSUBSCRIBE,
        **kwargs,
    }
    return mid, make_message(f"{mid}@x", **options)  # type: ignore[arg-type]


def test_mailing_list_post_with_list_unsubscribe_is_in_forums(store: Store) -> None:
    """List-Id and List-Post win over List-Unsubscribe: a discussion list is a forum."""
    box = Mailbox(store)
    headers = {
        "List-Id": "ILUG <ilug.linux.ie>",
        "List-Post": "<mailto:ilug@linux.ie>",
        "List-Unsubscribe": "<mailto:ilug-leave@linux.ie>",
        "Precedence": "bulk",
    }
    box.ingest([("l", make_message("l@x", subject="[ILUG] kernel", headers=headers))])
    box.ingest([newsletter("n")])
    assert box.message("l@x").category == "forums"
    assert box.message("n@x").category == "promotions"
    assert box.thread("l@x").category == "forums"


def test_newsletter_list_id_is_marketing_not_a_forum(store: Store) -> None:
    """A List-Id stamped by a newsletter service without List-Post sorts as promotions."""
    box = Mailbox(store)
    headers = {**UNSUBSCRIBE, "List-Id": "<a1b2.list-id.mcsv.net>"}
    box.ingest([newsletter("n", headers=headers)])
    assert box.message("n@x").category == "promotions"


def test_forwarded_newsletter_from_a_correspondent_is_primary(store: Store) -> None:
    """Mail from someone the owner has written to is Primary, whatever bulk headers it carries."""
    box = Mailbox(store)
    box.ingest([newsletter("before", sender=FRIEND, subject="Fwd: Weekly deals")])
    assert box.message("before@x").category == "promotions"
    box.ingest([("s1", make_message("s1@x", sender=ME, to=FRIEND, subject="Lunch?"))], "sent")
    box.ingest([newsletter("after", sender=FRIEND, subject="Fwd: Weekly deals", minutes=9)])
    after = box.message("after@x")
    assert (after.category, after.category_stage) == ("primary", "correspondent")
    # The earlier forward was re-sorted when Fred became a correspondent.
    assert box.message("before@x").category == "primary"
    with store.session() as session:
        contact = session.get(Contact, (box.user_id, "fred@example.net"))
        assert contact is not None and contact.sent_count == 1


def test_own_address_counts_as_sent_and_own_mail_is_primary(store: Store) -> None:
    """A message From an own address harvests its recipients even outside the Sent folder."""
    box = Mailbox(store)
    box.ingest([("o", make_message("o@x", sender=ME, to=FRIEND, headers={"Cc": "c@example.com"}))])
    with store.session() as session:
        emails = set(session.scalars(select(Contact.email).where(Contact.user_id == box.user_id)))
    assert emails == {"fred@example.net", "c@example.com"}
    assert box.message("o@x").category_stage == "own_message"


def test_switched_off_tab_gets_no_mail_and_explain_says_why(store: Store) -> None:
    """A switched-off tab's mail is Primary with reason switched_off; explain names the tab."""
    box = Mailbox(store)
    box.ingest([newsletter("n")])
    with store.session() as session:
        session.execute(
            update(User)
            .where(User.id == box.user_id)
            .values(settings={"categories_off": ["promotions"]})
        )
        result = recategorize(session, box.user_id)
    thread = box.thread("n@x")
    assert result.changed_threads == [thread.id] and thread.category == "primary"
    message = box.message("n@x")
    assert (message.category, message.category_stage) == ("primary", "switched_off")
    with store.session() as session:
        lines = explain(session, box.user_id, message.id).lines()
    assert lines[0].startswith("Primary: decided by switched_off (list-unsubscribe header)")
    assert "would be Promotions" in lines[0]


def test_backfill_announces_only_threads_whose_tab_changed(store: Store) -> None:
    """Backfill recomputes from stored data and logs Thread updates only for changed tabs."""
    box = Mailbox(store)
    box.ingest([newsletter("n"), ("p", make_message("p@x", sender=FRIEND, to=ME))])
    with store.session() as session:
        first = backfill_categories(session, box.user_id)
    assert first.recategorized.changed_threads == []
    with store.session() as session:
        session.execute(update(Message).values(category="updates", category_stage="stale"))
        session.execute(update(Thread).values(category="updates"))
        before = session.scalar(select(Change.seq).order_by(Change.seq.desc()).limit(1))
        again = backfill_categories(session, box.user_id)
        announced = session.scalars(
            select(Change.object_id).where(Change.type == "Thread", Change.seq > before)
        ).all()
    assert sorted(announced) == sorted(again.recategorized.changed_threads)
    assert len(announced) == 2
    assert box.thread("n@x").category == "promotions" and box.thread("p@x").category == "primary"


def test_thread_tab_is_newest_message_unless_pinned(store: Store) -> None:
    """A conversation follows its newest message's tab; a pinned one keeps the owner's choice."""
    box = Mailbox(store)
    box.ingest([newsletter("n1", subject="Deals")])
    box.ingest([("n2", make_message("n2@x", sender=FRIEND, to=ME, in_reply_to="n1@x", minutes=5))])
    assert box.thread("n1@x").category == "primary"
    with store.session() as session:
        session.execute(
            update(Thread)
            .where(Thread.id == box.thread("n1@x").id)
            .values(category="updates", category_pinned=True)
        )
    reply = make_message("n3@x", sender="deals@news.example", in_reply_to="n2@x", minutes=9)
    box.ingest([("n3", reply)])
    assert box.thread("n1@x").category == "updates"
