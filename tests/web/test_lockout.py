"""The web sign-in lock-out over real HTTP: 429 after too many failures, clear after the window."""

from __future__ import annotations

import logging
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import select

from mailroom.jmap.auth import name_key
from mailroom.store.engine import Store
from mailroom.store.models import SignInFailure
from tests.web.conftest import POLICY, Clock, add_user, browser, sign_in


def test_too_many_wrong_passwords_lock_the_name_until_the_window_passes(
    store: Store, server: str, clock: Clock
) -> None:
    """After 5 failures even the right password gets 429 "try again in 15 minutes" until then."""
    add_user(store, "alice")
    with browser(server) as client:
        for _ in range(POLICY.max_failures_per_name):
            assert sign_in(client, server, "alice", "wrong").status_code == 401
        locked = sign_in(client, server, "alice")
        assert locked.status_code == 429
        assert "Too many attempts; try again in 15 minutes." in locked.text
        assert 0 < int(locked.headers["retry-after"]) <= 15 * 60
        assert "mailroom_session" not in locked.headers.get("set-cookie", "")
        clock.advance(timedelta(minutes=14))
        assert sign_in(client, server, "alice").status_code == 429
        clock.advance(timedelta(minutes=1, seconds=1))
        assert sign_in(client, server, "alice").status_code == 303
        assert client.get("/").status_code == 200


def test_unknown_names_lock_the_same_way(store: Store, server: str) -> None:
    """A name that does not exist locks after as many failures as a real one; stored hashed."""
    with browser(server) as client:
        answers = [
            sign_in(client, server, "nobody", "x").status_code
            for _ in range(POLICY.max_failures_per_name + 1)
        ]
    assert answers == [401] * POLICY.max_failures_per_name + [429]
    with store.session() as session:
        keys = set(session.scalars(select(SignInFailure.key)))
    assert keys == {name_key("nobody"), "addr:127.0.0.1"}  # names only as digests


def test_one_address_guessing_many_names_is_locked(store: Store, server: str) -> None:
    """Failures under many names from one address lock that address, for every name."""
    add_user(store, "alice")
    with browser(server) as client:
        for number in range(POLICY.max_failures_per_address):
            assert sign_in(client, server, f"guess{number}", "x").status_code == 401
        assert sign_in(client, server, "alice").status_code == 429


def test_a_lock_out_is_logged_once_to_the_operator_log(
    store: Store, server: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Reaching the limit writes one operator-log line naming the key; refusals add none."""
    add_user(store, "alice")
    caplog.set_level(logging.WARNING, logger="mailroom.operator")
    with browser(server) as client:
        for _ in range(POLICY.max_failures_per_name + 3):
            sign_in(client, server, "alice", "wrong")
    lines = [
        r.getMessage()
        for r in caplog.records
        if r.name == "mailroom.operator" and "lock-out" in r.getMessage()
    ]
    assert len(lines) == 1 and "user name 'alice'" in lines[0] and "127.0.0.1" in lines[0]


def test_jmap_failures_count_for_the_web_sign_in(store: Store, server: str) -> None:
    """JMAP Basic and the web form share one counter: JMAP guesses lock the web form too."""
    add_user(store, "alice")
    for _ in range(POLICY.max_failures_per_name):
        answer = httpx.get(f"{server}/.well-known/jmap", auth=("alice", "wrong"))
        assert answer.status_code == 401
    with browser(server) as client:
        assert sign_in(client, server, "alice").status_code == 429
