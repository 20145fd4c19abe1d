"""Real JMAP clients from PyPI drive the server: jmaplib over http, jmapc over https.

Both do what a mail app does: list mailboxes, read the inbox collapsed by
thread, fetch emails and threads, set $seen/$flagged, move to Trash, follow
Email/changes and Thread/changes from an old state to the new one, and get
a push event after a change.
"""

from __future__ import annotations

import queue
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.jmap.conftest import PASSWORD, Person, Server


def test_jmaplib_over_http(server: Server, alice: Person) -> None:
    """jmaplib (JMAPClient, typed batches, patches, EventSourceClient) works end to end."""
    from jmap.auth import BasicAuth, BearerAuth
    from jmap.client import JMAPClient
    from jmap.core.patch import keyword_patch, mailbox_patch
    from jmap.models.push import StateChange
    from jmap.push import EventSourceClient

    url = f"{server.base}/.well-known/jmap"
    with JMAPClient.connect(url, auth=BasicAuth("alice", PASSWORD)) as client:
        assert client.echo(hello="walrus") == {"hello": "walrus"}
        with client.batch() as batch:
            mailboxes = batch.mail.mailbox.get(ids=None)
        by_role = {m.role: m for m in mailboxes.result.items}
        inbox, trash = by_role["inbox"], by_role["trash"]
        assert (inbox.total_emails, inbox.unread_emails, inbox.total_threads) == (4, 4, 3)

        with client.batch() as batch:
            found = batch.mail.email.query(
                filter={"inMailbox": inbox.id},
                sort=[{"property": "receivedAt", "isAscending": False}],
                collapseThreads=True,
                limit=10,
                calculate_total=True,
            )
            emails = batch.mail.email.get(
                ids=found.ref_ids(), properties=["subject", "from", "threadId", "keywords"]
            )
            threads = batch.mail.thread.get(ids=emails.ref_list("threadId"))
        assert found.result.total == 3
        subjects = [e.subject for e in emails.result.items]
        assert subjects == ["Quarterly report", "Lunch plans", "Re: Hello walrus"]
        assert sorted(len(t.email_ids) for t in threads.result.items) == [1, 1, 2]
        old_email, old_thread = emails.result.state, threads.result.state
        report, lunch, reply = (e.id for e in emails.result.items)

        pushed: queue.Queue[Any] = queue.Queue()

        def listen() -> None:
            events = EventSourceClient(client, types=("Email", "Mailbox", "Thread"), ping=30)
            stream = events.events()
            try:
                for event in stream:
                    if isinstance(event, StateChange):
                        pushed.put(event)
                        return
            finally:
                stream.close()

        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        time.sleep(0.3)

        with JMAPClient.connect(url, auth=BearerAuth(alice.token)) as other:
            with other.batch() as batch:
                seen = batch.mail.email.set(
                    update={report: keyword_patch(add=["$seen", "$flagged"])}
                )
                moved = batch.mail.email.set(
                    update={reply: mailbox_patch(add=[trash.id], remove=[inbox.id])}
                )
            assert not seen.result.has_errors and not moved.result.has_errors

        event = pushed.get(timeout=10)
        listener.join(timeout=10)
        assert alice.jmap_account in event.changed

        with client.batch() as batch:
            email_changes = batch.mail.email.changes(since_state=old_email)
            thread_changes = batch.mail.thread.changes(since_state=old_thread)
            now = batch.mail.email.get(
                ids=[report, reply, lunch], properties=["keywords", "mailboxIds"]
            )
            now_threads = batch.mail.thread.get(ids=[])
        assert set(email_changes.result.updated) == {report, reply}
        assert email_changes.result.new_state == now.result.state
        assert thread_changes.result.new_state == now_threads.result.state
        assert len(thread_changes.result.updated) == 2
        by_id = {e.id: e for e in now.result.items}
        assert by_id[report].keywords == {"$seen": True, "$flagged": True}
        assert by_id[reply].mailbox_ids == {trash.id: True}
        pushed_state = event.changed[alice.jmap_account]["Email"]
        assert int(old_email) < int(pushed_state) <= int(now.result.state)


def _jmapc_events(client: Any, out: queue.Queue[Any]) -> None:
    for event in client.events:
        out.put(event)
        return


def test_jmapc_over_https(
    tls_server: Server, alice: Person, monkeypatch: pytest.MonkeyPatch
) -> None:
    """jmapc (requests + sseclient) over https with a self-signed certificate trusted by env."""
    from jmapc import Client, Comparator, EmailQueryFilterCondition, Ref
    from jmapc.methods import (
        EmailChanges,
        EmailGet,
        EmailQuery,
        EmailSet,
        MailboxGet,
        ThreadChanges,
        ThreadGet,
    )

    assert isinstance(tls_server.verify, str)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", tls_server.verify)
    assert Path(tls_server.verify).is_file()
    host = tls_server.base.removeprefix("https://")
    client = Client.create_with_password(host, "alice", PASSWORD)
    assert client.jmap_session.api_url.startswith("https://")

    mailboxes = client.request(MailboxGet(ids=None))
    by_role = {m.role: m for m in mailboxes.data}
    inbox, trash = by_role["inbox"], by_role["trash"]
    assert inbox.total_threads == 3 and inbox.unread_emails == 4

    found, emails, threads = client.request(
        [
            EmailQuery(
                filter=EmailQueryFilterCondition(in_mailbox=inbox.id),
                sort=[Comparator(property="receivedAt", is_ascending=False)],
                collapse_threads=True,
                limit=10,
            ),
            EmailGet(ids=Ref("/ids"), properties=["subject", "threadId", "mailboxIds", "keywords"]),
            ThreadGet(ids=Ref("/list/*/threadId")),
        ]
    )
    assert [e.subject for e in emails.response.data] == [
        "Quarterly report",
        "Lunch plans",
        "Re: Hello walrus",
    ]
    assert sorted(len(t.email_ids) for t in threads.response.data) == [1, 1, 2]
    old_email, old_thread = emails.response.state, threads.response.state
    report, _lunch, reply = (e.id for e in emails.response.data)

    pushed: queue.Queue[Any] = queue.Queue()
    listener = threading.Thread(target=_jmapc_events, args=(client, pushed), daemon=True)
    listener.start()
    time.sleep(0.5)

    flagged = client.request(
        EmailSet(update={report: {"keywords/$seen": True, "keywords/$flagged": True}})
    )
    moved = client.request(
        EmailSet(update={reply: {f"mailboxIds/{inbox.id}": None, f"mailboxIds/{trash.id}": True}})
    )
    # $flagged also puts the email in the Starred mailbox, which the server reports
    # as a property it changed itself (RFC 8620 section 5.3).
    starred = by_role["flagged"].id
    assert set(flagged.updated) == {report} and flagged.updated[report].mailbox_ids[starred]
    assert moved.updated == {reply: None}

    event = pushed.get(timeout=10)
    listener.join(timeout=10)
    client._events.resp.close()  # sseclient keeps the stream open; hang up
    assert event.data.changed[alice.jmap_account].email is not None

    email_changes, thread_changes, now = client.request(
        [
            EmailChanges(since_state=old_email),
            ThreadChanges(since_state=old_thread),
            EmailGet(ids=[report, reply], properties=["keywords", "mailboxIds"]),
        ]
    )
    assert set(email_changes.response.updated) == {report, reply}
    assert email_changes.response.new_state == now.response.state
    assert len(thread_changes.response.updated) == 2
    by_id = {e.id: e for e in now.response.data}
    assert by_id[report].keywords == {"$seen": True, "$flagged": True}
    assert by_id[reply].mailbox_ids == {trash.id: True}
    client.requests_session.close()
