"""The quota policy itself: limits, budgets, slow-downs and the sliding minute (pure arithmetic)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from mailroom.providers.gmail.quota import (
    LEARNED_LIMIT_LIFETIME,
    MESSAGES_PER_REQUEST,
    MIN_LEARNABLE_LIMIT,
    SLOWDOWN_DURATION,
    START_LIMIT,
    UNITS_PER_FULL_MESSAGE,
    WINDOW_SECONDS,
    QuotaState,
    message_requests,
    rejection_usage,
    reservation_wait,
    scaled_time,
    units_for_messages,
    wait_for_room,
    window_usage,
)

NOW = 1_800_000_000.0


def test_the_constants_are_the_specified_ones() -> None:
    """15,000 units to start, 5 messages a request, 60 units a message, a minute, a day."""
    assert START_LIMIT == 15_000
    assert MESSAGES_PER_REQUEST == 5
    assert UNITS_PER_FULL_MESSAGE == 60
    assert WINDOW_SECONDS == 60
    assert LEARNED_LIMIT_LIFETIME == 86_400


def test_a_fresh_account_is_paced_at_85_percent_of_15000() -> None:
    """Nothing learned: the limit is 15,000 and the budget 12,750 units a minute."""
    state = QuotaState()
    assert state.known_limit(NOW) is None
    assert state.limit(NOW) == 15_000
    assert state.budget(NOW) == 12_750


def test_the_first_rejection_teaches_the_usage_and_blocks_a_minute() -> None:
    """Without a stated limit the usage at the rejection is learned; the account waits 60 s."""
    state = QuotaState().after_rejection(NOW, used=6_000, stated_limit=None)
    assert state.known_limit(NOW) == 6_000
    assert state.budget(NOW) == 5_100
    assert state.blocked_for(NOW) == 60.0
    assert state.blocked_for(NOW + 45) == 15.0
    assert state.blocked_for(NOW + 61) == 0.0
    assert state.active_slowdowns(NOW) == 0


def test_a_stated_limit_wins_over_the_usage() -> None:
    """When the rejection names the limit, that number is learned, not the usage."""
    state = QuotaState().after_rejection(NOW, used=9_000, stated_limit=6_000)
    assert state.known_limit(NOW) == 6_000


def test_a_rejection_after_little_use_teaches_nothing() -> None:
    """Below the smallest plausible limit the rejection is not about the minute: no learning."""
    state = QuotaState().after_rejection(NOW, used=MIN_LEARNABLE_LIMIT - 1, stated_limit=None)
    assert state.known_limit(NOW) is None
    assert state.limit(NOW) == START_LIMIT
    assert state.blocked_for(NOW) == 60.0


def test_rejections_at_a_known_limit_slow_down_for_a_while() -> None:
    """Each further rejection keeps 80 % of the budget (down to a quarter), for ten minutes."""
    state = QuotaState().after_rejection(NOW, used=6_000, stated_limit=None)
    second = state.after_rejection(NOW + 120, used=6_000, stated_limit=None)
    assert second.known_limit(NOW + 120) == 6_000
    assert second.budget(NOW + 120) == 4_080  # 6000 * 0.85 * 0.8
    third = second.after_rejection(NOW + 240, used=6_000, stated_limit=None)
    assert third.budget(NOW + 240) == 3_264  # 6000 * 0.85 * 0.64
    many = third
    for step in range(10):
        many = many.after_rejection(NOW + 300 + step, used=6_000, stated_limit=None)
    assert many.budget(NOW + 310) == 1_275  # the floor: a quarter of 5,100
    assert many.budget(NOW + 309 + SLOWDOWN_DURATION) == 5_100  # the slow-down is over
    again = many.after_rejection(NOW + 309 + SLOWDOWN_DURATION, used=6_000, stated_limit=None)
    assert again.active_slowdowns(NOW + 309 + SLOWDOWN_DURATION) == 1  # counted from zero again


def test_a_rejection_below_the_known_limit_lowers_it() -> None:
    """A rejection at less usage than the learned limit learns the lower one (and slows down)."""
    state = QuotaState().after_rejection(NOW, used=6_000, stated_limit=None)
    lower = state.after_rejection(NOW + 90, used=4_500, stated_limit=None)
    assert lower.known_limit(NOW + 90) == 4_500
    assert lower.budget(NOW + 90) == 3_060  # 4500 * 0.85 * 0.8


def test_a_learned_limit_is_forgotten_after_a_day() -> None:
    """A day after it was learned the limit is unknown again and pacing is back at 12,750."""
    state = QuotaState().after_rejection(NOW, used=6_000, stated_limit=None)
    assert state.known_limit(NOW + LEARNED_LIMIT_LIFETIME - 1) == 6_000
    assert state.known_limit(NOW + LEARNED_LIMIT_LIFETIME) is None
    assert state.budget(NOW + LEARNED_LIMIT_LIFETIME) == 12_750
    relearned = state.after_rejection(NOW + LEARNED_LIMIT_LIFETIME, used=9_000, stated_limit=None)
    assert relearned.known_limit(NOW + LEARNED_LIMIT_LIFETIME) == 9_000  # a raised limit found
    assert relearned.active_slowdowns(NOW + LEARNED_LIMIT_LIFETIME) == 0


def test_the_sliding_minute_counts_only_the_last_60_seconds() -> None:
    """Usage per second counts while the second is less than a minute old."""
    usage = {int(NOW) - 60: 100, int(NOW) - 59: 200, int(NOW): 300}
    assert window_usage(usage, NOW) == 500
    assert window_usage(usage, NOW + 1) == 300


def test_wait_for_room_names_the_second_that_frees_enough() -> None:
    """A request waits until enough of the oldest seconds have left the minute."""
    usage = {int(NOW) - 50: 300, int(NOW) - 30: 300, int(NOW): 300}
    assert wait_for_room(usage, 300, 1_200, NOW) == 0.0
    assert wait_for_room(usage, 300, 900, NOW) == pytest.approx(10.0)  # the -50 s second leaves
    assert wait_for_room(usage, 600, 900, NOW) == pytest.approx(30.0)  # both old seconds leave
    assert wait_for_room({}, 5_000, 1_000, NOW) == 0.0  # too big for any minute: goes alone
    assert wait_for_room(usage, 5_000, 1_000, NOW) == pytest.approx(60.0)  # ... in an empty one


def test_a_block_outlasts_any_room() -> None:
    """After a rejection a reservation waits out the block even when the minute has room."""
    state = QuotaState().after_rejection(NOW, used=6_000, stated_limit=None)
    assert reservation_wait(state, {}, 60, NOW + 20) == pytest.approx(40.0)
    assert reservation_wait(state, {}, 60, NOW + 60) == 0.0


def test_the_refused_request_is_not_part_of_what_google_allowed() -> None:
    """The usage at a rejection leaves out the refused request's own reserved units."""
    usage = {int(NOW) - 10: 5_700, int(NOW): 300}
    assert rejection_usage(usage, 300, NOW) == 5_700
    assert rejection_usage({}, 300, NOW) == 0


def test_messages_are_fetched_five_a_request_at_60_units_each() -> None:
    """Twelve ids make requests of 5, 5 and 2; five full messages cost 300 units."""
    ids = [f"m{i}" for i in range(12)]
    requests = message_requests(ids)
    assert [len(r) for r in requests] == [5, 5, 2]
    assert [i for r in requests for i in r] == ids
    assert units_for_messages(5) == 300


def test_a_scaled_clock_runs_and_sleeps_factor_times_faster() -> None:
    """A 600x clock starts at its start; 0.05 real seconds are 30 of its seconds, and its
    sleep of 30 seconds takes about 0.05 real ones."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    clock = scaled_time(600, start)
    assert (clock.clock() - start).total_seconds() < 5
    began = time.monotonic()
    clock.sleep(30)
    real = time.monotonic() - began
    passed = (clock.clock() - start).total_seconds()
    assert 0.045 <= real < 1.0
    assert 29.0 <= passed < 600
    with pytest.raises(ValueError, match="positive"):
        scaled_time(0)
