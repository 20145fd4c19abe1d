"""The provider contract against Microsoft Graph: the Graph emulator over real HTTP.

A contract "folder" is a Graph mail folder: ``INBOX`` is the well-known Inbox,
other names are top-level folders by display name (created when missing).
"""

from __future__ import annotations

import socket
import time
from typing import ClassVar

import pytest
from sqlalchemy import select

from mailroom.config import Settings
from mailroom.oauth.credentials import add_oauth_account
from mailroom.oauth.tokens import OAuthClient, TokenSet
from mailroom.providers import registry
from mailroom.store.engine import Store
from mailroom.store.models import Account, Folder, MessageLocation
from tests.emulators.graph.fixture import graph_emulator
from tests.emulators.graph.mailbox import Message
from tests.emulators.graph.server import GraphEmulator
from tests.providers.contract import Harness, ProviderContract

__all__ = [
    "PROVIDER",
    "GraphHarness",
    "add_graph_account",
    "fetch",
    "folder_ref",
    "graph_account",
    "graph_emulator",
    "import_all",
    "raw",
    "set_graph",
    "sync",
]

PROVIDER = "microsoft"
SCOPES = ["offline_access", "Mail.ReadWrite", "Mail.Send"]


def set_graph(store: Store, account_id: int, **values: object) -> None:
    """Change the account's ``graph`` settings (api_url, immutable_ids)."""
    with store.session() as session:
        account = session.get(Account, account_id)
        assert account is not None
        graph = dict((account.settings or {}).get("graph") or {})
        account.settings = {**(account.settings or {}), "graph": {**graph, **values}}


def add_graph_account(
    store: Store,
    settings: Settings,
    graph: GraphEmulator,
    *,
    immutable_ids: bool = True,
    owner: str = "me",
    address: str | None = None,
) -> int:
    """A connected mailroom Microsoft account on a mailbox of the emulator (the default one)."""
    issued = graph.issue_tokens(address)
    tokens = TokenSet(
        issued["access_token"],
        issued.get("refresh_token"),
        expires_at=time.time() + float(issued.get("expires_in", 3600)),
    )
    account_id = add_oauth_account(
        store,
        settings,
        provider=PROVIDER,
        name="microsoft",
        address=address or graph.default_address,
        owner=owner,
        client=OAuthClient("mailroom-test"),
        token_url=graph.token_url(),
        scopes=SCOPES,
        tokens=tokens,
    )
    set_graph(store, account_id, api_url=graph.graph_url, immutable_ids=immutable_ids)
    return account_id


def sync(store: Store, settings: Settings, account_id: int) -> list[int]:
    """One sync through the registry."""
    syncer = registry.syncer_for(store, PROVIDER, settings)
    assert syncer is not None
    return syncer.sync(account_id)


def import_all(store: Store, settings: Settings, account_id: int) -> int:
    """Import pages until none is left; how many calls it took."""
    importer = registry.importer_for(store, PROVIDER, settings)
    assert importer is not None
    for page in range(1, 2000):
        if not importer.import_page(account_id):
            return page
    raise AssertionError("the import does not end")


def fetch(store: Store, settings: Settings, account_id: int) -> None:
    """What a scheduler tick does: sync, then import until no history is left."""
    sync(store, settings, account_id)
    import_all(store, settings, account_id)


@pytest.fixture
def graph_account(store: Store, settings: Settings, graph_emulator: GraphEmulator) -> int:
    """The id of a connected Microsoft account on the test's emulated mailbox."""
    return add_graph_account(store, settings, graph_emulator)


def folder_ref(graph: GraphEmulator, name: str) -> str:
    """The emulator folder id for a contract folder name (created at the top if missing)."""
    if name == "INBOX":
        return "inbox"
    mailbox = graph.mailbox()
    with mailbox.lock:
        for folder in mailbox.folders.values():
            if folder.display_name == name and folder.parent_id == mailbox.root.id:
                return folder.id
    return mailbox.create_folder(name).id


def raw(key: str) -> bytes:
    """A small message with Message-ID ``<key@x>``."""
    return (
        f"From: a@example.org\r\nTo: user@example.com\r\nSubject: {key}\r\n"
        f"Message-ID: <{key}@x>\r\nDate: Tue, 01 Dec 2026 10:00:00 +0000\r\n\r\nbody {key}\r\n"
    ).encode()


class GraphHarness(Harness):
    """Acts on the emulated mailbox as Outlook on the web would."""

    provider = PROVIDER
    lacks: ClassVar[dict[str, str]] = {}

    def __init__(
        self, store: Store, settings: Settings, account_id: int, graph: GraphEmulator
    ) -> None:
        super().__init__(store, settings, account_id)
        self.graph = graph
        self.messages: dict[str, Message] = {}

    def put(self, key: str, folder: str = "INBOX") -> None:
        self.messages[key] = self.graph.add_message(raw(key), folder_ref(self.graph, folder))

    def move(self, key: str, folder: str) -> None:
        ref = self.messages[key].immutable_id
        self.messages[key] = self.graph.move_message(ref, folder_ref(self.graph, folder))

    def mark_seen(self, key: str) -> None:
        self.graph.mark_read(self.messages[key].immutable_id)

    def provider_flagged(self, key: str) -> bool:
        message = self.graph.mailbox().message(self.messages[key].immutable_id)
        return message.flag_status == "flagged"

    def break_auth(self) -> None:
        self.graph.expire_access_tokens()
        self.graph.revoke_refresh_tokens()

    def break_connection(self) -> None:
        with socket.socket() as probe:  # a port nobody listens on (closed right away)
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        set_graph(self.store, self.account_id, api_url=f"http://127.0.0.1:{port}/v1.0")

    def provider_folders(self) -> set[str]:
        mailbox = self.graph.mailbox()
        with mailbox.lock:
            folders = dict(mailbox.folders)

        def path(folder_id: str) -> str:
            folder = folders[folder_id]
            above = folder.parent_id
            if above is None or above == mailbox.root.id:
                return folder.display_name
            return f"{path(above)}/{folder.display_name}"

        return {path(f) for f, x in folders.items() if x.parent_id is not None}

    def folders_of(self, key: str) -> set[str]:
        """The folders the store locates the message in (the Inbox as ``INBOX``)."""
        message_id = self.stored()[key]
        with self.store.session() as session:
            rows = session.execute(
                select(Folder.path, Folder.special_use)
                .join(MessageLocation, MessageLocation.folder_id == Folder.id)
                .where(MessageLocation.message_id == message_id)
            ).all()
        return {"INBOX" if use == "inbox" else path for path, use in rows}


@pytest.fixture
def harness(store: Store, settings: Settings, graph_emulator: GraphEmulator) -> GraphHarness:
    """A fresh emulated Microsoft mailbox and its mailroom account."""
    account_id = add_graph_account(store, settings, graph_emulator)
    return GraphHarness(store, settings, account_id, graph_emulator)


class TestGraphContract(ProviderContract):
    """Graph holds to the provider contract."""
