"""The web page over real HTTP: health, thread list, and never unsanitized HTML."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from mailroom.store.engine import Store
from mailroom.store.models import Message
from tests.factories import make_message
from tests.helpers import ingest, make_account
from tests.web.conftest import add_user, browser, sign_in

HOSTILE = (
    "<img src=x onerror=alert(1)><script>alert('x')</script>"
    "<a href='javascript:alert(1)'>click</a><iframe src='//evil'></iframe>"
    "<svg onload=alert(1)></svg><p style='background:url(javascript:alert(1))'>ok</p>"
)


@pytest.fixture
def me(store: Store, server: str) -> Iterator[httpx.Client]:
    """A browser signed in as the default user ``me`` (who owns the test account)."""
    make_account(store)
    add_user(store, "me")
    client = browser(server)
    assert sign_in(client, server, "me").status_code == 303
    yield client
    client.close()


def test_health_and_thread_list(store: Store, server: str, me: httpx.Client) -> None:
    """/health answers ok and / lists the newest threads with their subjects, escaped."""
    account = make_account(store)
    ingest(store, account, [("a", make_message("a@x", subject="<b>Budget</b> & plans"))])
    assert httpx.get(f"{server}/health").json()["status"] == "ok"
    page = me.get("/")
    assert page.status_code == 200
    assert "&lt;b&gt;Budget&lt;/b&gt; &amp; plans" in page.text
    assert "Content-Security-Policy" in page.headers


def test_hostile_html_never_reaches_a_page_unsanitized(store: Store, me: httpx.Client) -> None:
    """The thread page and the message frame carry no script, handler or javascript: URL."""
    account = make_account(store)
    result = ingest(store, account, [("h", make_message("h@x", html=HOSTILE))])
    (message_id,) = result.created_ids
    with store.session() as session:
        message = session.get(Message, message_id)
        assert message is not None
        thread_id = message.thread_id
    thread_page = me.get(f"/threads/{thread_id}").text
    frame_tag = 'sandbox="allow-same-origin allow-popups allow-popups-to-escape-sandbox"'
    assert f'{frame_tag} src="/messages/{message_id}/html"' in thread_page
    frame = me.get(f"/messages/{message_id}/html")
    assert "sandbox" in frame.headers["Content-Security-Policy"]
    own_scripts = re.compile(r'<script src="/static/[\w./-]+" defer></script>')
    for text in (own_scripts.sub("", thread_page), frame.text):
        lowered = text.lower()
        for bad in ("<script", "onerror", "onload", "javascript:", "<iframe src='//evil"):
            assert bad not in lowered
    assert "click" in frame.text and "ok" in frame.text


def test_unknown_thread_is_404(me: httpx.Client) -> None:
    """A thread id that does not exist answers 404 with a plain page."""
    assert me.get("/threads/999").status_code == 404
