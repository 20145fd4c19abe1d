"""Live updates, server side: the push stream opened by the web session cookie, and the
sidebar fragment live.js swaps in (both stores)."""

from __future__ import annotations

import json
import re

import httpx

from mailroom.store.engine import Store
from mailroom.web.pages.live import active_entry
from tests.factories import make_message
from tests.helpers import ingest
from tests.web.conftest import browser, sign_in
from tests.web.seeding import seed


def _signed_in(client: httpx.Client, base: str) -> httpx.Client:
    assert sign_in(client, base, "me").status_code == 303
    return client


def _inbox_count(sidebar: str) -> str:
    found = re.search(r'data-box="inbox".*?<span class="count">(\d+)', sidebar, re.S)
    assert found is not None, sidebar
    return found.group(1)


def test_the_session_cookie_opens_the_push_stream(store: Store, server: str) -> None:
    seed(store)
    with browser(server) as client:
        _signed_in(client, server)
        # Resuming from state 0 answers at once with every type that ever moved.
        with client.stream(
            "GET",
            "/jmap/eventsource?types=Email,Mailbox&closeafter=state",
            headers={"Last-Event-ID": "0"},
        ) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            text = stream.read().decode()
    data = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    change = json.loads(data)
    assert change["@type"] == "StateChange"
    (types,) = change["changed"].values()
    assert set(types) == {"Email", "Mailbox"}


def test_the_push_stream_needs_a_live_session_or_credentials(store: Store, server: str) -> None:
    seed(store)
    with browser(server) as client:
        client.cookies.set("mailroom_session", "not-a-session")
        answer = client.get("/jmap/eventsource?closeafter=state")
    assert answer.status_code == 401
    assert "WWW-Authenticate" in answer.headers


def test_the_sidebar_fragment_has_fresh_counts_and_the_page_entry(
    store: Store, server: str
) -> None:
    account = seed(store)
    with browser(server) as client:
        _signed_in(client, server)
        before = client.get("/fragments/sidebar", params={"page": "/mail/starred"})
        assert before.status_code == 200
        assert before.text.lstrip().startswith('<nav id="sidebar"')
        assert "<html" not in before.text
        assert re.search(r'data-box="starred" aria-current="page"', before.text)
        assert _inbox_count(before.text) == "5"
        ingest(store, account, [("new", make_message("new@live", subject="Fresh"))])
        after = client.get("/fragments/sidebar", params={"page": "/"})
    assert _inbox_count(after.text) == "6"
    assert re.search(r'data-box="inbox" aria-current="page"', after.text)


def test_the_sidebar_fragment_needs_a_session(store: Store, server: str) -> None:
    seed(store)
    with browser(server) as client:
        answer = client.get("/fragments/sidebar", params={"page": "/"})
    assert answer.status_code == 303
    assert answer.headers["location"].startswith("/signin")


def test_a_page_path_names_its_sidebar_entry() -> None:
    assert active_entry("/") == "inbox"
    assert active_entry("/mail/spam") == "spam"
    assert active_entry("/label/12") == "label:12"
    assert active_entry("/label/x") == ""
    assert active_entry("/threads/3") == ""
    assert active_entry("/mail/a/b") == ""
