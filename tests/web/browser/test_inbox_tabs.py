"""In the browser: the Inbox and its tabs bar."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.web.browser.conftest import Watch
from tests.web.seeding import TAB_MAIL


def test_switching_tabs_shows_each_tabs_mail(page: Page, watch: Watch) -> None:
    """Each tab lists its own mail, shows its unread count and is marked current;
    the switch keeps the sidebar and breaks no CSP rule."""
    tabs = page.get_by_role("navigation", name="Inbox tabs")
    for tab, fields in TAB_MAIL.items():
        link = tabs.locator(f"a[data-tab={tab}]")
        expect(link).to_contain_text("1")
        link.click()
        expect(link).to_have_attribute("aria-current", "page")
        rows = page.locator("ol.threads > li")
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text(str(fields["subject"]))
        expect(page.get_by_role("navigation", name="Mailboxes")).to_be_visible()
        assert (tab == "primary") == ("tab=" not in page.url)
    assert watch.problems == []
