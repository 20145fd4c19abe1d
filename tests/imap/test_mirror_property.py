"""A stateful property test: after any changes by another client (and local operations) and a
sync, mailroom's messages, locations, flags and folder labels equal the server's.

Each example is a fresh Dovecot user and account. Steps: deliver, move, copy, delete, flag
changes (on every copy), a folder reset (new UIDVALIDITY), a folder rename, partial
imports and budget-limited syncs, local operations (star, read, archive, trash, restore)
propagated at once, and full syncs after which both sides are compared in full
(:func:`tests.imap.views.assert_mirrors`), which also proves no message is stored twice.
"""

from __future__ import annotations

import itertools
from contextlib import ExitStack

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test
from imapclient import IMAPClient

from mailroom.config import Settings
from mailroom.labels.operations import Operations
from mailroom.providers.imap import import_page, propagate_pending, sync_account
from mailroom.store.engine import Store
from tests.factories import make_message
from tests.imap.conftest import add_account, new_mailbox
from tests.imap.views import assert_mirrors, header_mid, message_ids, sync_all
from tests.support.dovecot import DovecotServer

_serial = itertools.count()
SYSTEM_FOLDERS = ["INBOX", "Archive", "Trash"]


class MirrorMachine(RuleBasedStateMachine):
    """Another client changes the mailbox; mailroom syncs; both sides must agree."""

    store: Store
    settings_: Settings
    server: DovecotServer

    def __init__(self) -> None:
        super().__init__()
        self.stack = ExitStack()
        self.mailbox = new_mailbox(self.server)
        self.account = add_account(self.store, self.settings_, self.mailbox, f"p{next(_serial)}")
        with self.store.session() as session:
            from mailroom.store.models import Account

            row = session.get(Account, self.account)
            assert row is not None
            self.user_id = row.user_id
        self.client: IMAPClient = self.stack.enter_context(self.mailbox.client())
        self.user_folder = "Work"
        self.client.create_folder(self.user_folder)
        self.count = 0
        self.touched: set[str] = set()  # Message-IDs that local operations changed

    # -- helpers ---------------------------------------------------------------

    @property
    def folders(self) -> list[str]:
        return [*SYSTEM_FOLDERS, self.user_folder]

    def _messages(self) -> list[tuple[str, int, str]]:
        """(folder, uid, Message-ID) of every message on the server."""
        found: list[tuple[str, int, str]] = []
        for folder in self.folders:
            self.client.select_folder(folder, readonly=True)
            uids = self.client.search(["ALL"])
            if not uids:
                continue
            data = self.client.fetch(uids, [b"BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)]"])
            for uid, item in data.items():
                mid = header_mid(item[b"BODY[HEADER.FIELDS (MESSAGE-ID)]"])
                assert mid is not None
                found.append((folder, int(uid), mid))
        return found

    def _pick(self, data: st.DataObject) -> tuple[str, int, str] | None:
        messages = self._messages()
        return data.draw(st.sampled_from(messages)) if messages else None

    # -- another client --------------------------------------------------------

    @rule(folder_index=st.integers(0, 3), seen=st.booleans(), size=st.integers(0, 3))
    def deliver(self, folder_index: int, seen: bool, size: int) -> None:
        self.count += 1
        raw = make_message(f"p{self.count}@prop", subject=f"n{self.count}", body="x" * (size * 700))
        self.client.append(self.folders[folder_index], raw, flags=(b"\\Seen",) if seen else ())

    @rule(data=st.data(), to=st.integers(0, 3))
    def move(self, data: st.DataObject, to: int) -> None:
        picked = self._pick(data)
        if picked is None or picked[0] == self.folders[to]:
            return
        folder, uid, _mid = picked
        self.client.select_folder(folder)
        if self.client.has_capability("MOVE"):
            self.client.move([uid], self.folders[to])
        else:
            self.client.copy([uid], self.folders[to])
            self.client.delete_messages([uid])
            self.client.uid_expunge([uid])

    @rule(data=st.data(), to=st.integers(0, 3))
    def copy(self, data: st.DataObject, to: int) -> None:
        picked = self._pick(data)
        if picked is None or picked[0] == self.folders[to]:
            return
        folder, uid, _mid = picked
        self.client.select_folder(folder)
        self.client.copy([uid], self.folders[to])

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        picked = self._pick(data)
        if picked is None:
            return
        folder, uid, _mid = picked
        self.client.select_folder(folder)
        self.client.delete_messages([uid])
        self.client.uid_expunge([uid])

    @rule(data=st.data(), flag=st.sampled_from([b"\\Seen", b"\\Flagged"]), on=st.booleans())
    def flag(self, data: st.DataObject, flag: bytes, on: bool) -> None:
        picked = self._pick(data)
        if picked is None:
            return
        for folder, uid, mid in self._messages():  # every copy, so copies agree
            if mid != picked[2]:
                continue
            self.client.select_folder(folder)
            if on:
                self.client.add_flags([uid], [flag])
            else:
                self.client.remove_flags([uid], [flag])

    @rule()
    def reset_user_folder(self) -> None:
        """Delete and recreate the user folder with the same messages: a new UIDVALIDITY."""
        folder = self.user_folder
        self.client.select_folder(folder)
        uids = self.client.search(["ALL"])
        data = self.client.fetch(uids, [b"BODY.PEEK[]", b"FLAGS"]) if uids else {}
        self.client.close_folder()
        self.client.delete_folder(folder)
        self.client.create_folder(folder)
        for uid in uids:
            flags = [f for f in data[uid][b"FLAGS"] if f != b"\\Recent"]
            self.client.append(folder, data[uid][b"BODY[]"], flags=flags)

    @rule()
    def rename_user_folder(self) -> None:
        new = "Projects" if self.user_folder == "Work" else "Work"
        self.client.select_folder("INBOX", readonly=True)  # never rename the selected folder
        self.client.rename_folder(self.user_folder, new)
        self.user_folder = new

    # -- mailroom ----------------------------------------------------------------

    @rule()
    def partial_import(self) -> None:
        sync_account(self.store, self.account, settings=self.settings_)
        import_page(self.store, self.account, settings=self.settings_)

    @rule(budget=st.integers(1, 3))
    def budget_sync(self, budget: int) -> None:
        sync_account(self.store, self.account, settings=self.settings_, budget=budget)

    @precondition(lambda self: self.count > 0)
    @rule(
        data=st.data(),
        operation=st.sampled_from(
            ["star", "unstar", "read", "unread", "archive", "trash", "restore", "spam", "delete"]
        ),
    )
    def local_operation(self, data: st.DataObject, operation: str) -> None:
        sync_all(self.store, self.account, self.settings_)
        ids = sorted(message_ids(self.store, self.account).values())
        if not ids:
            return
        by_id = {v: k for k, v in message_ids(self.store, self.account).items()}
        message = data.draw(st.sampled_from(ids))
        self.touched.add(by_id[message])
        with self.store.session() as session:
            ops = Operations(session, self.user_id)
            {
                "star": lambda: ops.star([message]),
                "unstar": lambda: ops.star([message], starred=False),
                "read": lambda: ops.mark_read([message]),
                "unread": lambda: ops.mark_read([message], read=False),
                "archive": lambda: ops.archive([message]),
                "trash": lambda: ops.trash([message]),
                "restore": lambda: ops.restore([message]),
                "spam": lambda: ops.spam([message]),
                "delete": lambda: ops.delete_forever([message]),
            }[operation]()
        propagate_pending(self.store, self.account, settings=self.settings_)

    @rule()
    def sync_and_compare(self) -> None:
        sync_all(self.store, self.account, self.settings_)
        assert_mirrors(self.store, self.account, self.mailbox, frozenset(self.touched))

    def teardown(self) -> None:
        try:
            sync_all(self.store, self.account, self.settings_)
            assert_mirrors(self.store, self.account, self.mailbox, frozenset(self.touched))
            sync_all(self.store, self.account, self.settings_)  # a second sync changes nothing
            assert_mirrors(self.store, self.account, self.mailbox, frozenset(self.touched))
        finally:
            self.stack.close()


def _run(
    store: Store, settings_: Settings, server: DovecotServer, examples: int, steps: int
) -> None:
    MirrorMachine.store = store
    MirrorMachine.settings_ = settings_
    MirrorMachine.server = server
    run_state_machine_as_test(
        MirrorMachine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            derandomize=False,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            database=None,
            # Each step talks to a real server: shrinking a long history takes too long.
            phases=[Phase.explicit, Phase.reuse, Phase.generate],
        ),
    )


def test_mirror_after_random_changes(
    store: Store, settings: Settings, dovecot: DovecotServer
) -> None:
    """A few short random histories of changes end with both sides equal."""
    _run(store, settings, dovecot, examples=3, steps=8)


@pytest.mark.slow
def test_mirror_after_many_random_changes(
    store: Store, settings: Settings, dovecot: DovecotServer
) -> None:
    """Many longer random histories of changes end with both sides equal."""
    _run(store, settings, dovecot, examples=40, steps=25)


@pytest.mark.slow
def test_mirror_without_server_extensions(
    store: Store, settings: Settings, plain_dovecot: DovecotServer
) -> None:
    """The same holds on a server without CONDSTORE, QRESYNC, MOVE, ESEARCH and SPECIAL-USE."""
    _run(store, settings, plain_dovecot, examples=25, steps=20)
