"""In the browser: from the Inbox the user menu reaches Accounts and Settings, the
sidebar's Compose button the compose form, and a compact density makes rows lower."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.web.browser.conftest import Watch


def _row_height(page: Page) -> float:
    row = page.locator("ol.threads > li").first
    expect(row).to_be_visible()
    box = row.bounding_box()
    assert box is not None
    return float(box["height"])


def _open_from_user_menu(page: Page, name: str) -> None:
    page.goto("/")
    page.locator(".user-menu summary").click()
    menu = page.locator(".user-menu-panel")
    expect(menu).to_be_visible()
    menu.get_by_role("link", name=name).click()
    page.wait_for_url(re.compile(f"/{name.lower()}$"))
    expect(page.get_by_role("heading", level=1)).to_have_text(name)


def test_the_links_reach_accounts_settings_and_compose(page: Page, watch: Watch) -> None:
    """Accounts and Settings from the user menu (no Admin for a non-operator), Compose
    from the sidebar."""
    _open_from_user_menu(page, "Accounts")
    _open_from_user_menu(page, "Settings")
    page.goto("/")
    page.locator(".user-menu summary").click()
    expect(page.locator(".user-menu-panel").get_by_role("link", name="Admin")).to_have_count(0)
    sidebar = page.get_by_role("navigation", name="Mailboxes")
    sidebar.get_by_role("link", name="Compose").click()
    page.wait_for_url(re.compile(r"/compose$"))
    expect(page.locator("form textarea").first).to_be_visible()
    assert watch.problems == []


def test_compact_density_makes_rows_lower(page: Page, watch: Watch) -> None:
    """Choosing Compact on Settings gives <body> the class and the Inbox rows less height."""
    comfortable = _row_height(page)
    page.goto("/settings")
    page.get_by_label("Density").select_option("compact")
    page.get_by_role("button", name="Save display").click()
    expect(page.get_by_role("status")).to_have_text("The display settings are saved.")
    page.goto("/")
    expect(page.locator("body")).to_have_class("density-compact")
    compact = _row_height(page)
    assert compact < comfortable - 4, (comfortable, compact)
    padding = page.locator(".thread-link").first.evaluate("e => getComputedStyle(e).paddingTop")
    assert padding == "2.25px"  # 0.15rem of the 15px root font
    assert watch.problems == []


def test_a_thread_answers_through_the_compose_form(page: Page, watch: Watch) -> None:
    """Reply under a message opens the compose form addressed to its sender; in the
    thread the r key does the same, and c opens an empty compose form."""
    page.locator("ol.threads > li a.thread-link").first.click()
    page.wait_for_url(re.compile(r"/threads/\d+"))
    thread = page.url
    answers = page.get_by_role("navigation", name="Answer this message").last
    answers.get_by_role("link", name="Reply", exact=True).click()
    page.wait_for_url(re.compile(r"/compose\?reply=\d+$"))
    expect(page.locator("input[name=subject]")).to_have_value("Re: Lunch on Friday?")
    page.goto(thread)
    page.locator("body").press("r")
    page.wait_for_url(re.compile(r"/compose\?reply=\d+$"))
    page.goto("/")
    page.locator("body").press("c")
    page.wait_for_url(re.compile(r"/compose$"))
    assert watch.problems == []
