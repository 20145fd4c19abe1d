"""Fixtures for the IMAP provider: a private Dovecot per test session, a mailbox per test.

Every test gets a fresh Dovecot user (its own Maildir), a mailroom account pointing
at it (host 127.0.0.1, allow-listed for the SSRF guard, plain IMAP), settings
carrying a fresh master key, and ``other``: an IMAPClient logged in as the same
user — "another mail client" making changes behind mailroom's back.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from imapclient import IMAPClient

from mailroom.config import Settings
from mailroom.providers.imap import add_imap_account
from mailroom.secrets import generate_key
from mailroom.store.engine import Store
from tests.imap.views import Mailbox
from tests.jmap.conftest import Jmap
from tests.support.dovecot import DovecotServer, DovecotUnavailableError, find_dovecot

PASSWORD = "imap-test-pw"
_users = itertools.count(1)

# Mail dropped into a Maildir behind Dovecot's back (as a plain MDA would) reaches IDLE
# clients only through inotify, which misses some same-second deliveries here; then the
# next check comes after the default 30 s. Checking every second keeps IDLE tests fast.
IDLE_CHECK = "mailbox_idle_check_interval = 1 secs\n"
# Dovecot without the extensions mailroom prefers: exercises every fallback path.
PLAIN_CAPABILITIES = "imap_capability = IMAP4rev1 LITERAL+ SASL-IR UIDPLUS IDLE NAMESPACE\n"


def _start(tmp_path_factory: pytest.TempPathFactory, name: str, extra: str = "") -> DovecotServer:
    if find_dovecot() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("dovecot is not installed; scripts/test-services.sh installs it")
        pytest.skip("dovecot is not installed (apt-get install dovecot-imapd)")
    try:
        return DovecotServer(tmp_path_factory.mktemp(name), extra_config=extra).start()
    except DovecotUnavailableError as exc:  # pragma: no cover - depends on the machine
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def dovecot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DovecotServer]:
    """One private Dovecot (CONDSTORE, QRESYNC, MOVE, ESEARCH, SPECIAL-USE) for the session."""
    server = _start(tmp_path_factory, "imap-dovecot", IDLE_CHECK)
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture(scope="session")
def plain_dovecot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DovecotServer]:
    """A private Dovecot that offers none of CONDSTORE, QRESYNC, MOVE, ESEARCH, SPECIAL-USE."""
    server = _start(tmp_path_factory, "imap-plain-dovecot", PLAIN_CAPABILITIES)
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings with a fresh master key and 127.0.0.1 allow-listed (also in the environment)."""
    key = generate_key()
    monkeypatch.setenv("MAILROOM_MASTER_KEY", key)
    monkeypatch.setenv("MAILROOM_ALLOWED_PRIVATE_HOSTS", "127.0.0.1")
    monkeypatch.delenv("MAILROOM_MASTER_KEY_FILE", raising=False)
    return Settings(master_key=key, allowed_private_hosts="127.0.0.1", data_dir=tmp_path / "data")


def new_mailbox(server: DovecotServer) -> Mailbox:
    """A fresh Dovecot user on ``server``."""
    user = f"user{next(_users)}x{os.getpid()}"
    server.add_user(user, PASSWORD)
    return Mailbox(server, user, PASSWORD)


@pytest.fixture
def mailbox(dovecot: DovecotServer) -> Mailbox:
    """A fresh, empty mailbox (Dovecot user) for this test."""
    return new_mailbox(dovecot)


@pytest.fixture
def other(mailbox: Mailbox) -> Iterator[IMAPClient]:
    """Another IMAP client, logged in to the test's mailbox."""
    with mailbox.client() as client:
        yield client


def add_account(
    store: Store, settings: Settings, mailbox: Mailbox, name: str = "imap", owner: str = "me"
) -> int:
    """A mailroom account of ``owner`` for ``mailbox`` (plain IMAP on 127.0.0.1)."""
    return add_imap_account(
        store,
        settings,
        name=name,
        host=mailbox.server.host,
        port=mailbox.server.port,
        tls="none",
        login=mailbox.user,
        password=mailbox.password,
        owner=owner,
    )


def owner_jmap(store: Store, account: int) -> Iterator[Jmap]:
    """A JMAP client of the owner ("me") of the IMAP account, on a real server (a generator
    for fixtures: the client, then closed and the server stopped)."""
    from sqlalchemy import select

    from mailroom.jmap.auth import set_password
    from mailroom.store.models import Account
    from tests.jmap.conftest import PASSWORD, Person, run_server

    with store.session() as session:
        user_id = session.scalars(select(Account.user_id).where(Account.id == account)).one()
        set_password(session, "me", PASSWORD)
    servers = run_server(store)
    server = next(servers)
    client = Jmap(server, Person("me", user_id, account, 0))
    yield client
    client.close()
    next(servers, None)


def draft_form(jmap: Jmap, text: str = "Not sent yet — a draft.") -> dict[str, Any]:
    """An Email/set create of a draft in the Drafts mailbox, read and unsent."""
    mailboxes = jmap.call("Mailbox/get", {"ids": None})["list"]
    drafts = next(m["id"] for m in mailboxes if m["role"] == "drafts")
    return {
        "mailboxIds": {drafts: True},
        "keywords": {"$draft": True, "$seen": True},
        "from": [{"name": "Me", "email": "me@example.org"}],
        "to": [{"name": "Bob", "email": "bob@example.net"}],
        "subject": "Unfinished thoughts",
        "textBody": [{"partId": "t"}],
        "bodyValues": {"t": {"value": text}},
    }


@pytest.fixture
def account(store: Store, settings: Settings, mailbox: Mailbox) -> int:
    """The id of a mailroom IMAP account for the test's mailbox."""
    return add_account(store, settings, mailbox)
