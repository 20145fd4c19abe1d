"""Filing sent mail at an IMAP account (real Dovecot): APPENDed to Sent once, a draft moved."""

from __future__ import annotations

import pytest
from imapclient import IMAPClient
from sqlalchemy import select

from mailroom.config import Settings
from mailroom.ingest import IncomingMessage
from mailroom.jmap.stored_email import queue_append, store_email
from mailroom.labels.resolver import system_label
from mailroom.outbound.after_mail import AfterMail
from mailroom.outbound.filing import file_sent
from mailroom.providers.base import TransientError
from mailroom.providers.imap import propagate_pending
from mailroom.providers.imap.identity import provider_id
from mailroom.store.engine import Store
from mailroom.store.models import Account, MessageLocation, PendingChange
from tests.factories import make_message
from tests.imap.conftest import account, dovecot, mailbox, other, settings
from tests.imap.views import Mailbox, message_count, message_ids, sync_all
from tests.jmap.conftest import free_port
from tests.outbound.after_support import (
    after_mail,
    keywords_of,
    labels_of,
    outgoing,
    reply,
    send,
)
from tests.support.smtp_sink import SmtpSink

__all__ = ["account", "after_mail", "dovecot", "mailbox", "other", "settings"]

ME = "me@example.org"


@pytest.fixture
def ready(
    store: Store, settings: Settings, account: int, sink: SmtpSink, after_mail: AfterMail
) -> int:
    """The IMAP account, synced once, sending to the sink with the filing hook installed."""
    sync_all(store, account, settings)
    outgoing(store, settings, account, sink)
    return account


def _lunch() -> bytes:
    return make_message(
        "lunch-7@example.net", subject="Lunch", sender="Alice <alice@example.net>", to=ME
    ).replace(b"\n", b"\r\n")


def _reply() -> bytes:
    return reply("lunch-7@example.net", "reply-7@example.org")


def _imap_port(store: Store, account: int, port: int) -> int:
    """Point the account at another IMAP port; the one it had."""
    with store.session() as session:
        row = session.get(Account, account)
        assert row is not None
        before = int(row.settings["port"])
        row.settings = {**row.settings, "port": port}
    return before


def _folder(other: IMAPClient, name: str) -> dict[int, tuple[set[bytes], bytes]]:
    """UID -> (flags, header block) of every message in a Dovecot folder."""
    other.select_folder(name, readonly=True)
    uids = other.search("ALL")
    fetched = other.fetch(uids, [b"FLAGS", b"BODY.PEEK[HEADER]"]) if uids else {}
    return {uid: (set(d[b"FLAGS"]), d[b"BODY[HEADER]"]) for uid, d in fetched.items()}


def _appends(store: Store) -> list[tuple[str, int]]:
    with store.session() as session:
        return [
            (state, attempts)
            for state, attempts in session.execute(
                select(PendingChange.state, PendingChange.attempts).where(
                    PendingChange.operation == "append"
                )
            )
        ]


def test_the_sent_copy_is_appended_to_sent_once_and_known_to_the_next_sync(
    store: Store, settings: Settings, ready: int, mailbox: Mailbox, other: IMAPClient
) -> None:
    """APPEND to Sent with \\Seen, the UID bound; a sync and a second filing add nothing."""
    account = ready
    mailbox.append("INBOX", _lunch())
    sync_all(store, account, settings)
    submission = send(store, settings, account, _reply())
    propagate_pending(store, account, settings=settings)
    (flags, header), *more = _folder(other, "Sent").values()
    assert more == [] and b"reply-7@example.org" in header and b"\\Seen" in flags
    copy = message_ids(store, account)["reply-7@example.org"]
    with store.session() as session:
        located = session.scalars(
            select(MessageLocation.uid).where(MessageLocation.message_id == copy)
        ).all()
    assert len(located) == 1
    ((inbox_flags, _),) = _folder(other, "INBOX").values()
    assert b"\\Answered" in inbox_flags
    count = message_count(store, account)
    sync_all(store, account, settings)
    assert message_count(store, account) == count
    file_sent(store, submission)
    propagate_pending(store, account, settings=settings)
    assert len(_folder(other, "Sent")) == 1


def test_an_append_while_the_server_is_down_waits_and_the_copy_is_kept(
    store: Store, settings: Settings, ready: int, other: IMAPClient
) -> None:
    """The IMAP server unreachable: the Sent copy stays stored, the append pending, uncharged."""
    account = ready
    real_port = _imap_port(store, account, free_port())
    send(store, settings, account, _reply())
    with pytest.raises(TransientError):
        propagate_pending(store, account, settings=settings)
    assert "reply-7@example.org" in message_ids(store, account)
    assert _appends(store) == [("pending", 0)]
    assert _folder(other, "Sent") == {}
    _imap_port(store, account, real_port)
    propagate_pending(store, account, settings=settings)
    assert len(_folder(other, "Sent")) == 1
    assert _appends(store) == [("done", 0)]


def test_a_sent_draft_moves_from_drafts_to_sent_without_the_draft_flag(
    store: Store, settings: Settings, ready: int, other: IMAPClient
) -> None:
    """The draft appended to Drafts earlier is the sent message: moved to Sent, \\Draft cleared."""
    account = ready
    raw = _reply().replace(b"\n", b"\r\n")
    with store.session() as session:
        row = session.get(Account, account)
        assert row is not None
        drafts = system_label(session, row.user_id, "drafts").id
        key = provider_id("reply-7@example.org", len(raw))
        assert key is not None
        stored = store_email(
            session, account, row.user_id, IncomingMessage(key, raw, label_ids=[drafts]), ["$draft"]
        )
        assert stored is not None
        (draft,) = stored.created_ids
        queue_append(session, row, draft, key)
    propagate_pending(store, account, settings=settings)
    ((flags, _),) = _folder(other, "Drafts").values()
    assert b"\\Draft" in flags
    send(store, settings, account, raw, email_id=draft)
    propagate_pending(store, account, settings=settings)
    assert _folder(other, "Drafts") == {}
    ((flags, header),) = _folder(other, "Sent").values()
    assert b"reply-7@example.org" in header
    assert b"\\Draft" not in flags and b"\\Seen" in flags
    assert labels_of(store, draft) == {"sent"} and "$draft" not in keywords_of(store, draft)
    count = message_count(store, account)
    sync_all(store, account, settings)
    assert message_count(store, account) == count
