"""Sending from the compose page, over real HTTP on both stores, to a real SMTP sink:
the one-sentence refusals, the undo window and Undo, and delivery with filing in Sent."""

from __future__ import annotations

import re
from datetime import timedelta

from sqlalchemy import select

from mailroom.outbound.after_mail import AfterMail
from mailroom.store.models import Submission
from tests.outbound.after_support import ME, after_mail
from tests.web.compose_support import UNDO_SECONDS, Composer, composer, sent_id

__all__ = ["after_mail", "composer"]  # fixtures, imported for pytest


def _send(composer: Composer, **fields: str) -> int:
    return sent_id(composer.post(action="send", **fields))


def test_a_bad_address_or_no_recipient_is_one_sentence_and_keeps_the_draft(
    composer: Composer,
) -> None:
    """Nothing is queued; the page says what to change, and the text is saved as the draft."""
    bad = composer.post(action="send", to="bob, carol@example.net", subject="Hi", body="Text")
    assert bad.status_code == 422
    assert (
        "&#39;bob&#39; in To is not an email address; give one such as bob@example.org." in bad.text
    )
    saved = re.search(r'name="draft" value="(\d+)"', bad.text)
    assert saved is not None and composer.drafts() == [int(saved.group(1))]
    nobody = composer.post(action="send", draft=saved.group(1), subject="Hi", body="Text")
    assert nobody.status_code == 422
    assert "Add at least one recipient in To, Cc or Bcc." in nobody.text
    assert 'value="Hi"' in nobody.text and len(composer.drafts()) == 1
    with composer.store.session() as session:
        assert session.scalars(select(Submission)).all() == []


def test_send_waits_the_undo_window_and_undo_returns_to_the_draft(composer: Composer) -> None:
    """The submission is scheduled for the window; Undo cancels it, nothing reaches the sink."""
    submission = _send(composer, to="bob@example.net", subject="Oops", body="Not yet")
    row = composer.submission(submission)
    assert row.state == "scheduled"
    assert row.send_at is not None and row.queued_at is not None
    assert row.send_at - row.queued_at == timedelta(seconds=UNDO_SECONDS)
    bar = composer.client.get(f"/compose/sent/{submission}").text
    assert "Sending…" in bar and ">Undo</button>" in bar
    undone = composer.client.post(
        f"/compose/sent/{submission}/undo", data={"csrf": composer.csrf()}
    )
    assert undone.status_code == 303
    assert undone.headers["location"] == f"/compose?draft={row.email_id}&undone=1"
    assert composer.submission(submission).state == "canceled"
    page = composer.client.get(undone.headers["location"]).text
    assert "Sending was undone; the message is back in your drafts." in page
    assert 'value="Oops"' in page and composer.drafts() == [row.email_id]
    assert composer.deliver(row.lane) == 0 and composer.sink.messages == []
    again = composer.client.post(f"/compose/sent/{submission}/undo", data={"csrf": composer.csrf()})
    assert again.status_code == 422 and "cannot be undone" in again.text


def test_a_sent_message_is_delivered_without_bcc_and_filed_in_sent(
    composer: Composer, after_mail: AfterMail
) -> None:
    """After the window the lane delivers it; the draft becomes the Sent message."""
    submission = _send(
        composer,
        to="Bob <bob@example.net>",
        bcc="boss@example.com",
        subject="Report",
        body="Here it is.",
    )
    draft = composer.submission(submission).email_id
    assert composer.deliver(composer.submission(submission).lane) == 1
    assert len(composer.sink.messages) == 1
    delivered = composer.sink.messages[0]
    assert delivered.mail_from == ME
    assert sorted(delivered.rcpt_tos) == ["bob@example.net", "boss@example.com"]
    assert b"Subject: Report" in delivered.data and b"boss@example.com" not in delivered.data
    assert composer.submission(submission).state == "sent"
    assert composer.sent() == [draft] and composer.drafts() == []
    assert "Message sent." in composer.client.get(f"/compose/sent/{submission}").text
