"""The web page over real HTTP: health, thread list, and never unsanitized HTML."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn

from mailroom.store.engine import Store
from mailroom.web.app import create_app
from tests.factories import make_message
from tests.helpers import ingest, make_account

HOSTILE = (
    "<img src=x onerror=alert(1)><script>alert('x')</script>"
    "<a href='javascript:alert(1)'>click</a><iframe src='//evil'></iframe>"
    "<svg onload=alert(1)></svg><p style='background:url(javascript:alert(1))'>ok</p>"
)


@pytest.fixture
def server(store: Store) -> Iterator[str]:
    """The web app served by uvicorn in a thread on a free loopback port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(create_app(store), host="127.0.0.1", port=port, log_level="warning")
    runner = uvicorn.Server(config)
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not runner.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    runner.should_exit = True
    thread.join(timeout=10)


def test_health_and_thread_list(store: Store, server: str) -> None:
    """/health answers ok and / lists the newest threads with their subjects, escaped."""
    account = make_account(store)
    ingest(store, account, [("a", make_message("a@x", subject="<b>Budget</b> & plans"))])
    assert httpx.get(f"{server}/health").json()["status"] == "ok"
    page = httpx.get(f"{server}/")
    assert page.status_code == 200
    assert "&lt;b&gt;Budget&lt;/b&gt; &amp; plans" in page.text
    assert "Content-Security-Policy" in page.headers


def test_hostile_html_never_reaches_a_page_unsanitized(store: Store, server: str) -> None:
    """The thread page and the message frame carry no script, handler or javascript: URL."""
    account = make_account(store)
    result = ingest(store, account, [("h", make_message("h@x", html=HOSTILE))])
    (message_id,) = result.created_ids
    with store.session() as session:
        from mailroom.store.models import Message

        message = session.get(Message, message_id)
        assert message is not None
        thread_id = message.thread_id
    thread_page = httpx.get(f"{server}/threads/{thread_id}").text
    frame = httpx.get(f"{server}/messages/{message_id}/html")
    assert "sandbox" in frame.headers["Content-Security-Policy"]
    for text in (thread_page, frame.text):
        lowered = text.lower()
        for bad in ("<script", "onerror", "onload", "javascript:", "<iframe src='//evil"):
            assert bad not in lowered
    assert "click" in frame.text and "ok" in frame.text


def test_unknown_thread_is_404(store: Store, server: str) -> None:
    """A thread id that does not exist answers 404 with a plain page."""
    make_account(store)
    assert httpx.get(f"{server}/threads/999").status_code == 404
