"""Changes made in mailroom reach Gmail: labels by X-GM-LABELS, Trash/Spam by moves, flags."""

from __future__ import annotations

from sqlalchemy import select

from mailroom.config import Settings
from mailroom.labels.lifecycle import LabelLifecycle
from mailroom.labels.operations import Operations
from mailroom.labels.resolver import resolve_path
from mailroom.providers.imap import propagate_pending, sync_account
from mailroom.store.engine import Store
from mailroom.store.models import Message, MessageLocation, PendingChange
from tests.emulators.gmail_imap import GmailImapServer
from tests.factories import make_message
from tests.imap.gmail.views import gmail_view, mailroom_view
from tests.imap.views import sync_all


def _setup(
    store: Store, settings: Settings, gmail: GmailImapServer, account: int
) -> dict[str, int]:
    """Three messages at Gmail, synced; returns Message-ID -> mailroom message id."""
    model = gmail.model
    model.add(make_message("a@x"), ("\\Inbox",))
    model.add(make_message("b@x"), ("\\Inbox", "Work"))
    model.add(make_message("c@x"), ("Work/Invoices",))
    sync_all(store, account, settings)
    with store.session() as session:
        rows = session.execute(select(Message.message_id_header, Message.id)).all()
    return {str(header).strip("<>"): mid for header, mid in rows}


def _msgid(gmail: GmailImapServer, message_id: str) -> int:
    found = gmail.model.find(message_id)
    assert found is not None
    return found.msgid


def test_labels_archive_star_and_read_reach_gmail_and_replay_changes_nothing(
    store: Store, settings: Settings, gmail: GmailImapServer, gmail_account: int
) -> None:
    """A new label is created at Gmail; archive drops \\Inbox; the message stays one message."""
    ids = _setup(store, settings, gmail, gmail_account)
    with store.session() as session:
        receipts = resolve_path(session, 1, ["Receipts", "2026"]).id
        work = resolve_path(session, 1, ["Work"]).id
        ops = Operations(session, 1)
        ops.label([ids["a@x"]], receipts)
        ops.label([ids["b@x"]], work, on=False)
        ops.archive([ids["b@x"]])
        ops.star([ids["c@x"]])
        ops.mark_read([ids["a@x"], ids["c@x"]])
    result = propagate_pending(store, gmail_account, settings=settings)
    assert result.failed == 0 and result.retried == 0
    model = gmail.model
    assert model.message(_msgid(gmail, "a@x")).labels == {"\\Inbox", "Receipts/2026"}
    assert model.message(_msgid(gmail, "b@x")).labels == set()
    assert model.message(_msgid(gmail, "c@x")).labels == {"Work/Invoices", "\\Starred"}
    assert "\\Seen" in model.message(_msgid(gmail, "a@x")).flags
    assert len(model.messages()) == 3
    sync_account(store, gmail_account, settings=settings)
    assert mailroom_view(store, gmail_account) == gmail_view(model)

    version = model.version
    with store.session() as session:
        session.execute(PendingChange.__table__.update().values(state="pending", done_at=None))
    again = propagate_pending(store, gmail_account, settings=settings)
    assert again.failed == 0 and again.moved == 0 and again.flagged == 0
    assert model.version == version  # nothing was changed at Gmail the second time


def test_trash_spam_restore_and_delete_forever_reach_gmail(
    store: Store, settings: Settings, gmail: GmailImapServer, gmail_account: int
) -> None:
    """Trash and Spam are moves out of All Mail; restore brings the message back to the inbox."""
    ids = _setup(store, settings, gmail, gmail_account)
    with store.session() as session:
        ops = Operations(session, 1)
        ops.trash([ids["a@x"]])
        ops.spam([ids["b@x"]])
    propagate_pending(store, gmail_account, settings=settings)
    model = gmail.model
    assert model.message(_msgid(gmail, "a@x")).place == "trash"
    assert model.message(_msgid(gmail, "b@x")).place == "spam"
    sync_account(store, gmail_account, settings=settings)
    assert mailroom_view(store, gmail_account) == gmail_view(model)

    with store.session() as session:
        ops = Operations(session, 1)
        ops.restore([ids["a@x"]])
        ops.delete_forever([ids["c@x"]])
    result = propagate_pending(store, gmail_account, settings=settings)
    assert result.failed == 0 and result.retried == 0
    restored = model.message(_msgid(gmail, "a@x"))
    assert restored.place == "all" and "\\Inbox" in restored.labels
    assert model.find("c@x") is None
    sync_account(store, gmail_account, settings=settings)
    assert mailroom_view(store, gmail_account) == gmail_view(model)


def test_a_label_created_in_mailroom_becomes_a_gmail_label_not_a_synced_folder(
    store: Store, settings: Settings, gmail: GmailImapServer, gmail_account: int
) -> None:
    """The label's folder is created at Gmail and stays a view; labelling uses X-GM-LABELS."""
    ids = _setup(store, settings, gmail, gmail_account)
    with store.session() as session:
        label = LabelLifecycle(session, 1).create("Projects")
        Operations(session, 1).label([ids["c@x"]], label.id)
    result = propagate_pending(store, gmail_account, settings=settings)
    assert result.failed == 0 and result.retried == 0
    assert gmail.model.has_folder("Projects")
    assert "Projects" in gmail.model.message(_msgid(gmail, "c@x")).labels
    sync_all(store, gmail_account, settings)
    assert mailroom_view(store, gmail_account) == gmail_view(gmail.model)
    with store.session() as session:
        counts = session.execute(select(MessageLocation.message_id)).scalars().all()
    assert len(counts) == len(set(counts)) == 3  # one location each: All Mail
