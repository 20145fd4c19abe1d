"""Web, CLI read models and webhooks over sealed ``messages`` columns: clear text, never ``mrf1.``.

Each reader is asked about a sealed message and must show what the same mail
shows when kept clear: subject, sender, recipients, preview and Message-ID.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.engine import make_url

from mailroom.errors import SealedWithoutKeys
from mailroom.listing import thread_rows
from mailroom.reading import list_messages, message_detail, newest_threads
from mailroom.store.engine import Store
from mailroom.store.models import Message, Thread
from mailroom.store.reader import SqliteReader
from mailroom.web.app import create_app
from mailroom.webhooks.worker import WebhookWorker
from tests.crypto.sealed_mail.conftest import SUBJECT
from tests.factories import make_message
from tests.helpers import ingest, make_account
from tests.jmap.conftest import serve
from tests.web.conftest import add_user, browser, csrf_of, sign_in
from tests.webhooks.support import Clock, Receiver, endpoint_for, hook_settings

SENDER = ("Wilhelmina Stroud", "wil@stroud.example")
TO = ("Oswin Fairweather", "oswin@fair.example")
PREVIEW = "The hangar doors are stuck again"


def _mail(message_id: str, subject: str = SUBJECT, minutes: int = 0) -> bytes:
    return make_message(
        message_id,
        subject=subject,
        sender=f"{SENDER[0]} <{SENDER[1]}>",
        to=f"{TO[0]} <{TO[1]}>",
        body=f"{PREVIEW}.\n",
        minutes=minutes,
    )


def _sealed_thread(store: Store) -> tuple[tuple[int, int, int], list[int]]:
    account = make_account(store, "me")
    raws = [
        ("1", _mail("first@sealed")),
        (
            "2",
            make_message(
                "second@sealed",
                subject=f"Re: {SUBJECT}",
                in_reply_to="first@sealed",
                sender="Oswin <oswin@fair.example>",
                minutes=5,
            ),
        ),
    ]
    created = ingest(store, account, raws).created_ids
    with store.session() as session:
        assert all(session.scalars(select(Message.sealed)).all())
        (thread,) = set(session.scalars(select(Message.thread_id)).all())
        stored = session.scalar(select(Thread.subject).where(Thread.id == thread))
        assert "mrf1." not in str(stored)
    return account, created


def test_read_models_open_sealed_columns(sealed_store: Store) -> None:
    account, (first, second) = _sealed_thread(sealed_store)
    user = account[0]
    with sealed_store.session() as session:
        listed = {row["id"]: row for row in list_messages(session, user)}
        assert listed[first]["subject"] == SUBJECT
        assert (listed[first]["from_name"], listed[first]["from"]) == SENDER
        assert listed[first]["message_id"] == "first@sealed"
        detail = message_detail(session, user, first)
        assert detail["to"] == [list(TO)] and detail["preview"].startswith(PREVIEW)
        (thread,) = newest_threads(session, user)
        assert thread["subject"] == SUBJECT  # the oldest message's, opened
        assert thread["senders"] == [SENDER[0], "Oswin"]
        (row,) = thread_rows(
            session,
            user,
            session.execute(
                select(
                    Thread.id,
                    Thread.subject,
                    Thread.message_count,
                    Thread.unread_count,
                    Thread.last_message_at,
                    Thread.category,
                )
            ).all(),
        )
        assert row.subject == SUBJECT and row.senders[0][0] == SENDER[0]
        assert row.preview.startswith("Hi there")  # the newest message's preview
        everything = str([listed, detail, thread, row])
    assert "mrf1." not in everything and second in listed


def test_a_reader_without_keys_says_so(sealed_store: Store) -> None:
    if sealed_store.dialect != "sqlite":
        pytest.skip("the standard-library reader reads SQLite files only")
    account, _ = _sealed_thread(sealed_store)
    reader = SqliteReader(Path(make_url(sealed_store.engine.url).database or ""))
    try:
        for read in (list_messages, newest_threads):
            with pytest.raises(SealedWithoutKeys, match="sealed"):
                read(reader, account[0])
    finally:
        reader.connection.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A recording HTTP receiver on 127.0.0.1 (as the webhook tests use)."""
    server = Receiver()
    yield server
    server.down()


@pytest.fixture
def web(sealed_store: Store) -> Iterator[str]:
    """The web application over the sealing store."""
    yield from serve(create_app(sealed_store))


def test_web_pages_show_opened_columns(sealed_store: Store, web: str) -> None:
    _sealed_thread(sealed_store)
    add_user(sealed_store, "me")
    client = browser(web)
    assert sign_in(client, web, "me").status_code == 303
    with sealed_store.session() as session:
        (thread,) = session.scalars(select(Thread.id)).all()
    try:
        inbox = client.get("/")
        rule = {"csrf": csrf_of(inbox.text), "subject": "hangar", "archive": "on"}
        pages = {
            "inbox": inbox,
            "rule test": client.post("/settings/rules/test", data=rule),
            "thread": client.get(f"/threads/{thread}"),
            "search": client.get("/search", params={"q": "from:stroud"}),
            "subject search": client.get("/search", params={"q": "subject:hangar"}),
        }
    finally:
        client.close()
    for name, page in pages.items():
        assert page.status_code == 200, name
        assert "mrf1." not in page.text, name
        assert SUBJECT in page.text.replace("<mark>", "").replace("</mark>", ""), name
    assert "Wilhelmina" in pages["inbox"].text and "(no subject)" not in pages["inbox"].text
    assert f"<title>{SUBJECT}" in pages["thread"].text
    assert "<mark>hangar</mark>" in pages["subject search"].text
    assert "matches 2 messages already in your mail" in pages["rule test"].text
    assert TO[0] in pages["thread"].text


def test_webhook_events_carry_opened_columns(
    sealed_store: Store, tmp_path: Path, receiver: Receiver
) -> None:
    settings = hook_settings(tmp_path)
    account = make_account(sealed_store, "me")
    endpoint_for(sealed_store, settings, receiver.url, account[0])
    with sealed_store.session() as session:
        from mailroom.store.models import Account, utcnow

        row = session.get(Account, account[1])
        assert row is not None
        row.import_finished_at = utcnow()
    ingest(sealed_store, account, [("1", _mail("hooked@sealed"))])
    worker = WebhookWorker(sealed_store, settings, clock=Clock())
    worker.run_once()
    worker.close()
    events = [json.loads(request.body) for request in receiver.requests]
    (event,) = [event for event in events if event["type"] == "messageNew"]
    assert event["data"]["subject"] == SUBJECT
    assert event["data"]["messageId"] == "hooked@sealed"
    assert event["data"]["from"] == {"name": SENDER[0], "email": SENDER[1]}


def test_the_cli_lists_searches_and_shows_sealed_mail(store: Store, tmp_path: Path) -> None:
    """`mailroom list`, `search` and `show` open sealed rows with the installation's key
    (the bare SQLite reader has none: the command reads again through the store)."""
    import base64
    import os

    from click.testing import CliRunner

    from mailroom.cli.main import cli
    from mailroom.crypto import MasterKeyWrapper
    from mailroom.crypto.sealing import MailSealing

    key = os.urandom(32)
    store.sealing = MailSealing(MasterKeyWrapper(key), seal_new_mail=True)
    _, (first, _second) = _sealed_thread(store)
    url = store.engine.url.render_as_string(hide_password=False)
    with_key = {
        "MAILROOM_DATA_DIR": str(tmp_path / "data"),
        "MAILROOM_MASTER_KEY": base64.urlsafe_b64encode(key).decode(),
    }

    def run(*args: str, env: dict[str, str] = with_key) -> str:
        result = CliRunner().invoke(cli, ["--database-url", url, *args], env=env)
        assert "Traceback" not in result.output, result.output
        return result.output

    for args in (["list", "--owner", "me"], ["search", "hangar", "--owner", "me"]):
        said = run(*args, "--format", "jsonl")
        assert SUBJECT in said and SENDER[1] in said and "mrf1." not in said, said
        assert "first@sealed" in said
    shown = run("show", str(first), "--owner", "me")
    assert SUBJECT in shown and TO[1] in shown and "mrf1." not in shown
    keyless = run("list", "--owner", "me", env={"MAILROOM_DATA_DIR": with_key["MAILROOM_DATA_DIR"]})
    assert "sealed" in keyless and "mrf1." not in keyless and SUBJECT not in keyless


def test_without_keys_jmap_and_the_web_say_so_in_a_sentence(sealed_store: Store) -> None:
    """Sealed mail served by a process that has no key: one sentence, never a 500 or ciphertext."""
    from tests.jmap.conftest import Jmap, email_id, run_server, seed

    alice = seed(sealed_store, "alice")
    sealed_store.sealing = None  # this process was started without MAILROOM_MASTER_KEY_FILE
    for server in run_server(sealed_store):
        with Jmap(server, alice) as client:
            got = client.call(
                "Email/get", {"ids": [email_id(alice.messages["hello"])], "properties": ["subject"]}
            )
            queried = client.call("Email/query", {"filter": {"subject": "walrus"}})
        client = browser(server.base)
        assert sign_in(client, server.base, "alice").status_code == 303
        inbox = client.get("/")
        client.close()
    for answer in (got, queried):
        assert answer["error"]["type"] == "serverFail", answer
        assert "sealed" in answer["error"]["description"] and "mrf1." not in str(answer)
    assert inbox.status_code == 422 and "sealed" in inbox.text
    assert "mrf1." not in inbox.text and "Traceback" not in inbox.text
