"""What the compose tests share: the web app whose account sends to an SMTP sink, signed in.

The app is served for real (uvicorn on loopback, both stores) with a submission
policy whose clock the test moves; the seeded account ``home`` of ``me`` has the
address :data:`ME` and the sink as its outgoing server. :meth:`Composer.deliver`
runs the lane worker the way ``mailroom serve`` does, at the test's time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from mailroom.config import Settings
from mailroom.jmap.app import JmapConfig
from mailroom.jmap.auth import Authenticator
from mailroom.jmap.submission_policy import SubmissionPolicy
from mailroom.labels.resolver import system_label
from mailroom.outbound.sender import Sender
from mailroom.store.engine import Store
from mailroom.store.models import Message, MessageLabel, Submission
from mailroom.web.app import create_app
from tests.jmap.conftest import serve
from tests.outbound.after_support import outgoing
from tests.support.smtp_sink import SmtpSink
from tests.web.conftest import Clock, browser, csrf_of, sign_in
from tests.web.seeding import seed

UNDO_SECONDS = 30


@dataclass
class Composer:
    """A signed-in browser on the compose pages, and what is behind them."""

    client: httpx.Client
    store: Store
    settings: Settings
    clock: Clock
    sink: SmtpSink
    user_id: int
    account_id: int

    def csrf(self) -> str:
        """The session's CSRF token."""
        return csrf_of(self.client.get("/compose").text)

    def post(
        self,
        files: dict[str, tuple[str, bytes, str]] | None = None,
        htmx: bool = False,
        **fields: str,
    ) -> httpx.Response:
        """POST the compose form (multipart, as the browser sends it) with ``fields``;
        ``htmx`` as the page's autosave does. ``att`` holds attachment tokens, one a line."""
        data: dict[str, str | list[str]] = {"csrf": self.csrf(), **fields}
        attachments = fields.get("att")
        if attachments is not None:
            data["att"] = attachments.split("\n")
        return self.client.post(
            "/compose",
            data=data,
            files=files or {"upload": ("", b"", "application/octet-stream")},
            headers={"HX-Request": "true"} if htmx else None,
        )

    def drafts(self) -> list[int]:
        """The ids of the messages in the user's Drafts."""
        return self._box("drafts")

    def sent(self) -> list[int]:
        """The ids of the messages in the user's Sent."""
        return self._box("sent")

    def _box(self, role: str) -> list[int]:
        with self.store.session() as session:
            label = system_label(session, self.user_id, role).id
            return list(
                session.scalars(
                    select(Message.id)
                    .join(MessageLabel, MessageLabel.message_id == Message.id)
                    .where(MessageLabel.label_id == label)
                    .order_by(Message.id)
                )
            )

    def submission(self, submission_id: int) -> Submission:
        """A submission row, read now."""
        with self.store.session() as session:
            row = session.get(Submission, submission_id)
            assert row is not None
            session.expunge(row)
            return row

    def deliver(self, lane: str) -> int:
        """Move past the undo window and let the lane hand over what is due."""
        self.clock.advance(timedelta(seconds=UNDO_SECONDS + 1))
        return Sender(self.store, self.settings, clock=self.clock).run_lane(lane)


def sent_id(answer: httpx.Response) -> int:
    """The submission id a successful Send redirected to."""
    assert answer.status_code == 303, answer.text
    found = re.fullmatch(r"/compose/sent/(\d+)", answer.headers["location"])
    assert found is not None, answer.headers["location"]
    return int(found.group(1))


def draft_id(answer: httpx.Response) -> int:
    """The draft id a save without JS redirected to."""
    assert answer.status_code == 303, answer.text
    found = re.fullmatch(r"/compose\?draft=(\d+)", answer.headers["location"])
    assert found is not None, answer.headers["location"]
    return int(found.group(1))


@pytest.fixture
def composer(store: Store, auth: Authenticator, clock: Clock, tmp_path: Path) -> Iterator[Composer]:
    """``me`` signed in, with the seeded mail and an account that sends to a sink."""
    user_id, account_id, _ = seed(store)
    settings = Settings(
        data_dir=tmp_path / "data",
        allowed_private_hosts="127.0.0.1",
        web_undo_seconds=UNDO_SECONDS,
        submission_max_bytes=200_000,
    )
    with SmtpSink() as sink:
        outgoing(store, settings, account_id, sink)
        jmap = JmapConfig(submission=SubmissionPolicy(settings, clock=clock))
        for base in serve(create_app(store, jmap, settings=settings, auth=auth)):
            client = browser(base)
            assert sign_in(client, base, "me").status_code == 303
            try:
                yield Composer(client, store, settings, clock, sink, user_id, account_id)
            finally:
                client.close()
