"""A stateful property test: after any changes in Gmail and in mailroom, the mirror equals Gmail.

Each example is a fresh Gmail API emulator and account. Steps in Gmail: deliver
with random labels, relabel, trash, delete forever, re-categorize, rename a user
label, expire the history, expire the access token, refuse the next batch parts
with 429. Steps in mailroom: star, read, archive, trash, propagated at once.
After a sync and the backfill, every Gmail message is stored exactly once with
the labels, read state and tab that SPEC §1/§5 derive from its label ids.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test

from mailroom.config import Settings
from mailroom.labels.operations import Operations
from mailroom.labels.propagation import propagate_pending
from mailroom.providers import registry
from mailroom.providers.base import RateLimitError
from mailroom.store.engine import Store
from mailroom.store.models import Account
from tests.emulators.gmail.emulator import GmailEmulator
from tests.emulators.gmail.seed import make_message
from tests.imap.gmail.test_gmail_mirror_property import settings_for
from tests.providers.gmail.test_sync import stored, the_minute_passes
from tests.providers.test_gmail_contract import add_gmail_account, import_all, sync

_serial = itertools.count()
PLACES = {"INBOX": "Inbox", "SENT": "Sent", "SPAM": "Spam", "TRASH": "Trash"}
CATEGORIES = {
    "CATEGORY_PERSONAL": "primary",
    "CATEGORY_SOCIAL": "social",
    "CATEGORY_PROMOTIONS": "promotions",
    "CATEGORY_UPDATES": "updates",
    "CATEGORY_FORUMS": "forums",
}
LABELS = ["INBOX", "UNREAD", "STARRED", "IMPORTANT", "SPAM", "USER"]
OPERATIONS = ["star", "unstar", "read", "unread", "archive", "trash"]


def expected_labels(gmail: GmailEmulator, label_ids: set[str]) -> frozenset[str]:
    """The mailroom label paths a message with these Gmail label ids must carry."""
    names = gmail.label_names()
    found = {PLACES[i] for i in label_ids if i in PLACES}
    found |= {names[i] for i in label_ids if i.startswith("Label_")}
    if not found:
        found.add("Archive")
    if "STARRED" in label_ids:
        found.add("Starred")
    found |= {i for i in label_ids if i in CATEGORIES}
    return frozenset(found)


class GmailApiMirrorMachine(RuleBasedStateMachine):
    """Gmail and mailroom both change the mailbox; after a sync they must agree."""

    store: Store
    settings_: Settings

    def __init__(self) -> None:
        super().__init__()
        self.gmail = GmailEmulator().start()
        self.work = self.gmail.create_label("Work")
        self.account = add_gmail_account(
            self.store, self.settings_, self.gmail, name=f"gm{next(_serial)}"
        )
        with self.store.session() as session:
            row = session.get(Account, self.account)
            assert row is not None
            self.user_id = row.user_id
        self.count = 0
        self.fetch()

    # -- helpers -----------------------------------------------------------------

    def live(self) -> list[str]:
        with self.gmail.mailbox.lock:
            return sorted(self.gmail.mailbox.messages)

    def pick(self, data: st.DataObject) -> str | None:
        ids = self.live()
        return data.draw(st.sampled_from(ids)) if ids else None

    def fetch(self) -> None:
        """A scheduler tick: sync, then the backfill; a quota deferral waits its minute.

        Every deferral used up at least one refused batch part, and there are
        at most 3 per step, so this ends.
        """
        for _attempt in range(3 * 12 + 1):
            try:
                sync(self.store, self.settings_, self.account)
                import_all(self.store, self.settings_, self.account)
                return
            except RateLimitError:
                the_minute_passes(self.store, self.account)
        raise AssertionError("the quota deferral never ends")

    # -- Gmail's side ------------------------------------------------------------

    @rule(labels=st.sets(st.sampled_from(LABELS)), category=st.sampled_from(sorted(CATEGORIES)))
    def deliver(self, labels: set[str], category: str) -> None:
        self.count += 1
        raw = make_message(f"Note {self.count}", message_id=f"<n{self.count}@example.org>")
        ids = {self.work if x == "USER" else x for x in labels} | {category}
        self.gmail.add_message(raw, sorted(ids))

    @rule(
        data=st.data(), add=st.sets(st.sampled_from(LABELS)), drop=st.sets(st.sampled_from(LABELS))
    )
    def relabel(self, data: st.DataObject, add: set[str], drop: set[str]) -> None:
        gmail_id = self.pick(data)
        if gmail_id is not None:
            ids = {self.work if x == "USER" else x for x in add}
            gone = {self.work if x == "USER" else x for x in drop} - ids
            self.gmail.change_labels(gmail_id, add=sorted(ids), remove=sorted(gone))

    @rule(data=st.data(), category=st.sampled_from(sorted(CATEGORIES)))
    def categorize(self, data: st.DataObject, category: str) -> None:
        gmail_id = self.pick(data)
        if gmail_id is not None:
            self.gmail.categorize(gmail_id, category)

    @rule(data=st.data(), back=st.booleans())
    def trash(self, data: st.DataObject, back: bool) -> None:
        gmail_id = self.pick(data)
        if gmail_id is not None:
            (self.gmail.untrash if back else self.gmail.trash)(gmail_id)

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        gmail_id = self.pick(data)
        if gmail_id is not None:
            self.gmail.delete(gmail_id)

    @rule()
    def rename_label(self) -> None:
        name = self.gmail.label_names()[self.work]
        self.gmail.rename_label(self.work, "Projects/Work" if name == "Work" else "Work")

    @rule()
    def expire_history(self) -> None:
        self.gmail.expire_history()

    @rule()
    def expire_tokens(self) -> None:
        self.gmail.expire_tokens()

    @rule(count=st.integers(1, 3))
    def refuse_batch_parts(self, count: int) -> None:
        self.gmail.inject_faults(count, 429, in_batch=True)

    # -- mailroom's side -----------------------------------------------------------

    @precondition(lambda self: bool(stored(self.store, self.account)))
    @rule(data=st.data(), operation=st.sampled_from(OPERATIONS))
    def local_operation(self, data: st.DataObject, operation: str) -> None:
        mine = stored(self.store, self.account)
        message_id = mine[data.draw(st.sampled_from(sorted(mine)))].id
        with self.store.session() as session:
            ops = Operations(session, self.user_id)
            {
                "star": lambda: ops.star([message_id]),
                "unstar": lambda: ops.star([message_id], False),
                "read": lambda: ops.mark_read([message_id]),
                "unread": lambda: ops.mark_read([message_id], False),
                "archive": lambda: ops.archive([message_id]),
                "trash": lambda: ops.trash([message_id]),
            }[operation]()
        propagator = registry.propagator_for(self.store, "gmail", self.settings_)
        assert propagator is not None
        run = propagate_pending(self.store, self.account, propagator)
        assert run.failed == 0

    # -- the comparison ------------------------------------------------------------

    @rule()
    def sync_and_compare(self) -> None:
        self.fetch()
        mine = stored(self.store, self.account)
        with self.gmail.mailbox.lock:
            theirs = {
                m.id: set(m.labels)
                for m in self.gmail.mailbox.messages.values()
                if not m.unfetchable
            }
        assert sorted(mine) == sorted(theirs)
        for gmail_id, label_ids in theirs.items():
            got = mine[gmail_id]
            assert got.labels == expected_labels(self.gmail, label_ids), gmail_id
            assert got.seen == ("UNREAD" not in label_ids)
            category = next((CATEGORIES[i] for i in label_ids if i in CATEGORIES), None)
            if category is not None:
                assert got.category == category

    def teardown(self) -> None:
        self.gmail.stop()


@pytest.mark.timeout(900)
def test_the_gmail_mirror_equals_gmail_after_random_changes(
    store: Store, settings: Settings
) -> None:
    """Random histories of changes on both sides end with the store equal to Gmail."""
    GmailApiMirrorMachine.store = store
    GmailApiMirrorMachine.settings_ = settings
    run_state_machine_as_test(GmailApiMirrorMachine, settings=settings_for(examples=6, steps=12))
