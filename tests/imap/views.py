"""Both sides of an IMAP account, read independently, so tests can compare them in full.

``server_view`` reads the Dovecot mailbox with a plain IMAPClient: for every folder
(except views such as \\All) every UID with its Message-ID and flags.
``store_view`` reads mailroom's tables: every message, its locations (folder path
and UID, current UIDVALIDITY only), its flags (``seen_at``, Starred) and its folder
labels. Messages are keyed by their Message-ID, which every test message has and
which the test side parses itself (never with mailroom's code).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from imapclient import IMAPClient
from sqlalchemy import select

from mailroom.config import Settings
from mailroom.labels.resolver import system_label
from mailroom.providers.imap import import_page, sync_account
from mailroom.providers.imap.login import account_connection
from mailroom.store.engine import Store
from mailroom.store.models import (
    Account,
    Folder,
    Label,
    Message,
    MessageLabel,
    MessageLocation,
)
from tests.support.dovecot import DovecotServer

_MID = re.compile(rb"^message-id:\s*<?([^>\s]+)>?", re.IGNORECASE | re.MULTILINE)
VIEWS = {b"\\all", b"\\flagged", b"\\important"}


class Mailbox:
    """One Dovecot user, and a way to act on it as another mail client."""

    def __init__(self, server: DovecotServer, user: str, password: str) -> None:
        self.server = server
        self.user = user
        self.password = password

    @contextmanager
    def client(self) -> Iterator[IMAPClient]:
        """A logged-in IMAPClient (the "other client"), logged out afterwards."""
        client = IMAPClient(self.server.host, port=self.server.port, ssl=False, timeout=30)
        try:
            client.login(self.user, self.password)
            yield client
        finally:
            try:
                client.logout()
            except Exception:  # noqa: BLE001
                client.shutdown()

    def append(self, folder: str, raw: bytes, flags: tuple[bytes, ...] = ()) -> None:
        """APPEND a message as another client would."""
        with self.client() as client:
            client.append(folder, raw, flags=flags)


def header_mid(block: bytes) -> str | None:
    """The Message-ID in a header block, parsed by the test side."""
    match = _MID.search(block.replace(b"\r\n ", b" ").replace(b"\r\n\t", b" "))
    return match.group(1).decode() if match else None


@dataclass
class View:
    """Where each message lives and its flags, keyed by Message-ID."""

    locations: dict[tuple[str, int], str] = field(default_factory=dict)
    flags: dict[str, set[tuple[bool, bool]]] = field(default_factory=dict)
    labels: dict[str, set[str]] = field(default_factory=dict)

    @property
    def messages(self) -> set[str]:
        """The Message-IDs present."""
        return set(self.locations.values())

    def places(self) -> dict[str, set[tuple[str, int]]]:
        """Message-ID → its (folder, UID) locations."""
        out: dict[str, set[tuple[str, int]]] = {}
        for place, mid in self.locations.items():
            out.setdefault(mid, set()).add(place)
        return out


def server_view(client: IMAPClient) -> View:
    """Every message of every (non-view) folder, read with plain IMAP."""
    view = View()
    for flags, _delimiter, name in client.list_folders():
        if {f.lower() for f in flags} & (VIEWS | {b"\\noselect", b"\\nonexistent"}):
            continue
        client.select_folder(name, readonly=True)
        uids = client.search(["ALL"])
        if not uids:
            continue
        data = client.fetch(uids, [b"FLAGS", b"BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)]"])
        for uid, item in data.items():
            mid = header_mid(item[b"BODY[HEADER.FIELDS (MESSAGE-ID)]"])
            assert mid is not None, f"test message without Message-ID in {name}"
            view.locations[(name, int(uid))] = mid
            msg_flags = {f.lower() for f in item[b"FLAGS"]}
            view.flags.setdefault(mid, set()).add(
                (b"\\seen" in msg_flags, b"\\flagged" in msg_flags)
            )
    return view


def store_view(store: Store, account_id: int) -> View:
    """mailroom's picture of the account: locations, flags and folder labels per message."""
    view = View()
    with store.session() as session:
        user_id = session.scalars(select(Account.user_id).where(Account.id == account_id)).one()
        starred = system_label(session, user_id, "starred").id
        folder_labels = {
            lid
            for lid in session.scalars(
                select(Folder.label_id).where(Folder.account_id == account_id)
            )
            if lid is not None
        }
        messages = session.execute(
            select(Message.id, Message.message_id_header, Message.seen_at).where(
                Message.account_id == account_id
            )
        ).all()
        by_id = {m.id: m for m in messages}
        labels: dict[int, set[int]] = {}
        for mid, lid in session.execute(
            select(MessageLabel.message_id, MessageLabel.label_id).where(
                MessageLabel.message_id.in_(list(by_id))
            )
        ):
            labels.setdefault(mid, set()).add(lid)
        paths = dict(session.execute(select(Label.id, Label.path)).all())
        rows = session.execute(
            select(MessageLocation.message_id, Folder.path, MessageLocation.uid)
            .join(Folder, Folder.id == MessageLocation.folder_id)
            .where(
                Folder.account_id == account_id,
                MessageLocation.uidvalidity == Folder.uidvalidity,
            )
        ).all()
    for message_id, path, uid in rows:
        view.locations[(path, int(uid))] = by_id[message_id].message_id_header or f"#{message_id}"
    for m in messages:
        key = m.message_id_header or f"#{m.id}"
        view.flags.setdefault(key, set()).add(
            (m.seen_at is not None, starred in labels.get(m.id, set()))
        )
        view.labels[key] = {paths[lid] for lid in labels.get(m.id, set()) & folder_labels}
    return view


def message_count(store: Store, account_id: int) -> int:
    """How many messages the account has in the store."""
    with store.session() as session:
        return len(
            session.scalars(select(Message.id).where(Message.account_id == account_id)).all()
        )


def message_ids(store: Store, account_id: int) -> dict[str, int]:
    """Message-ID header → message id (asserting no Message-ID is stored twice)."""
    with store.session() as session:
        rows = session.execute(
            select(Message.message_id_header, Message.id).where(Message.account_id == account_id)
        ).all()
    mapping = {mid: id_ for mid, id_ in rows}
    assert len(mapping) == len(rows), "a message is stored twice"
    return mapping  # type: ignore[return-value]


def sync_all(store: Store, account_id: int, settings: Settings, **kwargs: Any) -> int:
    """Sync, then import until the history is done (one connection); returns import pages."""
    pages = 0
    with account_connection(store, account_id, settings=settings) as conn:
        sync_account(store, account_id, settings=settings, connection=conn, **kwargs)
        while import_page(store, account_id, settings=settings, connection=conn):
            pages += 1
            assert pages < 1000, "the import does not end"
    return pages


def folder_label_paths(store: Store, account_id: int) -> dict[str, str]:
    """Folder path → label path of the account's folders."""
    with store.session() as session:
        return dict(
            session.execute(
                select(Folder.path, Label.path)
                .join(Label, Label.id == Folder.label_id)
                .where(Folder.account_id == account_id)
            ).all()
        )


def assert_mirrors(
    store: Store, account_id: int, mailbox: Mailbox, loose: frozenset[str] = frozenset()
) -> None:
    """mailroom's messages, locations, flags and folder labels equal the server's.

    For messages in ``loose`` (touched by local operations) a folder label may also be
    kept in the database only (SPEC §6: trashing a message in a user folder keeps that
    label), so there the folder labels must only include the server's.
    """
    with mailbox.client() as client:
        server = server_view(client)
    mine = store_view(store, account_id)
    assert mine.messages == server.messages
    assert mine.places() == server.places()
    for mid in server.messages:
        assert len(server.flags[mid]) == 1, f"copies of {mid} disagree on flags"
        assert mine.flags[mid] == server.flags[mid], mid
    label_of = folder_label_paths(store, account_id)
    for mid, places in server.places().items():
        expected = {label_of[folder] for folder, _uid in places}
        if mid in loose:
            assert expected <= mine.labels[mid], mid
        else:
            assert mine.labels[mid] == expected, mid
    assert message_count(store, account_id) == len(server.messages), "a message is stored twice"
