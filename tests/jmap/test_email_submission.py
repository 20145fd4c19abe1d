"""EmailSubmission (RFC 8621 §7) end to end: a JMAP client sends a reply through a real sink.

Over real HTTP on both stores; the lane worker (``Sender.run_lane``) is run by
the test at the injected clock's time.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from email import message_from_bytes
from email.utils import format_datetime
from pathlib import Path
from typing import Any

from mailroom.outbound.bounces import recognise_bounces
from mailroom.store.engine import Store
from tests.helpers import ingest
from tests.jmap.conftest import Person, download, email_id
from tests.jmap.email_submission_helpers import ALICE, USING, Sending, start_sending
from tests.jmap.email_submission_helpers import sending as sending  # the fixture

CAPABILITY = "urn:ietf:params:jmap:submission"


def stamp(moment: datetime, seconds: int) -> str:
    """The UTCDate ``seconds`` after ``moment``."""
    return (moment + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def reply_draft(sending: Sending, alice: Person) -> dict[str, Any]:
    """Alice's reply to Bob's message ``reply@x``, with a Bcc to Carol."""
    return sending.draft(
        to=[{"name": "Bob", "email": "bob@example.net"}],
        cc=[{"name": None, "email": "dave@example.org"}],
        bcc=[{"name": "Carol", "email": "carol@example.com"}],
        subject="Re: Hello walrus",
        inReplyTo=["reply@x"],
        references=["hello@x", "reply@x"],
        bodyValues={"b": {"value": "Glad the walrus is well.\n"}},
    )


def test_reply_is_sent_moved_to_sent_threaded_and_answered(sending: Sending, alice: Person) -> None:
    """Draft, submit with onSuccessUpdateEmail, deliver, and see it everywhere it should be."""
    drafts, sent = sending.mailbox("drafts"), sending.mailbox("sent")
    identity = sending.identity()
    state = sending.call("EmailSubmission/get", ids=[])["state"]
    responses = sending.calls(
        ["Email/set", {"create": {"draft": reply_draft(sending, alice)}}, "0"],
        [
            "EmailSubmission/set",
            {
                "create": {"send": {"identityId": identity, "emailId": "#draft"}},
                "onSuccessUpdateEmail": {
                    "#send": {
                        f"mailboxIds/{drafts}": None,
                        f"mailboxIds/{sent}": True,
                        "keywords/$draft": None,
                    }
                },
            },
            "1",
        ],
        ["EmailSubmission/get", {"ids": ["#send"]}, "2"],
    )
    names = [(name, tag) for name, _, tag in responses]
    assert names == [
        ("Email/set", "0"),
        ("EmailSubmission/set", "1"),
        ("Email/set", "1"),  # the implicit Email/set follows with the same call id
        ("EmailSubmission/get", "2"),
    ]
    draft_id = responses[0][1]["created"]["draft"]["id"]
    created = responses[1][1]["created"]["send"]
    assert created["undoStatus"] == "pending" and created["id"].startswith("S")
    assert created["envelope"] == {
        "mailFrom": {"email": ALICE, "parameters": None},
        "rcptTo": [
            {"email": "bob@example.net", "parameters": None},
            {"email": "dave@example.org", "parameters": None},
            {"email": "carol@example.com", "parameters": None},
        ],
    }
    assert responses[1][1]["oldState"] == state != responses[1][1]["newState"]
    assert responses[2][1]["updated"] == {draft_id: None}
    (listed,) = responses[3][1]["list"]
    assert listed["emailId"] == draft_id and listed["identityId"] == identity
    assert listed["deliveryStatus"] is None and listed["dsnBlobIds"] == []
    moved = sending.call("Email/get", ids=[draft_id], properties=["mailboxIds", "keywords"])
    (email,) = moved["list"]
    assert email["mailboxIds"] == {sent: True}
    assert "$draft" not in email["keywords"]

    assert sending.run_lane() == 1
    (delivered,) = sending.sink.messages
    assert delivered.mail_from == ALICE
    assert sorted(delivered.rcpt_tos) == [
        "bob@example.net",
        "carol@example.com",
        "dave@example.org",
    ]
    parsed = message_from_bytes(delivered.data)
    assert parsed["Bcc"] is None and parsed["Subject"] == "Re: Hello walrus"
    assert parsed["In-Reply-To"] == "<reply@x>"

    (after,) = sending.call("EmailSubmission/get", ids=[created["id"]])["list"]
    assert after["undoStatus"] == "final"
    assert set(after["deliveryStatus"]) == {
        "bob@example.net",
        "dave@example.org",
        "carol@example.com",
    }
    for status in after["deliveryStatus"].values():
        assert status["smtpReply"] == "250 2.0.0 Ok: queued"
        assert status["delivered"] in ("queued", "yes")
        assert status["displayed"] == "unknown"
    changes = sending.call("EmailSubmission/changes", sinceState=responses[1][1]["newState"])
    assert changes["updated"] == [created["id"]] and changes["created"] == []

    replied = email_id(alice.messages["reply"])
    both = sending.call("Email/get", ids=[draft_id, replied], properties=["threadId", "keywords"])
    mine, theirs = both["list"]
    assert mine["threadId"] == theirs["threadId"] == after["threadId"]
    assert theirs["keywords"].get("$answered") is True


def test_cancel_within_the_undo_window_sends_nothing(
    store: Store, alice: Person, tmp_path: Path
) -> None:
    """A submission waits out the undo window; canceled in it, it never reaches the sink."""
    for setup in start_sending(store, alice, tmp_path, send_undo_seconds=30):
        first = setup.submit(setup.create_draft(subject="Oops"))["created"]["s"]
        second = setup.submit(setup.create_draft(subject="Fine"))["created"]["s"]
        assert first["undoStatus"] == second["undoStatus"] == "pending"
        assert setup.run_lane() == 0  # both still in their window
        canceled = setup.call(
            "EmailSubmission/set", update={first["id"]: {"undoStatus": "canceled"}}
        )
        assert canceled["updated"] == {first["id"]: None}
        setup.clock.advance(31)
        assert setup.run_lane() == 1
        (delivered,) = setup.sink.messages
        assert message_from_bytes(delivered.data)["Subject"] == "Fine"
        got = setup.call("EmailSubmission/get", ids=[first["id"], second["id"]])["list"]
        assert [s["undoStatus"] for s in got] == ["canceled", "final"]
        too_late = setup.call(
            "EmailSubmission/set", update={second["id"]: {"undoStatus": "canceled"}}
        )
        assert too_late["notUpdated"][second["id"]]["type"] == "cannotUnsend"
        setup.clock.advance(3600)
        assert setup.run_lane() == 0 and len(setup.sink.messages) == 1


def test_send_at_and_futurerelease_hold(store: Store, alice: Person, tmp_path: Path) -> None:
    """sendAt is the end of the undo window, or the HOLDFOR/HOLDUNTIL time; the lane waits."""
    for setup in start_sending(store, alice, tmp_path, send_undo_seconds=10):
        account = setup.client.session["accounts"][setup.client.account]
        offered = account["accountCapabilities"][CAPABILITY]
        assert offered["maxDelayedSend"] == 30 * 86400
        longest, latest = offered["submissionExtensions"]["FUTURERELEASE"]
        assert longest == str(30 * 86400) and latest.endswith("Z")
        now = setup.clock.now
        plain = setup.submit(setup.create_draft(subject="Now"))["created"]["s"]
        envelope = {
            "mailFrom": {"email": ALICE, "parameters": {"HOLDFOR": "3600"}},
            "rcptTo": [{"email": "bob@example.net", "parameters": None}],
        }
        held = setup.submit(setup.create_draft(subject="Later"), envelope=envelope)
        held = held["created"]["s"]
        assert "envelope" not in held  # given by the client, not the server's to report
        until = dict(
            envelope, mailFrom={"email": ALICE, "parameters": {"holduntil": "2099-01-01T00:00:00Z"}}
        )
        far = setup.submit(setup.create_draft(subject="Never"), envelope=until)
        assert far["notCreated"]["s"]["type"] == "invalidProperties"
        assert far["notCreated"]["s"]["properties"] == ["envelope"]

        assert plain["sendAt"] == stamp(now, 10) and held["sendAt"] == stamp(now, 3600)
        setup.clock.advance(11)
        assert setup.run_lane() == 1
        setup.clock.advance(3600)
        assert setup.run_lane() == 1
        subjects = [message_from_bytes(m.data)["Subject"] for m in setup.sink.messages]
        assert subjects == ["Now", "Later"]
        pending = setup.call("EmailSubmission/query", filter={"undoStatus": "pending"})
        assert pending["ids"] == []


def test_session_advertises_submission_in_the_account(sending: Sending) -> None:
    """The capability is server-wide and an account capability; Mailboxes allow submitting."""
    session = sending.client.session
    assert CAPABILITY in session["capabilities"]
    assert session["primaryAccounts"][CAPABILITY] == sending.client.account
    (inbox,) = sending.call("Mailbox/get", ids=[sending.mailbox("inbox")])["list"]
    assert inbox["myRights"]["maySubmit"] is True
    assert USING[-1] == CAPABILITY


def report(original: str, recipient: str, date: datetime) -> bytes:
    """A delivery status notification (RFC 3464) saying ``recipient`` failed for good."""
    text = (
        "From: Mail Delivery System <MAILER-DAEMON@mx.example.net>\n"
        f"To: {ALICE}\n"
        "Subject: Undelivered Mail Returned to Sender\n"
        "Message-ID: <bounce-1@mx.example.net>\n"
        f"Date: {format_datetime(date)}\n"
        "MIME-Version: 1.0\n"
        'Content-Type: multipart/report; report-type=delivery-status; boundary="BB"\n\n'
        "--BB\nContent-Type: text/plain\n\nYour message could not be delivered.\n\n"
        "--BB\nContent-Type: message/delivery-status\n\n"
        "Reporting-MTA: dns; mx.example.net\n\n"
        f"Final-Recipient: rfc822; {recipient}\nAction: failed\nStatus: 5.1.1\n"
        f"Diagnostic-Code: smtp; 550 5.1.1 <{recipient}>: User unknown\n\n"
        "--BB\nContent-Type: text/rfc822-headers\n\n"
        f"From: Alice <{ALICE}>\nTo: {recipient}\nSubject: Lunch?\nMessage-ID: <{original}>\n\n"
        "--BB--\n"
    )
    return text.encode().replace(b"\n", b"\r\n")


def test_a_bounce_reaches_delivery_status_and_dsn_blob_ids(sending: Sending, alice: Person) -> None:
    """A report arriving after the send marks its recipient and lists its blob."""
    draft = sending.create_draft(cc=[{"name": None, "email": "dave@example.org"}])
    created = sending.submit(draft)["created"]["s"]
    assert sending.run_lane() == 1
    (email,) = sending.call("Email/get", ids=[draft], properties=["messageId"])["list"]
    (original,) = email["messageId"]
    state = sending.call("EmailSubmission/get", ids=[])["state"]
    stored = ingest(
        sending.store,
        (alice.user_id, alice.account_id, alice.inbox),
        [("dsn", report(original, "bob@example.net", sending.clock.now))],
    )
    recognise_bounces(sending.store, stored.created_ids)
    (after,) = sending.call("EmailSubmission/get", ids=[created["id"]])["list"]
    assert after["dsnBlobIds"] == [f"R{stored.created_ids[0]}"]
    bob = after["deliveryStatus"]["bob@example.net"]
    assert bob["delivered"] == "no" and bob["smtpReply"].startswith("550 5.1.1")
    assert after["deliveryStatus"]["dave@example.org"]["delivered"] == "queued"
    assert after["undoStatus"] == "final"
    changes = sending.call("EmailSubmission/changes", sinceState=state)
    assert changes["updated"] == [created["id"]]
    assert download(sending.client, after["dsnBlobIds"][0]).content.startswith(b"From: Mail")
