"""Which new mail is held, how held mail is kept out of every tab, and the releasers (SPEC §9)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, update

from mailroom.assistant import hold
from mailroom.assistant.config import AssistantConfig, set_owner
from mailroom.assistant.hold import HoldPolicy
from mailroom.config import Settings
from mailroom.errors import ConfigError
from mailroom.ingest import IncomingMessage, commit_batch
from mailroom.jobs.assistant import AssistantJobs
from mailroom.jobs.queues import make_queues
from mailroom.jobs.runtime import Runtime
from mailroom.listing import View, tab_unread, thread_page
from mailroom.store.engine import Store
from mailroom.store.models import Change, Message, Thread, utcnow
from tests.assistant.helpers import OWNER, incoming, make_owner, thread_tabs
from tests.factories import make_message


@pytest.fixture
def holding() -> Iterator[None]:
    """A process that may hold mail (as a runtime with a model installs it)."""
    policy = HoldPolicy(3)
    hold.ACTIVE.append(policy)
    yield
    hold.ACTIVE.remove(policy)


def _held(store: Store) -> dict[str, bool]:
    with store.session() as session:
        rows = session.execute(select(Message.provider_id, Message.category_held_at))
        return {provider_id: held is not None for provider_id, held in rows}


def test_only_mail_the_verdict_could_change_is_held(store: Store, holding: None) -> None:
    """A stranger's new mail is held; a Gmail label, the owner's own copy, a correspondent
    and old mail are not."""
    owner = make_owner(store)
    sent = IncomingMessage(
        "sent",
        make_message("sent@example.org", sender=OWNER, to="Pat <pat@friends.example>"),
        label_ids=[owner.inbox],
        received_at=utcnow(),
    )
    commit_batch(store, owner.account_id, owner.user_id, [sent])  # Pat is now a correspondent
    friend = IncomingMessage(
        "friend",
        make_message("friend@example.org", sender="Pat <pat@friends.example>", to=OWNER),
        label_ids=[owner.inbox],
        received_at=utcnow(),
    )
    labelled = incoming(owner, "labelled", "weekly offers")
    labelled.provider_labels = ["CATEGORY_PROMOTIONS"]
    old = incoming(owner, "old", "an old offer")
    old.received_at = utcnow() - timedelta(days=3)
    stranger = incoming(owner, "stranger", "a new offer")
    commit_batch(store, owner.account_id, owner.user_id, [friend, labelled, old, stranger])
    assert _held(store) == {
        "sent": False,
        "friend": False,
        "labelled": False,
        "old": False,
        "stranger": True,
    }
    tabs = thread_tabs(store, ["friend", "labelled", "old", "stranger"])
    assert tabs == {
        "friend": "primary",
        "labelled": "promotions",
        "old": "primary",
        "stranger": "held",
    }


def test_no_hold_while_importing_for_an_owner_without_it_or_without_a_model(
    store: Store, holding: None
) -> None:
    """An importing account, an owner who did not switch the assistant on, and a process
    without a model hold nothing."""
    owner = make_owner(store, live=False)
    commit_batch(store, owner.account_id, owner.user_id, [incoming(owner, "importing", "offer")])
    with store.session() as session:
        set_owner(session, owner.user_id, False)
        session.execute(update(Message).values(received_at=utcnow()))
    live = make_owner(store, live=True, assistant=False)
    commit_batch(store, live.account_id, live.user_id, [incoming(live, "owner-off", "offer")])
    with store.session() as session:
        set_owner(session, live.user_id, True)
    hold.ACTIVE.clear()
    commit_batch(store, live.account_id, live.user_id, [incoming(live, "no-model", "offer")])
    hold.ACTIVE.append(HoldPolicy(3))
    assert _held(store) == {"importing": False, "owner-off": False, "no-model": False}


def test_held_mail_is_in_no_tab_and_a_held_reply_leaves_its_thread_in_place(
    store: Store, holding: None
) -> None:
    """A held new thread is missing from the web's Primary tab, JMAP's category filter and
    `mailroom list --tab`; a held reply leaves its thread in its tab."""
    owner = make_owner(store, assistant=False)
    first = incoming(owner, "first", "the plan")
    commit_batch(store, owner.account_id, owner.user_id, [first])
    with store.session() as session:
        set_owner(session, owner.user_id, True)
    reply = IncomingMessage(
        "reply",
        make_message(
            "reply@example.com",
            subject="Re: the plan",
            sender="Shop first <first@shop.example.com>",
            to=OWNER,
            in_reply_to="first@example.com",
        ),
        label_ids=[owner.inbox],
        received_at=utcnow(),
    )
    commit_batch(store, owner.account_id, owner.user_id, [reply, incoming(owner, "new", "offer")])
    from mailroom.jmap import methods  # noqa: F401 - emailquery is imported through it
    from mailroom.jmap.emailquery import EmailFilter

    assert _held(store) == {"first": False, "reply": True, "new": True}
    assert thread_tabs(store, ["first", "reply", "new"]) == {
        "first": "primary",
        "reply": "primary",
        "new": "held",
    }
    with store.session() as session:
        new_thread = session.scalar(select(Message.thread_id).where(Message.provider_id == "new"))
        view = View("inbox", None, "primary", None, frozenset())
        listed = thread_page(session, owner.user_id, view, {"inbox": owner.inbox})
        shown = {row.id for row in listed.rows}
        jmap = EmailFilter(session, owner.user_id, {"inbox": owner.inbox}, tabs=True)
        compiled = jmap.compile({"category": "primary"})
        found = set(session.scalars(select(Message.provider_id).where(compiled)))
    from mailroom.reading import MessageFilter, list_messages

    assert new_thread not in shown and len(shown) == 1
    assert found == {"first", "reply"}  # the reply's thread stays in Primary; "new" is in none
    with store.session() as session:  # `mailroom list --tab primary`: no held message
        listed_ids = {
            row["id"]
            for row in list_messages(
                session, owner.user_id, where=MessageFilter(category="primary")
            )
        }
        first_id = session.scalar(select(Message.id).where(Message.provider_id == "first"))
        unread = tab_unread(session, owner.user_id, owner.inbox)
    assert listed_ids == {first_id}
    assert unread == {"primary": 1}  # the tabs bar counts the first thread, not the held one
    from mailroom.jmap.methods.email_reader import EmailReader

    with store.session() as session:  # JMAP Email/get: no tab yet, never the internal "held"
        by_provider = dict(session.execute(select(Message.provider_id, Message.id)).all())
        emails = EmailReader(session, owner.user_id, tabs=True).read(
            [by_provider["first"], by_provider["new"]], ["id", "category"]
        )
    assert emails[by_provider["first"]]["category"] == "primary"
    assert emails[by_provider["new"]]["category"] is None


def test_the_sweep_and_the_delayed_job_release_through_one_releaser(
    store: Store, tmp_path: Path, holding: None
) -> None:
    """The sweep releases mail held past hold_max_seconds into the cascade's tab, announces
    the thread, and a second releaser finds nothing left to do."""
    owner = make_owner(store)
    commit_batch(store, owner.account_id, owner.user_id, [incoming(owner, "a", "offer")])
    commit_batch(store, owner.account_id, owner.user_id, [incoming(owner, "b", "offer")])
    settings = Settings(data_dir=tmp_path, assistant="offline", hold_max_seconds=3)
    jobs = AssistantJobs(store, make_queues(settings), settings, utcnow)
    assert jobs.run_sweep() == []  # not overdue yet
    with store.session() as session:
        ids = dict(session.execute(select(Message.provider_id, Message.id)).all())
        session.execute(
            update(Message)
            .where(Message.provider_id == "a")
            .values(category_held_at=utcnow() - timedelta(seconds=10))
        )
        before = session.scalar(select(Change.seq).order_by(Change.seq.desc()).limit(1))
    assert jobs.run_sweep() == [ids["a"]]
    assert thread_tabs(store, ["a", "b"]) == {"a": "primary", "b": "held"}
    with store.session() as session:
        announced = set(
            session.scalars(
                select(Change.type).where(Change.seq > before, Change.kind == "updated")
            )
        )
    assert announced == {"Email", "Thread"}
    assert jobs.run_release([ids["a"], ids["b"]]) == [ids["b"]]  # the delayed job: b only
    assert jobs.run_release([ids["a"], ids["b"]]) == []  # nothing is released twice
    assert jobs.run_sweep() == []
    with store.session() as session:
        assert session.scalar(select(Thread.category).where(Thread.category == "held")) is None


def test_hold_max_seconds_outside_2_to_300_is_one_sentence(tmp_path: Path, store: Store) -> None:
    """A hold outside 2–300 s and an unknown model are refused with a clear sentence,
    before a runtime starts anything."""
    for value in (1, 301):
        with pytest.raises(ConfigError) as refused:
            AssistantConfig.from_settings(Settings(data_dir=tmp_path, hold_max_seconds=value))
        assert str(refused.value) == (
            f"The setting MAILROOM_HOLD_MAX_SECONDS is invalid ({value} is not between 2 and "
            "300 seconds); fix it and try again."
        )
    with pytest.raises(ConfigError, match="MAILROOM_ASSISTANT is invalid"):
        Runtime(store, Settings(data_dir=tmp_path, assistant="gpt"))
    with pytest.raises(ConfigError, match="needs MAILROOM_ASSISTANT_URL"):
        AssistantConfig.from_settings(Settings(data_dir=tmp_path, assistant="openai"))
    assert AssistantConfig.from_settings(Settings(data_dir=tmp_path)).hold_max_seconds == 60
