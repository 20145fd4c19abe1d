"""The assistant and tab corrections on sealed mail: the model is asked with the clear sender,
subject and text, its reason is explained opened, its training set finds corrected senders,
and moving a sealed sender's thread teaches the cascade."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import select, text, update

from mailroom.assistant.mail import load_mail
from mailroom.assistant.offline import training_examples
from mailroom.categories.corrections import move_to_tab
from mailroom.categories.recompute import explain
from mailroom.config import Settings
from mailroom.ingest import IncomingMessage, commit_batch
from mailroom.jobs.assistant import AssistantJobs
from mailroom.jobs.queues import make_queues
from mailroom.store.engine import Store
from mailroom.store.models import Account, Message, utcnow
from tests.assistant.fake_model import fake_model, verdict
from tests.assistant.helpers import OWNER, incoming, make_owner, thread_tabs
from tests.factories import make_message

REASON = "a sale with a countdown"


def _ids(store: Store) -> dict[str, int]:
    with store.session() as session:
        return {p: i for i, p in session.execute(select(Message.id, Message.provider_id))}


def test_the_assistant_sees_clear_text_and_its_reason_is_explained_opened(
    sealed_store: Store, tmp_path: Path
) -> None:
    owner = make_owner(sealed_store, live=False)
    items = [incoming(owner, f"m{i}", f"offer {i}") for i in range(2)]
    commit_batch(sealed_store, owner.account_id, owner.user_id, items)
    with sealed_store.session() as session:
        session.execute(update(Account).values(import_finished_at=utcnow()))
        stored = session.execute(text("SELECT subject, preview, from_email FROM messages"))
        assert all(str(v).startswith("mrf1.") for row in stored for v in row)
    ids = _ids(sealed_store)
    with fake_model({"offer": (0.0, verdict("promotions", REASON))}) as model:
        settings = Settings(
            data_dir=tmp_path,
            assistant="openai",
            assistant_url=model.url,
            assistant_model="fake",
            allowed_private_hosts="127.0.0.1",
        )
        queues = make_queues(settings)
        jobs = AssistantJobs(sealed_store, queues, settings, utcnow)
        try:
            jobs.run_backlog(sorted(ids.values()))
        finally:
            jobs.uninstall()
    asked = [json.dumps(request) for request in model.requests]
    assert len(asked) == 2 and not any("mrf1." in request for request in asked)
    assert any("Subject: offer 0" in r and "m0@shop.example.com" in r for r in asked)
    assert set(thread_tabs(sealed_store, ["m0", "m1"]).values()) == {"promotions"}
    with sealed_store.session() as session:
        sealed_reason = session.scalar(
            text("SELECT assistant_reason FROM messages WHERE id = :id"), {"id": ids["m0"]}
        )
        assert str(sealed_reason).startswith("mrf1.")
        said = " ".join(explain(session, owner.user_id, ids["m0"]).lines())
        facts = load_mail(session, [ids["m1"]])[ids["m1"]]
    assert REASON in said and "mrf1." not in said
    assert (facts.subject, facts.from_email) == ("offer 1", "m1@shop.example.com")
    assert facts.from_name == "Shop m1" and "Hello, offer 1." in facts.text


def test_moving_a_sealed_thread_teaches_its_sender_and_trains_on_it(sealed_store: Store) -> None:
    owner = make_owner(sealed_store, assistant=False)
    commit_batch(
        sealed_store, owner.account_id, owner.user_id, [incoming(owner, "n1", "weekly news")]
    )
    ids = _ids(sealed_store)
    with sealed_store.session() as session:
        thread = session.scalar(select(Message.thread_id).where(Message.id == ids["n1"]))
        assert thread is not None
        move = move_to_tab(session, owner.user_id, [thread], "updates")
        assert move.corrections == {"n1@shop.example.com": None}
        examples = training_examples(session, owner.user_id)
    assert (ids["n1"], "updates") in examples
    raw = make_message("n1b@example.com", sender="Shop <n1@shop.example.com>", to=OWNER)
    later = IncomingMessage("n1-again", raw, label_ids=[owner.inbox], received_at=utcnow())
    commit_batch(sealed_store, owner.account_id, owner.user_id, [later])
    with sealed_store.session() as session:
        row = session.execute(
            select(Message.category, Message.category_stage).where(
                Message.provider_id == "n1-again"
            )
        ).one()
    assert tuple(row) == ("updates", "correction")
