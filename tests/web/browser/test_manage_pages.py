"""Settings, admin and disconnecting an account in Chromium: what the user changes there
takes effect in the pages, and every "are you sure?" is asked before a form is sent."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Dialog, Page, expect

from mailroom.config import Settings
from mailroom.jmap.app import JmapConfig
from mailroom.store.engine import Store
from mailroom.store.models import Account, Rule
from mailroom.web.app import create_app
from tests.jmap.conftest import serve
from tests.web.browser.conftest import WAIT_MS, Watch, sign_in


@pytest.fixture
def site(store: Store, mail: tuple[int, int, int]) -> Iterator[str]:
    """The seeded store's web application, with ``me`` as an operator."""
    settings = Settings(admins="me")
    yield from serve(create_app(store, jmap=JmapConfig(poll_interval=0.05), settings=settings))


class Confirms:
    """Accepts the page's confirm() questions and remembers them; any other dialog is a
    problem."""

    def __init__(self, watch: Watch) -> None:
        self.asked: list[str] = []
        self.watch = watch

    def __call__(self, dialog: Dialog) -> None:
        if dialog.type == "confirm":
            self.asked.append(dialog.message)
            dialog.accept()
        else:
            self.watch.problems.append(f"dialog {dialog.type}: {dialog.message}")
            dialog.dismiss()


@pytest.fixture
def manage(chromium: Browser, site: str, watch: Watch) -> Iterator[tuple[Page, Confirms]]:
    """A signed-in page whose confirm() questions are accepted (and recorded)."""
    context = chromium.new_context(base_url=site)
    context.set_default_timeout(WAIT_MS)
    confirms = Confirms(watch)
    opened = context.new_page()
    opened.on("dialog", confirms)
    opened.on("pageerror", lambda error: watch.problems.append(f"page error: {error}"))
    opened.goto("/")
    sign_in(opened)
    opened.wait_for_url(lambda url: url.endswith("/"))
    yield opened, confirms
    context.close()


def test_settings_change_the_inbox_and_the_times(
    manage: tuple[Page, Confirms], store: Store, watch: Watch
) -> None:
    """Switching a tab off hides it from the Inbox; another time zone shows in a thread;
    a rule is tried against existing mail, added, and removed after a confirm."""
    page, confirms = manage
    tabs = page.locator("nav.tabs")
    expect(tabs.get_by_role("link", name="Social")).to_be_visible()
    page.goto("/settings")
    page.get_by_label("Social").uncheck()
    page.get_by_role("button", name="Save tabs").click()
    page.goto("/")
    expect(tabs.get_by_role("link", name="Promotions")).to_be_visible()
    expect(tabs.get_by_role("link", name="Social")).to_have_count(0)

    page.goto("/settings")
    page.get_by_label("Time zone").select_option("Asia/Tokyo")
    page.get_by_role("button", name="Save display").click()
    page.goto("/")
    page.locator("li.thread a.thread-link").first.click()
    expect(page.locator("li.message time").first).to_contain_text("JST")

    page.goto("/settings")
    page.get_by_label("From contains").fill("alice@example.org")
    page.get_by_label("Star").check()
    page.get_by_role("button", name="Test against existing mail").click()
    expect(page.locator(".rule-test")).to_contain_text("matches 1 message")
    page.get_by_role("button", name="Add the rule").click()
    rules = page.locator("ol.rule-list > li")
    expect(rules).to_have_count(1)
    rules.first.get_by_role("button", name="Remove").click()
    expect(page.get_by_text("No rules yet.")).to_be_visible()
    assert confirms.asked == ["Remove this rule?"]
    with store.session() as session:
        assert session.query(Rule).count() == 0
    assert watch.problems == []


def test_admin_page_and_disconnecting_an_account(
    manage: tuple[Page, Confirms], store: Store, watch: Watch
) -> None:
    """The operator reaches Admin from the menu; Disconnect asks first, then the account
    is disconnected and its mail stays."""
    page, confirms = manage
    page.goto("/settings")
    page.get_by_role("link", name="Admin").click()
    expect(page.get_by_role("heading", name="Queues")).to_be_visible()
    expect(page.get_by_text("No failed sends.")).to_be_visible()

    page.goto("/accounts")
    card = page.locator("li.account-card").first
    name = card.locator("h2.account-name").inner_text().split(" (")[0]
    card.get_by_role("button", name="Disconnect").click()
    expect(page.get_by_text("The account was disconnected; its mail stays.")).to_be_visible()
    expect(page.locator("li.account-card").first.locator(".account-status")).to_contain_text(
        "disconnected"
    )
    assert len(confirms.asked) == 1 and confirms.asked[0].startswith(f"Disconnect {name}?")
    with store.session() as session:
        assert {a.status for a in session.query(Account).all()} == {"disconnected"}
    page.goto("/")
    expect(page.locator("li.thread").first).to_be_visible()  # the mail stays
    assert watch.problems == []
