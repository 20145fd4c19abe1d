"""Connecting: offline account creation, sealed passwords, the SSRF guard, login and TLS errors."""

from __future__ import annotations

import dataclasses
import logging
import socket
from pathlib import Path

import pytest
from sqlalchemy import select

from mailroom.config import Settings
from mailroom.errors import ConfigError
from mailroom.providers import netguard, registry
from mailroom.providers.base import AuthError, TransientError
from mailroom.providers.imap import ImapSyncer, add_imap_account, sync_account
from mailroom.secrets import SecretBox, generate_key, load_master_key, write_key_file
from mailroom.store.engine import Store
from mailroom.store.models import Account
from tests.imap.conftest import add_account
from tests.imap.views import Mailbox


def _account(store: Store, account_id: int) -> Account:
    with store.session() as session:
        account = session.get(Account, account_id)
        assert account is not None
        return account


def _set(store: Store, account_id: int, **values: object) -> None:
    with store.session() as session:
        account = session.get(Account, account_id)
        assert account is not None
        account.settings = {**account.settings, **values}


def test_adding_an_account_is_offline_and_the_password_sealed(
    store: Store, settings: Settings
) -> None:
    """add_imap_account stores an active account without contacting the server; no clear text."""
    account_id = add_imap_account(
        store,
        settings,
        name="far",
        host="imap.example.invalid",
        login="me@example.org",
        password="correct horse battery staple",
    )
    account = _account(store, account_id)
    assert (account.provider, account.status, account.watch_state) == ("imap", "active", "idle")
    assert account.settings == {
        "host": "imap.example.invalid",
        "port": 993,
        "tls": "ssl",
        "login": "me@example.org",
    }
    assert account.secret is not None and b"horse" not in account.secret
    box = SecretBox(load_master_key(settings))
    assert box.open(account.secret, f"account:{account_id}") == b"correct horse battery staple"
    with pytest.raises(ConfigError):
        box.open(account.secret, "account:999")
    with pytest.raises(ConfigError, match="already has an account"):
        add_imap_account(store, settings, name="far", host="h.example", login="x", password="y")
    assert isinstance(registry.syncer_for(store, account.provider, settings), ImapSyncer)


def test_bad_values_and_a_missing_key_are_refused_in_plain_words(
    store: Store, tmp_path: Path
) -> None:
    """A missing master key, a key file in the data dir and bad flags raise ConfigError."""
    bare = Settings(data_dir=tmp_path / "data")
    with pytest.raises(ConfigError, match="No master key"):
        add_imap_account(store, bare, name="a", host="h.example", login="u", password="p")
    inside = write_key_file(tmp_path / "elsewhere" / "k", tmp_path / "data")
    moved = tmp_path / "data" / "k"
    moved.parent.mkdir(parents=True)
    inside.rename(moved)
    with pytest.raises(ConfigError, match="inside the data dir"):
        load_master_key(Settings(data_dir=tmp_path / "data", master_key_file=moved))
    keyed = Settings(data_dir=tmp_path / "data", master_key=generate_key())
    for kwargs in ({"tls": "sometimes"}, {"port": 70000}, {"host": "not a host"}):
        args = {"name": "a", "host": "h.example", "login": "u", "password": "p", **kwargs}
        with pytest.raises(ConfigError):
            add_imap_account(store, keyed, **args)  # type: ignore[arg-type]


def test_netguard_refuses_private_addresses_unless_allow_listed() -> None:
    """Loopback, private and link-local addresses are refused unless the operator allows them."""
    import ipaddress

    for text in (
        "127.0.0.1",
        "10.1.2.3",
        "192.168.0.1",
        "169.254.169.254",
        "::1",
        "fd00::1",
        "100.64.0.1",
        "::ffff:127.0.0.1",
        "0.0.0.0",
        "224.0.0.1",
    ):
        assert not netguard.is_public(ipaddress.ip_address(text)), text
    assert netguard.is_public(ipaddress.ip_address("93.184.216.34"))
    with pytest.raises(netguard.BlockedHostError) as blocked:
        netguard.check_host("127.0.0.1", 143)
    assert netguard.check_host("127.0.0.1", 143, ["127.0.0.1"]) == ["127.0.0.1"]
    assert netguard.check_host("127.0.0.1", 143, ["127.0.0.0/8"]) == ["127.0.0.1"]
    assert netguard.check_host("localhost", 143, ["LOCALHOST"])
    with pytest.raises(netguard.UnresolvableHostError) as unresolvable:
        netguard.check_host("no-such-host.invalid", 143)
    assert str(blocked.value).replace("127.0.0.1", "H") == str(unresolvable.value).replace(
        "no-such-host.invalid", "H"
    )
    assert isinstance(blocked.value, AuthError) and isinstance(unresolvable.value, TransientError)


def test_blocked_host_is_an_auth_error_and_dns_failure_transient(
    store: Store, settings: Settings, mailbox: Mailbox, caplog: pytest.LogCaptureFixture
) -> None:
    """A private host not allow-listed marks auth_error; an unknown name only fails this sync."""
    account_id = add_account(store, settings, mailbox)
    strict = dataclasses.replace(settings, allowed_private_hosts="")
    with caplog.at_level(logging.WARNING, logger="mailroom.operator"), pytest.raises(AuthError):
        sync_account(store, account_id, settings=strict)
    assert "non-public" in caplog.text  # the detail is for the operator only
    account = _account(store, account_id)
    assert account.status == "auth_error" and "cannot be used" in (account.status_reason or "")
    assert "non-public" not in (account.status_reason or "")
    _set(store, account_id, host="no-such-host.invalid")
    with pytest.raises(TransientError, match="cannot be used"):
        sync_account(store, account_id, settings=strict)
    assert _account(store, account_id).status == "auth_error"  # unchanged by a DNS failure
    _set(store, account_id, host="127.0.0.1")
    sync_account(store, account_id, settings=settings)
    assert _account(store, account_id).status == "active"


def test_wrong_password_marks_auth_error_until_a_login_works(
    store: Store, settings: Settings, mailbox: Mailbox
) -> None:
    """A refused login sets auth_error with a plain reason; a later good login clears it."""
    account_id = add_imap_account(
        store,
        settings,
        name="wrong",
        host="127.0.0.1",
        port=mailbox.server.port,
        tls="none",
        login=mailbox.user,
        password="not-the-password",
    )
    with pytest.raises(AuthError, match="refused the login"):
        sync_account(store, account_id, settings=settings)
    account = _account(store, account_id)
    assert account.status == "auth_error"
    assert account.status_reason and "check the user name and password" in account.status_reason
    with store.session() as session:
        row = session.get(Account, account_id)
        assert row is not None
        row.secret = SecretBox(load_master_key(settings)).seal(
            mailbox.password.encode(), f"account:{account_id}"
        )
    sync_account(store, account_id, settings=settings)
    account = _account(store, account_id)
    assert (account.status, account.status_reason) == ("active", None)


def test_refused_connections_and_tls_mismatches(
    store: Store, settings: Settings, mailbox: Mailbox
) -> None:
    """A closed port is transient; TLS or STARTTLS against a plain server is an auth error."""
    account_id = add_account(store, settings, mailbox)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    _set(store, account_id, port=closed_port)
    with pytest.raises(TransientError, match="Cannot connect"):
        sync_account(store, account_id, settings=settings)
    assert _account(store, account_id).status == "active"
    _set(store, account_id, port=mailbox.server.port, tls="ssl")
    with pytest.raises(AuthError, match="TLS handshake"):
        sync_account(store, account_id, settings=settings)
    _set(store, account_id, tls="starttls")
    with pytest.raises(AuthError, match="STARTTLS"):
        sync_account(store, account_id, settings=settings)
    with store.session() as session:
        assert session.scalars(select(Account.status)).all() == ["auth_error"]
