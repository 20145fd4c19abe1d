"""Claiming in batches: a slow-down mid-batch leaves the rest uncharged; tokens per batch."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from mailroom.outbound.pace import StorePace
from mailroom.outbound.sender import Sender
from mailroom.store.engine import Store
from tests.outbound.core_support import (
    Clock,
    account_for,
    failed,
    queue,
    sending_settings,
    subjects,
    submission,
)
from tests.support.smtp_sink import SmtpSink


def test_a_slow_down_mid_batch_puts_the_rest_back_uncharged(
    store: Store, sink: SmtpSink, clock: Clock, tmp_path: Path
) -> None:
    """421 "slow down" on the first of a batch: the others are queued as before, no attempt."""
    settings = sending_settings(tmp_path)
    account_id = account_for(store, sink)
    ids = [queue(store, settings, account_id, n, clock, lane="direct") for n in range(3)]
    sink.script(["421 4.7.0 Too many messages, slow down"])
    sender = Sender(store, settings, clock=clock)
    assert sender.run_lane("direct") == 1
    assert sender.lane_pause["direct"] == pytest.approx(60.0)
    first, *rest = (submission(store, number) for number in ids)
    assert (first.state, first.attempts, first.last_code) == ("queued", 1, 421)
    for row in rest:
        assert (row.state, row.attempts, row.deferrals) == ("queued", 0, 0)
        assert row.handoff_at is None and row.next_attempt_at == clock()
    assert sender.run_lane("direct") == 2  # the two put back are due at once
    clock.advance(30)
    assert sender.run_lane("direct") == 1
    assert subjects(sink) == ["n1", "n2", "n0"]
    assert failed(store) == []
    sender.close()


def test_a_batch_on_a_throttled_lane_takes_only_the_tokens_it_uses(
    store: Store, sink: SmtpSink, clock: Clock, tmp_path: Path
) -> None:
    """Three due calm mails and a burst of five: three tokens go, two stay for later mail."""
    settings = sending_settings(tmp_path, lane_rates="calm=6/5")
    account_id = account_for(store, sink)
    for number in range(3):
        queue(store, settings, account_id, number, clock, kind="newsletter")
    sender = Sender(store, settings, clock=clock)
    assert sender.run_lane("calm") == 3
    for number in range(3, 6):
        queue(store, settings, account_id, number, clock, kind="newsletter")
    assert sender.run_lane("calm") == 2  # the two tokens left
    assert sender.lane_pause["calm"] == pytest.approx(10.0)  # 6 a minute
    pace = StorePace(store, settings.lane_rate_map)
    assert pace.take("calm", clock()) == pytest.approx(10.0)  # nothing was left over
    clock.advance(timedelta(seconds=10).total_seconds())
    assert sender.run_lane("calm") == 1
    assert subjects(sink) == [f"n{number}" for number in range(6)]
    sender.close()
