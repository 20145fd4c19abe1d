"""``mailroom send``: a script's message, composed and queued as one of the user's identities."""

from __future__ import annotations

from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import default
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import select

from mailroom.cli.main import cli
from mailroom.owners import get_or_create_account, get_user
from mailroom.store.engine import Store
from mailroom.store.models import Identity
from tests.outbound.port_support import add_people, submissions


@pytest.fixture
def people(store: Store) -> Store:
    """The store with me (work: me@example.org, alias@example.org) and eve."""
    add_people(store)
    return store


def send(store: Store, tmp_path: Path, *args: str, body: str = "Hello Bob,\nGrüße.\n") -> Result:
    """Run ``mailroom send ARGS`` on the store with ``body`` on standard input."""
    url = store.engine.url.render_as_string(hide_password=False)
    return CliRunner().invoke(
        cli,
        ["--data-dir", str(tmp_path), "--database-url", url, "send", *args],
        input=body.encode(),
    )


def _parsed(raw: bytes) -> EmailMessage:
    message = BytesParser(policy=default).parsebytes(raw)
    assert isinstance(message, EmailMessage)
    return message


def _identity_id(store: Store, email: str) -> int:
    with store.session() as session:
        found = session.scalar(select(Identity.id).where(Identity.email == email))
    assert found is not None
    return found


def test_send_queues_a_composed_message_and_prints_its_id(people: Store, tmp_path: Path) -> None:
    """To, Cc and Bcc go in the envelope; Bcc is not in the bytes; the id is all it prints."""
    done = send(
        people,
        tmp_path,
        "--to",
        "Bob <bob@example.net>, carol@example.net",
        "--cc",
        "dan@example.net",
        "--bcc",
        "secret@example.com",
        "--subject",
        "Nightly report",
    )
    assert done.exit_code == 0, done.output
    ((row, raw),) = submissions(people)
    assert done.stdout == f"{row.id}\n"
    assert row.lane == "calm" and row.state == "queued"
    assert row.identity_id == _identity_id(people, "me@example.org")
    assert row.envelope["mailFrom"]["email"] == "me@example.org"
    assert [r["email"] for r in row.envelope["rcptTo"]] == [
        "bob@example.net",
        "carol@example.net",
        "dan@example.net",
        "secret@example.com",
    ]
    message = _parsed(raw)
    assert message["From"] == "Me <me@example.org>" and message["Bcc"] is None
    assert message["Subject"] == "Nightly report" and message["Message-ID"].endswith("example.org>")
    assert message.get_content().replace("\r\n", "\n") == "Hello Bob,\nGrüße.\n"


def test_kind_lane_from_and_attachments(people: Store, tmp_path: Path) -> None:
    """--kind invoice goes urgent, --lane direct goes direct, --from picks the alias identity."""
    report = tmp_path / "report.pdf"
    report.write_bytes(b"%PDF-1.4 not really\x00\xff")
    for choice in (("--kind", "invoice"), ("--lane", "direct")):
        done = send(people, tmp_path, "--to", "bob@example.net", "--subject", choice[1], *choice)
        assert done.exit_code == 0, done.output
    done = send(
        people,
        tmp_path,
        "--to",
        "bob@example.net",
        "--subject",
        "c",
        "--from",
        "ALIAS@example.org",
        "--attach",
        str(report),
    )
    assert done.exit_code == 0, done.output
    first, second, third = submissions(people)
    assert (first[0].lane, first[0].kind) == ("urgent", "invoice")
    assert second[0].lane == "direct"
    assert third[0].identity_id == _identity_id(people, "alias@example.org")
    message = _parsed(third[1])
    assert message.get_content_type() == "multipart/mixed"
    (attachment,) = message.iter_attachments()
    assert attachment.get_filename() == "report.pdf"
    assert attachment.get_content_type() == "application/pdf"
    assert attachment.get_content() == b"%PDF-1.4 not really\x00\xff"


BASIC = ("--to", "b@example.net", "--subject", "x")


@pytest.mark.parametrize(
    ("args", "body", "words"),
    [
        (("--to", "bob", "--subject", "x"), "hi", "'bob' is not an email address"),
        (("--cc", "bob@", "--subject", "x"), "hi", "--cc 'bob@' is not an email address"),
        (("--subject", "x"), "hi", "at least one recipient"),
        ((*BASIC, "--account", "nope"), "hi", "You have no account called 'nope'"),
        ((*BASIC, "--from", "eve@example.org"), "hi", "is not one of your addresses"),
        (BASIC, "  \n", "body on standard input is empty"),
        ((*BASIC, "--kind", "a", "--lane", "calm"), "hi", "not both"),
        ((*BASIC, "--attach", "/no/such"), "hi", "does not exist"),
    ],
)
def test_mistakes_are_one_plain_sentence(
    people: Store, tmp_path: Path, args: tuple[str, ...], body: str, words: str
) -> None:
    """A bad address, an unknown account or identity, a missing body: exit 1, one line."""
    done = send(people, tmp_path, *args, body=body)
    assert done.exit_code == 1
    assert done.stderr.startswith("mailroom: ") and len(done.stderr.strip().splitlines()) == 1
    assert words in done.stderr
    assert submissions(people) == []


def test_with_several_accounts_the_account_must_be_named(people: Store, tmp_path: Path) -> None:
    """Two accounts with addresses: no guess; --account picks its default identity."""
    with people.session() as session:
        me = get_user(session, "me")
        get_or_create_account(session, me, "club", "local", {"email": "me@club.example"})
    done = send(people, tmp_path, "--to", "bob@example.net", "--subject", "x")
    assert done.exit_code == 1 and "several accounts" in done.stderr
    done = send(people, tmp_path, "--to", "bob@example.net", "--subject", "x", "--account", "club")
    assert done.exit_code == 0, done.output
    ((row, raw),) = submissions(people)
    assert row.identity_id == _identity_id(people, "me@club.example")
    assert _parsed(raw)["From"] == "me <me@club.example>"
