"""Look-ups of sealed messages by Message-ID (keyed hashes) and by opened sender: ``$answered``
after a sent reply, a bounce recognised by its sender, Gmail's reply thread, Gmailify's
linked rows and a sibling's claim."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select, text

from mailroom.config import Settings
from mailroom.ingest import IncomingMessage, store_batch
from mailroom.labels.resolver import ensure_system_labels
from mailroom.outbound.after_mail import AfterMail
from mailroom.outbound.bounces import recognise_bounces
from mailroom.owners import get_or_create_account, get_or_create_user
from mailroom.providers.gmail.gmailify import claim_linked, linked_rows, siblings_of
from mailroom.providers.gmail.sending import reply_thread
from mailroom.store.engine import Store
from mailroom.store.models import Message, Submission
from tests.factories import make_message
from tests.helpers import ingest
from tests.outbound.after_support import (
    ME,
    after_mail,
    keywords_of,
    local_sender,
    reply,
    send,
    settings,
)
from tests.support.smtp_sink import SmtpSink

__all__ = ["after_mail", "settings"]  # fixtures, imported for pytest

ORIGINAL = "orig-9@example.org"
SIBLING = "sib@example.net"
OWNER = "owner@example.com"


@pytest.fixture
def sink() -> Iterator[SmtpSink]:
    """A plain SMTP sink on loopback."""
    with SmtpSink() as running:
        yield running


def _column(store: Store, column: str, message_id: int) -> Any:
    with store.session() as session:
        return session.execute(
            text(f"SELECT {column} FROM messages WHERE id = :id"), {"id": message_id}
        ).scalar()


def test_a_sent_reply_answers_its_sealed_parent(
    sealed_store: Store, settings: Settings, sink: SmtpSink, after_mail: AfterMail
) -> None:
    account = local_sender(sealed_store, settings, sink)
    lunch = make_message("lunch-1@example.net", subject="Lunch", sender="Alice <a@x.net>", to=ME)
    (parent,) = ingest(sealed_store, account, [("lunch", lunch)]).created_ids
    assert _column(sealed_store, "message_id_header", parent) != "lunch-1@example.net"
    send(sealed_store, settings, account[1], reply("lunch-1@example.net", "reply-1@example.org"))
    assert "$answered" in keywords_of(sealed_store, parent)


def _daemon_report() -> bytes:
    """A non-standard bounce only its sender calls one: no null Return-Path, a plain subject."""
    inner = make_message(ORIGINAL, sender=f"Me <{ME}>", to="bob@example.net", subject="Hello")
    return (
        b"From: MAILER-DAEMON@mail.example.net\r\n"
        b"To: " + ME.encode() + b"\r\n"
        b"Subject: note\r\n"
        b"Message-ID: <qmail-1@mail.example.net>\r\n"
        b"MIME-Version: 1.0\r\n"
        b'Content-Type: multipart/mixed; boundary="QQ"\r\n\r\n'
        b"--QQ\r\nContent-Type: text/plain\r\n\r\n"
        b"I wasn't able to deliver your message to the following addresses.\r\n\r\n"
        b"<bob@example.net>:\r\nSorry, no mailbox here by that name. (#5.1.1)\r\n\r\n"
        b"--QQ\r\nContent-Type: message/rfc822\r\n\r\n" + inner + b"\r\n--QQ--\r\n"
    )


def test_a_sealed_report_is_recognised_by_its_opened_sender(
    sealed_store: Store, settings: Settings, sink: SmtpSink
) -> None:
    account = local_sender(sealed_store, settings, sink)
    hello = make_message(ORIGINAL, subject="Hello", sender=f"Me <{ME}>", to="bob@example.net")
    submission_id = send(sealed_store, settings, account[1], hello)
    stored = ingest(sealed_store, account, [("daemon", _daemon_report())])
    (report,) = stored.created_ids
    assert str(_column(sealed_store, "from_email", report)).startswith("mrf1.")
    recognise_bounces(sealed_store, stored.created_ids)
    with sealed_store.session() as session:
        submission = session.get(Submission, submission_id)
        assert submission is not None
        status = dict(submission.delivery_status or {})
    assert status["bob@example.net"]["delivered"] == "no"


def _owner(store: Store) -> tuple[int, int, int, int]:
    """A user with a Gmail account and an IMAP sibling: (user, gmail, sibling, inbox)."""
    with store.session() as session:
        user = get_or_create_user(session, "me")
        gmail = get_or_create_account(session, user, "gmail", "gmail", {"email": OWNER})
        sibling = get_or_create_account(session, user, "sibling", "imap", {"email": SIBLING})
        roles = ensure_system_labels(session, user.id)
        return user.id, gmail.id, sibling.id, roles["inbox"]


def _original(key: str) -> bytes:
    body = make_message(f"{key}@example.org", subject=f"About {key}", to=SIBLING)
    return (
        f"Delivered-To: {SIBLING}\r\nReceived: from mx.example.org by imap.example.net "
        f"with ESMTP id {key}\r\n\tfor <{SIBLING}>; Mon, 5 Jan 2026 09:00:00 +0000\r\n"
    ).encode() + body


def _fetched_by_gmail(raw: bytes) -> bytes:
    return (
        f"Delivered-To: {OWNER}\r\nReceived: by 2002:a05:6000:1 with POP3 id x\r\n"
        f"\tfor <{OWNER}>; Mon, 5 Jan 2026 09:01:00 +0000\r\n"
    ).encode() + raw


def _store(store: Store, user: int, account: int, inbox: int, item: IncomingMessage) -> int:
    item.label_ids = [inbox]
    with store.session() as session:
        (created,) = store_batch(session, account, user, [item]).created_ids
        return created


def test_gmail_finds_the_thread_of_a_sealed_parent(sealed_store: Store) -> None:
    user, gmail, _sibling, inbox = _owner(sealed_store)
    parent = IncomingMessage("g-parent", _original("p1"), provider_thread_id="thread-77")
    _store(sealed_store, user, gmail, inbox, parent)
    answer = make_message("r1@example.com", sender=OWNER, in_reply_to="p1@example.org")
    with sealed_store.session() as session:
        assert reply_thread(session, gmail, answer) == "thread-77"
        other = make_message("r2@example.com", sender=OWNER, in_reply_to="nope@example.org")
        assert reply_thread(session, gmail, other) is None


def test_gmailify_finds_the_siblings_sealed_row(sealed_store: Store) -> None:
    user, gmail, sibling, inbox = _owner(sealed_store)
    held = _store(sealed_store, user, sibling, inbox, IncomingMessage("uid-1", _original("k1")))
    raws = {
        "g1": _fetched_by_gmail(_original("k1")),
        "g2": _fetched_by_gmail(_original("k2")),  # the sibling does not hold this one
    }
    with sealed_store.session() as session:
        found = linked_rows(session, user, siblings_of(session, user, gmail), raws)
    assert {gmail_id: row for gmail_id, (_s, row) in found.items()} == {"g1": held}


def test_a_sibling_claims_a_sealed_row_gmail_holds(sealed_store: Store) -> None:
    user, gmail, sibling, inbox = _owner(sealed_store)
    fetched = IncomingMessage("g1", _fetched_by_gmail(_original("k1")))
    row = _store(sealed_store, user, gmail, inbox, fetched)
    mine = IncomingMessage("uid-1", _original("k1"))
    other = IncomingMessage("uid-2", _original("k2"))
    with sealed_store.session() as session:
        left = claim_linked(session, sibling, user, [mine, other])
    assert [item.provider_id for item in left] == ["uid-2"]
    with sealed_store.session() as session:
        moved = session.get(Message, row)
        assert moved is not None and (moved.account_id, moved.provider_id) == (sibling, "uid-1")
        assert moved.subject == "About k1"
        assert session.scalar(select(Message.sealed).where(Message.id == row))
