"""Local operations carried to the server: flags, moves, deletes; idempotent; local wins."""

from __future__ import annotations

import json
import time

from imapclient import IMAPClient
from sqlalchemy import select, update

from mailroom.config import Settings
from mailroom.labels.operations import Operations
from mailroom.providers.imap import propagate_pending, sync_account
from mailroom.reading import list_messages
from mailroom.store.engine import Store
from mailroom.store.models import Label, PendingChange
from tests.factories import make_message
from tests.imap.views import Mailbox, server_view, store_view, sync_all


def _setup(
    store: Store, settings: Settings, account: int, other: IMAPClient, n: int = 3
) -> dict[str, int]:
    for i in range(n):
        other.append("INBOX", make_message(f"m-{i}@x", subject=f"m {i}"))
    sync_all(store, account, settings)
    with store.session() as session:
        return {r["message_id"]: r["id"] for r in list_messages(session, 1)}


def _labels(store: Store) -> dict[str, list[str]]:
    with store.session() as session:
        return {r["message_id"]: r["labels"] for r in list_messages(session, 1)}


def _highest_modseq(other: IMAPClient, folder: str) -> int:
    return int(other.folder_status(folder, [b"HIGHESTMODSEQ"])[b"HIGHESTMODSEQ"])


def _replay(store: Store) -> None:
    with store.session() as session:
        session.execute(update(PendingChange).values(state="pending", done_at=None))


def _assert_server_matches(store: Store, account: int, other: IMAPClient) -> None:
    """Every message is where its labels say, with the flags its state says."""
    server = server_view(other)
    mine = store_view(store, account)
    assert mine.places() == server.places()
    for mid, flags in server.flags.items():
        assert mine.flags[mid] == flags, mid


def test_star_and_read_become_flags_and_replay_changes_nothing(
    store: Store, settings: Settings, mailbox: Mailbox, account: int, other: IMAPClient
) -> None:
    """Starring sets \\Flagged, reading sets \\Seen; running the jobs again stores nothing."""
    ids = _setup(store, settings, account, other)
    with store.session() as session:
        ops = Operations(session, 1)
        ops.star([ids["m-0@x"]])
        ops.mark_read([ids["m-0@x"], ids["m-1@x"]])
    result = propagate_pending(store, account, settings=settings)
    assert result.done == 3 and result.failed == 0
    other.select_folder("INBOX", readonly=True)
    flags = {u: set(d[b"FLAGS"]) for u, d in other.fetch([1, 2, 3], [b"FLAGS"]).items()}
    assert {b"\\Seen", b"\\Flagged"} <= flags[1]
    assert b"\\Seen" in flags[2] and b"\\Flagged" not in flags[2]
    assert not {b"\\Seen", b"\\Flagged"} & flags[3]
    modseq = _highest_modseq(other, "INBOX")
    _replay(store)
    again = propagate_pending(store, account, settings=settings)
    assert again.done == 3 and again.flagged == 0 and again.moved == 0
    assert _highest_modseq(other, "INBOX") == modseq
    with store.session() as session:
        ops = Operations(session, 1)
        ops.star([ids["m-0@x"]], starred=False)
        ops.mark_read([ids["m-1@x"]], read=False)
    propagate_pending(store, account, settings=settings)
    sync_account(store, account, settings=settings)
    _assert_server_matches(store, account, other)


def test_archive_trash_and_spam_move_and_replay_changes_nothing(
    store: Store, settings: Settings, mailbox: Mailbox, account: int, other: IMAPClient
) -> None:
    """Archive, trash and spam move the message; its location follows; a replay moves nothing."""
    ids = _setup(store, settings, account, other)
    with store.session() as session:
        ops = Operations(session, 1)
        ops.archive([ids["m-0@x"]])
        ops.trash([ids["m-1@x"]])
        ops.spam([ids["m-2@x"]])
    result = propagate_pending(store, account, settings=settings)
    assert result.moved == 3 and result.failed == 0
    server = server_view(other)
    assert {folder for folder, _uid in server.locations} == {"Archive", "Trash", "Junk"}
    _assert_server_matches(store, account, other)
    modseqs = {f: _highest_modseq(other, f) for f in ("INBOX", "Archive", "Trash", "Junk")}
    _replay(store)
    again = propagate_pending(store, account, settings=settings)
    assert again.moved == 0 and again.expunged == 0
    assert {f: _highest_modseq(other, f) for f in modseqs} == modseqs
    before = _labels(store)
    sync_account(store, account, settings=settings)
    assert _labels(store) == before
    assert before["m-1@x"] == ["Trash"]
    with store.session() as session:
        ops = Operations(session, 1)
        ops.restore([ids["m-1@x"]])
        ops.spam([ids["m-2@x"]], is_spam=False)
    propagate_pending(store, account, settings=settings)
    sync_account(store, account, settings=settings)
    assert _labels(store)["m-1@x"] == ["Inbox"]
    assert _labels(store)["m-2@x"] == ["Inbox"]
    _assert_server_matches(store, account, other)


def test_delete_forever_expunges_on_the_server(
    store: Store, settings: Settings, mailbox: Mailbox, account: int, other: IMAPClient
) -> None:
    """A message deleted forever is expunged from the server, and the next sync keeps it gone."""
    ids = _setup(store, settings, account, other)
    with store.session() as session:
        Operations(session, 1).delete_forever([ids["m-1@x"]])
    assert propagate_pending(store, account, settings=settings).expunged == 1
    assert "m-1@x" not in server_view(other).messages
    sync_account(store, account, settings=settings)
    assert "m-1@x" not in _labels(store)
    _assert_server_matches(store, account, other)


def test_pending_local_changes_win_until_acknowledged(
    store: Store, settings: Settings, mailbox: Mailbox, account: int, other: IMAPClient
) -> None:
    """A sync reading the older server state does not revert a change not yet propagated."""
    ids = _setup(store, settings, account, other)
    other.select_folder("INBOX")
    other.add_flags([3], [b"\\Flagged"])  # a change elsewhere, so the sync has work
    with store.session() as session:
        ops = Operations(session, 1)
        ops.mark_read([ids["m-0@x"]])
        ops.archive([ids["m-1@x"]])
        ops.star([ids["m-2@x"]], starred=True)
        ops.star([ids["m-2@x"]], starred=False)  # pending: unflag although the server flags it
    sync_account(store, account, settings=settings)
    labels = _labels(store)
    assert labels["m-1@x"] == ["Archive"]
    assert labels["m-2@x"] == ["Inbox"]
    with store.session() as session:
        seen = {r["message_id"]: r["seen"] for r in list_messages(session, 1)}
    assert seen["m-0@x"] is True
    propagate_pending(store, account, settings=settings)
    sync_account(store, account, settings=settings)
    assert _labels(store)["m-2@x"] == ["Inbox"]
    _assert_server_matches(store, account, other)


def test_removing_the_location_label_moves_by_the_replacement_order(
    store: Store, settings: Settings, mailbox: Mailbox, account: int, other: IMAPClient
) -> None:
    """Removing a folder's label moves it to its newest user label's folder, else to Archive."""
    other.create_folder("Work")
    other.create_folder("Receipts")
    other.append("Work", make_message("w@x"))
    sync_all(store, account, settings)
    with store.session() as session:
        mid = list_messages(session, 1)[0]["id"]
        receipts = session.scalars(select(Label.id).where(Label.path == "Receipts")).one()
        work = session.scalars(select(Label.id).where(Label.path == "Work")).one()
        ops = Operations(session, 1)
        ops.label([mid], receipts)  # database-only while Work stays
    propagate_pending(store, account, settings=settings)
    assert {f for f, _u in server_view(other).locations} == {"Work"}
    with store.session() as session:
        Operations(session, 1).label([mid], work, on=False)
    propagate_pending(store, account, settings=settings)
    assert {f for f, _u in server_view(other).locations} == {"Receipts"}
    with store.session() as session:
        Operations(session, 1).label([mid], receipts, on=False)
    propagate_pending(store, account, settings=settings)
    assert {f for f, _u in server_view(other).locations} == {"Archive"}
    sync_account(store, account, settings=settings)
    assert _labels(store)["w@x"] == ["Archive"]
    _assert_server_matches(store, account, other)


def test_a_jmap_star_reaches_dovecot_within_seconds_without_the_sweep(
    store: Store, settings: Settings, mailbox: Mailbox, account: int, other: IMAPClient
) -> None:
    """With the jobs running in-process and no sweep, an Email/set star is \\Flagged at once."""
    from mailroom.jmap.auth import Principal
    from mailroom.jmap.dispatcher import Dispatcher, Limits
    from mailroom.jmap.methods import METHODS
    from mailroom.jmap.session import CAPABILITIES, session_state
    from mailroom.jobs.runtime import Runtime

    ids = _setup(store, settings, account, other, n=1)
    runtime = Runtime(store, settings, propagation_sweep=3600)  # the safety net never runs
    runtime.start_consumers(("propagate",))
    try:
        dispatcher = Dispatcher(store, METHODS, CAPABILITIES, Limits(), session_state)
        update = {f"M{ids['m-0@x']}": {"keywords/$flagged": True}}
        request = {
            "using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
            "methodCalls": [["Email/set", {"accountId": "u1", "update": update}, "s"]],
        }
        started = time.monotonic()
        answer = dispatcher.run(Principal(1, "me"), dispatcher.parse(json.dumps(request).encode()))
        assert list(answer["methodResponses"][0][1]["updated"]) == list(update)
        other.select_folder("INBOX", readonly=True)
        while b"\\Flagged" not in other.fetch([1], [b"FLAGS"])[1][b"FLAGS"]:
            assert time.monotonic() - started < 10, "the star did not reach Dovecot"
            time.sleep(0.05)
            other.noop()
    finally:
        runtime.stop()
    with store.session() as session:
        assert set(session.scalars(select(PendingChange.state))) == {"done"}
