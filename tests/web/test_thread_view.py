"""The thread page over real HTTP, on both stores: folding, read on open, the frame and its
remote images, inline images, attachments, the plain-text fallback, "why is this here?"."""

from __future__ import annotations

import re
from datetime import UTC
from email.message import EmailMessage
from zoneinfo import ZoneInfo

import httpx
import pytest
from sqlalchemy import select

from mailroom.labels.operations import Operations
from mailroom.store.engine import Store
from mailroom.store.models import Message, User
from tests.factories import BASE_TIME, make_message
from tests.helpers import ingest, make_account
from tests.web.conftest import add_user, browser, csrf_of, sign_in
from tests.web.thread_support import signed_in_me, thread_id_of  # noqa: F401  (fixture `me`)

PIXEL = "https://tracker.example/pixel.gif"
PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00"
    b"\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N"
    b"\x00\x00\x00\x00IEND\xaeB`\x82"
)


@pytest.fixture
def account(store: Store) -> tuple[int, int, int]:
    """The user ``me`` (with a password) and the account ``home``."""
    made = make_account(store, "me", "home")
    add_user(store, "me")
    return made


def _ids(store: Store, *message_ids: str) -> list[int]:
    with store.session() as session:
        return [
            session.scalars(select(Message.id).where(Message.message_id_header == mid)).one()
            for mid in message_ids
        ]


def _unread(store: Store, *ids: int) -> list[bool]:
    with store.session() as session:
        return [session.get(Message, mid).seen_at is None for mid in ids]  # type: ignore[union-attr]


def _message(page: str, message_id: int) -> str:
    start = page.index(f'data-message="{message_id}"')
    return page[start : page.index("</li>", start)]


def test_older_messages_fold_opening_marks_read_and_explains(
    store: Store, account: tuple[int, int, int], me: httpx.Client
) -> None:
    """The newest and the unread messages are open, older read ones folded; opening marks the
    thread read; "why is this here?" gives explain()'s sentences."""
    ingest(
        store,
        account,
        [
            ("a", make_message("a@x", subject="Plan", body="First words.\n")),
            ("b", make_message("b@x", subject="Re: Plan", in_reply_to="a@x", minutes=5)),
            ("c", make_message("c@x", subject="Re: Plan", in_reply_to="b@x", minutes=9)),
        ],
    )
    first, second, third = _ids(store, "a@x", "b@x", "c@x")
    with store.session() as session:
        Operations(session, account[0]).mark_read([first])
    page = me.get(f"/threads/{thread_id_of(store, 'a@x')}")
    assert page.status_code == 200, page.text
    assert "<details>" in _message(page.text, first)
    assert "<details open>" in _message(page.text, second)
    assert "<details open>" in _message(page.text, third)
    assert _unread(store, first, second, third) == [False, False, False]
    assert "Why is this here?" in page.text and "decided by default" not in page.text
    thread = thread_id_of(store, "a@x")
    why = me.get(f"/threads/{thread}/why")
    assert why.status_code == 200 and "<li>Primary: decided by default.</li>" in why.text
    assert "<html" not in why.text  # the list alone, for the page's <details>
    answered = me.get(f"/threads/{thread}?why=1").text  # without script: the page itself
    assert '<details class="why" open>' in answered
    assert "Primary: decided by default." in answered
    assert '<pre class="message-text">Hi there.' in page.text  # no HTML: the text itself


def test_marking_read_on_open_can_be_switched_off(
    store: Store, account: tuple[int, int, int], me: httpx.Client
) -> None:
    """With ``mark_read_on_open`` false the thread stays unread after it is opened."""
    ingest(store, account, [("a", make_message("a@x"))])
    with store.session() as session:
        user = session.get(User, account[0])
        assert user is not None
        user.settings = {**user.settings, "mark_read_on_open": False}
    assert me.get(f"/threads/{thread_id_of(store, 'a@x')}").status_code == 200
    assert _unread(store, *_ids(store, "a@x")) == [True]


def test_remote_images_wait_until_asked_for_this_message_or_this_sender(
    store: Store, server: str, account: tuple[int, int, int], me: httpx.Client
) -> None:
    """Remote images are dropped from the frame until the user shows them, for one message
    (a link) or always for the sender (a CSRF-checked form); links open in a new tab."""
    html = f'<p>Look <img src="{PIXEL}" alt="pixel"> <a href="https://example.org/">here</a></p>'
    ingest(store, account, [("p", make_message("p@x", sender="News <n@news.example>", html=html))])
    (message,) = _ids(store, "p@x")
    thread = thread_id_of(store, "p@x")
    page = me.get(f"/threads/{thread}").text
    assert "Remote images are hidden (1)" in page
    assert f'src="/messages/{message}/html"' in page
    frame = me.get(f"/messages/{message}/html")
    assert PIXEL not in frame.text and 'alt="pixel"' in frame.text
    assert "https:" not in frame.headers["Content-Security-Policy"]
    assert 'target="_blank" rel="noopener noreferrer"' in frame.text
    shown = me.get(f"/threads/{thread}?images={message}").text
    assert (
        f'src="/messages/{message}/html?images=1"' in shown
        and "Remote images are hidden" not in shown
    )
    allowed = me.get(f"/messages/{message}/html?images=1")
    assert (
        PIXEL in allowed.text
        and "img-src data: https: http:" in allowed.headers["Content-Security-Policy"]
    )
    refused = me.post("/senders/images", data={"message": str(message), "back": "/"})
    assert refused.status_code == 403
    assert "Remote images are hidden" in me.get(f"/threads/{thread}").text
    answer = me.post(
        "/senders/images",
        data={"csrf": csrf_of(page), "message": str(message), "back": f"/threads/{thread}"},
    )
    assert answer.status_code == 303 and answer.headers["location"] == f"/threads/{thread}"
    again = me.get(f"/threads/{thread}").text
    assert "Remote images are hidden" not in again and "html?images=1" in again
    with store.session() as session:
        user = session.get(User, account[0])
        assert user is not None and user.settings["images_from"] == ["n@news.example"]


def test_inline_images_come_from_the_message_and_attachments_download(
    store: Store, server: str, account: tuple[int, int, int], me: httpx.Client
) -> None:
    """A cid: image becomes a data: URL of its part; an attachment downloads as an
    attachment (nosniff) and only for its owner."""
    mail = EmailMessage()
    mail["Message-ID"] = "<att@x>"
    mail["From"] = "Alice <alice@example.org>"
    mail["To"] = "me@example.net"
    mail["Subject"] = "Pictures"
    mail.set_content("See the picture.\n")
    mail.add_alternative('<p>Logo: <img src="cid:logo@x" alt="logo"></p>', subtype="html")
    mail.get_payload()[1].add_related(PNG, "image", "png", cid="<logo@x>")
    mail.add_attachment(
        b"<script>alert(1)</script>", maintype="text", subtype="html", filename="évil report.html"
    )
    ingest(store, account, [("att", mail.as_bytes())])
    (message,) = _ids(store, "att@x")
    page = me.get(f"/threads/{thread_id_of(store, 'att@x')}").text
    frame = me.get(f"/messages/{message}/html").text
    assert 'src="data:image/png;base64,' in frame
    link = re.search(rf'href="(/messages/{message}/parts/[\d.]+)" download>évil report.html<', page)
    assert link is not None, page
    assert "logo" not in page.split('class="attachments"')[-1]  # the inline part is no download
    download = me.get(link.group(1))
    assert download.status_code == 200 and download.content == b"<script>alert(1)</script>"
    assert download.headers["content-type"] == "application/octet-stream"
    assert download.headers["x-content-type-options"] == "nosniff"
    assert download.headers["content-disposition"].startswith("attachment;")
    assert "filename*=UTF-8''%C3%A9vil%20report.html" in download.headers["content-disposition"]
    make_account(store, "bob", "bob")
    add_user(store, "bob")
    with browser(server) as bob:
        sign_in(bob, server, "bob")
        assert bob.get(link.group(1)).status_code == 404
        assert bob.get(f"/messages/{message}/html").status_code == 404
        assert bob.get(f"/threads/{thread_id_of(store, 'att@x')}").status_code == 404


def test_times_are_shown_in_the_users_time_zone(
    store: Store, account: tuple[int, int, int], me: httpx.Client
) -> None:
    """A message's time is the user's wall-clock time, with the zone's abbreviation."""
    ingest(store, account, [("t", make_message("t@x", subject="Zone"))])
    page = me.get(f"/threads/{thread_id_of(store, 't@x')}").text
    utc = BASE_TIME.astimezone(UTC)
    assert f">{utc:%Y-%m-%d %H:%M} UTC</time>" in page
    with store.session() as session:
        user = session.get(User, account[0])
        assert user is not None
        user.settings = {**user.settings, "timezone": "Asia/Kolkata"}
    page = me.get(f"/threads/{thread_id_of(store, 't@x')}").text
    local = BASE_TIME.astimezone(ZoneInfo("Asia/Kolkata"))
    assert f">{local:%Y-%m-%d %H:%M} IST</time>" in page


def test_newer_and_older_conversations_of_the_list_it_came_from(
    store: Store, account: tuple[int, int, int], me: httpx.Client
) -> None:
    """The thread page links the conversations next to it in its list (j/k), keeping back."""
    ingest(
        store,
        account,
        [(n, make_message(f"{n}@x", subject=f"Topic {n}", minutes=i)) for i, n in enumerate("abc")],
    )
    old, middle, new = (thread_id_of(store, f"{n}@x") for n in "abc")
    page = me.get(f"/threads/{middle}").text
    assert f'href="/threads/{new}" class="newer-thread"' in page
    assert f'href="/threads/{old}" class="older-thread"' in page
    assert "newer-thread" not in me.get(f"/threads/{new}").text
    assert "older-thread" not in me.get(f"/threads/{old}").text
    with store.session() as session:
        Operations(session, account[0]).archive(_ids(store, "b@x"))
    archived = me.get(f"/threads/{middle}", params={"back": "/mail/archive"}).text
    assert "newer-thread" not in archived and "older-thread" not in archived  # alone there
    inbox = me.get(f"/threads/{old}").text  # the archived one is no neighbour in the Inbox
    assert f'href="/threads/{new}" class="newer-thread"' in inbox
    searched = me.get(f"/threads/{old}", params={"back": "/search?q=topic"}).text
    assert "newer-thread" not in searched  # results are not a mailbox view
