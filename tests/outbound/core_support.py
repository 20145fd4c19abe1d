"""What the core sending tests share: an injected clock, an account sending to a sink, queueing."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select

from mailroom.config import Settings
from mailroom.outbound.queueing import queue_message
from mailroom.store.engine import Store
from mailroom.store.models import Account, FailedSend, Submission
from tests.factories import BASE_TIME, make_message
from tests.helpers import make_account
from tests.support.smtp_sink import SmtpSink


class Clock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime = BASE_TIME) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock on by ``seconds``."""
        self.now += timedelta(seconds=seconds)


def sending_settings(tmp_path: Path, **values: Any) -> Settings:
    """Settings whose SSRF allow-list lets accounts send to the loopback sink."""
    return Settings(data_dir=tmp_path, allowed_private_hosts="127.0.0.1", **values)


def account_for(store: Store, sink: SmtpSink | None, name: str = "test") -> int:
    """An account whose outgoing server is ``sink`` (plain SMTP on loopback); its id."""
    _, account_id, _ = make_account(store, name=name)
    if sink is not None:
        with store.session() as session:
            account = session.get(Account, account_id)
            assert account is not None
            smtp = {"host": sink.host, "port": sink.port, "security": "none", "login": None}
            account.settings = {**(account.settings or {}), "smtp": smtp}
    return account_id


def queue(
    store: Store,
    settings: Settings,
    account_id: int,
    number: int,
    clock: Clock,
    **kwargs: Any,
) -> int:
    """Queue message ``number`` (Message-ID ``<number@core.test>``); the submission id."""
    raw = make_message(f"{number}@core.test", subject=f"n{number}")
    with store.session() as session:
        submission = queue_message(
            session, settings=settings, account_id=account_id, raw=raw, now=clock(), **kwargs
        )
        return submission.id


def submission(store: Store, submission_id: int) -> Submission:
    """The submission as stored now."""
    with store.session() as session:
        row = session.get(Submission, submission_id)
        assert row is not None
        return row


def failed(store: Store) -> list[FailedSend]:
    """The failed-sends list, oldest first."""
    with store.session() as session:
        return list(session.scalars(select(FailedSend).order_by(FailedSend.id)))


def subjects(sink: SmtpSink) -> list[str]:
    """The subjects of the messages the sink accepted, in order."""
    found = []
    for message in sink.messages:
        for line in message.data.splitlines():
            if line.startswith(b"Subject: "):
                found.append(line[9:].decode())
    return found
