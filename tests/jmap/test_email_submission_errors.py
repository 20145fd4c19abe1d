"""Every way EmailSubmission/set refuses (RFC 8621 §7.5), over HTTP on both stores.

Each refusal is a SetError with a description, and nothing reaches the sink.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from mailroom.jmap.identities import sync_identities
from mailroom.jmap.submission_envelope import is_mailbox
from mailroom.store.engine import Store
from mailroom.store.models import Account, Identity
from tests.factories import make_message
from tests.jmap.conftest import Person, email_id, uploaded
from tests.jmap.email_submission_helpers import ALICE, Sending, start_sending

BOB = {"email": "bob@example.net", "parameters": None}


@pytest.fixture
def strict(store: Store, alice: Person, tmp_path: Path) -> Iterator[Sending]:
    """Alice sends through a sink with small limits: 2 recipients, 4000 octets."""
    yield from start_sending(
        store, alice, tmp_path, send_max_recipients=2, submission_max_bytes=4000
    )


def refusal(sending: Sending, email: str, **more: Any) -> dict[str, Any]:
    """The SetError of submitting ``email`` (which must be refused)."""
    answer = sending.submit(email, **more)
    assert answer["created"] is None, answer
    error: dict[str, Any] = answer["notCreated"]["s"]
    assert error["description"], error
    return error


def envelope(
    mail_from: str = ALICE, rcpt: list[dict[str, Any]] | None = None, **params: str
) -> Any:
    """An Envelope from ``mail_from`` (with these MAIL FROM parameters) to Bob or ``rcpt``."""
    return {
        "mailFrom": {"email": mail_from, "parameters": params or None},
        "rcptTo": [BOB] if rcpt is None else rcpt,
    }


def imported(sending: Sending, raw: bytes) -> str:
    """Email/import ``raw`` into Drafts; its Email id."""
    blob = uploaded(sending.client, raw)
    done = sending.call(
        "Email/import",
        emails={"i": {"blobId": blob, "mailboxIds": {sending.mailbox("drafts"): True}}},
    )
    return str(done["created"]["i"]["id"])


def test_properties_identity_and_email_must_be_given_and_yours(
    strict: Sending, store: Store, bob: Person
) -> None:
    """Unknown or server-set properties, and ids that are not the user's: invalidProperties."""
    draft = strict.create_draft()
    with store.session() as session:
        account = session.get(Account, bob.account_id)
        assert account is not None
        account.settings = {"email": "bob@example.net"}
        session.flush()
        sync_identities(session, bob.user_id, bob.name)
        bobs = session.scalar(select(Identity.id).where(Identity.user_id == bob.user_id))
    (identity,) = strict.call("Identity/get")["list"]  # Alice sees only her own
    assert identity["id"] != f"I{bobs}"
    mine = {"identityId": identity["id"], "emailId": draft}
    cases: list[tuple[dict[str, Any], list[str]]] = [
        ({**mine, "sendAt": "2030-01-01T00:00:00Z"}, ["sendAt"]),
        ({**mine, "color": "red"}, ["color"]),
        ({"emailId": draft}, ["identityId"]),
        ({**mine, "identityId": "I999999"}, ["identityId"]),
        ({**mine, "identityId": f"I{bobs}"}, ["identityId"]),
        ({"identityId": identity["id"]}, ["emailId"]),
        ({**mine, "emailId": email_id(bob.messages["hello"])}, ["emailId"]),
        ({**mine, "emailId": "#nothing"}, ["emailId"]),
        ({**mine, "envelope": {"mailFrom": ALICE}}, ["envelope"]),
    ]
    creations = {f"c{n}": values for n, (values, _) in enumerate(cases)}
    creations["odd"] = "not an object"  # type: ignore[assignment]
    creations["fine"] = {
        "identityId": identity["id"],
        "emailId": draft,
        "undoStatus": "pending",
        "deliveryStatus": None,
    }
    answer = strict.call("EmailSubmission/set", create=creations)
    for n, (_, properties) in enumerate(cases):
        error = answer["notCreated"][f"c{n}"]
        assert (error["type"], error["properties"]) == ("invalidProperties", properties), n
    assert answer["notCreated"]["odd"]["type"] == "invalidProperties"
    assert list(answer["created"]) == ["fine"]
    assert strict.run_lane() == 1


def test_message_size_from_and_message_id(strict: Sending) -> None:
    """tooLarge with maxSize; invalidEmail without From or Message-ID."""
    big = strict.create_draft(bodyValues={"b": {"value": "walrus " * 1000}})
    error = refusal(strict, big)
    assert (error["type"], error["maxSize"]) == ("tooLarge", 4000)
    no_from = strict.create_draft(**{"from": None})
    error = refusal(strict, no_from)
    assert (error["type"], error["properties"]) == ("invalidEmail", ["from"])
    raw = make_message("x@y", sender=f"Alice <{ALICE}>").replace(b"Message-ID: <x@y>\n", b"")
    assert b"Message-ID" not in raw
    error = refusal(strict, imported(strict, raw))
    assert (error["type"], error["properties"]) == ("invalidEmail", ["messageId"])
    assert strict.run_lane() == 0 and strict.sink.messages == []


def test_from_and_envelope_sender_must_be_yours(strict: Sending, store: Store) -> None:
    """forbiddenFrom for a stranger's From or another identity's; forbiddenMailFrom likewise."""
    with store.session() as session:
        account = session.get(Account, strict.person.account_id)
        assert account is not None
        account.settings = {**(account.settings or {}), "aliases": ["al@example.org"]}
    alias = strict.call("Identity/set", create={"a": {"email": "al@example.org"}})["created"]["a"]
    stranger = strict.create_draft(**{"from": [{"name": "Eve", "email": "eve@evil.example"}]})
    assert refusal(strict, stranger)["type"] == "forbiddenFrom"
    both = strict.create_draft(
        **{"from": [{"name": None, "email": ALICE}, {"name": None, "email": "eve@evil.example"}]}
    )
    assert refusal(strict, both)["type"] == "forbiddenFrom"
    mine = strict.create_draft()
    other_identity = strict.call(
        "EmailSubmission/set", create={"s": {"identityId": alias["id"], "emailId": mine}}
    )
    assert other_identity["notCreated"]["s"]["type"] == "forbiddenFrom"
    error = refusal(strict, mine, envelope=envelope("eve@evil.example"))
    assert error["type"] == "forbiddenMailFrom"
    assert refusal(strict, mine, envelope=envelope(""))["type"] == "forbiddenMailFrom"
    from_alias = strict.submit(mine, envelope=envelope("al@example.org"))
    assert from_alias["created"], from_alias  # any of the user's addresses may be MAIL FROM
    assert strict.run_lane() == 1
    assert strict.sink.messages[0].mail_from == "al@example.org"


def test_recipients_present_valid_and_not_too_many(strict: Sending) -> None:
    """noRecipients, invalidRecipients listing them, tooManyRecipients with maxRecipients."""
    nobody = strict.create_draft(to=None)
    assert refusal(strict, nobody)["type"] == "noRecipients"
    draft = strict.create_draft()
    assert refusal(strict, draft, envelope=envelope(rcpt=[]))["type"] == "noRecipients"
    bad = [{"email": "bob", "parameters": None}, BOB, {"email": "a b@x.org", "parameters": None}]
    error = refusal(strict, draft, envelope=envelope(rcpt=bad))
    assert (error["type"], error["invalidRecipients"]) == (
        "invalidRecipients",
        ["bob", "a b@x.org"],
    )
    in_headers = strict.create_draft(
        to=[{"name": None, "email": "bob"}, {"name": None, "email": "c@d.org"}]
    )
    error = refusal(strict, in_headers)
    assert (error["type"], error["invalidRecipients"]) == ("invalidRecipients", ["bob"])
    many = strict.create_draft(
        cc=[{"name": None, "email": "c@example.org"}, {"name": None, "email": "d@example.org"}]
    )
    error = refusal(strict, many)
    assert (error["type"], error["maxRecipients"]) == ("tooManyRecipients", 2)
    twice = [BOB, {"email": "BOB@example.net", "parameters": None}]
    assert strict.submit(draft, envelope=envelope(rcpt=twice))["created"]  # one recipient
    assert strict.run_lane() == 1
    assert strict.sink.messages[0].rcpt_tos == ("bob@example.net",)


def test_an_account_without_an_outgoing_server_is_forbidden_to_send(
    strict: Sending, store: Store
) -> None:
    """forbiddenToSend names the command that gives the account its server."""
    draft = strict.create_draft()
    with store.session() as session:
        account = session.get(Account, strict.person.account_id)
        assert account is not None
        account.settings = {k: v for k, v in (account.settings or {}).items() if k != "smtp"}
    error = refusal(strict, draft)
    assert error["type"] == "forbiddenToSend"
    assert "mailroom account update" in error["description"]


def test_futurerelease_parameters_are_checked(strict: Sending) -> None:
    """HOLDFOR and HOLDUNTIL: one of them, well-formed, within maxDelayedSend."""
    draft = strict.create_draft()
    for params in (
        {"HOLDFOR": "60", "HOLDUNTIL": "2030-01-01T00:00:00Z"},
        {"HOLDFOR": "soon"},
        {"HOLDFOR": str(31 * 86400)},
        {"HOLDUNTIL": "tomorrow"},
        {"HOLDUNTIL": "2030-01-01"},
    ):
        error = refusal(strict, draft, envelope=envelope(**params))
        assert (error["type"], error["properties"]) == ("invalidProperties", ["envelope"]), params
    past = strict.submit(draft, envelope=envelope(HOLDUNTIL="2000-01-01T00:00:00Z"))
    assert past["created"]["s"]["undoStatus"] == "pending"
    assert strict.run_lane() == 1  # a hold that ended already is none


def test_futurerelease_is_refused_when_the_operator_allows_no_hold(
    store: Store, alice: Person, tmp_path: Path
) -> None:
    """MAILROOM_SEND_MAX_DELAY_SECONDS=0: maxDelayedSend 0, no extension, HOLDFOR refused."""
    for sending in start_sending(store, alice, tmp_path, send_max_delay_seconds=0):
        account = sending.client.session["accounts"][sending.client.account]
        offered = account["accountCapabilities"]["urn:ietf:params:jmap:submission"]
        assert offered == {"maxDelayedSend": 0, "submissionExtensions": {}}
        error = refusal(sending, sending.create_draft(), envelope=envelope(HOLDFOR="10"))
        assert error["type"] == "invalidProperties"


def test_the_same_message_is_submitted_once(strict: Sending) -> None:
    """A second submission of one Message-ID is alreadyExists; after a cancel it is allowed."""
    draft = strict.create_draft()
    first = strict.submit(draft)["created"]["s"]
    error = refusal(strict, draft)
    assert (error["type"], error["existingId"]) == ("alreadyExists", first["id"])
    strict.call("EmailSubmission/set", update={first["id"]: {"undoStatus": "canceled"}})
    again = strict.submit(draft)["created"]["s"]
    assert again["id"] != first["id"]
    both = strict.call("EmailSubmission/get", ids=[first["id"], again["id"]])["list"]
    assert [s["undoStatus"] for s in both] == ["canceled", "pending"]  # the record stays
    assert strict.run_lane() == 1 and len(strict.sink.messages) == 1


def test_updates_only_cancel_and_destroys_only_finished(strict: Sending) -> None:
    """update: undoStatus canceled only; destroy: sent or canceled ones only."""
    pending = strict.submit(strict.create_draft())["created"]["s"]["id"]
    answer = strict.call(
        "EmailSubmission/set",
        update={
            pending: {"undoStatus": "final"},
            "S999999": {"undoStatus": "canceled"},
            "#nothing": {"undoStatus": "canceled"},
        },
        destroy=[pending, "S999999"],
    )
    assert answer["notUpdated"][pending]["type"] == "invalidProperties"
    assert answer["notUpdated"]["S999999"]["type"] == "notFound"
    assert answer["notUpdated"]["#nothing"]["type"] == "notFound"
    assert answer["notDestroyed"][pending]["type"] == "forbidden"
    assert answer["notDestroyed"]["S999999"]["type"] == "notFound"
    (current,) = strict.call("EmailSubmission/get", ids=[pending])["list"]
    same = {k: current[k] for k in ("emailId", "identityId", "envelope")}
    changed = strict.call(
        "EmailSubmission/set",
        update={pending: {**same, "undoStatus": "pending"}},  # the values it has: accepted
    )
    assert changed["updated"] == {pending: None}
    moved = strict.call("EmailSubmission/set", update={pending: {"emailId": "M1"}})
    assert moved["notUpdated"][pending]["properties"] == ["emailId"]
    assert strict.run_lane() == 1
    state = strict.call("EmailSubmission/get", ids=[])["state"]
    forgotten = strict.call("EmailSubmission/set", destroy=[pending])
    assert forgotten["destroyed"] == [pending]
    assert strict.call("EmailSubmission/get", ids=[pending])["notFound"] == [pending]
    changes = strict.call("EmailSubmission/changes", sinceState=state)
    assert changes["destroyed"] == [pending]


def test_on_success_destroy_email_and_bad_arguments(strict: Sending) -> None:
    """onSuccessDestroyEmail destroys the sent email; nothing succeeded, no Email/set follows."""
    draft = strict.create_draft()
    identity = strict.identity()
    responses = strict.calls(
        [
            "EmailSubmission/set",
            {
                "create": {
                    "ok": {"identityId": identity, "emailId": draft},
                    "no": {"identityId": "I999999", "emailId": draft},
                },
                "onSuccessDestroyEmail": ["#ok", "#no"],
            },
            "a",
        ],
        [
            "EmailSubmission/set",
            {
                "create": {"no": {"identityId": "I999999", "emailId": draft}},
                "onSuccessUpdateEmail": {"#no": {"keywords/$seen": None}},
            },
            "b",
        ],
        ["EmailSubmission/set", {"onSuccessUpdateEmail": ["#ok"]}, "c"],
        ["EmailSubmission/set", {"onSuccessDestroyEmail": {"#ok": True}}, "d"],
    )
    assert [(r[0], r[2]) for r in responses] == [
        ("EmailSubmission/set", "a"),
        ("Email/set", "a"),
        ("EmailSubmission/set", "b"),
        ("error", "c"),
        ("error", "d"),
    ]
    assert responses[1][1]["destroyed"] == [draft]
    assert responses[3][1]["type"] == responses[4][1]["type"] == "invalidArguments"
    assert strict.call("Email/get", ids=[draft])["notFound"] == [draft]
    assert strict.run_lane() == 1  # the submission does not depend on its email


def test_mailbox_syntax() -> None:
    """What counts as an address one can send to (RFC 5321 Mailbox, SMTPUTF8)."""
    good = [
        "a@b.example",
        "first.last+tag@sub.example.org",
        '"a b"@x.org',
        "ü@bücher.de",
        "a@[192.0.2.1]",
    ]
    bad = [
        "a",
        "a@",
        "@b.org",
        "a b@c.org",
        "a..b@c.org",
        "a@-b.org",
        "a@b-.org",
        f"{'x' * 65}@y.org",
    ]
    assert all(is_mailbox(email) for email in good)
    assert not any(is_mailbox(email) for email in bad)
