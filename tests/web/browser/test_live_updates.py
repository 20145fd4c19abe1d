"""In the browser: new mail and read state arrive without a reload (the JMAP push stream)."""

from __future__ import annotations

import httpx
from playwright.sync_api import Page, expect

from mailroom.jmap import ids
from mailroom.store.engine import Store
from tests.factories import make_message
from tests.helpers import ingest
from tests.web.browser.conftest import Served, Watch
from tests.web.conftest import PASSWORD

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
