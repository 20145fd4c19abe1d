"""A stateful property test: after any changes at Gmail and in mailroom, and a sync, mailroom
shows every Gmail message exactly once, with Gmail's ids, labels, place and read state.

Each example is a fresh Gmail IMAP emulator and account. Steps at Gmail: deliver with
random labels, relabel, read/star, trash, spam, untrash, delete forever, rename a label.
Steps in mailroom: star, read, archive, trash, restore, spam, label and unlabel, delete,
propagated at once. After a sync both sides are compared in full
(:func:`tests.imap.gmail.views.gmail_view` against ``mailroom_view``).
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test

from mailroom.config import Settings
from mailroom.labels.operations import Operations
from mailroom.labels.resolver import resolve_path
from mailroom.providers.imap import add_imap_account, propagate_pending, sync_account
from mailroom.store.engine import Store
from mailroom.store.models import Account
from tests.emulators.gmail_imap import GmailImapServer
from tests.factories import make_message
from tests.imap.gmail.conftest import PASSWORD, USER
from tests.imap.gmail.views import gmail_view, mailroom_view
from tests.imap.views import message_ids, sync_all

_serial = itertools.count()
LABELS = ["\\Inbox", "\\Starred", "\\Important", "Work", "Work/Tax", "Later"]


class GmailMirrorMachine(RuleBasedStateMachine):
    """Gmail and mailroom both change the mailbox; after a sync they must agree."""

    store: Store
    settings_: Settings

    def __init__(self) -> None:
        super().__init__()
        self.gmail = GmailImapServer(USER, PASSWORD).start()
        self.account = add_imap_account(
            self.store,
            self.settings_,
            name=f"gm{next(_serial)}",
            host=self.gmail.host,
            port=self.gmail.port,
            tls="none",
            login=USER,
            password=PASSWORD,
            owner="me",
        )
        with self.store.session() as session:
            row = session.get(Account, self.account)
            assert row is not None
            self.user_id = row.user_id
        self.count = 0
        self.label_name = "Work"

    def _pick(self, data: st.DataObject) -> int | None:
        ids = [m.msgid for m in self.gmail.model.messages()]
        return data.draw(st.sampled_from(ids)) if ids else None

    # -- at Gmail ----------------------------------------------------------------

    @rule(labels=st.sets(st.sampled_from(LABELS), max_size=3), seen=st.booleans())
    def deliver(self, labels: set[str], seen: bool) -> None:
        self.count += 1
        raw = make_message(f"p{self.count}@x", subject=f"m {self.count}")
        named = {self.label_name if x == "Work" else x for x in labels}
        self.gmail.model.add(raw, sorted(named), flags=["\\Seen"] if seen else [])

    @precondition(lambda self: self.count > 0)
    @rule(
        data=st.data(), add=st.sets(st.sampled_from(LABELS)), drop=st.sets(st.sampled_from(LABELS))
    )
    def relabel(self, data: st.DataObject, add: set[str], drop: set[str]) -> None:
        msgid = self._pick(data)
        if msgid is not None:
            self.gmail.model.relabel(msgid, add=add - drop, remove=drop)

    @precondition(lambda self: self.count > 0)
    @rule(data=st.data(), flag=st.sampled_from(["\\Seen", "\\Flagged"]), on=st.booleans())
    def flag(self, data: st.DataObject, flag: str, on: bool) -> None:
        msgid = self._pick(data)
        if msgid is not None:
            self.gmail.model.set_flags(msgid, add=[flag] if on else [], remove=[] if on else [flag])

    @precondition(lambda self: self.count > 0)
    @rule(data=st.data(), where=st.sampled_from(["trash", "spam", "untrash", "delete"]))
    def place(self, data: st.DataObject, where: str) -> None:
        msgid = self._pick(data)
        if msgid is None:
            return
        model = self.gmail.model
        {
            "trash": model.trash,
            "spam": model.spam,
            "untrash": model.untrash,
            "delete": model.delete,
        }[where](msgid)

    @rule()
    def rename_label(self) -> None:
        if self.gmail.model.has_folder(self.label_name):
            new = "Job" if self.label_name == "Work" else "Work"
            self.gmail.model.rename_label(self.label_name, new)
            self.label_name = new

    # -- in mailroom ---------------------------------------------------------------

    @precondition(lambda self: self.count > 0)
    @rule(
        data=st.data(),
        operation=st.sampled_from(
            [
                "star",
                "unstar",
                "read",
                "unread",
                "archive",
                "trash",
                "restore",
                "spam",
                "label",
                "unlabel",
                "delete",
            ]
        ),
    )
    def local_operation(self, data: st.DataObject, operation: str) -> None:
        sync_all(self.store, self.account, self.settings_)
        ids = sorted(message_ids(self.store, self.account).values())
        if not ids:
            return
        message = data.draw(st.sampled_from(ids))
        with self.store.session() as session:
            ops = Operations(session, self.user_id)
            later = resolve_path(session, self.user_id, ["Later"]).id
            {
                "star": lambda: ops.star([message]),
                "unstar": lambda: ops.star([message], starred=False),
                "read": lambda: ops.mark_read([message]),
                "unread": lambda: ops.mark_read([message], read=False),
                "archive": lambda: ops.archive([message]),
                "trash": lambda: ops.trash([message]),
                "restore": lambda: ops.restore([message]),
                "spam": lambda: ops.spam([message]),
                "label": lambda: ops.label([message], later),
                "unlabel": lambda: ops.label([message], later, on=False),
                "delete": lambda: ops.delete_forever([message]),
            }[operation]()
        run = propagate_pending(self.store, self.account, settings=self.settings_)
        assert run.failed == 0 and run.retried == 0

    @rule()
    def sync_and_compare(self) -> None:
        sync_all(self.store, self.account, self.settings_)
        assert mailroom_view(self.store, self.account) == gmail_view(self.gmail.model)

    def teardown(self) -> None:
        try:
            sync_all(self.store, self.account, self.settings_)
            assert mailroom_view(self.store, self.account) == gmail_view(self.gmail.model)
            sync_account(self.store, self.account, settings=self.settings_)  # changes nothing
            assert mailroom_view(self.store, self.account) == gmail_view(self.gmail.model)
        finally:
            self.gmail.stop()


def test_gmail_mirror_after_random_changes(store: Store, settings: Settings) -> None:
    """A few short random histories of changes end with both sides equal."""
    GmailMirrorMachine.store = store
    GmailMirrorMachine.settings_ = settings
    run_state_machine_as_test(
        GmailMirrorMachine,
        settings=settings_for(examples=4, steps=10),
    )


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_gmail_mirror_after_many_random_changes(store: Store, settings: Settings) -> None:
    """Many longer random histories of changes end with both sides equal."""
    GmailMirrorMachine.store = store
    GmailMirrorMachine.settings_ = settings
    run_state_machine_as_test(GmailMirrorMachine, settings=settings_for(examples=15, steps=20))


def settings_for(examples: int, steps: int) -> settings:
    """Hypothesis settings for a machine whose every step talks to a real server."""
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        database=None,
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
    )
