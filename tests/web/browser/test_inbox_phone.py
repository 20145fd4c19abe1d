"""In the browser at phone width: the Inbox fits and the sidebar opens from Menu."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, expect

from tests.web.browser.conftest import Watch, sign_in


@pytest.fixture
def phone(chromium: Browser, site: str, watch: Watch) -> Iterator[BrowserContext]:
    """A browser context the size of a phone (390 x 844 CSS pixels, touch)."""
    opened = chromium.new_context(
        base_url=site, viewport={"width": 390, "height": 844}, has_touch=True
    )
    opened.set_default_timeout(15_000)
    opened.on("page", watch.attach)
    yield opened
    opened.close()


def test_inbox_at_phone_width(phone: BrowserContext, watch: Watch) -> None:
    """Nothing is wider than the screen, rows show sender and subject, the tabs bar
    scrolls by itself, and Menu opens the sidebar (aria-expanded follows)."""
    page = phone.new_page()
    page.goto("/")
    sign_in(page)
    row = page.locator("ol.threads > li").first
    expect(row).to_contain_text("Alice Example")
    expect(row).to_contain_text("Lunch on Friday?")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390
    sidebar = page.get_by_role("navigation", name="Mailboxes")
    menu = page.get_by_role("button", name="Menu")
    expect(sidebar).to_be_hidden()
    menu.click()
    expect(sidebar).to_be_visible()
    expect(menu).to_have_attribute("aria-expanded", "true")
    sidebar.get_by_role("link", name="Spam").click()
    expect(page.get_by_role("heading", name="Spam")).to_be_visible()
    assert watch.problems == []
