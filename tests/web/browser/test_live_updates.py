"""In the browser: new mail and read state arrive without a reload (the JMAP push stream)."""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.sync_api import Page, Route, expect

from mailroom.jmap import ids
from mailroom.store.engine import Store
from tests.factories import make_message
from tests.helpers import ingest
from tests.web.browser.conftest import Served, Watch
from tests.web.conftest import PASSWORD
from tests.web.seeding import TAB_MAIL

SUBJECT = "Arrived while you looked"


def _jmap(served: Served, calls: list[list[object]]) -> list[list[object]]:
    answer = httpx.post(
        f"{served.base}/jmap/api",
        auth=("me", PASSWORD),
        json={
            "using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
            "methodCalls": calls,
        },
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    responses: list[list[object]] = answer.json()["methodResponses"]
    return responses


def _mark_read_elsewhere(served: Served, account: str) -> None:
    """Another client (JMAP) marks the new message read."""
    found = _jmap(
        served,
        [["Email/query", {"accountId": account, "filter": {"subject": SUBJECT}}, "q"]],
    )
    (email,) = found[0][1]["ids"]  # type: ignore[index]
    done = _jmap(
        served,
        [["Email/set", {"accountId": account, "update": {email: {"keywords/$seen": True}}}, "s"]],
    )
    assert email in done[0][1]["updated"], done  # type: ignore[index]


def test_new_mail_and_read_state_arrive_without_reload(
    page: Page,
    served: Served,
    store: Store,
    mail: tuple[int, int, int],
    watch: Watch,
) -> None:
    """A message ingested while the Inbox is open shows up, bold, and the Inbox count
    goes up; read through JMAP, its row un-bolds and the count goes down — no reload."""
    expect(page.locator("body[data-live=on]")).to_have_count(1)
    inbox = page.get_by_role("navigation", name="Mailboxes").locator("a[data-box=inbox]")
    expect(inbox.locator(".count")).to_have_text("5 unread")
    page.evaluate("window.__samePage = true")

    ingest(
        store,
        mail,
        [
            (
                "live",
                make_message("live@browser", subject=SUBJECT, sender="Carol <carol@example.org>"),
            )
        ],
    )
    row = page.locator("ol.threads > li", has_text=SUBJECT)
    expect(row).to_have_class("thread unread")
    expect(inbox.locator(".count")).to_have_text("6 unread")

    _mark_read_elsewhere(served, ids.account_id(mail[0]))
    expect(row).to_have_class("thread")
    expect(inbox.locator(".count")).to_have_text("5 unread")
    assert page.evaluate("window.__samePage === true"), "the page was reloaded"
    assert watch.problems == []


def _held_until(page: Page, held: list[Route]) -> None:
    """Let the page run until a request is held."""
    deadline = time.monotonic() + 15
    while not held:
        assert time.monotonic() < deadline, "the request to hold was never sent"
        page.wait_for_timeout(50)


def _redraws(page: Page) -> int:
    return int(page.evaluate("Number(document.body.dataset.liveRefreshed || 0)"))


@pytest.mark.parametrize("first", ["redraw", "switch"])
def test_a_live_redraw_never_undoes_a_tab_switch(
    page: Page, store: Store, mail: tuple[int, int, int], watch: Watch, first: str
) -> None:
    """New mail arrives while the reader switches from Primary to Social, whichever of the
    two requests is on its way when the other starts: Social is shown, and the redraw
    lands afterwards (Primary's count goes up in the tabs bar)."""
    expect(page.locator("body[data-live=on]")).to_have_count(1)
    held: list[Route] = []

    def hold_first(route: Route) -> None:
        request = route.request
        url = urlsplit(request.url)
        wanted = (
            bool(request.headers.get("x-mailroom-live")) and (url.path, url.query) == ("/", "")
            if first == "redraw"
            else url.query == "tab=social"
        )
        if wanted and not held:
            held.append(route)
        else:
            route.continue_()

    page.route("**/*", hold_first)
    tabs = page.get_by_role("navigation", name="Inbox tabs")
    expect(tabs.locator("a[data-tab=primary]")).to_contain_text("1")
    redraws = _redraws(page)
    if first == "redraw":
        ingest(store, mail, [("late", make_message("late@browser", subject=SUBJECT))])
        _held_until(page, held)
        tabs.locator("a[data-tab=social]").click()
        expect(tabs.locator("a[data-tab=social]")).to_have_attribute("aria-current", "page")
    else:
        tabs.locator("a[data-tab=social]").click()
        _held_until(page, held)
        ingest(store, mail, [("late", make_message("late@browser", subject=SUBJECT))])
        page.wait_for_timeout(1000)  # time for the stream to announce the change
    held[0].continue_()

    expect(page.locator("body[data-live-refreshed]")).not_to_have_attribute(
        "data-live-refreshed", str(redraws)
    )
    expect(tabs.locator("a[data-tab=primary]")).to_contain_text("2")
    expect(tabs.locator("a[data-tab=social]")).to_have_attribute("aria-current", "page")
    rows = page.locator("ol.threads > li")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(str(TAB_MAIL["social"]["subject"]))
    assert "tab=social" in page.url
    assert watch.problems == []
