"""What the after-sending tests share: an account that sends to a sink, and sending one message.

Sending goes the real way: :func:`mailroom.outbound.queueing.queue_message` on the
direct lane, then :class:`mailroom.outbound.sender.Sender` hands it to the SMTP
transport of the account's outgoing settings (an :class:`SmtpSink` on loopback),
and the sender calls the ``AFTER_SENT`` hooks :class:`AfterMail` installed. The sink
fixture is the one of ``tests/outbound/conftest.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest
from huey import Huey
from sqlalchemy import select

from mailroom.config import Settings
from mailroom.outbound.after_mail import AfterMail
from mailroom.outbound.queueing import queue_message
from mailroom.outbound.sender import Sender
from mailroom.outbound.smtp_settings import check_smtp, set_smtp
from mailroom.store.engine import Store
from mailroom.store.models import Account, Label, Message, MessageKeyword, MessageLabel, utcnow
from tests.factories import make_message
from tests.helpers import drain, make_account
from tests.support.smtp_sink import SmtpSink

ME = "me@example.org"


def sending_settings(tmp_path: Path) -> Settings:
    """Settings that allow plain SMTP to the loopback sink."""
    return Settings(data_dir=tmp_path / "data", allowed_private_hosts="127.0.0.1")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings allowing plain SMTP to the sink."""
    return sending_settings(tmp_path)


def reply(parent: str, message_id: str, **headers: str) -> bytes:
    """My reply to Alice's message ``parent`` (Message-ID ``message_id``)."""
    return make_message(
        message_id,
        subject="Re: Lunch",
        sender=f"Me <{ME}>",
        to="Alice <alice@example.net>",
        in_reply_to=parent,
        references=[parent],
        body="Yes, at noon.\n",
        headers=headers or None,
    )


def drain_follow_up(queues: dict[str, Huey]) -> None:
    """Run every queued follow-up job (the enrichers), one by one."""
    for name in ("enrich_live", "enrich", "enrich_backlog"):
        drain(queues[name])


def outgoing(store: Store, settings: Settings, account_id: int, sink: SmtpSink) -> None:
    """Give the account its address and the sink as its outgoing server (no AUTH)."""
    with store.session() as session:
        account = session.get(Account, account_id)
        assert account is not None
        account.settings = {**(account.settings or {}), "email": ME}
        set_smtp(account, check_smtp(sink.host, port=sink.port, security="none"), None, settings)


def local_sender(store: Store, settings: Settings, sink: SmtpSink) -> tuple[int, int, int]:
    """A local account of "me" sending to ``sink``: (user id, account id, inbox label id)."""
    account = make_account(store)
    outgoing(store, settings, account[1], sink)
    return account


def send(
    store: Store,
    settings: Settings,
    account_id: int,
    raw: bytes,
    *,
    email_id: int | None = None,
    clock: Callable[[], datetime] = utcnow,
) -> int:
    """Queue ``raw`` on the direct lane and run the lane once; the submission id."""
    with store.session() as session:
        submission = queue_message(
            session,
            settings=settings,
            account_id=account_id,
            raw=raw,
            lane="direct",
            email_id=email_id,
            now=clock(),
        )
        submission_id = submission.id
    sender = Sender(store, settings, clock=clock)
    try:
        sender.run_lane("direct")
    finally:
        sender.close()
    return submission_id


@pytest.fixture
def after_mail(tmp_path: Path) -> Iterator[AfterMail]:
    """The filing hook and the enrichers installed, as a job runtime does."""
    installed = AfterMail(sending_settings(tmp_path)).install()
    yield installed
    installed.uninstall()


def labels_of(store: Store, message_id: int) -> set[str]:
    """The roles (or names) of the message's labels."""
    with store.session() as session:
        rows = session.execute(
            select(Label.role, Label.name)
            .join(MessageLabel, MessageLabel.label_id == Label.id)
            .where(MessageLabel.message_id == message_id)
        )
        return {role or name for role, name in rows}


def keywords_of(store: Store, message_id: int) -> set[str]:
    """The stored keywords of the message."""
    with store.session() as session:
        return set(
            session.scalars(
                select(MessageKeyword.keyword).where(MessageKeyword.message_id == message_id)
            )
        )


def message_ids(store: Store, account_id: int) -> list[int]:
    """Every stored message of the account, oldest id first."""
    with store.session() as session:
        return list(
            session.scalars(
                select(Message.id).where(Message.account_id == account_id).order_by(Message.id)
            )
        )
