"""The outbound queue of a sealed owner: nothing of whom they wrote to in clear, read as before.

Two owners of one store (both kinds) send the same two messages through a real
SMTP sink that refuses some recipients, and get the same delivery report back:
one while the store writes mail clear, one while it seals. What the failed list
(in-process and ``mailroom outbound failed``), JMAP EmailSubmission/get over
HTTP and the webhook payloads say must be the same for both, and the sealed
owner's raw ``submissions``, ``failed_sends`` and ``bounces`` rows must hold no
address, Message-ID or reply text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from mailroom.cli.main import cli
from mailroom.config import Settings
from mailroom.crypto.sealing import MailSealing, sealing_from_settings
from mailroom.outbound.bounces import recognise_bounces
from mailroom.outbound.failures import failed_list
from mailroom.secrets import generate_key
from mailroom.store.engine import Store
from mailroom.webhooks.worker import WebhookWorker
from tests.factories import make_message
from tests.helpers import ingest
from tests.jmap.conftest import Jmap, Person, Server, run_server, seed
from tests.jmap.email_submission_helpers import USING, give_outgoing
from tests.outbound.after_support import ME, send
from tests.outbound.test_after_bounces import ORIGINAL, dsn
from tests.support.smtp_sink import SmtpSink
from tests.webhooks.support import Receiver, endpoint_for

LOST = "lost-3@example.org"
REFUSALS = {
    "erin@example.net": "550 5.1.1 <erin@example.net>: Recipient address rejected: no such user",
    "dave@example.net": "550 5.1.1 <dave@example.net>: Recipient address rejected: mailbox gone",
}
# What no raw row of a sealed owner's queue may hold: addresses, Message-IDs, reply texts.
SECRETS = (
    "bob@example.net",
    "carol@example.net",
    "dave@example.net",
    "erin@example.net",
    ME,
    ORIGINAL,
    LOST,
    "Recipient address",
    "no such user",
    "mailbox gone",
    "try again later",
)
# Ids and moments differ between the two owners; everything else must not.
_IDS = {"id", "identityId", "emailId", "threadId", "sendAt", "dsnBlobIds", "submissionId"}
_IDS |= {"accountId", "bounceEmailId", "sentAt", "failedAt", "created", "failed_at"}
_IDS |= {"submission_id", "account"}
SUBMISSION_EVENTS = ("messageSent", "messageFailed", "messageBounced")


def hello_message() -> bytes:
    """Hello to Bob, Carol and Erin (whom the sink refuses); the report names Bob and Carol."""
    to = "bob@example.net, carol@example.net, erin@example.net"
    return make_message(ORIGINAL, subject="Hello", sender=f"Me <{ME}>", to=to)


def lost_message() -> bytes:
    """A message to Dave alone, whom the sink refuses: it fails at once."""
    return make_message(LOST, subject="Lost", sender=f"Me <{ME}>", to="dave@example.net")


@dataclass
class Outbound:
    """The store, its settings (with the master key), the sink, the receiver, the JMAP server."""

    store: Store
    settings: Settings
    sealing: MailSealing
    sink: SmtpSink
    receiver: Receiver
    server: Server

    def seal(self, on: bool) -> None:
        """Write new mail sealed (or clear) from now on; sealed mail opens either way."""
        self.store.sealing = replace(self.sealing, seal_new_mail=on)

    def owner(self, name: str, *, sealed: bool) -> Person:
        """A person whose mail is written as ``sealed`` says, sending to the sink."""
        self.seal(sealed)
        person = seed(self.store, name, prefix=f"{name}-")
        give_outgoing(self.store, person, self.sink, ME)
        endpoint_for(self.store, self.settings, self.receiver.url, person.user_id)
        return person

    def send_and_bounce(self, person: Person) -> dict[str, int]:
        """Hello (Erin refused), Lost (refused whole), then the report on Hello; their ids."""
        hello = send(self.store, self.settings, person.account_id, hello_message())
        lost = send(self.store, self.settings, person.account_id, lost_message())
        account = (person.user_id, person.account_id, person.inbox)
        stored = ingest(self.store, account, [("dsn", dsn())])
        recognise_bounces(self.store, stored.created_ids)
        return {"hello": hello, "lost": lost}


@pytest.fixture
def outbound(store: Store, tmp_path: Path) -> Iterator[Outbound]:
    """A store with a master key whose sealing the test switches, a refusing sink, a receiver."""
    settings = Settings(
        data_dir=tmp_path, master_key=generate_key(), allowed_private_hosts="127.0.0.1"
    )
    sealing = sealing_from_settings(settings)
    assert sealing is not None
    store.sealing = sealing
    receiver = Receiver()
    try:
        with SmtpSink() as sink:
            sink.refuse(REFUSALS)
            for server in run_server(store):
                yield Outbound(store, settings, sealing, sink, receiver, server)
    finally:
        receiver.down()


def _plain(value: Any) -> Any:
    """``value`` without the ids and moments that differ between owners, lists in order."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k not in _IDS}
    if isinstance(value, list):
        return sorted((_plain(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    return value


def _jmap_submissions(outbound: Outbound, person: Person) -> list[dict[str, Any]]:
    with Jmap(outbound.server, person) as client:
        answer = client.call("EmailSubmission/get", {"accountId": client.account}, using=USING)
    return list(answer["list"])


def _webhook_events(outbound: Outbound) -> list[dict[str, Any]]:
    worker = WebhookWorker(outbound.store, outbound.settings)
    try:
        while worker.run_once().attempts:
            pass
    finally:
        worker.close()
    return [json.loads(request.body) for request in outbound.receiver.requests]


def _cli_failed(outbound: Outbound) -> list[dict[str, Any]]:
    url = outbound.store.engine.url.render_as_string(hide_password=False)
    key = outbound.settings.master_key
    assert key is not None
    done = CliRunner().invoke(
        cli,
        ["--database-url", url, "--data-dir", str(outbound.store.data_dir)]
        + ["outbound", "failed", "--json"],
        env={"MAILROOM_MASTER_KEY": key.get_secret_value()},
        catch_exceptions=False,
    )
    assert done.exit_code == 0, done.output
    return [json.loads(line) for line in done.output.splitlines()]


def raw_rows(store: Store, owner: int) -> dict[str, list[str]]:
    """Every raw row of the owner's submissions, failed sends and bounces, as text."""
    of_owner = "submission_id IN (SELECT id FROM submissions WHERE user_id = :owner)"
    queries = {
        "submissions": "SELECT * FROM submissions WHERE user_id = :owner",
        "failed_sends": f"SELECT * FROM failed_sends WHERE {of_owner}",
        "bounces": f"SELECT * FROM bounces WHERE {of_owner}",
    }
    with store.session() as session:
        return {
            table: [" ".join(map(str, row)) for row in session.execute(text(sql), {"owner": owner})]
            for table, sql in queries.items()
        }


def _secrets_in(rows: dict[str, list[str]]) -> set[str]:
    found = " ".join(" ".join(texts) for texts in rows.values()).lower()
    return {secret for secret in SECRETS if secret.lower() in found}


def test_a_sealed_owners_queue_reads_as_a_clear_owners_and_holds_nothing_clear(
    outbound: Outbound,
) -> None:
    """Failed list, CLI, EmailSubmission/get and webhooks agree; the sealed rows name nobody."""
    clear = outbound.owner("clara", sealed=False)
    sealed = outbound.owner("selma", sealed=True)
    outbound.seal(False)
    clear_ids = outbound.send_and_bounce(clear)
    outbound.seal(True)
    sealed_ids = outbound.send_and_bounce(sealed)
    assert len(outbound.sink.messages) == 2  # Hello went (to Bob), Lost was refused whole

    # What readers see is the same for both owners, and what it should be.
    with outbound.store.session() as session:
        listed = {entry.submission_id: entry.as_json() for entry in failed_list(session)}
    assert set(listed) == {clear_ids["lost"], sealed_ids["lost"]}
    mine = listed[sealed_ids["lost"]]
    assert mine["messageId"] == LOST and mine["recipients"] == ["dave@example.net"]
    assert "mailbox gone" in mine["reason"] and mine["code"] == 550
    assert _plain(mine) == _plain(listed[clear_ids["lost"]])
    assert {e["id"]: e for e in _cli_failed(outbound)} == listed

    submissions = {p.name: _jmap_submissions(outbound, p) for p in (clear, sealed)}
    hello = next(s for s in submissions["selma"] if len(s["envelope"]["rcptTo"]) == 3)
    status = hello["deliveryStatus"]
    assert status["bob@example.net"]["delivered"] == "no"  # the report says so
    assert status["bob@example.net"]["smtpReply"].startswith("550 5.1.1 <bob@example.net>")
    assert status["carol@example.net"]["smtpReply"] == "451 4.4.1 try again later"
    assert status["erin@example.net"]["delivered"] == "no"  # refused when it was sent
    assert "no such user" in status["erin@example.net"]["smtpReply"]
    assert len(hello["dsnBlobIds"]) == 1
    assert _plain(submissions["selma"]) == _plain(submissions["clara"])
    assert "mrf1." not in json.dumps(submissions)

    events = [e for e in _webhook_events(outbound) if e["type"] in SUBMISSION_EVENTS]
    by_account = {
        person.account_id: [e for e in events if e["data"]["accountId"] == person.account_id]
        for person in (clear, sealed)
    }
    mine_events = by_account[sealed.account_id]
    assert sorted(e["type"] for e in mine_events) == sorted(SUBMISSION_EVENTS)
    failed_event = next(e for e in mine_events if e["type"] == "messageFailed")["data"]
    assert failed_event["messageId"] == LOST and failed_event["recipients"] == ["dave@example.net"]
    assert "mailbox gone" in failed_event["reason"]
    bounced = next(e for e in mine_events if e["type"] == "messageBounced")["data"]
    assert [r["recipient"] for r in bounced["report"]] == ["bob@example.net", "carol@example.net"]
    assert _plain(mine_events) == _plain(by_account[clear.account_id])

    # The raw rows: the clear owner's name everyone, the sealed owner's nobody.
    clear_rows, sealed_rows = (
        raw_rows(outbound.store, clear.user_id),
        raw_rows(outbound.store, sealed.user_id),
    )
    for rows in (clear_rows, sealed_rows):
        assert [len(rows[t]) for t in ("submissions", "failed_sends", "bounces")] == [2, 1, 1]
    assert _secrets_in(clear_rows) == set(SECRETS)
    assert _secrets_in(sealed_rows) == set()
    assert all("mrf1." in row for table in sealed_rows.values() for row in table)


def test_queueing_twice_is_one_submission_and_the_queue_survives_a_key_rotation(
    outbound: Outbound,
) -> None:
    """The same message queued again, during and after a rotation: one submission, re-keyed."""
    from sqlalchemy import select

    from mailroom.crypto.datakeys import OwnerKeys
    from mailroom.crypto.fields import from_text, version_of
    from mailroom.crypto.message_fields import ID_KIND
    from mailroom.crypto.owner_rotation import Rotator, start_rotation
    from mailroom.crypto.sealing import mail_cipher
    from mailroom.crypto.submission_keys import rehash_submission_keys
    from mailroom.outbound.queueing import queue_message
    from mailroom.store.models import Submission

    store = outbound.store
    person = outbound.owner("selma", sealed=True)
    ids = outbound.send_and_bounce(person)

    def queue_again() -> int:
        with store.session() as session:
            queued = queue_message(
                session,
                settings=outbound.settings,
                account_id=person.account_id,
                raw=hello_message(),
            )
            return queued.id

    def keys() -> dict[int, str]:
        with store.session() as session:
            rows = session.execute(
                select(Submission.id, Submission.message_key).where(
                    Submission.user_id == person.user_id
                )
            )
            return {int(i): str(k) for i, k in rows}

    def stored_hash(version: int) -> str:
        with store.session() as session:
            cipher = mail_cipher(session)
            assert cipher is not None
            hashes = cipher.lookup_hashes(person.user_id, ID_KIND, ORIGINAL)
            versions = sorted(OwnerKeys(session, outbound.sealing.wrapper).versions(person.user_id))
            return dict(zip(sorted(versions, reverse=True), hashes, strict=True))[version]

    def readers() -> tuple[Any, ...]:
        with store.session() as session:
            listed = [e.as_json() for e in failed_list(session)]
        return listed, _jmap_submissions(outbound, person)

    before = readers()
    assert queue_again() == ids["hello"]
    assert keys()[ids["hello"]] == stored_hash(1)
    with store.session() as session:
        wrapper = outbound.sealing.wrapper
        rotation = start_rotation(session, OwnerKeys(session, wrapper), person.user_id).id
    assert queue_again() == ids["hello"]  # the stored key is v1's hash, the newest is v2
    Rotator(store, outbound.sealing.wrapper, batch=1).run(rotation)
    with store.session() as session:
        assert OwnerKeys(session, outbound.sealing.wrapper).versions(person.user_id) == [2]
    assert keys()[ids["hello"]] == stored_hash(2)
    assert queue_again() == ids["hello"] and len(keys()) == 2
    assert readers() == before

    rows = raw_rows(store, person.user_id)
    sealed_texts = [m for row in (r for t in rows.values() for r in t) for m in _sealed(row)]
    assert len(sealed_texts) >= 7  # Message-IDs, envelopes, statuses, last error, reason, report
    assert {version_of(from_text(t)) for t in sealed_texts} == {2}
    with store.session() as session:  # a repeated last pass changes nothing
        rehash_submission_keys(session, person.user_id, {}, 10)
    assert keys()[ids["hello"]] == stored_hash(2)


def _sealed(row: str) -> list[str]:
    return re.findall(r"mrf1\.[A-Za-z0-9_=-]+", row)


def test_the_sweeps_fail_sealed_mail_sealed(sealed_store: Store, tmp_path: Path) -> None:
    """Mail past its window and an unknown hand-off fail sealed, read clear, go with the owner."""
    from sqlalchemy import select, update

    from mailroom.outbound.sender import HANDOFF_TIMEOUT, THROTTLED_WINDOW, Sender
    from mailroom.store.models import Submission
    from tests.outbound.core_support import Clock, account_for, queue, sending_settings

    settings = sending_settings(tmp_path)
    clock = Clock()
    with SmtpSink() as sink:
        sink.script(["451 4.7.0 <bob@example.net> greylisted"] * 100)
        account_id = account_for(sealed_store, sink)
        late = queue(sealed_store, settings, account_id, 1, clock)
        stuck = queue(sealed_store, settings, account_id, 2, clock, lane="direct")
        sender = Sender(sealed_store, settings, clock=clock)
        try:
            assert sender.run_lane("calm") == 1  # deferred: its last error quotes Bob
            with sealed_store.session() as session:  # a worker died handing "stuck" over
                session.execute(
                    update(Submission)
                    .where(Submission.id == stuck)
                    .values(state="sending", handoff_at=clock())
                )
            clock.advance((THROTTLED_WINDOW + HANDOFF_TIMEOUT).total_seconds())
            sender.run_lane("calm")
            sender.run_lane("direct")
        finally:
            sender.close()
    with sealed_store.session() as session:
        reasons = {entry.submission_id: entry.reason for entry in failed_list(session)}
        rows = {row.id: row for row in session.scalars(select(Submission))}
    assert set(reasons) == {late, stuck}
    assert reasons[late].startswith("Not sent within 6 hours")
    assert "<bob@example.net> greylisted" in reasons[late]
    assert "may have accepted it" in reasons[stuck]
    assert rows[stuck].delivery_status == {
        "bob@example.net": {
            "smtpReply": "451 4.4.0 hand-off",
            "delivered": "unknown",
            "displayed": "unknown",
        }
    }
    assert "greylisted" in (rows[late].last_error or "")
    owner = rows[late].user_id
    raw = raw_rows(sealed_store, owner)
    assert [len(raw[t]) for t in ("submissions", "failed_sends")] == [2, 2]
    texts = " ".join(" ".join(r) for r in raw.values())
    assert "bob@example.net" not in texts and "greylisted" not in texts
    assert "mrf1." in texts
    with sealed_store.session() as session:  # the operator retries: a sealed row stays sealed
        from mailroom.outbound.queueing import retry_submission

        retry_submission(session, stuck, now=clock())
    with sealed_store.session() as session:
        again = session.get(Submission, stuck)
        assert again is not None and again.sealed
        assert (again.state, again.delivery_status) == ("queued", None)
        assert again.envelope["rcptTo"] == [{"email": "bob@example.net", "parameters": None}]
        assert [e.submission_id for e in failed_list(session)] == [late]
    from mailroom.crypto.shredding import delete_owner

    delete_owner(sealed_store, "me")  # the owner goes: key first, then every row of the queue
    assert raw_rows(sealed_store, owner) == {"submissions": [], "failed_sends": [], "bounces": []}
