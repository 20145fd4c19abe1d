"""The offline assistant with the real MiniLM model from site-packages (no hub, no network)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sqlalchemy import select

from mailroom.assistant.base import MailFacts
from mailroom.assistant.embedding import MiniLM, model_files
from mailroom.assistant.offline import OfflineClassifier
from mailroom.config import Settings
from mailroom.ingest import commit_batch
from mailroom.jobs.assistant import AssistantJobs
from mailroom.jobs.queues import make_queues
from mailroom.store.engine import Store
from mailroom.store.models import Message, User, utcnow
from tests.assistant.helpers import incoming, make_owner

SHOPS = ["sneakers", "laptops", "sofas", "watches", "jackets", "phones", "lamps", "boots"]
FRIENDS = ["Friday", "Sunday", "the weekend", "Tuesday", "tonight", "next week", "May", "June"]


def _promo(i: int, thing: str) -> tuple[str, str]:
    return f"Flash sale: {20 + i}% off all {thing}", f"Shop now, the offer on {thing} ends soon."


def _personal(i: int, when: str) -> tuple[str, str]:
    return f"Dinner {when}?", f"Hi, are you free {when}? Bring the kids if you like. Love, Ann"


def _mail(i: int, subject: str, text: str) -> MailFacts:
    return MailFacts(i, 1, "Someone", f"x{i}@example.org", subject, text)


def test_the_model_loads_from_site_packages_and_embeds_meaningfully() -> None:
    """The ONNX file and tokenizer come from installed packages; vectors are unit length
    and a paraphrase is nearer than an unrelated sentence."""
    model, tokenizer = model_files()
    assert "site-packages" in str(model) and "site-packages" in str(tokenizer)
    vectors = MiniLM().embed(
        ["Your order has shipped", "Your parcel is on its way", "Join our reading group"]
    )
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.1


def test_a_model_fitted_on_examples_sorts_unseen_mail() -> None:
    """Trained on sales and personal notes, it files unseen ones of each kind correctly."""
    classifier = OfflineClassifier()
    examples = [(_mail(i, *_promo(i, thing)), "promotions") for i, thing in enumerate(SHOPS)]
    examples += [(_mail(50 + i, *_personal(i, w)), "primary") for i, w in enumerate(FRIENDS)]
    examples += examples[:4]  # at least MIN_EXAMPLES
    model = classifier.fit(examples)
    assert model is not None
    unseen = [
        _mail(90, "Weekend deals: 40% off garden furniture", "Only until Sunday, shop now."),
        _mail(91, "Lunch tomorrow?", "Hey, want to grab lunch tomorrow? Ann"),
    ]
    predicted = [tab for tab, _ in model.predict(classifier.features(unseen))]
    assert predicted == ["promotions", "primary"]
    assert classifier.fit(examples[:5]) is None  # too little to learn from


def test_trained_on_the_owners_corrections_it_gives_held_mail_its_verdict(
    store: Store, tmp_path: Path
) -> None:
    """From the owner's corrected senders it learns their tabs; the job applies the verdict
    as the cascade's ``assistant`` stage, and an owner with too little mail gets none."""
    owner = make_owner(store)
    items, corrections = [], {}
    for i, thing in enumerate(SHOPS * 2):
        subject, _ = _promo(i, thing)
        items.append(incoming(owner, f"shop{i}", subject))
        corrections[f"shop{i}@shop.example.com"] = "promotions"
    for i, when in enumerate(FRIENDS * 2):
        subject, _ = _personal(i, when)
        items.append(incoming(owner, f"friend{i}", subject))
        corrections[f"friend{i}@shop.example.com"] = "primary"
    settings = Settings(data_dir=tmp_path, assistant="offline")
    jobs = AssistantJobs(store, make_queues(settings), settings, utcnow)
    commit_batch(store, owner.account_id, owner.user_id, [incoming(owner, "early", "Sale!")])
    with store.session() as session:
        early = session.scalar(select(Message.id).where(Message.provider_id == "early"))
    jobs.run_classify([early])  # nothing to learn from yet: no verdict, asked once
    commit_batch(store, owner.account_id, owner.user_id, items)
    with store.session() as session:
        user = session.get(User, owner.user_id)
        assert user is not None
        user.settings = {**user.settings, "tab_corrections": corrections}
    new = [
        incoming(owner, "new-sale", "Flash sale: 35% off all backpacks"),
        incoming(owner, "new-note", "Dinner on Saturday?"),
    ]
    commit_batch(store, owner.account_id, owner.user_id, new)
    with store.session() as session:
        ids = dict(session.execute(select(Message.provider_id, Message.id)).all())
    jobs.classifier.close()  # forget the model of before the corrections (retrained at once)
    jobs.run_classify([ids["new-sale"], ids["new-note"]])
    jobs.uninstall()
    with store.session() as session:
        rows = {
            r.provider_id: r
            for r in session.execute(
                select(
                    Message.provider_id,
                    Message.category,
                    Message.category_stage,
                    Message.assistant_at,
                ).where(Message.provider_id.in_(["early", "new-sale", "new-note"]))
            )
        }
    assert rows["early"].assistant_at is not None and rows["early"].category_stage == "default"
    assert (rows["new-sale"].category, rows["new-sale"].category_stage) == (
        "promotions",
        "assistant",
    )
    assert rows["new-note"].category == "primary"
