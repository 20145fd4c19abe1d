"""Correspondents of an owner whose mail is sealed: contacts stored as keyed hashes, found
by every form; tabs and their explanations see the opened sender, subject and reason."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sqlalchemy import select, text
from sqlalchemy.engine import make_url

from mailroom.categories.correspondents import correspondents_among, senders_by_address
from mailroom.categories.recompute import backfill_categories, explain
from mailroom.crypto.sealing import MailSealing
from mailroom.errors import SealedWithoutKeys
from mailroom.store.engine import Store
from mailroom.store.models import Contact, Message
from mailroom.store.reader import SqliteReader
from tests.categories.test_tabs import FRIEND, UNSUBSCRIBE
from tests.categories.test_tabs import Mailbox as TabsMailbox
from tests.factories import make_message

ME = "Me <me@example.org>"
HASH = re.compile(r"[0-9a-f]{64}")


class Mailbox(TabsMailbox):
    """The tab tests' owner (me@example.org, one account); messages found by provider id."""

    def tab(self, provider_id: str) -> tuple[str | None, str | None]:
        with self.store.session() as session:
            row = session.execute(
                select(Message.category, Message.category_stage).where(
                    Message.provider_id == provider_id
                )
            ).one()
            return row.category, row.category_stage

    def id(self, provider_id: str) -> int:
        with self.store.session() as session:
            found = session.scalar(select(Message.id).where(Message.provider_id == provider_id))
            assert found is not None
            return found

    def contacts(self) -> dict[str, int]:
        with self.store.session() as session:
            return {
                str(e): int(n)
                for e, n in session.execute(select(Contact.email, Contact.sent_count))
            }


def newsletter(pid: str, sender: str, minutes: int = 0) -> tuple[str, bytes]:
    raw = make_message(
        f"{pid}@x",
        subject="Fwd: Weekly deals",
        sender=sender,
        to=ME,
        headers=UNSUBSCRIBE,
        minutes=minutes,
    )
    return pid, raw


def test_correspondents_are_found_for_a_sealed_owner(sealed_store: Store) -> None:
    box = Mailbox(sealed_store)
    box.ingest([newsletter("before", FRIEND)])
    assert box.tab("before")[0] == "promotions"
    box.ingest([("s1", make_message("s1@x", sender=ME, to=FRIEND, subject="Lunch?"))], "sent")
    # The contact is the owner's keyed hash of the address, never the address.
    (stored,) = box.contacts()
    assert HASH.fullmatch(stored) and box.contacts()[stored] == 1
    with sealed_store.session() as session:
        assert correspondents_among(session, box.user_id, ["Fred@Example.net"]) == {
            "fred@example.net"
        }
        assert senders_by_address(session, box.user_id, {"fred@example.net"}) == {
            "fred@example.net": [box.id("before")]
        }
    box.ingest([newsletter("after", FRIEND, minutes=9)])
    assert box.tab("after") == ("primary", "correspondent")
    assert box.tab("before")[0] == "primary"  # re-sorted when Fred became a correspondent
    with sealed_store.session() as session:
        why = explain(session, box.user_id, box.id("after"))
    said = " ".join(why.lines())
    assert "fred@example.net" in said and "mrf1." not in said


def test_backfill_recounts_sealed_sent_mail_and_clear_contacts_become_hashes(
    store: Store, sealing: MailSealing
) -> None:
    box = Mailbox(store)
    # Written before sealing was switched on: a clear contact.
    box.ingest([("o1", make_message("o1@x", sender=ME, to=FRIEND))])
    assert box.contacts() == {"fred@example.net": 1}
    store.sealing = sealing
    # From an own address, outside the Sent folder, sealed: the sender is compared opened.
    box.ingest(
        [("o2", make_message("o2@x", sender=ME, to=FRIEND, headers={"Cc": "c@example.com"}))]
    )
    with store.session() as session:
        raw = session.execute(text("SELECT from_email FROM messages WHERE provider_id = 'o2'"))
        assert str(raw.scalar()).startswith("mrf1.")
        # Both forms are found: the clear row and the hash.
        assert correspondents_among(
            session, box.user_id, ["fred@example.net", "c@example.com", "x@example.com"]
        ) == {"fred@example.net", "c@example.com"}
        result = backfill_categories(session, box.user_id)
    assert (result.contacts, result.new_contacts) == (2, 0)
    contacts = box.contacts()
    assert sorted(contacts.values()) == [1, 2]
    assert all(HASH.fullmatch(email) for email in contacts)
    with store.session() as session:
        assert correspondents_among(session, box.user_id, ["fred@example.net"]) == {
            "fred@example.net"
        }
    box.ingest([newsletter("n", "Carla <c@example.com>", minutes=5)])
    assert box.tab("n") == ("primary", "correspondent")


def test_explain_needs_the_keys_for_a_sealing_owners_contacts(
    store: Store, sealing: MailSealing
) -> None:
    """A clear message of an owner whose contacts are hashes: the bare SQLite reader says it
    needs the keys (the CLI then reads through the store); a session finds the contact."""
    box = Mailbox(store)
    box.ingest([newsletter("clear", FRIEND)])
    store.sealing = sealing
    box.ingest([("s1", make_message("s1@x", sender=ME, to=FRIEND))], "sent")
    with store.session() as session:
        said = " ".join(explain(session, box.user_id, box.id("clear")).lines())
    assert "you have written to fred@example.net" in said
    if store.dialect != "sqlite":
        return
    reader = SqliteReader(Path(make_url(store.engine.url).database or ""))
    try:
        with pytest.raises(SealedWithoutKeys, match="opened without its keys"):
            explain(reader, box.user_id, box.id("clear"))
    finally:
        reader.connection.close()


def test_sealed_senders_are_found_exactly(sealed_store: Store) -> None:
    """The blind index narrows the sealed rows; the opened sender decides."""
    box = Mailbox(sealed_store)
    box.ingest(
        [
            ("from", make_message("a@x", sender=FRIEND)),
            ("words", make_message("b@x", sender="Fred Example <o@net.example>", subject="net")),
            ("to", make_message("c@x", sender="Carla <c@example.com>", to=FRIEND)),
            ("upper", make_message("d@x", sender="FRED <Fred@Example.NET>")),
        ]
    )
    with sealed_store.session() as session:
        found = senders_by_address(session, box.user_id, {"fred@example.net", "c@example.com"})
    assert {k: sorted(v) for k, v in found.items()} == {
        "fred@example.net": sorted([box.id("from"), box.id("upper")]),
        "c@example.com": [box.id("to")],
    }


def test_an_owner_rotation_rehashes_contacts_so_correspondents_are_still_known(
    sealed_store: Store, sealing: MailSealing
) -> None:
    """After the old key version is dropped, a contact hashed under it is hashed anew."""
    from mailroom.crypto import OwnerKeys
    from mailroom.crypto.owner_rotation import Rotator, start_rotation

    box = Mailbox(sealed_store)
    box.ingest([("s1", make_message("s1@x", sender=ME, to=FRIEND, subject="Lunch?"))], "sent")
    (before,) = box.contacts()
    with sealed_store.session() as session:
        rotation = start_rotation(session, OwnerKeys(session, sealing.wrapper), box.user_id).id
        session.commit()
    Rotator(sealed_store, sealing.wrapper, batch=2).run(rotation)
    (after,) = box.contacts()
    assert HASH.fullmatch(after) and after != before  # the newest version's hash
    with sealed_store.session() as session:
        assert correspondents_among(session, box.user_id, ["fred@example.net"]) == {
            "fred@example.net"
        }
    box.ingest([newsletter("later", FRIEND, minutes=9)])
    assert box.tab("later") == ("primary", "correspondent")
