"""In the browser: searching from the top bar."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.web.browser.conftest import Watch
from tests.web.seeding import TAB_MAIL


def test_search_from_shows_the_senders_threads_with_a_snippet(page: Page, watch: Watch) -> None:
    """`from:` typed in the search box lists only that sender's threads, each with a
    snippet; words are marked; bad syntax is one sentence on the page."""
    box = page.get_by_role("searchbox", name="Search mail")
    box.fill("from:alice")
    box.press("Enter")
    expect(page).to_have_url("/search?q=from%3Aalice")
    rows = page.get_by_role("region", name="Search results").locator("ol.threads > li")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(str(TAB_MAIL["primary"]["subject"]))
    expect(rows.first.locator(".preview")).to_contain_text("Hi there.")
    expect(box).to_have_value("from:alice")

    box.fill("from:alice lunch")
    box.press("Enter")
    expect(rows).to_have_count(1)
    expect(rows.first.locator(".subject mark")).to_have_text("Lunch")

    box.fill("from:bank OR from:shop")
    box.press("Enter")
    expect(rows).to_have_count(2)

    box.fill("from:(alice")
    box.press("Enter")
    expect(page.get_by_role("alert")).to_have_text(
        "from: needs a value right after the colon, like from:ann@example.org."
    )
    expect(rows).to_have_count(0)
    assert watch.problems == []
