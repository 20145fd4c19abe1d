"""The mailbox pages over real HTTP, on both stores: what each box lists, tabs, pages,
labels, the account filter, and the frame's headers and static files."""

from __future__ import annotations

import re
from collections.abc import Iterator
from email.message import EmailMessage

import httpx
import pytest
from click.testing import CliRunner
from sqlalchemy import select

from mailroom.cli.main import cli
from mailroom.labels.operations import Operations
from mailroom.labels.resolver import resolve_path
from mailroom.store.engine import Store
from mailroom.store.models import Message
from mailroom.web.pages.common import CSP
from tests.factories import make_message
from tests.helpers import ingest, make_account, thread_of
from tests.web.conftest import browser, sign_in
from tests.web.seeding import TAB_MAIL, seed


@pytest.fixture
def me(store: Store, server: str) -> Iterator[httpx.Client]:
    """A browser signed in as ``me``, whose store holds one message per tab."""
    seed(store)
    client = browser(server)
    assert sign_in(client, server, "me").status_code == 303
    yield client
    client.close()


def listed(page: httpx.Response) -> list[int]:
    """The thread ids a listing page shows, top to bottom."""
    assert page.status_code == 200, page.text
    return [int(found) for found in re.findall(r'data-thread="(\d+)"', page.text)]


def thread_ids(store: Store, *message_ids: str) -> list[int]:
    """The threads of messages given by Message-ID (without brackets)."""
    found = [thread_of(store, mid) for mid in message_ids]
    assert None not in found
    return [thread for thread in found if thread is not None]


def act(store: Store, action: str, *message_ids: str) -> None:
    """Apply an Operations action (archive, trash, spam, star) to the messages' threads."""
    with store.session() as session:
        ops = Operations(session, _user(store))
        messages = ops.messages_of_threads(thread_ids(store, *message_ids))
        getattr(ops, action)(messages)


def _user(store: Store) -> int:
    return make_account(store, "me", "home")[0]


def test_each_box_lists_its_own_threads(store: Store, me: httpx.Client) -> None:
    """Archived, spam and binned threads leave the Inbox and show in their own boxes;
    All mail is everything but spam and trash; Starred shows starred threads."""
    primary, promo, social, updates, forums = thread_ids(store, *(f"{t}@seed" for t in TAB_MAIL))
    act(store, "archive", "promotions@seed")
    act(store, "spam", "social@seed")
    act(store, "trash", "updates@seed")
    act(store, "star", "primary@seed")
    inbox = set(listed(me.get("/")))
    for tab in ("promotions", "social", "updates", "forums"):
        inbox |= set(listed(me.get("/", params={"tab": tab})))
    assert inbox == {primary, forums}
    assert listed(me.get("/mail/archive")) == [promo]
    assert listed(me.get("/mail/spam")) == [social]
    assert listed(me.get("/mail/trash")) == [updates]
    assert listed(me.get("/mail/starred")) == [primary]
    assert set(listed(me.get("/mail/all"))) == {primary, promo, forums}
    assert listed(me.get("/mail/sent")) == listed(me.get("/mail/drafts")) == []
    assert "Nothing sent yet." in me.get("/mail/sent").text
    assert me.get("/mail/nowhere").status_code == 404


def test_tabs_bar_counts_unread_and_hides_switched_off_tabs(store: Store, me: httpx.Client) -> None:
    """Every tab lists only its mail with its unread count; a tab switched off leaves the
    bar and its mail (re-sorted) shows in Primary; an unknown tab is Primary."""
    primary, _, social, _, _ = thread_ids(store, *(f"{t}@seed" for t in TAB_MAIL))
    page = me.get("/")
    for tab in TAB_MAIL:
        assert re.search(rf'data-tab="{tab}"[^>]*>\w+ <span class="count">1<', page.text), tab
    assert listed(me.get("/", params={"tab": "social"})) == [social]
    assert listed(me.get("/", params={"tab": "bogus"})) == [primary]
    url = store.engine.url.render_as_string(hide_password=False)
    switched = CliRunner().invoke(cli, ["--database-url", url, "categories", "off", "social"])
    assert switched.exit_code == 0, switched.output
    page = me.get("/")
    assert 'data-tab="social"' not in page.text and 'data-tab="forums"' in page.text
    assert set(listed(page)) == {primary, social}
    assert listed(me.get("/", params={"tab": "social"})) == listed(page)
    for tab in ("promotions", "updates", "forums"):
        CliRunner().invoke(cli, ["--database-url", url, "categories", "off", tab])
    assert 'aria-label="Inbox tabs"' not in me.get("/").text


def test_pages_walk_the_whole_inbox_both_ways(store: Store, me: httpx.Client) -> None:
    """Keyset pages of 50 cover every thread once, newest first (equal times by id),
    and the Newer links walk back to exactly the same pages."""
    account = make_account(store, "me", "home")
    ingest(
        store,
        account,
        [
            (f"p{i}", make_message(f"p{i}@x", subject=f"Page test {i}", minutes=i // 3))
            for i in range(115)
        ],
    )
    pages, last = walk(me, "/", "next")
    assert [len(ids) for ids in pages] == [50, 50, 16]  # 115 + the seeded Primary message
    everything = [thread for ids in pages for thread in ids]
    assert len(set(everything)) == 116
    with store.session() as session:
        order = {
            thread: (when, thread)
            for thread, when in session.execute(
                select(Message.thread_id, Message.received_at).where(
                    Message.thread_id.in_(everything)
                )
            )
        }
    assert everything == sorted(everything, key=lambda thread: order[thread], reverse=True)
    back, first = walk(me, last, "prev")
    assert back == pages[::-1]
    assert 'rel="prev"' not in me.get(first).text


def walk(me: httpx.Client, start: str, rel: str) -> tuple[list[list[int]], str]:
    """Follow the pager's ``rel`` links from ``start``: each page's thread ids, the last URL."""
    pages, link = [], start
    while True:
        page = me.get(link)
        pages.append(listed(page))
        found = re.search(rf'<a href="([^"]+)" rel="{rel}">', page.text)
        if found is None:
            return pages, link
        link = found.group(1).replace("&amp;", "&")


def test_labels_form_a_tree_with_unread_counts(store: Store, me: httpx.Client) -> None:
    """Work and Work/Invoices show nested with unread counts; a label's page lists its
    threads; another user's label is a 404."""
    user = _user(store)
    with store.session() as session:
        invoices = resolve_path(session, user, ["Work", "Invoices"])
        ops = Operations(session, user)
        ops.label(ops.messages_of_threads(thread_ids(store, "primary@seed")), invoices.id)
        invoices_id, work_id = invoices.id, invoices.parent_id
    page = me.get("/").text
    sidebar = page[page.index('aria-label="Mailboxes"') :]
    nested = re.search(
        rf'href="/label/{work_id}">\s*<span class="name">Work</span></a>\s*'
        rf'<ul role="list">\s*<li>\s*<a href="/label/{invoices_id}">\s*'
        r'<span class="name">Invoices</span><span class="count">1<',
        sidebar,
    )
    assert nested is not None, sidebar
    assert listed(me.get(f"/label/{invoices_id}")) == thread_ids(store, "primary@seed")
    assert listed(me.get(f"/label/{work_id}")) == []
    assert 'class="label-chip">Work/Invoices<' in page
    other = make_account(store, "you", "theirs")
    with store.session() as session:
        theirs = resolve_path(session, other[0], ["Secret"]).id
    assert me.get(f"/label/{theirs}").status_code == 404


def test_account_filter_narrows_lists_and_counts(store: Store, me: httpx.Client) -> None:
    """?account=ID shows only threads with mail in that account, counts included; an
    account id that is not the user's is ignored."""
    work = make_account(store, "me", "work")
    ingest(store, work, [("w1", make_message("w1@x", subject="From work", minutes=50))])
    (from_work,) = thread_ids(store, "w1@x")
    everything = listed(me.get("/"))
    assert from_work in everything and len(everything) == 2
    page = me.get("/", params={"account": work[1]})
    assert listed(page) == [from_work]
    assert re.search(
        r'data-box="inbox"[^>]*>\s*<span class="name">Inbox</span><span class="count">1<', page.text
    )
    assert f'href="/?account={work[1]}" aria-current="true">work<' in page.text
    other = make_account(store, "you", "theirs")
    assert listed(me.get("/", params={"account": other[1]})) == everything


def test_pages_need_sign_in_and_carry_the_strict_csp(server: str, me: httpx.Client) -> None:
    """Signed out, every mailbox page redirects to the sign-in form; signed in, pages carry
    the strict CSP and no inline script or style; the vendored htmx is served."""
    with browser(server) as anonymous:
        answer = anonymous.get("/mail/spam")
        assert answer.status_code == 303
        assert answer.headers["location"] == "/signin?next=%2Fmail%2Fspam"
    page = me.get("/")
    assert page.headers["content-security-policy"] == CSP
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP
    assert re.findall(r"<script(?![^>]*\bsrc=\"/static/)", page.text) == []
    assert " style=" not in page.text and "<style" not in page.text
    htmx = me.get("/static/vendor/htmx-2.0.11.min.js")
    assert htmx.status_code == 200 and "javascript" in htmx.headers["content-type"]
    assert me.get("/static/css/base.css").status_code == 200
    assert me.get("/static/../pages/common.py").status_code == 404


def test_a_row_shows_senders_count_labels_attachment_star_and_unread(
    store: Store, me: httpx.Client
) -> None:
    """A conversation's row names its senders by first name with the message count,
    marks attachments and the star, and is bold (class unread) until it is read."""
    account = make_account(store, "me", "home")
    first = EmailMessage()
    first.set_content("See the plan attached.\n")
    for name, value in (
        ("Message-ID", "<plan@x>"),
        ("From", "Carol Jones <carol@example.org>"),
        ("To", "me@example.net"),
        ("Subject", "The plan"),
        ("Date", "Fri, 01 Mar 2024 09:00:00 +0000"),
    ):
        first[name] = value
    first.add_attachment(
        b"%PDF-1.4 plan", maintype="application", subtype="pdf", filename="plan.pdf"
    )
    reply = make_message(
        "plan-reply@x",
        subject="Re: The plan",
        sender="Dan Smith <dan@example.org>",
        in_reply_to="plan@x",
        references=["plan@x"],
        body="Looks good.\n",
        minutes=30,
    )
    ingest(store, account, [("plan", first.as_bytes()), ("reply", reply)])
    (thread,) = thread_ids(store, "plan@x")
    act(store, "star", "plan@x")
    row = _row(me.get("/").text, thread)
    assert 'class="thread unread"' in row
    assert re.search(r'class="sender unread">Carol</span>, <span class="sender unread">Dan<', row)
    assert '<span class="message-count">2</span>' in row
    assert 'class="star on"' in row and "Starred." in row
    assert "Has attachments." in row and "Looks good." in row
    assert '<time datetime="2024-03-01T09:30:00+00:00"' in row and ">2024-03-01<" in row
    act(store, "mark_read", "plan@x")
    row = _row(me.get("/").text, thread)
    assert 'class="thread"' in row and "sender unread" not in row and "Unread." not in row


def _row(page: str, thread: int) -> str:
    start = page.rindex("<li", 0, page.index(f'data-thread="{thread}"'))
    return page[start : page.index("</li>", start)]
