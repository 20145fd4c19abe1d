"""Hold and release with a model over real HTTP (issue 18's Must show; SPEC §9).

A fake OpenAI-compatible model on loopback answers "promotions" in 0.2 s,
in 5 s, or never; ``hold_max_seconds`` is 3. The mail is ingested as new
mail of a live account (the cascade says Primary), the runtime's real
``enrich_live`` and ``release`` consumers do the rest, and the threads'
tabs are watched from the store.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from mailroom.assistant.stats import hold_stats
from mailroom.config import Settings
from mailroom.ingest import commit_batch
from mailroom.jobs.runtime import Runtime
from mailroom.store.engine import Store
from mailroom.store.models import Change, Message, Thread, utcnow
from tests.assistant.fake_model import fake_model, verdict
from tests.assistant.helpers import Timeline, incoming, make_owner

HOLD = 3


def _settings(tmp_path: Path, url: str, timeout: float = 6.0) -> Settings:
    return Settings(
        data_dir=tmp_path,
        assistant="openai",
        assistant_url=url,
        assistant_model="fake",
        assistant_timeout=timeout,
        hold_max_seconds=HOLD,
        allowed_private_hosts="127.0.0.1",
    )


def test_verdict_in_time_late_and_never(store: Store, tmp_path: Path) -> None:
    """Fast verdict: the model's tab at ≈0.2 s; slow: the cascade's tab at ≈3 s, then
    moved; never: the cascade's tab at ≈3 s, kept — each asked once, times kept."""
    rules = {
        "fast": (0.2, verdict("promotions")),
        "slow": (5.0, verdict("promotions")),
        "never": (None, verdict("promotions")),
    }
    owner = make_owner(store)
    with fake_model(rules) as model:
        runtime = Runtime(store, _settings(tmp_path, model.url))
        runtime.start_consumers(("enrich_live", "release"), workers=3)
        try:
            keys = ["fast", "slow", "never"]
            items = [incoming(owner, key, f"{key} deal of the week") for key in keys]
            commit_batch(store, owner.account_id, owner.user_id, items)
            timeline = Timeline(store, keys)
            timeline.watch(7.5)
        finally:
            runtime.stop()
    assert timeline.tabs("fast") == ["held", "promotions"], timeline.seen
    assert 0.1 <= timeline.since("fast", "promotions") < 1.5, timeline.seen
    assert timeline.tabs("slow") == ["held", "primary", "promotions"], timeline.seen
    assert 2.5 <= timeline.since("slow", "primary") < 4.8, timeline.seen
    assert 4.8 <= timeline.since("slow", "promotions") < 7.0, timeline.seen
    assert timeline.tabs("never") == ["held", "primary"], timeline.seen
    assert 2.5 <= timeline.since("never", "primary") < 4.8, timeline.seen
    assert len(model.requests) == 3  # asked once per message
    with store.session() as session:
        rows = {
            row.provider_id: row
            for row in session.execute(
                select(
                    Message.provider_id,
                    Message.thread_id,
                    Message.category_held_at,
                    Message.category_released_at,
                    Message.assistant_at,
                    Message.category_stage,
                )
            )
        }
        slow_updates = session.scalar(
            select(Change.seq)
            .where(
                Change.type == "Thread",
                Change.object_id == rows["slow"].thread_id,
                Change.kind == "updated",
            )
            .order_by(Change.seq.desc())
            .limit(1)
        )
        stored_tab = session.scalar(
            select(Thread.category).where(Thread.id == rows["slow"].thread_id)
        )
    assert slow_updates is not None and stored_tab == "promotions"  # the late move is announced
    assert rows["fast"].category_stage == "assistant"
    assert rows["never"].category_stage == "default"  # no verdict: the cascade's tab stays
    for key in keys:  # held and released timestamps are kept
        assert rows[key].category_held_at is not None
        assert rows[key].category_released_at is not None
    held = {
        k: (r.category_released_at - r.category_held_at).total_seconds() for k, r in rows.items()
    }
    assert held["fast"] < 1.5 and 2.5 <= held["slow"] < 4.8 and 2.5 <= held["never"] < 4.8
    assert rows["slow"].assistant_at > rows["slow"].category_released_at  # a late verdict
    with store.session() as session:
        stats = hold_stats(session, utcnow())
    assert (stats.released, stats.before_verdict) == (3, 2)  # slow and never: before it
    assert stats.median_seconds is not None and 2.5 <= stats.median_seconds < 4.8
