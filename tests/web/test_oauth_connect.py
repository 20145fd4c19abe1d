"""Connecting Gmail and Microsoft accounts from the accounts page, over real HTTP, against
the Gmail and Graph emulators' OAuth endpoints (both stores).

The browser's part is played by an httpx client that keeps cookies: the form is
posted, the redirect to the emulator's sign-in page followed by hand, and the
emulator's redirect back to the callback followed with the same cookies.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from mailroom.config import SecretStr, Settings
from mailroom.jmap.auth import Authenticator
from mailroom.oauth.source import TokenSource
from mailroom.secrets import generate_key
from mailroom.store.engine import Store
from mailroom.store.models import Account
from mailroom.web.app import create_app
from tests.emulators.gmail.emulator import GmailEmulator
from tests.emulators.gmail.fixtures import gmail_emulator
from tests.emulators.gmail.oauth import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET
from tests.emulators.graph.fixture import graph_emulator
from tests.emulators.graph.server import GraphEmulator
from tests.jmap.conftest import serve
from tests.web.conftest import add_user, browser, csrf_of, sign_in

__all__ = ["gmail_emulator", "graph_emulator"]


@pytest.fixture
def settings(
    tmp_path: Path, gmail_emulator: GmailEmulator, graph_emulator: GraphEmulator
) -> Settings:
    """A master key and web clients for both providers, pointed at the emulators."""
    secret = tmp_path / "google-secret.txt"
    secret.write_text(DEFAULT_CLIENT_SECRET)
    return Settings(
        master_key=SecretStr(generate_key()),
        allowed_private_hosts="127.0.0.1",
        data_dir=tmp_path / "data",
        google_client_id=DEFAULT_CLIENT_ID,
        google_client_secret_file=secret,
        google_oauth_url=gmail_emulator.url,
        microsoft_client_id="mailroom-test",
        microsoft_oauth_url=graph_emulator.base_url,
    )


@pytest.fixture
def me(store: Store, auth: Authenticator, settings: Settings) -> Iterator[httpx.Client]:
    """``me`` signed in to the application with those settings."""
    add_user(store, "me")
    for base in serve(create_app(store, auth=auth, settings=settings)):
        with browser(base) as client:
            assert sign_in(client, base, "me").status_code == 303
            yield client


def start(client: httpx.Client, provider: str, name: str, address: str) -> httpx.Response:
    """Press the accounts page's Connect button and send the form; the unfollowed answer."""
    accounts = client.get("/accounts").text
    assert f'href="/accounts/oauth/{provider}"' in accounts
    form = client.get(f"/accounts/oauth/{provider}")
    assert form.status_code == 200
    csrf = csrf_of(form.text)
    return client.post(
        f"/accounts/oauth/{provider}", data={"csrf": csrf, "name": name, "address": address}
    )


def sign_in_at_provider(client: httpx.Client, redirect: httpx.Response) -> httpx.Response:
    """Follow the redirect to the emulator's sign-in, and its answer back to the callback."""
    assert redirect.status_code == 303, redirect.text
    consent = httpx.get(redirect.headers["location"], follow_redirects=False)
    assert consent.status_code in (302, 303), consent.text
    back = consent.headers["location"]
    assert back.startswith(str(client.base_url))
    return client.get(back[len(str(client.base_url)) :])


def account(store: Store, name: str) -> Account:
    """The stored account called ``name``."""
    with store.session() as session:
        row = session.query(Account).filter_by(name=name).one()
        session.expunge(row)
        return row


def test_connect_gmail_from_the_accounts_page(
    store: Store, settings: Settings, me: httpx.Client, gmail_emulator: GmailEmulator
) -> None:
    """The flow ends with an active Gmail account whose sealed token reads the profile."""
    redirect = start(me, "gmail", "home", "ann@gmail.example")
    sent = parse_qs(urlsplit(redirect.headers["location"]).query)
    assert sent["code_challenge_method"] == ["S256"] and sent["login_hint"] == ["ann@gmail.example"]
    assert sent["redirect_uri"] == [f"{me.base_url}/accounts/oauth/callback"]
    cookie = redirect.headers["set-cookie"]
    assert "httponly" in cookie.lower() and "samesite=lax" in cookie.lower()
    done = sign_in_at_provider(me, redirect)
    assert done.status_code == 303 and done.headers["location"] == "/accounts?done=connected"
    assert "The account was connected" in me.get(done.headers["location"]).text
    row = account(store, "home")
    assert (row.provider, row.status) == ("gmail", "active")
    assert row.secret is not None and DEFAULT_CLIENT_SECRET.encode() not in row.secret
    token = TokenSource(store, row.id, settings).access_token()
    profile = httpx.get(
        f"{gmail_emulator.url}/gmail/v1/users/me/profile",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert profile.status_code == 200


def test_connect_microsoft_from_the_accounts_page(
    store: Store, settings: Settings, me: httpx.Client, graph_emulator: GraphEmulator
) -> None:
    """The flow ends with an active Microsoft account whose token reads the mail folders."""
    done = sign_in_at_provider(me, start(me, "microsoft", "work", graph_emulator.default_address))
    assert done.headers.get("location") == "/accounts?done=connected", done.text
    row = account(store, "work")
    assert (row.provider, row.status) == ("microsoft", "active")
    token = TokenSource(store, row.id, settings).access_token()
    folders = httpx.get(
        f"{graph_emulator.base_url}/v1.0/me/mailFolders",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert folders.status_code == 200


def test_refused_consent_is_one_sentence(
    store: Store, me: httpx.Client, gmail_emulator: GmailEmulator
) -> None:
    """When the owner says no at the provider, the page says so and no account is stored."""
    gmail_emulator.oauth.deny_consent()
    page = sign_in_at_provider(me, start(me, "gmail", "home", "ann@gmail.example"))
    assert page.status_code == 400
    assert "Access was refused in the browser, so the account was not connected." in page.text
    with store.session() as session:
        assert session.query(Account).count() == 0


def test_an_answer_from_another_flow_is_refused(store: Store, me: httpx.Client) -> None:
    """Another session with the pending cookie, a forged state, or a used flow store nothing."""
    redirect = start(me, "gmail", "home", "ann@gmail.example")
    consent = httpx.get(redirect.headers["location"], follow_redirects=False)
    back = urlsplit(consent.headers["location"])
    genuine = f"{back.path}?{back.query}"
    base = str(me.base_url)
    with browser(base) as other:  # the same user in another browser, given the cookie
        assert sign_in(other, base, "me").status_code == 303
        other.cookies.set("mailroom_oauth", me.cookies["mailroom_oauth"], path="/accounts/oauth")
        stolen = other.get(genuine)
        assert stolen.status_code == 400 and "start the connection again" in stolen.text
    code = parse_qs(back.query)["code"][0]
    forged = me.get("/accounts/oauth/callback", params={"code": code, "state": "1.x.y"})
    assert forged.status_code == 400 and "start the connection again" in forged.text
    assert me.get(genuine).status_code == 400  # the refused answer ended this flow
    with store.session() as session:
        assert session.query(Account).count() == 0


def test_form_errors_are_shown_before_leaving(me: httpx.Client) -> None:
    """A bad address is said on the form, without a redirect to the provider."""
    answer = start(me, "gmail", "home", "not an address")
    assert answer.status_code == 400
    assert re.search(r"is not a mail address", answer.text)
    assert me.get("/accounts/oauth/yahoo").status_code == 404


def test_an_account_in_auth_error_signs_in_again(store: Store, me: httpx.Client) -> None:
    """'Sign in again' on an auth_error account replaces its tokens and makes it active."""
    sign_in_at_provider(me, start(me, "gmail", "home", "ann@gmail.example"))
    row = account(store, "home")
    with store.session() as session:
        stored = session.get(Account, row.id)
        assert stored is not None
        stored.status, stored.status_reason = "auth_error", "invalid_grant"
    link = 'href="/accounts/oauth/gmail?reconnect=home"'
    assert link in me.get("/accounts").text
    form = me.get("/accounts/oauth/gmail", params={"reconnect": "home"})
    assert 'value="ann@gmail.example"' in form.text and "readonly" in form.text
    fields = {"csrf": csrf_of(form.text), "name": "home", "address": "ann@gmail.example"}
    redirect = me.post("/accounts/oauth/gmail", data={**fields, "reconnect": "1"})
    done = sign_in_at_provider(me, redirect)
    assert done.headers.get("location") == "/accounts?done=connected", done.text
    again = account(store, "home")
    assert (again.id, again.status, again.status_reason) == (row.id, "active", None)
    assert again.secret != row.secret
    missing = me.get("/accounts/oauth/microsoft", params={"reconnect": "home"})
    assert missing.status_code == 404 and "is a gmail account" in missing.text
