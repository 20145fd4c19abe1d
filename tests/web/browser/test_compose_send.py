"""Compose in a real browser against `mailroom serve`: a draft saved as one types, Send,
Undo within the window (nothing sent), Send again to the SMTP sink, in Sent; a reply.

The served account sends to an :class:`SmtpSink` on loopback (the serve reads
``MAILROOM_ALLOWED_PRIVATE_HOSTS`` and ``MAILROOM_WEB_UNDO_SECONDS`` from the
``.env`` of its working directory). The undo window is long enough that the
Undo click never races the lane, and the lane of ``mailroom serve`` sends once
it is over, which the page's status shows without a reload.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import select

from mailroom.config import Settings
from mailroom.store.engine import Store
from mailroom.store.models import Message
from tests.outbound.after_support import ME, outgoing
from tests.support.smtp_sink import SmtpSink
from tests.web.browser.conftest import Served, Watch, serve_store

UNDO_SECONDS = 20
DELIVERY_MS = 120_000  # the window, then the lane: generous for a loaded machine


@pytest.fixture
def sink() -> Iterator[SmtpSink]:
    """The outgoing server of the served account."""
    with SmtpSink() as running:
        yield running


@pytest.fixture
def served(
    store: Store, mail: tuple[int, int, int], sink: SmtpSink, tmp_path: Path
) -> Iterator[Served]:
    """`mailroom serve` whose account ``home`` sends as ME to the sink."""
    outgoing(store, Settings(data_dir=tmp_path / "data"), mail[1], sink)
    (tmp_path / ".env").write_text(
        f"MAILROOM_ALLOWED_PRIVATE_HOSTS=127.0.0.1\nMAILROOM_WEB_UNDO_SECONDS={UNDO_SECONDS}\n"
    )
    yield from serve_store(store, tmp_path)


@pytest.fixture
def site(served: Served) -> str:
    """Against the `mailroom serve` subprocess: its lane sends to the sink."""
    return served.base


def _send(page: Page) -> None:
    page.get_by_role("button", name="Send").click()
    page.wait_for_url("**/compose/sent/*")


def test_compose_undo_then_send_to_the_sink_and_find_it_in_sent(
    page: Page, sink: SmtpSink, watch: Watch
) -> None:
    """Type, see the draft saved, Send, Undo (back to the draft), Send, delivered, in Sent."""
    page.goto("/compose")
    page.get_by_label("To").fill("Bob <bob@example.net>")
    page.get_by_label("Subject").fill("Plans for Friday")
    page.get_by_label("Message").fill("Shall we meet at noon?")
    expect(page.locator("#draft-status")).to_have_text("Draft saved")
    _send(page)
    expect(page.locator("#send-status")).to_contain_text("Sending…")
    page.get_by_role("button", name="Undo").click()
    page.wait_for_url("**/compose?draft=*")
    expect(page.get_by_role("status").first).to_contain_text("Sending was undone")
    expect(page.get_by_label("Subject")).to_have_value("Plans for Friday")
    _send(page)
    expect(page.locator("#send-status")).to_contain_text("Message sent.", timeout=DELIVERY_MS)
    assert len(sink.messages) == 1  # the undone one never went
    delivered = sink.messages[0]
    assert delivered.mail_from == ME and delivered.rcpt_tos == ("bob@example.net",)
    assert b"Subject: Plans for Friday" in delivered.data
    page.get_by_role("link", name="View in Sent").click()
    expect(page.locator("main")).to_contain_text("Plans for Friday")
    assert watch.problems == []


def test_reply_to_a_thread_is_delivered_in_it(
    page: Page, sink: SmtpSink, store: Store, watch: Watch
) -> None:
    """A reply is addressed, quoted and threaded, and the sink gets it with In-Reply-To."""
    with store.session() as session:
        parent = session.scalar(select(Message.id).where(Message.subject == "Lunch on Friday?"))
    page.goto(f"/compose?reply={parent}")
    expect(page.get_by_label("To")).to_have_value("Alice Example <alice@example.org>")
    expect(page.get_by_label("Subject")).to_have_value("Re: Lunch on Friday?")
    page.get_by_label("Message").press("Control+Home")
    page.get_by_label("Message").press_sequentially("Friday works. ")
    _send(page)
    expect(page.locator("#send-status")).to_contain_text("Message sent.", timeout=DELIVERY_MS)
    assert len(sink.messages) == 1
    data = sink.messages[0].data
    assert b"In-Reply-To: <primary@seed>" in data and b"Friday works." in data
    assert watch.problems == []
