"""Catch-up: never-asked mail on enrich_backlog, only after every import and into an empty queue."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select, update

from mailroom.assistant import hold
from mailroom.assistant.catchup import never_asked
from mailroom.config import Settings
from mailroom.ingest import commit_batch
from mailroom.ingest.routing import BACKLOG, LIVE
from mailroom.jobs.assistant import AssistantJobs
from mailroom.jobs.queues import make_queues
from mailroom.owners import get_or_create_account, get_or_create_user
from mailroom.store.engine import Store
from mailroom.store.models import Account, Message, utcnow
from tests.assistant.fake_model import fake_model, verdict
from tests.assistant.helpers import incoming, make_owner, thread_tabs


def test_catch_up_waits_for_imports_and_an_empty_queue_then_yields_to_live_mail(
    store: Store, tmp_path: Path
) -> None:
    """Nothing is queued while an account imports or the queue holds work; then the newest
    never-asked mail is, is asked once, moves, and a backlog run yields to queued live mail."""
    owner = make_owner(store, live=False)
    items = [incoming(owner, f"m{i}", f"offer {i}") for i in range(3)]
    commit_batch(store, owner.account_id, owner.user_id, items)  # imported: never held
    with store.session() as session:
        user = get_or_create_user(session, "sam")
        second = get_or_create_account(session, user, "second", "local")
        second.import_finished_at = utcnow()
    with fake_model({"offer": (0.0, verdict("promotions"))}) as model:
        settings = Settings(
            data_dir=tmp_path,
            assistant="openai",
            assistant_url=model.url,
            assistant_model="fake",
            allowed_private_hosts="127.0.0.1",
        )
        queues = make_queues(settings)
        jobs = AssistantJobs(store, queues, settings, utcnow)
        try:
            assert jobs.catch_up() == {}  # "main" is still importing
            with store.session() as session:
                session.execute(update(Account).values(import_finished_at=utcnow()))
                newest_first = list(
                    session.scalars(
                        select(Message.id).order_by(Message.received_at.desc(), Message.id.desc())
                    )
                )
            assert jobs.catch_up() == {owner.user_id: newest_first}
            assert queues[BACKLOG].pending_count() == 1
            assert jobs.catch_up() == {}  # the queue is not empty: nothing more
            queues[LIVE].enqueue(jobs.classify_live.s([]))  # live mail waits
            jobs.run_backlog(newest_first)
            assert model.requests == []  # yielded before its first call
            assert queues[BACKLOG].pending_count() == 2  # put back (with a delay) behind it
            queues[LIVE].flush()
            jobs.run_backlog(newest_first)
            assert len(model.requests) == 3
            jobs.run_backlog(newest_first)  # asked once: a second run asks nothing
            assert len(model.requests) == 3
        finally:
            jobs.uninstall()
    assert set(thread_tabs(store, ["m0", "m1", "m2"]).values()) == {"promotions"}
    queues[BACKLOG].flush()
    assert jobs.catch_up() == {}  # every message was asked: nothing left to catch up


# stage, rule_category of each message: which a verdict could still change is the question
DECISIONS = {
    "unsorted": (None, None),
    "default": ("default", None),
    "sender": ("sender", None),
    "label": ("provider_label", None),
    "own": ("own_message", None),
    "correction": ("correction", None),
    "correspondent": ("correspondent", None),
    "rule": ("default", "promotions"),
    "unsorted-rule": (None, "updates"),
}


def test_the_hold_and_the_catch_up_agree_on_which_mail_a_verdict_could_change(
    store: Store,
) -> None:
    """New mail is held exactly when the catch-up would ask about it: undecided mail
    (a message without a stage too), never a rule's, a label's, the owner's own, a
    correction's or a correspondent's."""
    owner = make_owner(store)
    keys = list(DECISIONS)
    commit_batch(store, owner.account_id, owner.user_id, [incoming(owner, k, k) for k in keys])
    with store.session() as session:
        for key, (stage, rule) in DECISIONS.items():
            session.execute(
                update(Message)
                .where(Message.provider_id == key)
                .values(category_stage=stage, rule_category=rule)
            )
        ids = {
            key: message_id
            for key, message_id in session.execute(select(Message.provider_id, Message.id))
        }
    policy = hold.HoldPolicy(3)
    hold.ACTIVE.append(policy)
    try:
        with store.session() as session:
            asked = never_asked(session, owner.user_id)
            held, reason = hold.hold_new_mail(
                session, owner.user_id, owner.account_id, list(ids.values()), utcnow(), ()
            )
    finally:
        hold.ACTIVE.remove(policy)
    assert reason is None
    by_id = {message_id: key for key, message_id in ids.items()}
    assert sorted(by_id[i] for i in held) == ["default", "sender", "unsorted"]
    assert sorted(by_id[i] for i in asked) == sorted(by_id[i] for i in held)
