"""The provider contract against Gmail: the Gmail emulator over real HTTP, a fresh mailbox per test.

A "folder" of the contract is a Gmail label here: ``put`` delivers a message
with the label (``INBOX``, or a user label of that name), ``move`` swaps the
message's place label, and the store's view of a message's folders is the
Gmail labels its stored labels are bound to (Gmail keeps a message once, so the
Gmail provider records no per-folder locations).
"""

from __future__ import annotations

import socket
from typing import ClassVar

import pytest
from sqlalchemy import select

from mailroom.config import Settings
from mailroom.oauth.credentials import add_oauth_account
from mailroom.oauth.tokens import OAuthClient, TokenSet
from mailroom.providers import registry
from mailroom.store.engine import Store
from mailroom.store.models import Account, LabelBinding, MessageLabel
from tests.emulators.gmail.emulator import GmailEmulator
from tests.emulators.gmail.fixtures import gmail_emulator
from tests.emulators.gmail.seed import make_message
from tests.providers.contract import Harness, ProviderContract

__all__ = [
    "GmailHarness",
    "add_gmail_account",
    "gmail_account",
    "gmail_emulator",
    "import_all",
    "set_api_url",
    "sync",
]

SCOPES = ["https://mail.google.com/"]
PLACES = {"INBOX", "SPAM", "TRASH"}


def set_api_url(store: Store, account_id: int, url: str) -> None:
    """Point the account's Gmail API at ``url`` (the emulator, or a port nobody listens on)."""
    with store.session() as session:
        account = session.get(Account, account_id)
        assert account is not None
        account.settings = {**account.settings, "gmail": {"api_url": url}}


def add_gmail_account(
    store: Store, settings: Settings, gmail: GmailEmulator, owner: str = "me", name: str = "gmail"
) -> int:
    """A connected mailroom Gmail account on the emulator, as ``account add gmail`` leaves it."""
    access, refresh = gmail.tokens()
    account_id = add_oauth_account(
        store,
        settings,
        provider="gmail",
        name=name,
        address=gmail.address,
        owner=owner,
        client=OAuthClient(gmail.oauth.client_id, gmail.oauth.client_secret),
        token_url=f"{gmail.url}/token",
        scopes=SCOPES,
        tokens=TokenSet(access, refresh, expires_at=None),
    )
    set_api_url(store, account_id, gmail.url)
    return account_id


def sync(store: Store, settings: Settings, account_id: int) -> None:
    """One sync of the account through the registry, as a job runs it."""
    syncer = registry.syncer_for(store, "gmail", settings)
    assert syncer is not None
    syncer.sync(account_id)


def import_all(store: Store, settings: Settings, account_id: int) -> int:
    """Import pages until the backfill says none is left; how many pages it took."""
    importer = registry.importer_for(store, "gmail", settings)
    assert importer is not None
    for page in range(1, 200):
        if not importer.import_page(account_id):
            return page
    raise AssertionError("the backfill does not end")


@pytest.fixture
def gmail_account(store: Store, settings: Settings, gmail_emulator: GmailEmulator) -> int:
    """The id of a connected mailroom account on the test's emulated mailbox."""
    return add_gmail_account(store, settings, gmail_emulator)


class GmailHarness(Harness):
    """Acts on the emulated mailbox as the owner in Gmail's web page would."""

    provider = "gmail"
    lacks: ClassVar[dict[str, str]] = {}

    def __init__(
        self, store: Store, settings: Settings, account_id: int, gmail: GmailEmulator
    ) -> None:
        super().__init__(store, settings, account_id)
        self.gmail = gmail
        self.ids: dict[str, str] = {}

    def _label(self, folder: str) -> str:
        if folder in PLACES:
            return folder
        for label_id, name in self.gmail.label_names().items():
            if name == folder:
                return label_id
        return self.gmail.create_label(folder)

    def put(self, key: str, folder: str = "INBOX") -> None:
        raw = make_message(key, message_id=f"<{key}@x>")
        self.ids[key] = self.gmail.add_message(raw, [self._label(folder), "UNREAD"])

    def move(self, key: str, folder: str) -> None:
        gmail_id = self.ids[key]
        user = {i for i, n in self.gmail.label_names().items() if i.startswith("Label_")}
        here = self.gmail.label_ids(gmail_id) & (PLACES | user)
        target = self._label(folder)
        self.gmail.change_labels(gmail_id, add=[target], remove=sorted(here - {target}))

    def mark_seen(self, key: str) -> None:
        self.gmail.change_labels(self.ids[key], remove=["UNREAD"])

    def provider_flagged(self, key: str) -> bool:
        return "STARRED" in self.gmail.label_ids(self.ids[key])

    def break_auth(self) -> None:
        self.gmail.expire_tokens()
        self.gmail.revoke_refresh_tokens()

    def break_connection(self) -> None:
        with socket.socket() as probe:  # a port nobody listens on (closed right away)
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        set_api_url(self.store, self.account_id, f"http://127.0.0.1:{port}")

    def provider_folders(self) -> set[str]:
        with self.gmail.mailbox.lock:
            return {x.name for x in self.gmail.mailbox.labels.values() if x.type == "user"}

    def folders_of(self, key: str) -> set[str]:
        """The Gmail labels (user labels by name) the stored message's labels are bound to."""
        message_id = self.stored()[key]
        names = {**self.gmail.label_names(), **{p: p for p in PLACES}}
        with self.store.session() as session:
            refs = session.scalars(
                select(LabelBinding.provider_ref)
                .join(MessageLabel, MessageLabel.label_id == LabelBinding.label_id)
                .where(
                    LabelBinding.account_id == self.account_id,
                    MessageLabel.message_id == message_id,
                )
            ).all()
        return {names[ref] for ref in refs if ref in PLACES or ref.startswith("Label_")}


@pytest.fixture
def harness(store: Store, settings: Settings, gmail_emulator: GmailEmulator) -> GmailHarness:
    """A fresh emulated Gmail mailbox and its mailroom account."""
    account_id = add_gmail_account(store, settings, gmail_emulator)
    return GmailHarness(store, settings, account_id, gmail_emulator)


class TestGmailContract(ProviderContract):
    """Gmail holds to the whole provider contract."""
