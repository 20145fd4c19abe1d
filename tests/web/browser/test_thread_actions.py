"""The thread view and its actions in Chromium against `mailroom serve`: open a thread,
archive it (gone from the Inbox, in Archive, moved on the IMAP server by the engine),
star with the keyboard, snooze, undo, the shortcut list — with no script error, dialog or
CSP violation on the way."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from imapclient import IMAPClient
from playwright.sync_api import Browser, Locator, Page, expect

from mailroom.config import Settings
from mailroom.secrets import generate_key
from mailroom.store.engine import Store
from mailroom.store.models import Thread
from tests.factories import make_message
from tests.imap.conftest import add_account, dovecot, new_mailbox  # noqa: F401  (the session's Dovecot)
from tests.imap.views import sync_all
from tests.support.dovecot import DovecotServer
from tests.web.browser.conftest import Watch, serve_store, sign_in
from tests.web.conftest import add_user

PROPAGATION_SECONDS = 60  # the longest the engine may take to move the message on a busy machine
TALL = "".join(f"<p>Paragraph {n} of the plan.</p>" for n in range(40))


def _row(page: Page, subject: str) -> Locator:
    return page.locator("li.thread", has_text=subject)


def test_open_a_thread_and_archive_it_to_the_imap_server(
    store: Store,
    chromium: Browser,
    dovecot: DovecotServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The thread opens with its frame sized to the mail; Archive takes it out of the Inbox
    into Archive, and the engine inside `mailroom serve` moves it on the IMAP server."""
    key = generate_key()
    settings = Settings(master_key=key, allowed_private_hosts="127.0.0.1", data_dir=tmp_path / "d")
    mailbox = new_mailbox(dovecot)
    with mailbox.client() as imap:
        imap.append("INBOX", make_message("plan@x", subject="Quarterly plan", html=TALL))
    add_user(store, "me")
    account = add_account(store, settings, mailbox, name="work")
    sync_all(store, account, settings)
    # `mailroom serve` runs in tmp_path, whose .env gives it the master key and the allow-list.
    (tmp_path / ".env").write_text(
        f"MAILROOM_MASTER_KEY={key}\nMAILROOM_ALLOWED_PRIVATE_HOSTS=127.0.0.1\n"
    )
    with contextlib.closing(serve_store(store, tmp_path)) as served:
        _archive_in_the_browser(chromium, next(served).base)
        deadline = time.monotonic() + PROPAGATION_SECONDS
        with mailbox.client() as imap:
            while _folders(imap) != ([], 1):
                assert time.monotonic() < deadline, "the archive never reached the IMAP server"
                time.sleep(0.3)


def _folders(imap: IMAPClient) -> tuple[list[int], int]:
    """The UIDs in INBOX and how many messages Archive holds."""
    imap.select_folder("INBOX", readonly=True)
    inbox = imap.search("ALL")
    if not imap.folder_exists("Archive"):
        return inbox, 0
    imap.select_folder("Archive", readonly=True)
    return inbox, len(imap.search("ALL"))


def _archive_in_the_browser(chromium: Browser, base: str) -> None:
    watch = Watch()
    context = chromium.new_context(base_url=base)
    try:
        context.set_default_timeout(15_000)
        context.on("page", watch.attach)
        page = context.new_page()
        page.goto("/")
        sign_in(page)
        page.get_by_role("link", name=re.compile("Quarterly plan")).click()
        expect(page.get_by_role("heading", name="Quarterly plan")).to_be_visible()
        frame = page.locator("iframe.message-frame")
        expect(frame.content_frame.get_by_text("Paragraph 39 of the plan.")).to_be_attached()
        page.wait_for_function(
            "document.querySelector('iframe.message-frame').getBoundingClientRect().height > 600"
        )
        page.locator("#actions").get_by_role("button", name="Archive").click()
        expect(page.locator("#toast")).to_contain_text("Archived: 1 conversation.")
        page.wait_for_url(lambda url: url.endswith("/"))
        expect(_row(page, "Quarterly plan")).to_have_count(0)
        page.goto("/mail/archive")
        expect(_row(page, "Quarterly plan")).to_have_count(1)
        assert watch.problems == []
    finally:
        context.close()


@pytest.fixture
def inbox(page: Page) -> Iterator[Page]:
    """The signed-in page on the Inbox (Primary), its first row visible."""
    expect(page.locator("li.thread").first).to_be_visible()
    yield page


def test_star_with_the_keyboard_and_see_the_shortcuts(
    inbox: Page, store: Store, watch: Watch
) -> None:
    """j puts the cursor on the first row, s stars it; ? lists the shortcuts."""
    inbox.keyboard.press("j")
    inbox.keyboard.press("s")
    expect(inbox.locator("#toast")).to_contain_text("Starred: 1 conversation.")
    expect(inbox.locator("li.thread .star.on")).to_have_count(1)
    inbox.keyboard.press("?")
    expect(inbox.get_by_role("dialog", name="Keyboard shortcuts")).to_be_visible()
    expect(inbox.get_by_text("Go to Starred")).to_be_visible()
    inbox.keyboard.press("Escape")
    inbox.keyboard.press("g")
    inbox.keyboard.press("s")
    inbox.wait_for_url(lambda url: url.endswith("/mail/starred"))
    expect(inbox.locator("li.thread")).to_have_count(1)
    assert watch.problems == []


def test_snooze_a_thread_and_undo_an_archive(inbox: Page, store: Store, watch: Watch) -> None:
    """Snooze from the thread view puts the thread in Snoozed; an archive from the list is
    undone by the toast's Undo and the row comes back."""
    subject = "Lunch on Friday?"
    inbox.get_by_role("link", name=re.compile(re.escape(subject))).click()
    inbox.get_by_text("Snooze", exact=True).click()
    inbox.locator("#actions").get_by_role("button", name=re.compile("^Tomorrow")).click()
    expect(inbox.locator("#toast")).to_contain_text("Snoozed: 1 conversation.")
    inbox.wait_for_url(lambda url: url.endswith("/"))
    with store.session() as session:
        snoozed = [t for t in session.query(Thread).all() if t.snoozed_until is not None]
    assert [t.subject for t in snoozed] == [subject]
    inbox.goto("/mail/snoozed")
    expect(_row(inbox, subject)).to_have_count(1)
    inbox.goto("/?tab=promotions")
    sale = "Spring sale: 20% off"
    expect(_row(inbox, sale)).to_have_count(1)
    inbox.keyboard.press("j")
    inbox.keyboard.press("e")
    expect(inbox.locator("#toast")).to_contain_text("Archived: 1 conversation.")
    expect(_row(inbox, sale)).to_have_count(0)
    inbox.locator("#toast").get_by_role("button", name="Undo").click()
    expect(inbox.locator("#toast")).to_contain_text("Undone.")
    expect(_row(inbox, sale)).to_have_count(1)
    assert watch.problems == []


def test_j_and_k_in_a_conversation_and_why_it_is_here(
    inbox: Page, store: Store, watch: Watch
) -> None:
    """In a conversation j opens the older one of its list and k the newer one; opening
    "Why is this here?" fetches the reasons in place."""
    inbox.goto("/mail/all")
    rows = inbox.locator("li.thread a.thread-link")
    expect(rows).to_have_count(5)
    rows.nth(0).click()
    heading = inbox.locator("h1.thread-subject")
    expect(heading).to_be_visible()
    newest = heading.inner_text()
    # The heading shows before the deferred scripts run; a key pressed then reaches no handler.
    inbox.wait_for_load_state("domcontentloaded")
    inbox.keyboard.press("j")
    expect(heading).not_to_have_text(newest)
    assert "back=%2Fmail%2Fall" in inbox.url
    inbox.wait_for_load_state("domcontentloaded")
    inbox.keyboard.press("k")
    expect(heading).to_have_text(newest)
    why = inbox.locator("details.why")
    why.locator("summary").click()
    expect(why.locator("li").first).to_contain_text("Forums: decided by forums")
    expect(why.get_by_role("link", name="Show the reasons")).to_have_count(0)
    assert watch.problems == []
