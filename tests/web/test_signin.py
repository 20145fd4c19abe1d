"""Signing in to the web page over real HTTP: the door, the cookie, sign-out, isolation."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from mailroom.jmap.auth import Authenticator
from mailroom.store.engine import Store
from mailroom.store.models import Message, User, WebSession
from mailroom.web.app import create_app
from tests.factories import make_message
from tests.helpers import ingest, make_account
from tests.jmap.conftest import self_signed
from tests.web.conftest import (
    PASSWORD,
    add_user,
    browser,
    csrf_of,
    serve,
    sign_in,
    signin_csrf,
)


def _users(store: Store) -> int:
    with store.session() as session:
        return session.scalar(select(func.count()).select_from(User)) or 0


def _mail(store: Store, owner: str, subject: str) -> tuple[int, int]:
    """One message of ``owner``'s (who gets a password); its thread and message ids."""
    account = make_account(store, owner=owner)
    add_user(store, owner)
    result = ingest(store, account, [(subject, make_message(f"{subject}@x", subject=subject))])
    (message_id,) = result.created_ids
    with store.session() as session:
        message = session.get(Message, message_id)
        assert message is not None and message.thread_id is not None
        return message.thread_id, message_id


def test_every_page_redirects_to_signin_and_creates_no_user(store: Store, server: str) -> None:
    """Without a session /, a thread and a message frame redirect to /signin; no user appears."""
    with browser(server) as client:
        for path in ("/", "/threads/1", "/messages/1/html", "/threads/1?x=1"):
            answer = client.get(path)
            assert answer.status_code == 303, path
            assert answer.headers["location"].startswith("/signin")
        assert client.get("/threads/7").headers["location"] == "/signin?next=%2Fthreads%2F7"
        assert client.get("/health").status_code == 200
    assert _users(store) == 0


def test_signing_in_sets_a_strict_cookie_and_shows_only_own_mail(store: Store, server: str) -> None:
    """A right password gives an HttpOnly, SameSite=Lax session cookie (not Secure over http)."""
    _mail(store, "alice", "Alice's plans")
    _mail(store, "bob", "Bob's secret")
    with browser(server) as client:
        answer = sign_in(client, server, "alice", next_="/threads/1")
        assert answer.status_code == 303
        assert answer.headers["location"] == "/threads/1"
        cookie = next(
            value
            for key, value in answer.headers.multi_items()
            if key == "set-cookie" and value.startswith("mailroom_session=")
        ).lower()
        assert "httponly" in cookie and "samesite=lax" in cookie and "path=/" in cookie
        assert "secure" not in cookie
        page = client.get("/")
        assert page.status_code == 200
        assert "Alice&#39;s plans" in page.text and "Bob" not in page.text
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    with store.session() as session:
        stored = session.scalars(select(WebSession.token_sha256)).all()
    token = cookie.split(";")[0].split("=", 1)[1]
    assert len(stored) == 1 and token not in stored[0]  # only a hash is kept


def test_the_cookie_is_secure_over_https(store: Store, auth: Authenticator, tmp_path: Path) -> None:
    """Served over TLS, the session cookie carries Secure."""
    add_user(store, "alice")
    cert, key = self_signed(tmp_path)
    served = serve(create_app(store, auth=auth), cert, key)
    base = next(served)
    try:
        with browser(base, verify=ssl.create_default_context(cafile=str(cert))) as client:
            answer = sign_in(client, base, "alice")
            assert answer.status_code == 303
            cookie = answer.headers["set-cookie"].lower()
            assert cookie.startswith("mailroom_session=") and "secure" in cookie
            assert client.get("/").status_code == 200
    finally:
        served.close()


def test_a_user_cannot_open_another_users_thread_or_message(store: Store, server: str) -> None:
    """Bob's thread and message frame are 404 to Alice, the same as ids that do not exist."""
    _mail(store, "alice", "Alice's plans")
    bob_thread, bob_message = _mail(store, "bob", "Bob's secret")
    with browser(server) as client:
        assert sign_in(client, server, "alice").status_code == 303
        for path in (f"/threads/{bob_thread}", f"/messages/{bob_message}/html"):
            answer = client.get(path)
            assert answer.status_code == 404, path
            assert "secret" not in answer.text


def test_wrong_password_unknown_user_and_missing_csrf_start_no_session(
    store: Store, server: str
) -> None:
    """Wrong passwords and unknown users get the same 401 sentence; a form without CSRF is 403."""
    add_user(store, "alice")
    with browser(server) as client:
        wrong = sign_in(client, server, "alice", "nope")
        unknown = sign_in(client, server, "nobody", "nope")
        for answer in (wrong, unknown):
            assert answer.status_code == 401
            assert "The user name or the password is wrong." in answer.text
            assert "mailroom_session" not in answer.headers.get("set-cookie", "")
        signin_csrf(client, server)
        forged = client.post("/signin", data={"name": "alice", "password": PASSWORD})
        assert forged.status_code == 403 and "expired" in forged.text
    with browser(server) as cross_site:  # no sign-in cookie: a form posted from another site
        forged = cross_site.post(
            "/signin", data={"name": "alice", "password": PASSWORD, "csrf": "guess"}
        )
        assert forged.status_code == 403
    assert _users(store) == 1
    with store.session() as session:
        assert session.scalar(select(func.count()).select_from(WebSession)) == 0


def test_signing_out_ends_the_session_for_a_copied_cookie_too(store: Store, server: str) -> None:
    """After sign-out the old cookie opens nothing; a sign-out without its CSRF token is 403."""
    add_user(store, "alice")
    with browser(server) as client:
        assert sign_in(client, server, "alice").status_code == 303
        token = client.cookies["mailroom_session"]
        page = client.get("/")
        assert client.post("/signout", data={"csrf": "forged"}).status_code == 403
        assert client.get("/").status_code == 200
        out = client.post("/signout", data={"csrf": csrf_of(page.text)})
        assert out.status_code == 303 and out.headers["location"] == "/signin"
        assert client.get("/").status_code == 303
    with browser(server) as thief:
        thief.cookies.set("mailroom_session", token)
        assert thief.get("/").status_code == 303


@pytest.mark.parametrize(
    "target", ["//evil.example/", "https://evil.example/", "/\\evil", "/signout"]
)
def test_next_never_leaves_the_site(store: Store, server: str, target: str) -> None:
    """A next= pointing elsewhere (or at sign-out) lands on / after sign-in."""
    add_user(store, "alice")
    with browser(server) as client:
        answer = sign_in(client, server, "alice", next_=target)
        assert answer.status_code == 303 and answer.headers["location"] == "/"


@pytest.fixture
def signed_in(store: Store, server: str) -> Iterator[httpx.Client]:
    """A browser signed in as Alice."""
    add_user(store, "alice")
    client = browser(server)
    assert sign_in(client, server, "alice").status_code == 303
    yield client
    client.close()


def test_signin_form_sends_a_signed_in_browser_on(signed_in: httpx.Client) -> None:
    """GET /signin with a live session goes straight to the page it names."""
    answer = signed_in.get("/signin?next=%2Fthreads%2F3")
    assert answer.status_code == 303 and answer.headers["location"] == "/threads/3"


def test_an_unreadable_form_is_a_plain_400(server: str) -> None:
    """A sign-in POST that is not a url-encoded form gets a sentence, not a traceback."""
    with browser(server) as client:
        answer = client.post("/signin", content=b"{}", headers={"content-type": "application/json"})
        assert answer.status_code == 400 and "could not be read" in answer.text
        huge = client.post("/signin", data={"name": "x" * 20000, "password": "y"})
        assert huge.status_code == 400
