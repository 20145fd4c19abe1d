"""In the browser, against a real `mailroom serve`: signing in (to the page asked for)
and signing out."""

from __future__ import annotations

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.web.browser.conftest import Served, Watch, sign_in


@pytest.fixture
def site(served: Served) -> str:
    """These tests run against the `mailroom serve` subprocess."""
    return served.base


def test_sign_in_goes_to_the_page_asked_for(context: BrowserContext, watch: Watch) -> None:
    """A signed-out visit to a mailbox lands on the sign-in form; a wrong password says
    so in one sentence; the right one opens the mailbox first asked for."""
    page = context.new_page()
    page.goto("/mail/starred")
    expect(page).to_have_url("/signin?next=%2Fmail%2Fstarred")
    expect(page.get_by_role("navigation", name="Mailboxes")).to_have_count(0)
    sign_in(page, password="not the password")
    expect(page.get_by_role("alert")).to_have_text("The user name or the password is wrong.")
    sign_in(page)
    expect(page).to_have_url("/mail/starred")
    expect(page.get_by_role("heading", name="Starred")).to_be_visible()
    current = page.get_by_role("navigation", name="Mailboxes").locator("[aria-current=page]")
    expect(current).to_have_text("Starred")
    assert watch.problems == []


def test_sign_out_ends_the_session(page: Page, context: BrowserContext, watch: Watch) -> None:
    """Sign out from the user menu: the sign-in form, no session cookie, and the Inbox
    (also reached with the Back button) asks to sign in again."""
    expect(page.locator("ol.threads > li")).to_have_count(1)
    page.get_by_text("Signed in as me").click()
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url("/signin")
    assert not [cookie for cookie in context.cookies() if cookie["name"] == "mailroom_session"]
    page.go_back()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.goto("/")
    expect(page).to_have_url("/signin")
    assert watch.problems == []
