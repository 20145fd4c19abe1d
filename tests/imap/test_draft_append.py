"""A draft created over JMAP reaches the Dovecot Drafts folder once, and leaves it on destroy."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from imapclient import IMAPClient
from sqlalchemy import select

from mailroom.config import Settings
from mailroom.providers.imap import propagate_pending
from mailroom.store.engine import Store
from mailroom.store.models import MessageLocation, PendingChange
from tests.imap.conftest import draft_form, owner_jmap
from tests.imap.views import message_count, sync_all
from tests.jmap.conftest import Jmap


@pytest.fixture
def jmap(store: Store, account: int) -> Iterator[Jmap]:
    """A JMAP client of the owner of the IMAP account, on a real server."""
    yield from owner_jmap(store, account)


def _drafts_uids(other: IMAPClient) -> dict[int, set[bytes]]:
    other.select_folder("Drafts", readonly=True)
    uids = other.search("ALL")
    return {uid: set(data[b"FLAGS"]) for uid, data in other.fetch(uids, [b"FLAGS"]).items()}


def test_a_draft_is_appended_to_drafts_with_the_draft_flag_once(
    store: Store, settings: Settings, account: int, other: IMAPClient, jmap: Jmap
) -> None:
    """APPEND to Drafts with each keyword's flag; the UID is bound, the next sync adds nothing."""
    sync_all(store, account, settings)
    draft = draft_form(jmap)
    draft["keywords"] = {**draft["keywords"], "$flagged": True, "project-x": True}
    result = jmap.call("Email/set", {"create": {"d": draft}})
    assert result["notCreated"] is None, result["notCreated"]
    created = result["created"]["d"]
    run = propagate_pending(store, account, settings=settings)
    assert run.done == 1 and run.failed == 0
    (flags,) = _drafts_uids(other).values()
    assert {b"\\Draft", b"\\Seen", b"\\Flagged", b"project-x"} <= flags
    with store.session() as session:
        located = session.scalars(select(MessageLocation.uid)).all()
    assert len(located) == 1
    count = message_count(store, account)
    sync_all(store, account, settings)
    assert message_count(store, account) == count
    email = jmap.call("Email/get", {"ids": [created["id"]], "properties": ["keywords"]})
    assert {"$draft", "$seen", "$flagged", "project-x"} <= set(email["list"][0]["keywords"])
    again = propagate_pending(store, account, settings=settings)
    assert again.done == 0 and len(_drafts_uids(other)) == 1


def test_a_replayed_append_binds_the_copy_already_there(
    store: Store, settings: Settings, account: int, other: IMAPClient, jmap: Jmap
) -> None:
    """An append whose outcome was lost finds its message by Message-ID instead of a second copy."""
    sync_all(store, account, settings)
    jmap.call("Email/set", {"create": {"d": draft_form(jmap)}})
    propagate_pending(store, account, settings=settings)
    with store.session() as session:
        for location in session.scalars(select(MessageLocation)):
            session.delete(location)
        for change in session.scalars(select(PendingChange)):
            change.state, change.done_at = "pending", None
    propagate_pending(store, account, settings=settings)
    assert len(_drafts_uids(other)) == 1
    with store.session() as session:
        assert len(session.scalars(select(MessageLocation)).all()) == 1


def test_destroying_a_draft_deletes_it_at_the_provider(
    store: Store, settings: Settings, account: int, other: IMAPClient, jmap: Jmap
) -> None:
    """Email/set destroy of an appended draft expunges it from Drafts."""
    sync_all(store, account, settings)
    created = jmap.call("Email/set", {"create": {"d": draft_form(jmap)}})["created"]["d"]
    propagate_pending(store, account, settings=settings)
    assert len(_drafts_uids(other)) == 1
    result = jmap.call("Email/set", {"destroy": [created["id"]]})
    assert result["destroyed"] == [created["id"]]
    propagate_pending(store, account, settings=settings)
    assert _drafts_uids(other) == {}


def test_replacing_a_draft_leaves_only_the_new_one_in_drafts(
    store: Store, settings: Settings, account: int, other: IMAPClient, jmap: Jmap
) -> None:
    """Create the new version and destroy the old in one Email/set, as clients save a draft."""
    sync_all(store, account, settings)
    first = jmap.call("Email/set", {"create": {"d": draft_form(jmap)}})["created"]["d"]
    propagate_pending(store, account, settings=settings)
    newer = {**draft_form(jmap), "subject": "Finished thoughts"}
    result = jmap.call("Email/set", {"create": {"d2": newer}, "destroy": [first["id"]]})
    assert result["destroyed"] == [first["id"]] and result["created"]["d2"]
    propagate_pending(store, account, settings=settings)
    (uid,) = _drafts_uids(other)
    envelope = other.fetch([uid], [b"BODY.PEEK[HEADER.FIELDS (SUBJECT)]"])[uid]
    assert b"Finished thoughts" in envelope[b"BODY[HEADER.FIELDS (SUBJECT)]"]
    count = message_count(store, account)
    sync_all(store, account, settings)
    assert message_count(store, account) == count


def test_a_draft_made_before_the_first_sync_finds_the_drafts_folder(
    store: Store, settings: Settings, account: int, other: IMAPClient, jmap: Jmap
) -> None:
    """With no folders known yet, the append discovers them and still lands in Drafts."""
    jmap.call("Email/set", {"create": {"d": draft_form(jmap)}})
    run = propagate_pending(store, account, settings=settings)
    assert run.done == 1
    assert len(_drafts_uids(other)) == 1
    count = message_count(store, account)
    sync_all(store, account, settings)
    assert message_count(store, account) == count
