"""Per-user quota: per-method costs, profiles, the sliding minute, the rejection bodies."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest

from tests.emulators.gmail import NEW_PROJECT, GmailEmulator
from tests.emulators.gmail.conftest import API
from tests.emulators.gmail.quota import DOCUMENTED, QuotaMeter
from tests.emulators.gmail.seed import seed_mailbox


def test_documented_costs_are_charged(gmail_emulator: GmailEmulator, http: httpx.Client) -> None:
    """Each call is logged with the units of Google's table."""
    ids = seed_mailbox(gmail_emulator, 1)
    http.get(f"{API}/profile")
    http.get(f"{API}/labels")
    http.get(f"{API}/messages")
    http.get(f"{API}/messages/{ids[0]}", params={"format": "raw"})
    http.get(f"{API}/history", params={"startHistoryId": gmail_emulator.history_id})
    http.post(f"{API}/messages/batchModify", json={"ids": ids, "addLabelIds": ["STARRED"]})
    assert [(r.method, r.units) for r in gmail_emulator.requests] == [
        ("getProfile", 1),
        ("labels.list", 1),
        ("messages.list", 5),
        ("messages.get", 5),
        ("history.list", 2),
        ("messages.batchModify", 50),
    ]


def test_new_project_profile_costs_full_and_raw_more() -> None:
    """The new-project profile: 6,000 units a minute, 20 per bare get, 60 per full/raw."""
    with GmailEmulator(profile=NEW_PROJECT) as gmail:
        ids = seed_mailbox(gmail, 1)
        headers = {"Authorization": f"Bearer {gmail.access_token()}"}
        with httpx.Client(base_url=gmail.url, headers=headers) as http:
            for fmt in ("minimal", "raw", "full"):
                http.get(f"{API}/messages/{ids[0]}", params={"format": fmt})
        assert [r.units for r in gmail.requests] == [20, 60, 60]
        assert gmail.quota.limit == 6000


def test_over_the_limit_is_403_user_rate_limit_exceeded(
    gmail_emulator: GmailEmulator, http: httpx.Client
) -> None:
    """Past the limit: Google's 403 usageLimits/userRateLimitExceeded, the limit stated."""
    gmail_emulator.set_quota_limit(7)
    assert http.get(f"{API}/messages").status_code == 200
    refused = http.get(f"{API}/messages")
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["errors"][0] == {
        "message": "User Rate Limit Exceeded",
        "domain": "usageLimits",
        "reason": "userRateLimitExceeded",
    }
    assert error["details"][0]["metadata"]["quota_limit_value"] == "7"
    assert http.get(f"{API}/profile").status_code == 200  # 1 unit still fits
    assert gmail_emulator.units_charged() == 6  # the refused call cost nothing


def test_rejections_can_be_429(gmail_emulator: GmailEmulator, http: httpx.Client) -> None:
    """set_rejection_status(429) answers 429 global/rateLimitExceeded instead."""
    gmail_emulator.set_quota_limit(0)
    gmail_emulator.set_rejection_status(429)
    refused = http.get(f"{API}/profile")
    assert refused.status_code == 429
    assert refused.json()["error"]["errors"][0]["reason"] == "rateLimitExceeded"
    with pytest.raises(ValueError):
        gmail_emulator.set_rejection_status(500)


def test_the_minute_slides() -> None:
    """Units leave the window 60 seconds after they were charged."""
    now = [1000.0]
    meter = QuotaMeter(DOCUMENTED, clock=lambda: now[0])
    meter.limit = 10
    assert meter.try_charge(6)
    now[0] += 30
    assert meter.try_charge(4)
    assert not meter.try_charge(1)
    now[0] += 30.5  # the first 6 units are older than a minute now
    assert meter.used() == 4
    assert meter.try_charge(6)


def test_burst_limit_refuses_a_minutes_supply_in_a_second() -> None:
    """With a burst limit, spending too much within one second is refused."""
    now = [0.0]
    meter = QuotaMeter(DOCUMENTED, clock=lambda: now[0])
    meter.burst_per_second = 10
    assert meter.try_charge(10)
    assert not meter.try_charge(1)
    now[0] += 1.5
    assert meter.try_charge(10)


def test_faults_and_latency(gmail_emulator: GmailEmulator, http: httpx.Client) -> None:
    """Injected faults answer the next calls with Google's bodies, then service resumes."""
    gmail_emulator.inject_faults(2, 503)
    assert [http.get(f"{API}/profile").status_code for _ in range(3)] == [503, 503, 200]
    gmail_emulator.inject_faults(1, 429)
    assert http.get(f"{API}/profile").json()["error"]["errors"][0]["reason"] == (
        "rateLimitExceeded"
    )
    gmail_emulator.set_latency(0.2)
    answer = http.get(f"{API}/profile")
    assert answer.status_code == 200 and answer.elapsed.total_seconds() >= 0.2


def test_sending_limit_names_when_to_retry(
    gmail_emulator: GmailEmulator, http: httpx.Client
) -> None:
    """While sending is blocked, messages.send gets 429 "... Retry after <RFC 3339>"."""
    until = datetime.now(UTC) + timedelta(minutes=5)
    gmail_emulator.block_sending(until)
    refused = http.post(f"{API}/messages/send", json={"raw": "VG86IGFAYi5jCgp4"})
    assert refused.status_code == 429
    message = refused.json()["error"]["message"]
    assert message.startswith("User-rate limit exceeded.  Retry after ")
    stated = datetime.fromisoformat(message.rsplit(" ", 1)[1].replace("Z", "+00:00"))
    assert abs((stated - until).total_seconds()) < 0.01
    gmail_emulator.block_sending(None)
    assert http.post(f"{API}/messages/send", json={"raw": "VG86IGFAYi5jCgp4"}).status_code == 200
