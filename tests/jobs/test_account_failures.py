"""Failures that need a person are recorded on the account with a reason and logged once."""

from __future__ import annotations

import logging
import ssl
from pathlib import Path

import pytest

from mailroom.config import Settings
from mailroom.errors import ConfigError
from mailroom.jobs.queues import make_queues
from mailroom.jobs.status import record_failure
from mailroom.jobs.tasks import Jobs
from mailroom.providers.errors import failure_reason
from mailroom.providers.imap.account import ImapConfig, add_imap_account
from mailroom.providers.imap.connection import _bad_certificate
from mailroom.providers.netguard import BlockedHostError, UnresolvableHostError, unreachable
from mailroom.secrets import generate_key
from mailroom.store.engine import Store
from mailroom.store.models import Account
from tests.helpers import drain
from tests.jobs.test_supervisor import Clock, Harness, _accounts


def _account(store: Store, account_id: int) -> Account:
    with store.session() as session:
        account = session.get(Account, account_id)
        assert account is not None
        return account


def _tracebacks(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.exc_info]


def test_no_master_key_is_one_sentence_per_account_and_no_traceback(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Syncing IMAP accounts without a master key logs one line each and records the reason."""
    keyed = Settings(data_dir=tmp_path, master_key=generate_key())
    ids = [
        add_imap_account(
            store, keyed, name=f"mail{i}", host="imap.example.org", login="u", password="pw"
        )
        for i in range(2)
    ]
    jobs = Jobs(store, make_queues(Settings(data_dir=tmp_path)), Settings(data_dir=tmp_path))
    with caplog.at_level(logging.INFO):
        for _ in range(2):  # a second poll must not say it again
            for account_id in ids:
                jobs.sync_account(account_id)
            assert drain(jobs.queues["ingest"]) == 2  # no retries of a hopeless job
    assert _tracebacks(caplog) == []
    said = [r.getMessage() for r in caplog.records if "No master key" in r.getMessage()]
    assert len(said) == 2 and all("does not sync" in line for line in said)
    for account_id in ids:
        account = _account(store, account_id)
        assert account.status == "active"  # the operator's fix (a key) makes it work again
        assert account.status_reason and "No master key" in account.status_reason


def test_supervisor_stops_watching_without_a_master_key(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """A watcher failing for want of a master key is not restarted and says why once."""
    (account,) = _accounts(store, 1)
    clock = Clock()
    harness = Harness(store)
    with caplog.at_level(logging.INFO):
        harness.supervisor.tick(clock.now)
        harness.fail(account, ConfigError("No master key is set."))
        for _ in range(5):
            harness.supervisor.tick(clock.now)
            clock.now += 400
    assert len(harness.watchers[account]) == 1
    row = _account(store, account)
    assert (row.status, row.watch_state, row.status_reason) == (
        "active",
        "idle",
        "No master key is set.",
    )
    assert _tracebacks(caplog) == []
    harness.supervisor.stop()


def test_reasons_say_what_is_really_wrong(store: Store) -> None:
    """Blocked host, unresolvable name and an untrusted certificate get distinct reasons."""
    blocked, dns, tls = _accounts(store, 3)
    record_failure(store, blocked, BlockedHostError(unreachable("10.0.0.1")))
    record_failure(store, dns, UnresolvableHostError(unreachable("nowhere.invalid")))
    error = ssl.SSLCertVerificationError()
    error.verify_message = "self-signed certificate"
    config = ImapConfig(host="imap.example.org", port=993, tls="ssl", login="u")
    record_failure(store, tls, _bad_certificate(config, error))
    assert _account(store, blocked).status == "auth_error"  # SPEC: blocked = auth error
    assert "private address" in (_account(store, blocked).status_reason or "")
    assert "allow-list" in (_account(store, blocked).status_reason or "")
    assert _account(store, dns).status == "active"  # SPEC: DNS failure is transient
    assert _account(store, dns).status_reason == "cannot connect: name does not resolve"
    assert _account(store, tls).status == "auth_error"
    assert (_account(store, tls).status_reason or "").startswith("TLS certificate not trusted")
    # What the owner is told stays the same for a blocked and an unknown host (SPEC §1).
    assert "cannot be used" in str(BlockedHostError(unreachable("h")))
    assert failure_reason(ConfigError("plain")) == "plain"


def test_watch_failure_reason_and_backoff_are_recorded(store: Store) -> None:
    """A transient watch failure leaves the account active with its reason and backoff."""
    (account,) = _accounts(store, 1)
    clock = Clock()
    harness = Harness(store)
    harness.supervisor.tick(clock.now)
    harness.fail(account, UnresolvableHostError(unreachable("nowhere.invalid")))
    harness.supervisor.tick(clock.now)
    row = _account(store, account)
    assert (row.status, row.watch_state) == ("active", "backoff:5000")
    assert row.status_reason == "cannot connect: name does not resolve"
    harness.supervisor.stop()
