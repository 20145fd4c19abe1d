"""A draft created over JMAP reaches Gmail once and is not stored twice by the next sync."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import select

from mailroom.config import Settings
from mailroom.providers.imap import propagate_pending
from mailroom.store.engine import Store
from mailroom.store.models import Message, MessageLocation, PendingChange
from tests.emulators.gmail_imap import GmailImapServer
from tests.imap.conftest import draft_form, owner_jmap
from tests.imap.gmail.views import gmail_view, mailroom_view
from tests.imap.views import sync_all
from tests.jmap.conftest import Jmap


@pytest.fixture
def jmap(store: Store, gmail_account: int) -> Iterator[Jmap]:
    """A JMAP client of the owner of the Gmail account, on a real server."""
    yield from owner_jmap(store, gmail_account)


def test_a_draft_lands_in_gmail_drafts_once_with_gmail_s_id(
    store: Store, settings: Settings, gmail: GmailImapServer, gmail_account: int, jmap: Jmap
) -> None:
    """APPEND to [Gmail]/Drafts; the row takes the X-GM-MSGID; sync and replay add nothing."""
    sync_all(store, gmail_account, settings)
    draft = draft_form(jmap)
    draft["keywords"] = {**draft["keywords"], "$flagged": True}
    result = jmap.call("Email/set", {"create": {"d": draft}})
    assert result["notCreated"] is None, result["notCreated"]
    run = propagate_pending(store, gmail_account, settings=settings)
    assert run.done == 1 and run.failed == 0
    (message,) = gmail.model.messages()
    assert {"\\Draft", "\\Starred"} <= message.labels and "\\Seen" in message.flags
    with store.session() as session:
        (row,) = session.execute(select(Message.id, Message.provider_id)).all()
    assert row.provider_id == f"gm:{message.msgid:x}"
    sync_all(store, gmail_account, settings)
    assert mailroom_view(store, gmail_account) == gmail_view(gmail.model)

    with store.session() as session:  # the outcome was lost: the append runs again
        for location in session.scalars(select(MessageLocation)):
            session.delete(location)
        for change in session.scalars(select(PendingChange)):
            change.state, change.done_at = "pending", None
    propagate_pending(store, gmail_account, settings=settings)
    assert len(gmail.model.messages()) == 1
    with store.session() as session:
        assert len(session.scalars(select(MessageLocation)).all()) == 1
