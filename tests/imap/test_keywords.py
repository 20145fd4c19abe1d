"""JMAP keywords and IMAP flags on a real Dovecot: set over JMAP → flag; set over IMAP → keyword."""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from imapclient import IMAPClient
from sqlalchemy import select, update

from mailroom.config import Settings
from mailroom.jmap.auth import set_password
from mailroom.providers.imap import propagate_pending, sync_account
from mailroom.providers.imap.connection import FolderStatus
from mailroom.store.engine import Store
from mailroom.store.models import Account, Label, PendingChange
from tests.factories import make_message
from tests.imap.conftest import _start, add_account, new_mailbox
from tests.imap.views import message_ids, sync_all
from tests.jmap.conftest import PASSWORD, Jmap, Person, run_server
from tests.support.dovecot import DovecotServer

# Without the "w" right a user may store only \Seen and \Deleted: PERMANENTFLAGS has no \*.
_NO_KEYWORDS_ACL = "* owner lrsitekxa\n"


@pytest.fixture(scope="module")
def strict_dovecot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DovecotServer]:
    """A private Dovecot whose ACL lets its users store no keyword at all."""
    folder = Path(tempfile.mkdtemp(prefix="mr-acl-"))
    folder.chmod(0o755)
    acl = folder / "global.acl"
    acl.write_text(_NO_KEYWORDS_ACL)
    acl.chmod(0o644)
    extra = (
        "mail_plugins = $mail_plugins acl\n"
        "protocol imap {\n  mail_plugins = $mail_plugins imap_acl\n}\n"
        f"plugin {{\n  acl = vfile:{acl}\n}}\n"
    )
    server = _start(tmp_path_factory, "imap-acl-dovecot", extra)
    try:
        yield server
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def _jmap_of(store: Store, account: int) -> Iterator[Jmap]:
    """A JMAP client of the account's owner, over HTTP on the same store, until closed."""
    with store.session() as session:
        user_id = session.scalars(select(Account.user_id).where(Account.id == account)).one()
        set_password(session, "me", PASSWORD)
        inbox = session.scalars(
            select(Label.id).where(Label.user_id == user_id, Label.role == "inbox")
        ).first()
    serving = run_server(store)
    server = next(serving)
    client = Jmap(server, Person("me", user_id, account, inbox or 0))
    yield client
    client.close()
    next(serving, None)


@pytest.fixture
def jmap(store: Store, account: int) -> Iterator[Jmap]:
    """A JMAP client of the IMAP account's owner, over HTTP on the same store."""
    yield from _jmap_of(store, account)


def _server_flags(other: IMAPClient, folder: str = "INBOX") -> dict[int, set[str]]:
    other.select_folder(folder, readonly=True)
    data = other.fetch(other.search("ALL"), [b"FLAGS"])
    return {
        uid: {f.decode().lower() if isinstance(f, bytes) else str(f).lower() for f in d[b"FLAGS"]}
        for uid, d in data.items()
    }


def _flag_elsewhere(other: IMAPClient, *flags: bytes) -> None:
    """Another client adds flags to the first message of the INBOX."""
    other.select_folder("INBOX")
    other.add_flags([1], list(flags))


def _keywords(jmap: Jmap, email: str) -> dict[str, bool]:
    got = jmap.call("Email/get", {"ids": [email], "properties": ["keywords"]})
    keywords: dict[str, bool] = got["list"][0]["keywords"]
    return keywords


def _setup(
    store: Store, settings: Settings, account: int, other: IMAPClient, n: int = 2
) -> dict[str, str]:
    for i in range(n):
        other.append("INBOX", make_message(f"k-{i}@x", subject=f"k {i}"))
    sync_all(store, account, settings)
    return {mid: f"M{message_id}" for mid, message_id in message_ids(store, account).items()}


def test_keywords_set_over_jmap_become_imap_flags(
    store: Store, settings: Settings, account: int, other: IMAPClient, jmap: Jmap
) -> None:
    """$answered, $forwarded, $junk and a custom keyword reach Dovecot; removing them too."""
    emails = _setup(store, settings, account, other)
    email = emails["k-0@x"]
    keywords = {"$answered": True, "$forwarded": True, "$junk": True, "Project-X": True}
    result = jmap.call("Email/set", {"update": {email: {"keywords": keywords}}})
    assert result["updated"] == {email: None}, result
    assert propagate_pending(store, account, settings=settings).failed == 0
    flags = _server_flags(other)
    assert {"\\answered", "$forwarded", "$junk", "project-x"} <= flags[1]
    assert not {"\\answered", "$forwarded", "$junk", "project-x"} & flags[2]
    patch = {"keywords/$answered": None, "keywords/project-x": None, "keywords/$draft": True}
    jmap.call("Email/set", {"update": {email: patch}})
    propagate_pending(store, account, settings=settings)
    flags = _server_flags(other)
    assert {"$forwarded", "$junk", "\\draft"} <= flags[1]
    assert not {"\\answered", "project-x"} & flags[1]
    sync_account(store, account, settings=settings)  # the server's view agrees: nothing moves
    assert _keywords(jmap, email) == {"$draft": True, "$forwarded": True, "$junk": True}


def test_flags_set_over_imap_come_back_as_keywords(
    store: Store, settings: Settings, account: int, other: IMAPClient, jmap: Jmap
) -> None:
    """Another client's \\Answered, $Forwarded and custom flags are keywords after a sync."""
    emails = _setup(store, settings, account, other)
    _flag_elsewhere(other, b"\\Answered", b"$Forwarded", b"Custom1")
    sync_account(store, account, settings=settings)
    assert _keywords(jmap, emails["k-0@x"]) == {
        "$answered": True,
        "$forwarded": True,
        "custom1": True,
    }
    other.select_folder("INBOX")
    other.remove_flags([1], [b"\\Answered"])
    sync_account(store, account, settings=settings)
    assert _keywords(jmap, emails["k-0@x"]) == {"$forwarded": True, "custom1": True}
    assert _keywords(jmap, emails["k-1@x"]) == {}
    # Removed over JMAP, the flag goes whatever case the other client wrote it in.
    jmap.call("Email/set", {"update": {emails["k-0@x"]: {"keywords/custom1": None}}})
    propagate_pending(store, account, settings=settings)
    assert "custom1" not in _server_flags(other)[1]
    sync_account(store, account, settings=settings)
    assert _keywords(jmap, emails["k-0@x"]) == {"$forwarded": True}


def test_new_mail_brings_its_flags_as_keywords(
    store: Store, settings: Settings, account: int, other: IMAPClient, jmap: Jmap
) -> None:
    """A message first seen with \\Draft, \\Seen and $MDNSent is stored with those keywords."""
    other.append(
        "INBOX", make_message("flagged@x"), flags=[b"\\Draft", b"\\Seen", b"$MDNSent", b"\\Flagged"]
    )
    sync_all(store, account, settings)
    email = f"M{message_ids(store, account)['flagged@x']}"
    assert _keywords(jmap, email) == {
        "$draft": True,
        "$flagged": True,
        "$mdnsent": True,
        "$seen": True,
    }


def test_pending_local_keywords_win_over_an_older_server_view(
    store: Store, settings: Settings, account: int, other: IMAPClient, jmap: Jmap
) -> None:
    """Until propagated, a local keyword survives a sync; another client's flag is not lost."""
    emails = _setup(store, settings, account, other, n=1)
    email = emails["k-0@x"]
    jmap.call("Email/set", {"update": {email: {"keywords/$answered": True}}})
    _flag_elsewhere(other, b"$Junk")
    sync_account(store, account, settings=settings)
    assert _keywords(jmap, email) == {"$answered": True}
    propagate_pending(store, account, settings=settings)
    assert {"\\answered", "$junk"} <= _server_flags(other)[1]
    sync_account(store, account, settings=settings)
    assert _keywords(jmap, email) == {"$answered": True, "$junk": True}


def test_keywords_changes_are_logged(
    store: Store, settings: Settings, account: int, other: IMAPClient, jmap: Jmap
) -> None:
    """A keyword read from the server is an Email change (Email/changes reports it)."""
    emails = _setup(store, settings, account, other, n=1)
    before = jmap.state("Email")
    _flag_elsewhere(other, b"$Phishing")
    sync_account(store, account, settings=settings)
    changes = jmap.call("Email/changes", {"sinceState": before})
    assert changes["updated"] == [emails["k-0@x"]]


def test_a_keyword_the_server_never_stored_stays_local(
    store: Store, settings: Settings, account: int, other: IMAPClient, jmap: Jmap
) -> None:
    """A keyword the folder does not define (it could not be stored) survives the next sync."""
    emails = _setup(store, settings, account, other, n=1)
    email = emails["k-0@x"]
    jmap.call("Email/set", {"update": {email: {"keywords/local-only": True}}})
    with store.session() as session:  # as if the server had refused it: nothing reached it
        session.execute(update(PendingChange).values(state="done"))
    _flag_elsewhere(other, b"\\Answered")
    sync_account(store, account, settings=settings)
    assert _keywords(jmap, email) == {"$answered": True, "local-only": True}


@pytest.mark.parametrize(
    ("permanent", "flag", "stored"),
    [
        (None, "$Junk", True),  # no PERMANENTFLAGS: RFC 3501 says every flag is permanent
        (frozenset({"\\answered", "\\*"}), "Custom", True),
        (frozenset({"\\answered", "\\draft"}), "\\Answered", True),
        (frozenset({"\\answered", "\\draft"}), "$Forwarded", False),
        (frozenset(), "\\Draft", False),
    ],
)
def test_permanent_flags_decide_what_a_folder_stores(
    permanent: frozenset[str] | None, flag: str, stored: bool
) -> None:
    """A flag is stored for good iff PERMANENTFLAGS is absent, has \\* or lists the flag."""
    status = FolderStatus(1, None, 0, None, permanent_flags=permanent)
    assert status.can_store(flag) is stored


def test_keyword_propagation_reaches_every_copy_and_replays_as_nothing(
    store: Store, settings: Settings, account: int, other: IMAPClient, jmap: Jmap
) -> None:
    """A keyword lands on each copy of a message; replaying the change stores no flag again."""
    other.create_folder("Work")
    emails = _setup(store, settings, account, other, n=1)
    other.select_folder("INBOX")
    other.copy([1], "Work")
    sync_all(store, account, settings)
    email = emails["k-0@x"]
    jmap.call("Email/set", {"update": {email: {"keywords/$forwarded": True}}})
    first = propagate_pending(store, account, settings=settings)
    assert first.done == 1 and first.flagged == 2
    assert "$forwarded" in _server_flags(other, "INBOX")[1]
    assert "$forwarded" in _server_flags(other, "Work")[1]
    with store.session() as session:
        session.execute(update(PendingChange).values(state="pending", done_at=None))
    again = propagate_pending(store, account, settings=settings)
    assert again.done == 1 and again.flagged == 0 and again.moved == 0


def test_keywords_stay_local_where_permanentflags_refuse_them(
    store: Store,
    settings: Settings,
    strict_dovecot: DovecotServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """PERMANENTFLAGS (\\Deleted \\Seen): $seen reaches the server, $forwarded stays local."""
    mailbox = new_mailbox(strict_dovecot)
    account = add_account(store, settings, mailbox)
    with mailbox.client() as other:
        emails = _setup(store, settings, account, other, n=1)
        serving = _jmap_of(store, account)
        jmap = next(serving)
        email = emails["k-0@x"]
        patch = {"keywords/$forwarded": True, "keywords/$seen": True}
        jmap.call("Email/set", {"update": {email: patch}})
        with caplog.at_level(logging.INFO, logger="mailroom.providers.imap.propagator"):
            result = propagate_pending(store, account, settings=settings)
        assert "The keyword $forwarded stays local" in caplog.text
        assert result.done == 2 and result.failed == result.retried == 0  # read, keywords
        flags = _server_flags(other)[1]
        assert "\\seen" in flags and "$forwarded" not in flags
        sync_account(store, account, settings=settings)
        assert _keywords(jmap, email) == {"$forwarded": True, "$seen": True}
        next(serving, None)
