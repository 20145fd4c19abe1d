"""The accounts, settings and admin pages over real HTTP, on both stores."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from mailroom.config import Settings
from mailroom.jmap.auth import Authenticator
from mailroom.jobs.queues import make_queues
from mailroom.providers.imap.account import account_password
from mailroom.secrets import generate_key
from mailroom.store.engine import Store
from mailroom.store.models import Account, ApiToken, AuditEntry, Rule, User
from mailroom.web.app import create_app
from tests.jmap.conftest import serve
from tests.web.conftest import browser, csrf_of, sign_in
from tests.web.seeding import seed


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """A master key, ``me`` as the operator, loopback allow-listed."""
    return Settings(
        master_key=generate_key(),
        admins="me",
        allowed_private_hosts="127.0.0.1,localhost",
        data_dir=tmp_path / "data",
    )


@pytest.fixture
def base(store: Store, auth: Authenticator, settings: Settings) -> Iterator[str]:
    """The application with those settings, the seeded mailbox of ``me``."""
    seed(store)
    yield from serve(create_app(store, auth=auth, settings=settings))


@pytest.fixture
def me(base: str) -> Iterator[tuple[httpx.Client, str]]:
    """A client signed in as ``me`` and its CSRF token."""
    with browser(base) as client:
        assert sign_in(client, base, "me").status_code == 303
        yield client, csrf_of(client.get("/").text)


def _account(store: Store, name: str) -> Account:
    with store.session() as session:
        account = session.query(Account).filter_by(name=name).one()
        session.expunge(account)
        return account


def test_the_accounts_page_shows_state_progress_and_outgoing(
    store: Store, me: tuple[httpx.Client, str]
) -> None:
    client, _ = me
    with store.session() as session:
        account = session.query(Account).filter_by(name="home").one()
        account.provider = "imap"
        account.import_total, account.import_done = 40, 10
        account.status, account.status_reason = "auth_error", "the server refused the login"
        account.settings = {"smtp": {"host": "smtp.example.org", "port": 587}}
    answer = client.get("/accounts")
    assert answer.status_code == 200
    assert '<progress max="40" value="10"' in answer.text
    assert "10 / 40" in answer.text
    assert "auth_error — the server refused the login" in answer.text
    assert "smtp.example.org:587" in answer.text
    assert 'hx-trigger="every 3s"' in answer.text
    fragment = client.get(f"/accounts/{account.id}/state")
    assert fragment.status_code == 200 and "10 / 40" in fragment.text
    assert "<html" not in fragment.text
    assert client.get("/accounts/999999/state").status_code == 404


def test_disconnect_needs_the_token_and_forgets_the_password(
    store: Store, me: tuple[httpx.Client, str]
) -> None:
    client, csrf = me
    account = _account(store, "home")
    assert client.post(f"/accounts/{account.id}/disconnect", data={"csrf": "x"}).status_code == 403
    assert _account(store, "home").status == "active"
    answer = client.post(f"/accounts/{account.id}/disconnect", data={"csrf": csrf})
    assert answer.status_code == 303
    assert _account(store, "home").status == "disconnected"
    assert "its mail stays" in client.get(answer.headers["location"]).text
    with store.session() as session:
        audit = session.execute(
            select(AuditEntry.via, AuditEntry.origin).where(
                AuditEntry.action == "account.disconnect"
            )
        ).all()
    assert [tuple(row) for row in audit] == [("web", "127.0.0.1")]  # the browser's address


def test_add_an_imap_account_with_its_outgoing_server(
    store: Store, settings: Settings, me: tuple[httpx.Client, str]
) -> None:
    client, csrf = me
    assert 'action="/accounts/discover"' in client.get("/accounts/add").text
    found = client.post("/accounts/discover", data={"csrf": csrf, "address": "ann@localhost"})
    assert found.status_code == 200
    assert "the form holds a guess" in found.text  # nothing is published for localhost
    assert 'value="imap.localhost"' in found.text
    fields = {
        "csrf": csrf,
        "name": "work",
        "host": "127.0.0.1",
        "port": "1993",
        "tls": "ssl",
        "login": "ann",
        "password": "s3cret",
        "smtp_host": "smtp.example.org",
        "smtp_port": "",
        "smtp_security": "tls",
        "smtp_login": "",
    }
    answer = client.post("/accounts/add", data=fields)
    assert answer.status_code == 303, answer.text
    account = _account(store, "work")
    assert account.provider == "imap"
    assert account.settings["host"] == "127.0.0.1" and account.settings["port"] == 1993
    assert account.settings["smtp"]["host"] == "smtp.example.org"
    assert account.settings["smtp"]["port"] == 465
    assert account_password(account, settings) == "s3cret"
    again = client.post("/accounts/add", data=fields)
    assert again.status_code == 400
    assert "already has an account called &#39;work&#39;" in again.text
    assert 'value="127.0.0.1"' in again.text  # the form keeps what was typed
    bad = client.post("/accounts/add", data={**fields, "name": "x", "port": "99999"})
    assert bad.status_code == 400 and "is not a TCP port" in bad.text


def test_settings_tabs_display_and_tokens(store: Store, me: tuple[httpx.Client, str]) -> None:
    client, csrf = me
    page = client.get("/settings")
    assert page.status_code == 200 and 'name="tab_promotions" checked' in page.text
    on = {"csrf": csrf, "tab_social": "on", "tab_updates": "on", "tab_forums": "on"}
    assert client.post("/settings/tabs", data=on).status_code == 303
    assert (
        client.post("/settings/display", data={"csrf": csrf, "density": "compact"}).status_code
        == 303
    )
    with store.session() as session:
        prefs = session.query(User).filter_by(name="me").one().settings
    assert prefs["categories_off"] == ["promotions"]
    assert prefs["density"] == "compact" and prefs["mark_read_on_open"] is False
    assert "Promotions" not in client.get("/").text.split('class="tabs"')[-1].split("</nav>")[0]

    made = client.post("/settings/tokens", data={"csrf": csrf, "name": "phone"})
    token = re.search(r'id="new-token">([^<]+)<', made.text)
    assert token is not None
    jmap = httpx.get(
        f"{client.base_url}/.well-known/jmap",
        headers={"Authorization": f"Bearer {token.group(1)}"},
    )
    assert jmap.status_code in (200, 301, 302, 307, 308)
    assert token.group(1) not in client.get("/settings").text  # shown once
    with store.session() as session:
        token_id = session.query(ApiToken).one().id
    assert (
        client.post(f"/settings/tokens/{token_id}/revoke", data={"csrf": csrf}).status_code == 303
    )
    with store.session() as session:
        assert session.query(ApiToken).count() == 0


def test_rules_test_add_and_remove(store: Store, me: tuple[httpx.Client, str]) -> None:
    client, csrf = me
    rule = {"csrf": csrf, "from": "shop.example", "labels": "Shopping", "archive": "on"}
    tested = client.post("/settings/rules/test", data=rule)
    assert tested.status_code == 200
    assert "matches 1 message already in your mail" in tested.text
    assert "Spring sale: 20% off" in tested.text
    with store.session() as session:
        assert session.query(Rule).count() == 0  # a test adds nothing
    assert client.post("/settings/rules", data=rule).status_code == 303
    with store.session() as session:
        rule_id = session.query(Rule).one().id
    assert "shop.example" in client.get("/settings").text
    empty = client.post("/settings/rules", data={"csrf": csrf, "archive": "on"})
    assert empty.status_code == 400 and 'role="alert"' in empty.text
    assert client.post(f"/settings/rules/{rule_id}/remove", data={"csrf": csrf}).status_code == 303
    with store.session() as session:
        assert session.query(Rule).count() == 0


def test_the_admin_page_is_for_operators_only(
    store: Store, base: str, me: tuple[httpx.Client, str]
) -> None:
    client, _ = me
    with store.session() as session:
        account = session.query(Account).filter_by(name="home").one()
        account.status, account.status_reason = "auth_error", "login refused"
    answer = client.get("/admin")
    assert answer.status_code == 200
    assert "send_urgent" in answer.text and "No failed sends." in answer.text
    assert "login refused" in answer.text
    from tests.web.conftest import add_user

    add_user(store, "bob")
    with browser(base) as other:
        assert sign_in(other, base, "bob").status_code == 303
        assert other.get("/admin").status_code == 404
        assert 'href="/admin"' not in other.get("/settings").text


def test_the_admin_page_and_metrics_count_the_same_queues(
    settings: Settings, base: str, me: tuple[httpx.Client, str]
) -> None:
    """A job waiting on enrich_backlog is one on /admin and one in /metrics."""
    client, _ = me
    queue = make_queues(settings)["enrich_backlog"]
    queue.task(name="waits_for_nobody")(lambda: None)()
    admin = client.get("/admin").text
    assert "<tr><td>enrich_backlog</td><td>1</td></tr>" in admin
    assert "<tr><td>ingest</td><td>0</td></tr>" in admin
    scraped = client.get("/metrics").text
    assert 'mailroom_queue_depth{queue="enrich_backlog"} 1.0' in scraped


def test_the_pages_need_a_signed_in_user(base: str) -> None:
    with browser(base) as client:
        for path in ("/accounts", "/accounts/add", "/settings", "/admin"):
            assert client.get(path).status_code == 303
