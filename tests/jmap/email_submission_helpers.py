"""What the EmailSubmission tests share: a JMAP server whose sending goes to a real SMTP sink.

The server's :class:`SubmissionPolicy` and the lane worker (part A's
``Sender.run_lane``, called by the test) read one injected :class:`Clock`, so
undo windows and holds pass when the test says, never by waiting.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from mailroom.config import Settings
from mailroom.jmap.app import JmapConfig
from mailroom.jmap.submission_policy import SubmissionPolicy
from mailroom.jmap.submitting import KIND
from mailroom.outbound.filing import file_sent
from mailroom.outbound.hooks import AFTER_SENT
from mailroom.outbound.lanes import lane_for
from mailroom.outbound.sender import Sender
from mailroom.store.engine import Store
from mailroom.store.models import Account, utcnow
from tests.jmap.conftest import CORE, MAIL, Jmap, Person, Server, run_server
from tests.support.smtp_sink import SmtpSink

SUBMISSION = "urn:ietf:params:jmap:submission"
USING = [CORE, MAIL, SUBMISSION]
ALICE = "alice@example.org"


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = utcnow().replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move on by ``seconds``."""
        self.now += timedelta(seconds=seconds)


@dataclass
class Sending:
    """Alice's client, her outgoing sink, the clock and the lane worker."""

    store: Store
    server: Server
    client: Jmap
    sink: SmtpSink
    clock: Clock
    settings: Settings
    person: Person

    def call(self, name: str, **args: Any) -> Any:
        """One call with the submission capability; its arguments (or ``{"error": ...}``)."""
        return self.client.call(name, args, using=USING)

    def calls(self, *calls: list[Any]) -> list[list[Any]]:
        """Several calls in one request (with accountId added); the method responses."""
        full = [[n, {"accountId": self.client.account, **a}, c] for n, a, c in calls]
        return self.client.calls(*full, using=USING)

    def run_lane(self, lane: str | None = None) -> int:
        """One run of the lane worker at the clock's time; how many it handed over.

        The lane is by default the one JMAP mail is queued in (its kind's lane).
        """
        lane = lane or lane_for(KIND, self.settings.lane_kind_map)
        return Sender(self.store, self.settings, clock=self.clock).run_lane(lane)

    def mailbox(self, role: str) -> str:
        """The id of Alice's mailbox with this role."""
        found = self.call("Mailbox/query", filter={"role": role})["ids"]
        assert len(found) == 1, found
        return str(found[0])

    def identity(self) -> str:
        """The id of Alice's default identity (her account's address)."""
        (identity,) = [i for i in self.call("Identity/get")["list"] if not i["mayDelete"]]
        assert identity["email"] == ALICE
        return str(identity["id"])

    def draft(self, **fields: Any) -> dict[str, Any]:
        """An Email/set creation of a draft from Alice to Bob, in Drafts; ``fields`` override."""
        return {
            "mailboxIds": {self.mailbox("drafts"): True},
            "keywords": {"$draft": True, "$seen": True},
            "from": [{"name": "Alice", "email": ALICE}],
            "to": [{"name": "Bob", "email": "bob@example.net"}],
            "subject": "Lunch?",
            "bodyValues": {"b": {"value": "Shall we?\n"}},
            "textBody": [{"partId": "b", "type": "text/plain"}],
            **fields,
        }

    def create_draft(self, **fields: Any) -> str:
        """Create a draft (see :meth:`draft`); its Email id."""
        done = self.call("Email/set", create={"d": self.draft(**fields)})
        assert done["created"], done
        return str(done["created"]["d"]["id"])

    def submit(self, email_id: str, **more: Any) -> Any:
        """EmailSubmission/set creating one submission ``s`` of ``email_id``; the response."""
        values = {"identityId": self.identity(), "emailId": email_id, **more}
        return self.call("EmailSubmission/set", create={"s": values})


def give_outgoing(store: Store, person: Person, sink: SmtpSink, email: str = ALICE) -> None:
    """Give the person's account its address and its outgoing server: the sink, no login."""
    smtp = {"host": sink.host, "port": sink.port, "security": "none", "login": None}
    with store.session() as session:
        account = session.get(Account, person.account_id)
        assert account is not None
        account.settings = {**(account.settings or {}), "email": email, "smtp": smtp}


def sending_settings(tmp_path: Path, **more: Any) -> Settings:
    """Settings that let the SSRF guard reach the loopback sink."""
    return Settings(data_dir=tmp_path, allowed_private_hosts="127.0.0.1", **more)


def start_sending(
    store: Store, person: Person, tmp_path: Path, **settings: Any
) -> Iterator[Sending]:
    """Run a server whose submissions go to a fresh sink; yields the whole set-up.

    What was sent is filed as the job runtime files it (``file_sent`` after each send).
    """
    clock = Clock()
    config = sending_settings(tmp_path, **settings)
    jmap = JmapConfig(poll_interval=0.05, submission=SubmissionPolicy(config, clock))
    AFTER_SENT.append(file_sent)
    try:
        with SmtpSink() as sink:
            give_outgoing(store, person, sink)
            for server in run_server(store, jmap=jmap):
                with Jmap(server, person) as client:
                    yield Sending(store, server, client, sink, clock, config, person)
    finally:
        AFTER_SENT.remove(file_sent)


@pytest.fixture
def sending(store: Store, alice: Person, tmp_path: Path) -> Iterator[Sending]:
    """Alice sends through a sink, no undo window."""
    yield from start_sending(store, alice, tmp_path)


__all__ = [
    "ALICE",
    "SUBMISSION",
    "USING",
    "Clock",
    "Sending",
    "give_outgoing",
    "sending",
    "sending_settings",
    "start_sending",
]
