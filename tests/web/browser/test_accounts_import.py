"""In the browser: add an IMAP account through the form, against a real Dovecot, and see
its import progress appear on the accounts page without reloading, up to "done"."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from mailroom.secrets import generate_key
from mailroom.store.engine import Store
from mailroom.store.models import Account, Message
from tests.factories import make_message
from tests.imap.conftest import dovecot, new_mailbox
from tests.support.dovecot import DovecotServer
from tests.web.browser.conftest import Served, Watch, serve_store

__all__ = ["dovecot"]  # the session's Dovecot, shared with the IMAP tests

MESSAGES = 400  # eight import pages
IMPORT_SECONDS = 120  # a loaded machine; the supervisor's poll round (what once started it) is 300


@pytest.fixture
def served(store: Store, mail: tuple[int, int, int], tmp_path: Path) -> Iterator[Served]:
    """`mailroom serve` with a master key and 127.0.0.1 allow-listed (its ./.env)."""
    (tmp_path / ".env").write_text(
        f"MAILROOM_MASTER_KEY={generate_key()}\nMAILROOM_ALLOWED_PRIVATE_HOSTS=127.0.0.1\n"
    )
    yield from serve_store(store, tmp_path)


@pytest.fixture
def site(served: Served) -> str:
    """Against the `mailroom serve` subprocess: its engine must sync and import the account."""
    return served.base


def test_add_an_imap_account_and_watch_its_import(
    page: Page, watch: Watch, store: Store, dovecot: DovecotServer
) -> None:
    mailbox = new_mailbox(dovecot)
    for number in range(MESSAGES):
        dovecot.deliver(mailbox.user, make_message(f"m{number}@dovecot", subject=f"Note {number}"))
    page.goto("/accounts/add")
    page.get_by_label("Email address").fill(f"{mailbox.user}@localhost")
    page.get_by_role("button", name="Find the servers").click()
    expect(page.locator(".discovery")).to_contain_text("the form holds a guess")
    page.get_by_label("Account name").fill("dovecot")
    page.locator("#host").fill(dovecot.host)
    page.locator("#port").fill(str(dovecot.port))
    page.locator("#tls").select_option("none")
    page.locator("#login").fill(mailbox.user)
    page.locator("#password").fill(mailbox.password)
    page.get_by_role("button", name="Add the account").click()
    page.wait_for_url(lambda url: "/accounts?done=added" in url)
    with store.session() as session:
        account_id = session.query(Account.id).filter_by(name="dovecot").scalar()
    card = page.locator(f"#account-{account_id}")
    status = card.locator(".account-import")
    expect(status).not_to_have_text("done")  # the import has only been asked for
    # The first sync counts the folders; the page, polling, shows the count without a reload
    # (or already the end: a fast machine may import it all between two polls).
    expect(status).to_have_text(re.compile(rf"\d+ / {MESSAGES}\s*$|^\s*done\s*$"))
    # Then the engine imports it all, page after page, with no sync asked for: the card
    # (still polling) ends at "done" and stops polling.
    expect(status).to_have_text("done", timeout=IMPORT_SECONDS * 1000)
    expect(card).not_to_have_attribute("hx-get", re.compile(".*"))
    with store.session() as session:
        stored = session.query(Message).filter_by(account_id=account_id).count()
    assert stored == MESSAGES
    assert watch.problems == []
