"""The engine's hooks move their series: hand-offs per lane, Gmail quota, new-mail lag."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select, update

from mailroom.config import Settings
from mailroom.jobs.queues import make_queues
from mailroom.jobs.tasks import Jobs
from mailroom.outbound.sender import Sender
from mailroom.providers.gmail.quota_store import StoreQuotaPacer
from mailroom.store.engine import Store
from mailroom.store.models import Account, Message
from tests.factories import make_message
from tests.helpers import ingest, make_account
from tests.outbound.core_support import Clock, account_for, queue, sending_settings
from tests.support.smtp_sink import SmtpSink


def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def sink() -> Iterator[SmtpSink]:
    """A plain SMTP sink on loopback."""
    with SmtpSink() as running:
        yield running


def test_handoffs_count_per_lane_and_outcome(store: Store, sink: SmtpSink, tmp_path: Path) -> None:
    """A refused direct message counts as failed, an accepted one as sent, in its lane."""
    clock = Clock()
    sender = Sender(store, sending_settings(tmp_path), clock=clock)
    account = account_for(store, sink)
    sent, failed = (
        _sample("mailroom_outbound_handoffs_total", lane="direct", outcome=outcome)
        for outcome in ("sent", "failed")
    )
    sink.script(["550 5.1.1 no such user"])
    queue(store, sender.settings, account, 1, clock, lane="direct")
    queue(store, sender.settings, account, 2, clock, lane="direct")
    assert sender.run_lane("direct") == 2
    sender.close()
    assert _sample("mailroom_outbound_handoffs_total", lane="direct", outcome="sent") == sent + 1
    assert (
        _sample("mailroom_outbound_handoffs_total", lane="direct", outcome="failed") == failed + 1
    )


def test_gmail_quota_units_and_rejections_are_counted(store: Store) -> None:
    """Units a reservation spends are counted; a refusal counts once; a wait spends nothing."""
    _, account, _ = make_account(store, name="gmail")
    now = datetime(2026, 1, 1, 12, 0, 0).astimezone()
    pacer = StoreQuotaPacer(store, account, clock=lambda: now, sleep=lambda _s: None)
    units, rejections = (
        _sample("mailroom_gmail_quota_units_total"),
        _sample("mailroom_gmail_quota_rejections_total"),
    )
    assert pacer.reserve(250) == 0.0
    assert _sample("mailroom_gmail_quota_units_total") == units + 250
    assert pacer.rejected(250) > 0
    assert _sample("mailroom_gmail_quota_rejections_total") == rejections + 1
    assert pacer.reserve(250) > 0  # blocked for the minute: nothing spent
    assert _sample("mailroom_gmail_quota_units_total") == units + 250
    pacer.close()


def test_sync_lag_counts_new_mail_of_synced_accounts_only(store: Store, tmp_path: Path) -> None:
    """Mail stored 3 s after arrival is observed once it is past import; old mail never."""
    owner = make_account(store)
    result = ingest(store, owner, [("m1", make_message("m1@lag.test"))])
    with store.session() as session:
        received = session.scalar(
            select(Message.received_at).where(Message.id.in_(result.created_ids))
        )
    assert received is not None
    moment = [received]
    jobs = Jobs(store, make_queues(Settings(data_dir=tmp_path)), now=lambda: moment[0])
    count = _sample("mailroom_sync_lag_seconds_count")
    total = _sample("mailroom_sync_lag_seconds_sum")

    def follow_up(at: datetime) -> None:
        moment[0] = at
        jobs.enqueue_follow_up(result)

    follow_up(received + timedelta(seconds=3))  # still importing: history, not lag
    assert _sample("mailroom_sync_lag_seconds_count") == count
    with store.session() as session:
        session.execute(
            update(Account).where(Account.id == owner[1]).values(import_finished_at=received)
        )
    follow_up(received + timedelta(seconds=3))
    assert _sample("mailroom_sync_lag_seconds_count") == count + 1
    assert _sample("mailroom_sync_lag_seconds_sum") == pytest.approx(total + 3)
    follow_up(received + timedelta(days=2))  # old mail moved in is not lag
    assert _sample("mailroom_sync_lag_seconds_count") == count + 1
