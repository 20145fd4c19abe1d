"""How the parts of the web app link up, over real HTTP on both stores: the user menu
(Admin for operators only), the Compose button, Drafts rows opening the compose form,
the display density as a class on <body>, and the time zone chosen on /settings."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from mailroom.config import Settings
from mailroom.jmap.auth import Authenticator
from mailroom.store.engine import Store
from mailroom.store.models import Message, User
from mailroom.web.app import create_app
from tests.helpers import make_account
from tests.jmap.conftest import serve
from tests.web.compose_support import Composer, composer, draft_id
from tests.web.conftest import add_user, browser, csrf_of, sign_in
from tests.web.seeding import seed

__all__ = ["composer"]  # the fixture, imported for pytest


@pytest.fixture
def base(store: Store, auth: Authenticator, tmp_path: Path) -> Iterator[str]:
    """The app with ``me`` (an operator, the seeded mail) and ``you`` (not one)."""
    seed(store)
    make_account(store, "you", "work")
    add_user(store, "you")
    settings = Settings(admins="me", data_dir=tmp_path / "data")
    yield from serve(create_app(store, auth=auth, settings=settings))


@contextmanager
def _client(base: str, name: str) -> Iterator[httpx.Client]:
    with browser(base) as client:
        assert sign_in(client, base, name).status_code == 303
        yield client


def _user_menu(page: str) -> list[str]:
    panel = re.search(r'<div class="user-menu-panel">(.*?)</div>', page, re.S)
    assert panel is not None, page
    return re.findall(r'<a href="([^"]+)"', panel.group(1))


def _prefs(store: Store, name: str) -> dict[str, object]:
    with store.session() as session:
        user = session.scalars(select(User).where(User.name == name)).one()
        return dict(user.settings or {})


def test_the_user_menu_links_accounts_settings_and_admin_for_operators_only(base: str) -> None:
    with _client(base, "me") as me, _client(base, "you") as you:
        for path in ("/", "/mail/sent", "/settings", "/accounts"):
            assert _user_menu(me.get(path).text) == ["/accounts", "/settings", "/admin"]
            assert _user_menu(you.get(path).text) == ["/accounts", "/settings"]
        for link in ("/accounts", "/settings", "/admin"):
            assert me.get(link).status_code == 200
        assert you.get("/admin").status_code == 404


def test_the_sidebar_has_a_compose_button(base: str) -> None:
    with _client(base, "me") as me:
        for path in ("/", "/mail/archive"):
            sidebar = me.get(path).text.split('<nav id="sidebar"', 1)[1]
            assert '<a class="compose-button" href="/compose">Compose</a>' in sidebar
        assert me.get("/compose").status_code == 200


def test_a_drafts_row_opens_its_draft_in_the_compose_form(composer: Composer) -> None:
    saved = draft_id(
        composer.post(action="save", to="bob@example.net", subject="Plans", body="Hi Bob")
    )
    with composer.store.session() as session:
        thread = session.scalar(select(Message.thread_id).where(Message.id == saved))
    listing = composer.client.get("/mail/drafts").text
    assert f'href="/threads/{thread}/draft"' in listing
    opened = composer.client.get(f"/threads/{thread}/draft")
    assert opened.status_code == 303
    assert opened.headers["location"] == f"/compose?draft={saved}"
    form = composer.client.get(opened.headers["location"]).text
    assert 'value="Plans"' in form and "Hi Bob" in form
    # In the other boxes the same thread's row opens the thread view.
    everything = composer.client.get("/mail/all").text
    assert f'href="/threads/{thread}?back=/mail/all"' in everything
    assert f"/threads/{thread}/draft" not in everything


def test_a_thread_without_a_draft_or_of_another_user_goes_to_the_thread_view(
    base: str, store: Store
) -> None:
    with store.session() as session:
        mine = session.scalars(select(Message.thread_id).order_by(Message.id)).first()
    with _client(base, "me") as me, _client(base, "you") as you:
        answer = me.get(f"/threads/{mine}/draft")
        assert answer.status_code == 303 and answer.headers["location"] == f"/threads/{mine}"
        theirs = you.get(f"/threads/{mine}/draft")
        assert theirs.headers["location"] == f"/threads/{mine}"
        assert you.get(theirs.headers["location"]).status_code == 404


def test_the_density_is_a_class_on_body(base: str, store: Store) -> None:
    with _client(base, "me") as me:
        assert '<body class="density-comfortable">' in me.get("/").text
        csrf = csrf_of(me.get("/settings").text)
        saved = me.post("/settings/display", data={"csrf": csrf, "density": "compact"})
        assert saved.status_code == 303
        for path in ("/", "/mail/starred", "/settings"):
            assert '<body class="density-compact">' in me.get(path).text
    assert _prefs(store, "me")["density"] == "compact"


def test_the_time_zone_is_chosen_on_settings_and_times_follow_it(base: str, store: Store) -> None:
    with _client(base, "me") as me:
        page = me.get("/settings").text
        assert "<option selected>UTC</option>" in page and "<option>Asia/Tokyo</option>" in page
        assert re.search(r'title="\d{4}-\d\d-\d\d \d\d:\d\d UTC"', me.get("/").text)
        csrf = csrf_of(page)
        saved = me.post(
            "/settings/display", data={"csrf": csrf, "density": "compact", "timezone": "Asia/Tokyo"}
        )
        assert saved.status_code == 303
        assert "<option selected>Asia/Tokyo</option>" in me.get("/settings").text
        assert re.search(r'title="\d{4}-\d\d-\d\d \d\d:\d\d JST"', me.get("/").text)
        refused = me.post(
            "/settings/display",
            data={"csrf": csrf, "density": "compact", "timezone": "Mars/Olympus"},
        )
        assert refused.status_code == 400
        assert "Choose a time zone from the list." in refused.text
        assert _prefs(store, "me")["timezone"] == "Asia/Tokyo"
        # A form without the field (an older page) leaves the zone as it is.
        kept = me.post("/settings/display", data={"csrf": csrf, "density": "comfortable"})
        assert kept.status_code == 303
    assert _prefs(store, "me")["timezone"] == "Asia/Tokyo"
    assert _prefs(store, "me")["density"] == "comfortable"


def test_every_message_of_a_thread_links_reply_reply_all_and_forward(
    base: str, store: Store
) -> None:
    with store.session() as session:
        message, thread = session.execute(
            select(Message.id, Message.thread_id).where(Message.subject == "Lunch on Friday?")
        ).one()
    with _client(base, "me") as me:
        page = me.get(f"/threads/{thread}").text
        answers = re.findall(r'<a href="(/compose\?[a-z_]+=\d+)" data-key="[raf]">', page)
        assert answers == [
            f"/compose?reply={message}",
            f"/compose?reply_all={message}",
            f"/compose?forward={message}",
        ]
        subjects = [
            re.search(r'name="subject"[^>]*value="([^"]*)"', me.get(a).text) for a in answers
        ]
        assert [found.group(1) if found else None for found in subjects] == [
            "Re: Lunch on Friday?",
            "Re: Lunch on Friday?",
            "Fwd: Lunch on Friday?",
        ]
