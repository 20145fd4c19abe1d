"""Which ids a message names for threading, the cap, and the provider conversation map."""

from __future__ import annotations

from sqlalchemy import delete

from mailroom.conversations.references import MAX_REFERENCES, reference_chain
from mailroom.conversations.threader import ProviderThreadMap
from mailroom.ingest import IncomingMessage, store_batch
from mailroom.mime import parse_message
from mailroom.store.engine import Store
from mailroom.store.models import Thread
from tests.factories import make_message
from tests.helpers import make_account, thread_of


def _parsed(headers: str) -> list[str]:
    raw = (
        "Message-ID: <self@x>\nFrom: Daniel <dan@example.org>\nTo: list@example.org\n"
        f"{headers}\nSubject: Re: hi\n\nbody\n"
    ).encode()
    return reference_chain(parse_message(raw))


def test_gnus_attribution_is_not_an_id() -> None:
    """An In-Reply-To without angle brackets ("joe@host's message of ...") names nothing."""
    assert _parsed('In-Reply-To: joe@example.com\'s message of "Tue, 27 Aug 2002"') == []


def test_an_address_of_the_message_itself_is_not_an_id() -> None:
    """MH's "Message from X <addr> of date <id>" keeps the id and drops the address."""
    chain = _parsed(
        'In-Reply-To: Message from Daniel <dan@example.org> of "Mon." <real.1@host>\n'
        "References: <list@example.org> <root.0@host>"
    )
    assert chain == ["real.1@host", "root.0@host"]


def test_in_reply_to_first_then_newest_references_and_never_itself() -> None:
    """In-Reply-To leads, References follow newest first, the own id and repeats are dropped."""
    chain = _parsed("In-Reply-To: <c@h>\nReferences: <a@h> <b@h> <c@h> <self@x>")
    assert chain == ["c@h", "b@h", "a@h"]


def test_the_cap_keeps_the_root() -> None:
    """A chain longer than the cap keeps In-Reply-To, the newest references and the root."""
    refs = " ".join(f"<r{i}@h>" for i in range(120))
    chain = _parsed(f"In-Reply-To: <r119@h>\nReferences: {refs}")
    assert len(chain) == MAX_REFERENCES
    assert chain[0] == "r119@h" and chain[1] == "r118@h" and chain[-1] == "r0@h"


def test_provider_map_is_bounded_and_checked_against_the_session(store: Store) -> None:
    """The map forgets its oldest entries and never returns a thread that no longer exists."""
    make_account(store)
    with store.session() as session:
        alive, gone = Thread(user_id=1), Thread(user_id=1)
        session.add_all([alive, gone])
        session.flush()
        cache = ProviderThreadMap(limit=2)
        cache.put(1, "t-alive", alive.id)
        cache.put(1, "t-gone", gone.id)
        session.execute(delete(Thread).where(Thread.id == gone.id))
        assert cache.get(session, 1, "t-alive") == alive.id
        assert cache.get(session, 1, "t-gone") is None
        cache.put(1, "t-3", alive.id)
        cache.put(1, "t-4", alive.id)
        assert len(cache) == 2 and cache.get(session, 1, "t-alive") is None


def test_provider_conversation_joins_messages_of_one_batch(store: Store) -> None:
    """Two messages of one Gmail conversation in one batch share a thread; the third does not."""
    user_id, account_id, inbox = make_account(store)
    items = [
        IncomingMessage(
            f"p{i}",
            make_message(f"p{i}@x", subject=f"Topic {i}"),
            label_ids=[inbox],
            provider_thread_id="conv-1" if i < 2 else "conv-2",
        )
        for i in range(3)
    ]
    with store.session() as session:
        store_batch(session, account_id, user_id, items)
    assert thread_of(store, "p0@x") == thread_of(store, "p1@x") != thread_of(store, "p2@x")
