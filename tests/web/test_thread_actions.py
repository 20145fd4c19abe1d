"""Actions and their undo over real HTTP, on both stores: each action does what it says
through the operations service, undo puts back exactly what it changed, and forms without
the session's CSRF token or naming another user's mail change nothing."""

from __future__ import annotations

import base64
import json
import re
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from sqlalchemy import select

from mailroom.labels.resolver import resolve_path
from mailroom.store.engine import Store
from mailroom.store.models import Message, MessageLabel, PendingChange, Thread, User, utcnow
from tests.factories import make_message
from tests.helpers import ingest, make_account
from tests.web.conftest import add_user, browser, csrf_of, sign_in
from tests.web.thread_support import signed_in_me, thread_id_of  # noqa: F401  (fixture `me`)

HX = {"HX-Request": "true"}


@pytest.fixture
def account(store: Store) -> tuple[int, int, int]:
    """``me`` with two threads in the Inbox (one of two messages) and the label Work."""
    made = make_account(store, "me", "home")
    add_user(store, "me")
    ingest(
        store,
        made,
        [
            ("a", make_message("a@x", subject="Plan", sender="Ann <ann@example.org>")),
            ("b", make_message("b@x", subject="Re: Plan", in_reply_to="a@x", minutes=3)),
            ("c", make_message("c@x", subject="Other", sender="Cy <cy@example.org>", minutes=5)),
        ],
    )
    with store.session() as session:
        resolve_path(session, made[0], "Work")
    return made


def state(store: Store) -> dict[str, Any]:
    """Every message's labels and read state, every thread's wake time and tab, the
    corrections: what an undo must give back exactly."""
    with store.session() as session:
        labels: dict[int, set[int]] = {}
        for mid, lid in session.execute(select(MessageLabel.message_id, MessageLabel.label_id)):
            labels.setdefault(mid, set()).add(lid)
        seen = {m.id: m.seen_at is None for m in session.scalars(select(Message))}
        threads = {
            t.id: (t.snoozed_until, t.category, t.category_pinned)
            for t in session.scalars(select(Thread))
        }
        settings = {
            u.name: u.settings.get("tab_corrections") for u in session.scalars(select(User))
        }
    return {"labels": labels, "unread": seen, "threads": threads, "corrections": settings}


def _work(store: Store, user: int) -> int:
    with store.session() as session:
        return resolve_path(session, user, "Work").id


def post(me: httpx.Client, path: str, fields: dict[str, Any], csrf: str) -> httpx.Response:
    """A form POST as htmx sends it."""
    return me.post(path, data={"csrf": csrf, **fields}, headers=HX)


def _token(answer: httpx.Response) -> str:
    found = re.search(r'name="token" value="([^"]+)"', answer.text)
    assert found is not None, answer.text
    return found.group(1)


@pytest.mark.parametrize(
    "fields",
    [
        {"action": "archive"},
        {"action": "trash"},
        {"action": "spam"},
        {"action": "star"},
        {"action": "unread"},
        {"action": "label", "label": "WORK"},
        {"target": "label:WORK"},
        {"target": "trash"},
        {"tab": "updates"},
        {"snooze": "tomorrow"},
    ],
    ids=lambda fields: "-".join(str(v) for v in fields.values()),
)
def test_an_action_changes_the_thread_and_undo_puts_back_exactly_that(
    store: Store, account: tuple[int, int, int], me: httpx.Client, fields: dict[str, str]
) -> None:
    """Each action changes the thread's messages and queues the change for the provider;
    its undo token restores every label, read state, wake time, tab and correction."""
    thread = thread_id_of(store, "a@x")
    page = me.get("/").text  # opening the list marks nothing read
    csrf = csrf_of(page)
    work = _work(store, account[0])
    fields = {k: v.replace("WORK", str(work)) for k, v in fields.items()}
    me.get(f"/threads/{thread}")  # read, so that "unread" has something to do
    me.get(f"/threads/{thread_id_of(store, 'c@x')}")  # some state the action must not touch
    before = state(store)
    with store.session() as session:
        queued = session.scalar(select(PendingChange.id).order_by(PendingChange.id.desc()))
    answer = post(me, "/actions", {**fields, "thread": thread, "back": "/", "here": "/"}, csrf)
    assert answer.status_code == 200, answer.text
    assert 'role="status"' in answer.text and "1 conversation" in answer.text
    assert answer.headers["hx-trigger"] == '{"mailroom:go": {"to": "/"}}'
    after = state(store)
    assert after != before
    other = thread_id_of(store, "c@x")
    assert after["threads"][other] == before["threads"][other]
    with store.session() as session:  # a tab is mailroom's own: nothing for the provider
        newest = session.scalar(select(PendingChange.id).order_by(PendingChange.id.desc()))
        assert (newest != queued) is ("tab" not in fields)
    undone = post(me, "/undo", {"token": _token(answer), "go": "/"}, csrf)
    assert undone.status_code == 200 and "Undone." in undone.text
    assert state(store) == before


def test_snooze_takes_a_typed_time_in_the_users_zone(
    store: Store, account: tuple[int, int, int], me: httpx.Client
) -> None:
    """A typed snooze time is the user's wall-clock time; one in the past is refused."""
    with store.session() as session:
        user = session.get(User, account[0])
        assert user is not None
        user.settings = {**user.settings, "timezone": "Europe/Berlin"}
    csrf = csrf_of(me.get("/").text)
    thread = thread_id_of(store, "a@x")
    when = (utcnow() + timedelta(days=3)).strftime("%Y-%m-%dT10:30")
    answer = post(me, "/actions", {"action": "snooze", "until": when, "thread": thread}, csrf)
    assert "Snoozed" in answer.text, answer.text
    with store.session() as session:
        until = session.get(Thread, thread).snoozed_until  # type: ignore[union-attr]
    local = datetime.fromisoformat(when).replace(tzinfo=ZoneInfo("Europe/Berlin"))
    assert until == local
    past = post(
        me, "/actions", {"action": "snooze", "until": "2001-01-01T10:00", "thread": thread}, csrf
    )
    assert 'role="alert"' in past.text and "Choose a time in the future" in past.text


def test_bulk_actions_and_the_form_without_script(
    store: Store, account: tuple[int, int, int], me: httpx.Client
) -> None:
    """The list's form names several threads; without htmx the answer is a redirect to the
    page the action leaves the user on, and the rows carry the bulk checkboxes."""
    page = me.get("/").text
    assert page.count('form="bulk"') == 2 and 'id="bulk"' in page
    threads = [thread_id_of(store, "a@x"), thread_id_of(store, "c@x")]
    answer = me.post(
        "/actions",
        data={
            "csrf": csrf_of(page),
            "action": "archive",
            "thread": threads,
            "back": "/?tab=primary",
        },
    )
    assert answer.status_code == 303 and answer.headers["location"] == "/?tab=primary"
    after = me.get("/?tab=primary").text  # the notice the action left, with its Undo form
    assert 'data-thread="' not in after
    assert '<span class="toast-message">Archived: 2 conversations.</span>' in after
    assert "mailroom_notice" not in me.cookies  # shown once
    assert "Archived: 2" not in me.get("/").text
    archived = re.findall(r'data-thread="(\d+)"', me.get("/mail/archive").text)
    assert sorted(archived) == sorted(str(t) for t in threads)
    token = re.search(r'name="token" value="([^"]+)"', after)
    assert token is not None
    undone = me.post(
        "/undo", data={"csrf": csrf_of(after), "token": token.group(1), "go": "/?tab=primary"}
    )
    assert undone.status_code == 303
    back = me.get(undone.headers["location"]).text
    assert '<span class="toast-message">Undone.' in back and 'name="token"' not in back
    assert sorted(re.findall(r'data-thread="(\d+)"', back)) == sorted(str(t) for t in threads)
    forged = base64.urlsafe_b64encode(json.dumps(["<script>x()</script>", "t", "/"]).encode())
    for value in ("!!not-base64", forged.decode()):
        me.cookies.set("mailroom_notice", value)
        shown = me.get("/")
        assert shown.status_code == 200 and "<script>x()" not in shown.text


def test_forms_without_the_token_or_on_foreign_mail_change_nothing(
    store: Store, server: str, account: tuple[int, int, int], me: httpx.Client
) -> None:
    """No CSRF token: 403; another user's thread: a plain refusal; an undo token from another
    session or a damaged one: refused; nothing changes."""
    thread = thread_id_of(store, "a@x")
    csrf = csrf_of(me.get("/").text)
    before = state(store)
    assert me.post("/actions", data={"action": "archive", "thread": thread}).status_code == 403
    bob_account = make_account(store, "bob", "bob")
    add_user(store, "bob")
    ingest(store, bob_account, [("z", make_message("z@x"))])
    bobs = thread_id_of(store, "z@x")
    before = state(store)
    refused = post(me, "/actions", {"action": "trash", "thread": bobs}, csrf)
    assert 'role="alert"' in refused.text and f"There is no thread {bobs}" in refused.text
    assert state(store) == before
    answer = post(me, "/actions", {"action": "archive", "thread": thread}, csrf)
    token = _token(answer)
    with browser(server) as bob:
        sign_in(bob, server, "bob")
        bob_csrf = csrf_of(bob.get("/").text)
        stolen = bob.post("/undo", data={"csrf": bob_csrf, "token": token}, headers=HX)
        assert "This undo has expired" in stolen.text
    damaged = post(me, "/undo", {"token": token[:-3] + "AAA"}, csrf)
    assert "This undo has expired" in damaged.text
    assert post(me, "/undo", {"token": token}, csrf).text.count("Undone.") == 1
    assert state(store) == before
