"""Threading sealed mail on both stores: as clear mail threads, and across the switch.

A sealed row stores its Message-ID, references and subject key as the owner's keyed
hashes and its subject, sender and recipients sealed (``crypto.message_fields``); the
threader and the subject rescue must still find the conversations clear mail finds,
also between rows written before sealing was switched on and rows written after.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from functools import cache

import pytest
from sqlalchemy import select, text

from mailroom.conversations.references import reference_chain
from mailroom.conversations.subject import split_subject
from mailroom.conversations.threader import BatchThreader
from mailroom.crypto.datakeys import OwnerKeys
from mailroom.crypto.owner_rotation import start_rotation
from mailroom.crypto.sealing import MailSealing
from mailroom.mime import parse_message
from mailroom.providers.local import open_source
from mailroom.store.engine import Store
from mailroom.store.models import Message, Thread
from tests.conftest import SAMPLES
from tests.conversations.conftest import rescue_scenarios
from tests.factories import make_message
from tests.helpers import ingest, make_account, thread_of_provider

Corpus = list[tuple[str, bytes]]
ALICE, BOB = "Alice <alice@example.org>", "Bob <bob@example.net>"
CAROL, DAN = "carol@example.org", "dan@example.net"


@cache
def _sample_conversations() -> tuple[tuple[str, bytes], ...]:
    """Conversations of the sample corpus: subject groups of 2-6 messages, some by references.

    Groups holding a reply that names no parent (subject rescue) come first, then
    groups threaded by references; about 45 messages.
    """
    groups: dict[str, list[tuple[str, bytes]]] = defaultdict(list)
    rescued: set[str] = set()
    for message in open_source(SAMPLES).messages():
        if not message.raw:
            continue
        parsed = parse_message(message.raw)
        reply, core = split_subject(parsed.subject)
        groups[core.casefold()].append((message.provider_id, message.raw))
        if reply and not reference_chain(parsed):
            rescued.add(core.casefold())
    wanted = sorted(
        (k for k in groups if 1 < len(groups[k]) <= 6), key=lambda k: (k not in rescued, k)
    )
    picked: list[tuple[str, bytes]] = []
    for key in wanted:
        if len(picked) + len(groups[key]) <= 45:
            picked += groups[key]
    return tuple(picked)


def _partition(store: Store, owner: int) -> set[frozenset[str]]:
    """The owner's threads as sets of provider ids."""
    with store.session() as session:
        rows = session.execute(
            select(Message.provider_id, Message.thread_id).where(Message.user_id == owner)
        ).all()
    groups: dict[int | None, set[str]] = defaultdict(set)
    for provider_id, thread_id in rows:
        groups[thread_id].add(provider_id)
    return {frozenset(group) for group in groups.values()}


def _ingest_in_batches(
    store: Store, account: tuple[int, int, int], items: Corpus, cuts: Sequence[int]
) -> None:
    start = 0
    for end in [*cuts, len(items)]:
        if items[start:end]:
            ingest(store, account, items[start:end])
        start = end


def test_a_sealed_store_threads_as_a_clear_one(store: Store, sealing: MailSealing) -> None:
    """The same mail, clear in one batch and sealed in shuffled batches: the same threads.

    The corpus holds real sample conversations (references, and replies naming no
    parent) and the subject rescue's hand-made cases (one candidate, two candidates
    bridged later, a reply sharing nobody, one outside the window).
    """
    corpus: Corpus = [*_sample_conversations(), *rescue_scenarios()]
    clear_account = make_account(store, "clear-owner", name="clear")
    ingest(store, clear_account, corpus)
    expected = _partition(store, clear_account[0])

    store.sealing = sealing
    sealed_account = make_account(store, "sealed-owner", name="sealed")
    shuffled = list(corpus)
    random.Random(7).shuffle(shuffled)
    _ingest_in_batches(store, sealed_account, shuffled, [4, 11, 23, 30, 41, 50])
    owner = sealed_account[0]

    assert _partition(store, owner) == expected
    # Not a trivial partition: references and the subject rescue both joined messages.
    assert {"s1", "s2"} in expected and {"s3"} in expected and {"l2"} in expected
    assert sum(len(group) > 1 for group in expected) >= 8
    with store.session() as session:
        sealed = session.scalars(select(Message.sealed).where(Message.user_id == owner)).all()
        assert sealed and all(sealed)
        headers = session.scalars(
            select(Message.message_id_header).where(Message.user_id == owner)
        ).all()
        assert not any(h and "@" in h for h in headers)  # hashed, not the ids
        subjects = session.scalars(select(Thread.subject).where(Thread.user_id == owner)).all()
        assert subjects and set(subjects) == {""}  # never ciphertext, never the clear text
        clear_subjects = session.scalars(
            select(Thread.subject).where(Thread.user_id == clear_account[0])
        ).all()
        assert "Budget" in clear_subjects  # clear mail keeps its thread subjects
        stored = session.execute(text("SELECT subject FROM threads")).scalars().all()
    assert not any("mrf1." in (s or "") for s in stored)


def _mail(mid: str, subject: str, sender: str, to: str, minutes: int, **kw: object) -> bytes:
    return make_message(f"{mid}@switch", subject=subject, sender=sender, to=to,
                        minutes=minutes, **kw)  # type: ignore[arg-type]  # fmt: skip


def test_replies_sealed_after_the_switch_join_clear_conversations(
    store: Store, sealing: MailSealing
) -> None:
    """Sealing switched on later: sealed mail threads onto, and pulls in, clear mail."""
    account = make_account(store)
    owner = account[0]
    ingest(
        store,
        account,
        [
            ("p1", _mail("p1", "Plan", ALICE, BOB, 0)),
            ("s1", _mail("s1", "Budget", CAROL, DAN, 0)),
            # A clear reply to a message not stored yet: the sealed parent must adopt it.
            ("c1", _mail("c1", "Re: Lunch", BOB, ALICE, 20, in_reply_to="l1@switch")),
            ("o1", _mail("o1", "Offsite", ALICE, BOB, 0)),
        ],
    )
    store.sealing = sealing
    ingest(
        store,
        account,
        [
            ("p2", _mail("p2", "Re: Plan", BOB, ALICE, 10, in_reply_to="p1@switch")),
            ("s2", _mail("s2", "AW: Budget", DAN, CAROL, 60)),
        ],
    )
    ingest(store, account, [("l1", _mail("l1", "Lunch", ALICE, BOB, 5))])
    # Two sealed replies naming the same clear root in separate batches.
    ingest(
        store,
        account,
        [("o2", _mail("o2", "Re: Offsite", BOB, ALICE, 5, references=["o1@switch"]))],
    )
    ingest(
        store,
        account,
        [("o3", _mail("o3", "Re: Offsite", ALICE, BOB, 9, references=["o1@switch", "o2@switch"]))],
    )

    # A sealed reply naming no parent: its only candidate is the conversation above, whose
    # clear root and sealed replies the rescue must see as one (one id, two stored forms).
    ingest(store, account, [("o4", _mail("o4", "RE: Offsite", BOB, ALICE, 30))])

    with store.session() as session:
        rows = session.execute(
            select(Message.provider_id, Message.sealed).where(Message.user_id == owner)
        ).all()
    flags = {provider_id: bool(sealed) for provider_id, sealed in rows}
    assert flags == {
        "p1": False, "s1": False, "c1": False, "o1": False,
        "p2": True, "s2": True, "l1": True, "o2": True, "o3": True, "o4": True,
    }  # fmt: skip
    assert _partition(store, owner) == {
        frozenset({"p1", "p2"}),
        frozenset({"s1", "s2"}),
        frozenset({"c1", "l1"}),
        frozenset({"o1", "o2", "o3", "o4"}),
    }


def test_clear_mail_after_sealing_is_switched_off_joins_sealed_conversations(
    store: Store, sealing: MailSealing
) -> None:
    """Sealing switched off again (keys kept): clear replies still find sealed parents."""
    store.sealing = sealing
    account = make_account(store)
    ingest(store, account, [("p1", _mail("p1", "Plan", ALICE, BOB, 0))])
    ingest(store, account, [("s1", _mail("s1", "Budget", CAROL, DAN, 0))])
    store.sealing = MailSealing(sealing.wrapper, seal_new_mail=False)
    ingest(
        store,
        account,
        [
            ("p2", _mail("p2", "Re: Plan", BOB, ALICE, 10, in_reply_to="p1@switch")),
            ("s2", _mail("s2", "Re: Budget", DAN, CAROL, 60)),
        ],
    )
    owner = account[0]
    assert thread_of_provider(store, owner, "p2") == thread_of_provider(store, owner, "p1")
    assert thread_of_provider(store, owner, "s2") == thread_of_provider(store, owner, "s1")


def test_message_by_message_threading_finds_every_form_too(
    store: Store, sealing: MailSealing, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When batch threading fails, threading message by message still links sealed replies
    to clear parents and clear replies to sealed parents."""
    account = make_account(store)
    ingest(store, account, [("p1", _mail("p1", "Plan", ALICE, BOB, 0))])
    ingest(
        store, account, [("c1", _mail("c1", "Re: Lunch", BOB, ALICE, 20, in_reply_to="l1@switch"))]
    )

    def broken(self: BatchThreader, message_ids: list[int]) -> None:
        raise RuntimeError("batch threading is down")

    monkeypatch.setattr(BatchThreader, "assign_batch", broken)
    store.sealing = sealing
    ingest(
        store,
        account,
        [
            ("p2", _mail("p2", "Re: Plan", BOB, ALICE, 10, in_reply_to="p1@switch")),
            ("l1", _mail("l1", "Lunch", ALICE, BOB, 5)),
        ],
    )
    owner = account[0]
    assert thread_of_provider(store, owner, "p2") == thread_of_provider(store, owner, "p1")
    assert thread_of_provider(store, owner, "l1") == thread_of_provider(store, owner, "c1")
    with store.session() as session:
        notes = session.scalars(select(Message.thread_note).where(Message.user_id == owner)).all()
    assert not any(notes)


def test_the_subject_rescue_during_a_rotation_sees_one_id_under_both_versions(
    store: Store, sealing: MailSealing
) -> None:
    """While an owner key rotation runs, a parent hashed under version 1 and its reply hashed
    under version 2 are one conversation to the rescue: a reply naming no parent joins it,
    and the rescue never splits it."""
    store.sealing = sealing
    account = make_account(store)
    owner = account[0]
    ingest(store, account, [("p1", _mail("p1", "Plan", ALICE, BOB, 0))])
    with store.session() as session:
        start_rotation(session, OwnerKeys(session, sealing.wrapper), owner)
    ingest(
        store, account, [("p2", _mail("p2", "Re: Plan", BOB, ALICE, 10, in_reply_to="p1@switch"))]
    )
    assert thread_of_provider(store, owner, "p2") == thread_of_provider(store, owner, "p1")
    ingest(store, account, [("p3", _mail("p3", "RE: Plan", ALICE, BOB, 20))])
    ingest(store, account, [("p4", _mail("p4", "Re: Re: Plan", BOB, ALICE, 30))])
    assert _partition(store, owner) == {frozenset({"p1", "p2", "p3", "p4"})}
