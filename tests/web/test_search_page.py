"""The search page over real HTTP, on both stores: the operators, threaded results with
marked snippets, escaping, Spam and Trash, paging, the account filter, and bad syntax as
one sentence."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from mailroom.labels.operations import Operations
from mailroom.labels.resolver import resolve_path
from mailroom.store.engine import Store
from tests.factories import make_message
from tests.helpers import ingest, make_account, thread_of
from tests.jmap.conftest import with_attachment
from tests.web.conftest import browser, sign_in
from tests.web.seeding import seed

DAY = 24 * 60  # minutes
MAIL = [
    ("inv1@s", {"sender": "Bob Builder <bob@builder.example>", "subject": "Invoice 42",
                "body": "Please find the invoice for March attached.\n", "minutes": 2 * DAY}),
    ("inv2@s", {"sender": "Carol <carol@example.com>", "to": "Bob <bob@builder.example>",
                "subject": "Re: Invoice 42", "in_reply_to": "inv1@s",
                "body": "Thanks, the invoice arrived.\n", "minutes": 2 * DAY + 60}),
    ("xss@s", {"sender": '"<img src=x onerror=alert(1)>" <evil@example.com>',
               "subject": "<script>alert(1)</script> receipt",
               "body": "<b>receipt</b> for you\n", "minutes": DAY}),
    ("old@s", {"sender": "Dan <dan@old.example>", "subject": "Old news",
               "body": "An ancient invoice.\n", "minutes": -40 * DAY}),
    ("spam@s", {"sender": "Spammer <x@spam.example>", "subject": "Cheap invoice",
                "body": "Buy now.\n", "minutes": 3 * DAY}),
]  # fmt: skip


def threads(store: Store, *message_ids: str) -> list[int]:
    found = [thread_of(store, mid) for mid in message_ids]
    assert None not in found
    return [thread for thread in found if thread is not None]


def listed(response: httpx.Response, status: int = 200) -> list[int]:
    """The thread ids of the results, top to bottom."""
    assert response.status_code == status, response.text
    return [int(found) for found in re.findall(r'data-thread="(\d+)"', response.text)]


@pytest.fixture
def me(store: Store, server: str) -> Iterator[httpx.Client]:
    """Signed in as ``me``: the tab mail of the seed and the messages above; the invoice
    thread starred, the bank's statement labelled Work and read, the spam in Spam."""
    account = seed(store)
    ingest(store, account, [(mid, make_message(mid, **fields)) for mid, fields in MAIL])  # type: ignore[arg-type]
    ingest(store, account, [("report@x", with_attachment())])
    user = account[0]
    with store.session() as session:
        ops = Operations(session, user)
        ops.star(ops.messages_of_threads(threads(store, "inv1@s")))
        ops.spam(ops.messages_of_threads(threads(store, "spam@s")))
        bank = ops.messages_of_threads(threads(store, "updates@seed"))
        ops.label(bank, resolve_path(session, user, ["Work"]).id)
        ops.mark_read(bank)
    client = browser(server)
    assert sign_in(client, server, "me").status_code == 303
    yield client
    client.close()


def search(client: httpx.Client, query: str, **params: str) -> httpx.Response:
    return client.get("/search", params={"q": query, **params})


def test_from_lists_the_senders_threads_once(store: Store, me: httpx.Client) -> None:
    """from: matches the sender's name or address; a thread is one row at its newest match."""
    (invoice,) = threads(store, "inv1@s")
    assert listed(search(me, "from:bob")) == [invoice]
    assert listed(search(me, "from:Builder")) == [invoice]
    assert listed(search(me, "from:carol@example.com")) == [invoice]
    assert listed(search(me, 'from:"Bob Builder"')) == [invoice]
    assert listed(search(me, "to:bob@builder.example")) == [invoice]
    assert listed(search(me, "from:nobody@nowhere.example")) == []
    assert (
        "No conversation matches from:nobody@nowhere.example."
        in search(me, "from:nobody@nowhere.example").text
    )


def test_words_use_the_index_and_snippets_mark_them(store: Store, me: httpx.Client) -> None:
    """Free words match subject and body; rows show the thread's subject and the matching
    message's words, marked; Spam is left out."""
    invoice, old = threads(store, "inv1@s", "old@s")
    page = search(me, "invoice")
    assert listed(page) == [invoice, old]
    assert "<mark>Invoice</mark> 42" in page.text
    assert "Thanks, the <mark>invoice</mark> arrived." in page.text  # the newest match
    assert "An ancient <mark>invoice</mark>." in page.text
    assert 'value="invoice"' in page.text  # the query stays in the search box
    assert listed(search(me, '"invoice arrived"')) == [invoice]
    assert listed(search(me, '"arrived invoice"')) == []
    assert listed(search(me, "invoi")) == [invoice, old]  # the last word is also a prefix


def test_from_shows_a_snippet_without_words(store: Store, me: httpx.Client) -> None:
    """A search without words shows the matching message's preview as the snippet."""
    page = search(me, "from:dan")
    assert listed(page) == threads(store, "old@s")
    assert "An ancient invoice." in page.text and "<mark>" not in page.text


def test_everything_is_escaped(store: Store, me: httpx.Client) -> None:
    """Subjects, names and bodies are escaped before the marks go in."""
    page = search(me, "receipt")
    assert listed(page) == threads(store, "xss@s")
    assert "&lt;script&gt;alert(1)&lt;/script&gt; <mark>receipt</mark>" in page.text
    assert "&lt;b&gt;<mark>receipt</mark>&lt;/b&gt; for you" in page.text
    assert "<script>alert" not in page.text and "<b>" not in page.text
    assert "<img" not in page.text
    for hostile, status in (
        ("<script>alert(1)</script>", 200),
        ('"><script>alert(1)</script>', 400),
    ):
        answer = search(me, hostile)
        assert answer.status_code == status and "<script>alert" not in answer.text


def test_state_label_and_attachment_operators(store: Store, me: httpx.Client) -> None:
    """is:, label:, has:attachment, in: and negation narrow as they say."""
    invoice, bank, report, primary = threads(
        store, "inv1@s", "updates@seed", "report@x", "primary@seed"
    )
    assert listed(search(me, "is:starred")) == listed(search(me, "in:starred")) == [invoice]
    assert listed(search(me, "label:work")) == listed(search(me, "label:WORK")) == [bank]
    assert listed(search(me, "is:read")) == [bank]
    assert bank not in listed(search(me, "is:unread"))
    assert listed(search(me, "has:attachment")) == [report]
    assert listed(search(me, "in:inbox from:alice")) == [primary]
    assert listed(search(me, "invoice -from:dan")) == [invoice]
    assert listed(search(me, "from:dan OR from:reports.example")) == threads(
        store, "report@x", "old@s"
    )
    assert listed(search(me, "{quarterly ancient}")) == threads(store, "report@x", "old@s")
    assert listed(search(me, "in:sent")) == []


def test_dates(store: Store, me: httpx.Client) -> None:
    """before:/after: by day (the seed's mail is from 2024-03-01 on, the old one from January)."""
    old, invoice = threads(store, "old@s", "inv1@s")
    assert listed(search(me, "before:2024-03-01")) == [old]
    assert listed(search(me, "invoice after:2024/03/02")) == [invoice]
    assert listed(search(me, "invoice before:2024-03-03 after:2024-01-01")) == [old]
    assert listed(search(me, "older_than:1d")) != []  # the test mail is from 2024
    assert listed(search(me, "newer_than:1d")) == []


def test_spam_and_trash_only_when_named(store: Store, me: httpx.Client) -> None:
    """Spam is searched with in:spam or in:anywhere; Trash likewise."""
    spam, invoice, old = threads(store, "spam@s", "inv1@s", "old@s")
    assert listed(search(me, "cheap")) == []
    assert listed(search(me, "cheap in:spam")) == [spam]
    assert listed(search(me, "invoice in:anywhere")) == [spam, invoice, old]
    with store.session() as session:
        ops = Operations(session, make_account(store, "me", "home")[0])
        ops.trash(ops.messages_of_threads([old]))
    assert listed(search(me, "invoice")) == [invoice]
    assert listed(search(me, "invoice in:trash")) == [old]


@pytest.mark.parametrize(
    ("query", "sentence"),
    [
        ("(lunch", "A ( is not closed; add the )."),
        ("is:important", "is: takes unread, read, starred or snoozed, not &#39;important&#39;."),
        ("label:Holidays", "There is no label &#39;Holidays&#39;; the sidebar lists your labels."),
        ("a OR", "OR needs a term on each side, like invoice OR receipt."),
    ],
)
def test_bad_syntax_is_one_sentence(me: httpx.Client, query: str, sentence: str) -> None:
    """A search that cannot be understood is the page (400) with one sentence, the query kept."""
    page = search(me, query)
    assert page.status_code == 400
    assert f'<p class="error search-error" role="alert">{sentence}</p>' in page.text
    assert 'id="search-q"' in page.text and "Traceback" not in page.text


def test_empty_search_shows_the_operators(me: httpx.Client) -> None:
    """No query (or only punctuation) lists no mail and explains the syntax."""
    for query in ("", "  ", "!!!"):
        page = search(me, query)
        assert listed(page) == []
        assert "Search operators" in page.text and "has:attachment" in page.text


def test_pages_and_account_filter(store: Store, me: httpx.Client) -> None:
    """Results come 50 threads a page with links both ways; the account filter narrows."""
    account = make_account(store, "me", "home")
    ingest(
        store,
        account,
        [
            (f"r{n}@s", make_message(f"r{n}@s", subject=f"Weekly digest {n}", minutes=DAY + n))
            for n in range(53)
        ],
    )
    first = search(me, "digest")
    rows = listed(first)
    assert len(rows) == 50
    older = re.search(r'href="([^"]+)" rel="next"', first.text)
    assert older is not None and 'rel="prev"' not in first.text
    second = me.get(older.group(1).replace("&amp;", "&"))
    assert len(listed(second)) == 3 and not set(listed(second)) & set(rows)
    assert 'rel="prev"' in second.text and 'rel="next"' not in second.text
    other = make_account(store, "me", "work")
    ingest(store, other, [("w1@s", make_message("w1@s", subject="Digest from work", minutes=9))])
    work = threads(store, "w1@s")
    assert listed(search(me, "digest from work", account=str(other[1]))) == work
    assert listed(search(me, "digest", account=str(other[1]))) == work
    assert work[0] in listed(search(me, "digest work"))


def test_signed_out_goes_to_sign_in(server: str) -> None:
    """The search needs a signed-in user."""
    with browser(server) as client:
        answer = client.get("/search", params={"q": "from:bob"})
    assert answer.status_code == 303
    assert answer.headers["location"] == "/signin?next=%2Fsearch%3Fq%3Dfrom%253Abob"
