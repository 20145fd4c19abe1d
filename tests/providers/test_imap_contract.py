"""The provider contract against IMAP: a private Dovecot, a fresh mailbox per test."""

from __future__ import annotations

import socket
from typing import ClassVar

import pytest
from imapclient import IMAPClient

from mailroom.config import Settings
from mailroom.secrets import SecretBox, load_master_key
from mailroom.store.engine import Store
from mailroom.store.models import Account
from tests.factories import make_message
from tests.imap.conftest import add_account, new_mailbox
from tests.imap.views import Mailbox
from tests.providers.contract import Harness, ProviderContract
from tests.support.dovecot import DovecotServer

FOLDERS = ("INBOX", "Archive")


class ImapHarness(Harness):
    """Acts on the Dovecot mailbox as another mail client would."""

    provider = "imap"
    lacks: ClassVar[dict[str, str]] = {}

    def __init__(self, store: Store, settings: Settings, account_id: int, mailbox: Mailbox) -> None:
        super().__init__(store, settings, account_id)
        self.mailbox = mailbox

    def _find(self, client: IMAPClient, key: str) -> tuple[str, list[int]]:
        for folder in FOLDERS:
            client.select_folder(folder)
            uids = client.search(["HEADER", "Message-ID", f"<{key}@x>"])
            if uids:
                return folder, list(uids)
        raise AssertionError(f"{key} is not on the server")

    def put(self, key: str, folder: str = "INBOX") -> None:
        self.mailbox.append(folder, make_message(f"{key}@x", subject=key))

    def move(self, key: str, folder: str) -> None:
        with self.mailbox.client() as client:
            _here, uids = self._find(client, key)
            client.move(uids, folder)

    def mark_seen(self, key: str) -> None:
        with self.mailbox.client() as client:
            _here, uids = self._find(client, key)
            client.add_flags(uids, [b"\\Seen"])

    def provider_flagged(self, key: str) -> bool:
        with self.mailbox.client() as client:
            _here, uids = self._find(client, key)
            flags = client.get_flags(uids)
        return all(b"\\Flagged" in f for f in flags.values())

    def provider_folders(self) -> set[str]:
        with self.mailbox.client() as client:
            listed = client.list_folders()
        return {
            name.replace(delimiter.decode() if isinstance(delimiter, bytes) else delimiter, "/")
            for _flags, delimiter, name in listed
        }

    def _update(self, **values: object) -> None:
        with self.store.session() as session:
            account = session.get(Account, self.account_id)
            assert account is not None
            for name, value in values.items():
                setattr(account, name, value)

    def break_auth(self) -> None:
        assert self.settings is not None
        box = SecretBox(load_master_key(self.settings))
        self._update(secret=box.seal(b"not the password", f"account:{self.account_id}"))

    def break_connection(self) -> None:
        with socket.socket() as probe:  # a port nobody listens on (closed right away)
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        with self.store.session() as session:
            account = session.get(Account, self.account_id)
            assert account is not None
            account.settings = {**account.settings, "port": port}


@pytest.fixture
def harness(store: Store, settings: Settings, dovecot: DovecotServer) -> ImapHarness:
    """A fresh Dovecot mailbox and its mailroom account."""
    mailbox = new_mailbox(dovecot)
    return ImapHarness(store, settings, add_account(store, settings, mailbox), mailbox)


class TestImapContract(ProviderContract):
    """IMAP holds to the whole provider contract."""
