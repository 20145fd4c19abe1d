"""Lanes: kinds of mail map to lanes, unknown kinds go calm, each lane has its queue."""

from __future__ import annotations

import pytest

from mailroom.errors import ConfigError
from mailroom.jobs.queues import QUEUES
from mailroom.outbound.lanes import CALM, DIRECT, LANES, URGENT, lane_for

KINDS = {"password_reset": URGENT, "invoice": URGENT, "newsletter": CALM, "relay": DIRECT}


def test_lanes_are_the_three_of_the_spec() -> None:
    """The lanes are urgent, calm and direct (SPEC §11)."""
    assert LANES == ("urgent", "calm", "direct")


@pytest.mark.parametrize(
    ("kind", "lane"),
    [("password_reset", URGENT), ("invoice", URGENT), ("newsletter", CALM), ("relay", DIRECT)],
)
def test_known_kinds_go_to_their_configured_lane(kind: str, lane: str) -> None:
    """A kind named in the configuration is sent in the lane it names."""
    assert lane_for(kind, KINDS) == lane


@pytest.mark.parametrize("kind", ["report", "", None])
def test_unknown_kinds_go_calm(kind: str | None) -> None:
    """A kind the configuration does not name (or no kind) goes to the calm lane."""
    assert lane_for(kind, KINDS) == CALM
    assert lane_for(kind, {}) == CALM


def test_a_configured_lane_that_does_not_exist_is_a_config_error() -> None:
    """A kind mapped to a lane that does not exist is refused with the lanes named."""
    with pytest.raises(ConfigError, match="urgent, calm, direct"):
        lane_for("invoice", {"invoice": "fast"})


def test_every_lane_has_its_send_queue() -> None:
    """Each lane is served by the queue send_<lane>, registered with the other queues."""
    assert [f"send_{lane}" for lane in LANES] == [q for q in QUEUES if q.startswith("send")]
