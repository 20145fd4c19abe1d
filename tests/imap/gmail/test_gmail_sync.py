"""Syncing a Gmail account over IMAP: one message per X-GM-MSGID, labels from X-GM-LABELS."""

from __future__ import annotations

from sqlalchemy import select

from mailroom.config import Settings
from mailroom.providers.imap import ImapWatcher, sync_account
from mailroom.store.engine import Store
from mailroom.store.models import Label, LabelBinding, Message
from tests.emulators.gmail_imap import GmailImapServer
from tests.factories import make_message
from tests.imap.gmail.views import gmail_view, location_counts, mailroom_view
from tests.imap.test_watcher import _wait_for, watching
from tests.imap.views import sync_all

LABELLED = [
    ("a@x", ("\\Inbox",)),
    ("b@x", ("\\Inbox", "Work", "Work/Invoices", "\\Important")),
    ("c@x", ("Work/Invoices", "Receipts", "\\Starred")),
    ("d@x", ()),
    ("e@x", ("\\Sent",)),
]


def _deliver(gmail: GmailImapServer, mail: list[tuple[str, tuple[str, ...]]]) -> dict[str, int]:
    return {mid: gmail.model.add(make_message(mid, subject=mid), labels) for mid, labels in mail}


def test_each_message_is_stored_once_with_its_gmail_labels(
    store: Store, settings: Settings, gmail: GmailImapServer, gmail_account: int
) -> None:
    """A message in four label folders is one message with one location (All Mail)."""
    ids = _deliver(gmail, LABELLED)
    gmail.model.spam(gmail.model.add(make_message("s@x"), ("\\Inbox",)))
    gmail.model.trash(gmail.model.add(make_message("t@x"), ("Receipts",)))
    # The emulator shows the message in several folders, as Gmail does.
    assert ids["b@x"] in gmail.model.folder_uids("Work").values()
    assert ids["b@x"] in gmail.model.folder_uids("INBOX").values()
    sync_all(store, gmail_account, settings)
    assert mailroom_view(store, gmail_account) == gmail_view(gmail.model)
    counts = location_counts(store, gmail_account)
    assert len(counts) == 7 and set(counts.values()) == {1}
    with store.session() as session:
        invoices = session.scalars(select(Label).where(Label.path == "Work/Invoices")).one()
        parent = session.get(Label, invoices.parent_id)
        assert parent is not None and parent.path == "Work"
        refs = set(
            session.scalars(
                select(LabelBinding.provider_ref).where(LabelBinding.account_id == gmail_account)
            )
        )
    assert {"INBOX", "Work", "Work/Invoices", "Receipts", "[Gmail]/Trash"} <= refs


def test_new_mail_and_relabels_at_gmail_are_seen_by_the_next_sync(
    store: Store, settings: Settings, gmail: GmailImapServer, gmail_account: int
) -> None:
    """New mail, labels added and removed, Trash, Spam, back and deleted forever."""
    ids = _deliver(gmail, LABELLED[:3])
    sync_all(store, gmail_account, settings)
    model = gmail.model
    ids["n@x"] = model.add(make_message("n@x"), ("\\Inbox", "Later"))
    model.relabel(ids["a@x"], add=["Later"], remove=["\\Inbox"])
    model.relabel(ids["b@x"], remove=["Work/Invoices", "\\Inbox"])
    model.set_flags(ids["c@x"], add=["\\Seen"], remove=["\\Flagged"])
    sync_account(store, gmail_account, settings=settings)
    assert mailroom_view(store, gmail_account) == gmail_view(model)

    model.trash(ids["a@x"])
    model.spam(ids["b@x"])
    sync_account(store, gmail_account, settings=settings)
    assert mailroom_view(store, gmail_account) == gmail_view(model)
    with store.session() as session:
        before = dict(session.execute(select(Message.provider_id, Message.id)).all())

    model.untrash(ids["a@x"])
    model.relabel(ids["a@x"], add=["\\Inbox"])
    model.delete(ids["b@x"])
    sync_account(store, gmail_account, settings=settings)
    assert mailroom_view(store, gmail_account) == gmail_view(model)
    with store.session() as session:
        after = dict(session.execute(select(Message.provider_id, Message.id)).all())
    # The message that came back from the Trash is the same row, not a new one.
    assert after[f"gm:{ids['a@x']:x}"] == before[f"gm:{ids['a@x']:x}"]
    assert f"gm:{ids['b@x']:x}" not in after


def test_gmail_thread_ids_decide_the_conversation(
    store: Store, settings: Settings, gmail: GmailImapServer, gmail_account: int
) -> None:
    """Messages Gmail puts in one thread share a thread, whatever their headers say."""
    model = gmail.model
    first = model.add(make_message("t1@x", subject="Lunch?"), ("\\Inbox",))
    model.add(make_message("t2@x", subject="Something else entirely"), ("\\Inbox",), thrid=first)
    model.add(make_message("t3@x", subject="Unrelated"), ("\\Inbox",))
    sync_all(store, gmail_account, settings)
    with store.session() as session:
        threads = dict(session.execute(select(Message.message_id_header, Message.thread_id)).all())
        provider = dict(
            session.execute(select(Message.message_id_header, Message.provider_thread_id)).all()
        )
    by_id = {str(k).strip("<>"): v for k, v in threads.items()}
    assert by_id["t1@x"] == by_id["t2@x"] != by_id["t3@x"]
    assert {str(k).strip("<>"): v for k, v in provider.items()}["t2@x"] == f"{first:x}"


def test_the_watcher_idles_on_all_mail_and_stores_new_mail(
    store: Store, settings: Settings, gmail: GmailImapServer, gmail_account: int
) -> None:
    """New Gmail mail reaches the store through IDLE (All Mail is watched, not INBOX)."""
    sync_account(store, gmail_account, settings=settings)
    watcher = ImapWatcher(store, gmail_account, settings=settings, poll_interval=0.1)
    with watching(watcher) as errors:
        gmail.model.add(make_message("pushed@x"), ("\\Inbox", "Work"))
        assert _wait_for(lambda: "pushed@x" in mailroom_view(store, gmail_account)), errors
    assert not errors
    assert mailroom_view(store, gmail_account) == gmail_view(gmail.model)


def test_labels_renamed_or_deleted_at_gmail_follow_on_every_message(
    store: Store, settings: Settings, gmail: GmailImapServer, gmail_account: int
) -> None:
    """A renamed label moves to its new name on every message; a deleted one goes."""
    ids = _deliver(gmail, LABELLED[:3])
    sync_all(store, gmail_account, settings)
    gmail.model.rename_label("Work", "Job")
    gmail.model.delete_label("Receipts")
    sync_account(store, gmail_account, settings=settings)
    assert mailroom_view(store, gmail_account) == gmail_view(gmail.model)
    assert gmail.model.message(ids["b@x"]).labels >= {"Job", "Job/Invoices"}
    with store.session() as session:
        paths = set(session.scalars(select(Label.path)))
    assert {"Job", "Job/Invoices"} <= paths
    assert not {"Work", "Work/Invoices", "Receipts"} & paths
