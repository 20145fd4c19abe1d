"""Filing what was sent: one Sent copy of the transmitted bytes, threaded, ``$answered`` set."""

from __future__ import annotations

from sqlalchemy import select

from mailroom.config import Settings
from mailroom.ingest import IncomingMessage
from mailroom.jmap.stored_email import store_email
from mailroom.labels.resolver import system_label
from mailroom.outbound.after_mail import AfterMail
from mailroom.outbound.filing import file_sent
from mailroom.providers import registry
from mailroom.store.engine import Store
from mailroom.store.models import Account, Blob, Change, Message, PendingChange, Submission
from tests.factories import make_message
from tests.helpers import ingest, make_account, thread_of
from tests.outbound.after_support import (
    ME,
    after_mail,
    keywords_of,
    labels_of,
    local_sender,
    message_ids,
    outgoing,
    reply,
    send,
    settings,
)
from tests.support.smtp_sink import SmtpSink

__all__ = ["after_mail", "settings"]  # fixtures, imported for pytest


def _reply(bcc: str | None = None) -> bytes:
    extra = {"Bcc": bcc} if bcc else {}
    return reply("lunch-1@example.net", "reply-1@example.org", **extra)


def _incoming(store: Store, account: tuple[int, int, int]) -> int:
    lunch = make_message(
        "lunch-1@example.net", subject="Lunch", sender="Alice <alice@example.net>", to=ME
    )
    return ingest(store, account, [("lunch", lunch)]).created_ids[0]


def test_a_sent_reply_is_filed_once_in_sent_threaded_and_answers_its_parent(
    store: Store, settings: Settings, sink: SmtpSink, after_mail: AfterMail
) -> None:
    """The transmitted bytes (no Bcc) land in Sent, read, in the thread; the parent is $answered."""
    account = local_sender(store, settings, sink)
    parent = _incoming(store, account)
    submission_id = send(store, settings, account[1], _reply(bcc="boss@example.com"))
    assert len(sink.messages) == 1 and b"boss@example.com" not in sink.messages[0].data
    copy = [m for m in message_ids(store, account[1]) if m != parent]
    assert len(copy) == 1
    with store.session() as session:
        sent = session.get(Message, copy[0])
        submission = session.get(Submission, submission_id)
        assert sent is not None and submission is not None
        raw = session.scalars(select(Blob.data).where(Blob.sha256 == sent.raw_sha256)).one()
        assert sent.seen_at is not None
        assert submission.email_id == sent.id
        changes = session.scalars(
            select(Change.kind).where(
                Change.type == "EmailSubmission", Change.object_id == submission_id
            )
        ).all()
    assert bytes(raw).replace(b"\r\n", b"\n") == sink.messages[0].data.replace(b"\r\n", b"\n")
    assert b"Bcc" not in bytes(raw)
    assert labels_of(store, sent.id) == {"sent"}
    assert thread_of(store, "reply-1@example.org") == thread_of(store, "lunch-1@example.net")
    assert "$answered" in keywords_of(store, parent)
    assert changes.count("updated") >= 2  # sent, then filed

    file_sent(store, submission_id)  # a second run (a sweep, an operator) adds nothing
    assert len(message_ids(store, account[1])) == 2


def test_filing_waits_for_the_sent_state(store: Store, settings: Settings, sink: SmtpSink) -> None:
    """A submission that was not sent (failed at the server) gets no Sent copy."""
    account = local_sender(store, settings, sink)
    sink.script(["550 5.7.1 refused"])
    submission_id = send(store, settings, account[1], _reply())
    file_sent(store, submission_id)
    assert message_ids(store, account[1]) == []


def test_a_stored_draft_becomes_the_sent_message(
    store: Store, settings: Settings, sink: SmtpSink, after_mail: AfterMail
) -> None:
    """A submission of a stored draft moves that draft to Sent, read, without $draft: no copy."""
    account = local_sender(store, settings, sink)
    user_id, account_id, _inbox = account
    parent = _incoming(store, account)
    with store.session() as session:
        drafts = system_label(session, user_id, "drafts").id
        item = IncomingMessage("draft-1", _reply(), label_ids=[drafts])
        stored = store_email(session, account_id, user_id, item, ["$draft"])
        assert stored is not None
        (draft,) = stored.created_ids
    send(store, settings, account_id, _reply(), email_id=draft)
    assert sorted(message_ids(store, account_id)) == sorted([parent, draft])
    assert labels_of(store, draft) == {"sent"}
    assert "$draft" not in keywords_of(store, draft)
    assert "$answered" in keywords_of(store, parent)
    with store.session() as session:
        message = session.get(Message, draft)
        assert message is not None and message.seen_at is not None


def test_a_provider_that_files_sent_mail_itself_gets_no_copy(
    store: Store, settings: Settings, sink: SmtpSink, after_mail: AfterMail
) -> None:
    """With files_sent_mail declared, nothing is stored or appended; $answered still is set."""
    registry.register(registry.ProviderEntry("selffiling", files_sent_mail=True))
    try:
        account = make_account(store)
        with store.session() as session:
            row = session.get(Account, account[1])
            assert row is not None
            row.provider = "selffiling"
        outgoing(store, settings, account[1], sink)
        parent = _incoming(store, account)
        send(store, settings, account[1], _reply())
        assert len(sink.messages) == 1
        assert message_ids(store, account[1]) == [parent]
        assert "$answered" in keywords_of(store, parent)
        with store.session() as session:
            appends = session.scalars(
                select(PendingChange.id).where(PendingChange.operation == "append")
            ).all()
        assert appends == []
    finally:
        registry.unregister("selffiling")
