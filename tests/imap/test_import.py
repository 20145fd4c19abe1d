"""First contact and the history import of an IMAP account against a real Dovecot."""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import pytest
from sqlalchemy import select

from mailroom.config import Settings
from mailroom.providers.base import TransientError
from mailroom.providers.imap import import_page, import_state, sync_account
from mailroom.providers.imap.connection import ImapConnection
from mailroom.providers.imap.prefetch import LookAhead
from mailroom.reading import list_messages
from mailroom.store.engine import Store
from mailroom.store.models import Blob, Folder, Label, Message, SkippedMessage
from tests.factories import make_message
from tests.imap.views import (
    Mailbox,
    assert_mirrors,
    message_count,
    message_ids,
    sync_all,
)


def _fill(mailbox: Mailbox) -> dict[str, list[str]]:
    """A multi-folder account: INBOX, Sent, Drafts, nested user folders, Archive, Junk, Trash."""
    layout = {
        "INBOX": 7,
        "Sent": 3,
        "Drafts": 1,
        "Work": 2,
        "Work.Invoices": 2,
        "Archive": 4,
        "Junk": 2,
        "Trash": 1,
    }
    names: dict[str, list[str]] = {}
    with mailbox.client() as client:
        client.create_folder("Work")
        client.create_folder("Work.Invoices")
        for folder, count in layout.items():
            for i in range(count):
                mid = f"{folder.lower().replace('.', '-')}-{i}@example.org"
                flags = (b"\\Seen",) if i % 2 else ()
                client.append(folder, make_message(mid, subject=f"{folder} {i}"), flags=flags)
                names.setdefault(folder, []).append(mid)
    return names


def test_first_sync_fetches_nothing_and_import_brings_everything(
    store: Store, settings: Settings, mailbox: Mailbox, account: int
) -> None:
    """The first sync only sets the marks; the import then stores every folder with its labels."""
    names = _fill(mailbox)
    touched = sync_account(store, account, settings=settings)
    assert touched  # the folders were discovered
    assert message_count(store, account) == 0
    with store.session() as session:
        state = import_state(session, account)
    assert state.importing and state.done == 0 and state.total == 22
    sync_all(store, account, settings)
    assert_mirrors(store, account, mailbox)
    with store.session() as session:
        state = import_state(session, account)
        rows = {r["message_id"]: r for r in list_messages(session, 1)}
        paths = set(session.scalars(select(Label.path)))
    assert not state.importing and state.done == state.total == 22
    assert rows["inbox-0@example.org"]["labels"] == ["Inbox"]
    assert rows["sent-0@example.org"]["labels"] == ["Sent"]
    assert rows["junk-0@example.org"]["labels"] == ["Spam"]
    assert rows["work-invoices-1@example.org"]["labels"] == ["Work/Invoices"]
    assert rows["work-invoices-1@example.org"]["seen"] is True
    assert {"Work", "Work/Invoices"} <= paths
    assert sum(len(v) for v in names.values()) == len(rows)


def test_raw_bytes_are_stored(
    store: Store, settings: Settings, mailbox: Mailbox, account: int
) -> None:
    """The message's RFC 5322 bytes are kept exactly as the server serves them."""
    raw = make_message("raw-1@example.org", subject="Raw", body="line one\r\nline two\r\n")
    mailbox.append("INBOX", raw)
    sync_all(store, account, settings)
    with store.session() as session:
        sha = session.scalar(select(Message.raw_sha256))
        data = session.scalar(select(Blob.data).where(Blob.sha256 == sha))
    with mailbox.client() as client:
        client.select_folder("INBOX")
        served = client.fetch([1], [b"BODY.PEEK[]"])[1][b"BODY[]"]
    assert data == served


def test_import_goes_newest_first_in_pages_of_50_inbox_first(
    store: Store, settings: Settings, mailbox: Mailbox, account: int
) -> None:
    """Each page stores the 50 newest missing messages, Inbox before Sent before Trash."""
    with mailbox.client() as client:
        for i in range(120):
            client.append("INBOX", make_message(f"in-{i}@x", subject=f"in {i}"))
        client.append("Trash", make_message("trash-0@x"))
        client.append("Sent", make_message("sent-0@x"))
    sync_account(store, account, settings=settings)
    assert import_page(store, account, settings=settings)
    ids = message_ids(store, account)
    assert set(ids) == {f"in-{i}@x" for i in range(70, 120)}
    assert import_page(store, account, settings=settings)
    assert import_page(store, account, settings=settings)
    assert len(message_ids(store, account)) == 120
    assert import_page(store, account, settings=settings)
    assert "sent-0@x" in message_ids(store, account)
    assert "trash-0@x" not in message_ids(store, account)
    assert not import_page(store, account, settings=settings)
    assert len(message_ids(store, account)) == 122
    with store.session() as session:
        assert not import_state(session, account).importing


def test_new_mail_during_import_is_synced_at_once(
    store: Store, settings: Settings, mailbox: Mailbox, account: int
) -> None:
    """Mail arriving mid-import is stored by the next sync, and the import still ends complete."""
    with mailbox.client() as client:
        for i in range(80):
            client.append("INBOX", make_message(f"old-{i}@x"))
    sync_account(store, account, settings=settings)
    assert import_page(store, account, settings=settings)
    mailbox.append("INBOX", make_message("fresh@x", subject="Fresh"))
    sync_account(store, account, settings=settings)
    assert "fresh@x" in message_ids(store, account)
    assert len(message_ids(store, account)) == 51
    sync_all(store, account, settings)
    assert len(message_ids(store, account)) == 81
    assert_mirrors(store, account, mailbox)


def test_rerun_and_overlap_store_nothing_twice(
    store: Store, settings: Settings, mailbox: Mailbox, account: int
) -> None:
    """Running sync and import again, or marks reset to first contact, never duplicates."""
    with mailbox.client() as client:
        for i in range(60):
            client.append("INBOX", make_message(f"m-{i}@x"))
    sync_all(store, account, settings)
    with store.session() as session:  # forget the marks: the whole folder is "history" again
        for folder in session.scalars(select(Folder).where(Folder.account_id == account)):
            folder.uidvalidity = None
            folder.state = {}
    sync_all(store, account, settings)
    sync_all(store, account, settings)
    assert len(message_ids(store, account)) == 60
    assert_mirrors(store, account, mailbox)


def test_a_message_the_parser_rejects_is_kept_raw_and_costs_nothing_else(
    store: Store, settings: Settings, mailbox: Mailbox, account: int
) -> None:
    """Bytes that are no RFC 5322 message are stored raw with a parse note; the rest imports."""
    garbage = b"\x00\xff\xfe not a message \x00\r\n\r\n\x89PNG\r\n\x1a\n" + bytes(range(256))
    mailbox.server.deliver(mailbox.user, garbage, flags="S")
    mailbox.append("INBOX", make_message("fine@x"))
    sync_all(store, account, settings)
    with store.session() as session:
        rows = session.execute(select(Message.message_id_header, Message.parse_notes)).all()
        blobs = session.scalars(select(Blob.size)).all()
    assert len(rows) == 2
    assert len(blobs) == 2
    notes = {mid: n for mid, n in rows}
    assert "fine@x" in notes
    assert "message-id: missing" in notes[None]  # identified by its bytes' hash
    sync_all(store, account, settings)  # and recognised again: nothing is stored twice
    assert message_count(store, account) == 2


def test_an_unreadable_message_is_skipped_after_five_attempts(
    store: Store, settings: Settings, mailbox: Mailbox, account: int
) -> None:
    """A message the server cannot serve costs only itself: 5 attempts, then the skipped ledger."""
    mailbox.append("INBOX", make_message("before@x"))
    bad = mailbox.server.deliver(mailbox.user, make_message("broken@x"), flags="S")
    mailbox.append("INBOX", make_message("after@x"))
    bad.chmod(0)  # Dovecot (running as nobody) cannot read it and drops the connection
    try:
        sync_account(store, account, settings=settings)
        calls = 0
        while True:
            calls += 1
            assert calls < 20, "the import does not get past the broken message"
            try:
                if not import_page(store, account, settings=settings):
                    break
            except TransientError:
                continue
        assert set(message_ids(store, account)) == {"before@x", "after@x"}
        with store.session() as session:
            skipped = session.scalars(select(SkippedMessage)).all()
        assert len(skipped) == 1
        assert "after 5 attempts" in skipped[0].reason
        assert skipped[0].labels == ["INBOX"]
        with store.session() as session:
            assert not import_state(session, account).importing
        sync_account(store, account, settings=settings)  # the next sync does not trip over it
    finally:
        bad.chmod(0o600)


def test_import_state_is_one_query_and_doubts_until_discovered(
    store: Store, settings: Settings, mailbox: Mailbox, account: int
) -> None:
    """An account never synced counts as importing; an empty mailbox is done after one sync."""
    with store.session() as session:
        assert import_state(session, account).importing
    sync_account(store, account, settings=settings)
    with store.session() as session:
        assert not import_state(session, account).importing


def test_look_ahead_on_a_kept_connection_survives_changes_between_pages(
    store: Store, settings: Settings, mailbox: Mailbox, account: int
) -> None:
    """Pages fetched ahead are used only if still exact; expunges between pages lose nothing."""
    from mailroom.providers.imap.login import account_connection

    with mailbox.client() as client:
        for i in range(160):
            client.append("INBOX", make_message(f"la-{i}@x"))
    with account_connection(store, account, settings=settings) as conn:
        sync_account(store, account, settings=settings, connection=conn)
        assert import_page(store, account, settings=settings, connection=conn)  # 111-160
        assert conn.attached  # the next page (61-110) is on its way
        with mailbox.client() as client:  # another client deletes from the prefetched page
            client.select_folder("INBOX")
            client.delete_messages([100, 101])
            client.uid_expunge([100, 101])
        while import_page(store, account, settings=settings, connection=conn):
            pass
        # Fetched before the expunge, so stored; the next sync sees them vanish.
        sync_account(store, account, settings=settings, connection=conn)
    assert len(message_ids(store, account)) == 158
    assert_mirrors(store, account, mailbox)


@pytest.mark.slow
def test_a_large_import_parses_in_worker_processes(
    store: Store, settings: Settings, mailbox: Mailbox, account: int
) -> None:
    """With more than a thousand messages the look-ahead parses in worker processes; all arrive."""
    from mailroom.providers.imap.login import account_connection

    for i in range(1_100):
        mailbox.server.deliver(mailbox.user, make_message(f"big-{i}@x", subject=f"big {i}"))
    pages = 0
    with account_connection(store, account, settings=settings) as conn:
        sync_account(store, account, settings=settings, connection=conn)
        while import_page(store, account, settings=settings, connection=conn):
            pages += 1
        assert conn.attached  # the look-ahead and its parse pool are attached to the connection
    assert not conn.attached  # ... and released with it
    # Pages on a kept connection grow: 50, 100, 200, 400 (750 in four pages), and the
    # fifth (the last 350) says no more.
    assert pages == 4
    assert_mirrors(store, account, mailbox)


def test_import_pages_through_sparse_uids_window_by_window(
    store: Store,
    settings: Settings,
    mailbox: Mailbox,
    account: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """UIDs with wide gaps (most messages expunged) are found by widening searches."""
    monkeypatch.setattr("mailroom.providers.imap.importer._SCAN_CHUNK", 4)
    with mailbox.client() as client:
        for i in range(150):
            client.append("INBOX", make_message(f"sparse-{i}@x", subject=f"s {i}"))
        client.select_folder("INBOX")
        client.delete_messages([uid for uid in client.search("ALL") if uid % 9])  # keep every 9th
        client.expunge()
        kept = sorted(client.search("ALL"))
    assert len(kept) == 16 and kept[-1] - kept[0] == 135
    sync_account(store, account, settings=settings)
    assert message_count(store, account) == 0
    sync_all(store, account, settings)
    assert set(message_ids(store, account)) == {f"sparse-{uid - 1}@x" for uid in kept}
    assert_mirrors(store, account, mailbox)


def _record_prefetched_pages(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Start parse workers for any import; per page taken, whether it came fetched and parsed."""

    monkeypatch.setattr("mailroom.mime.pool.PARALLEL_FROM", 1)  # workers even for 200 messages
    taken: list[bool] = []
    original_take = LookAhead.take

    def take(self: LookAhead, folder_id: int, uidvalidity: int, uids: list[int]) -> object:
        result = original_take(self, folder_id, uidvalidity, uids)
        taken.append(result is not None and len(result.parsed) == len(uids))
        return result

    monkeypatch.setattr(LookAhead, "take", take)
    return taken


def _wait_for_workers(ahead: LookAhead) -> None:
    """Wait until the look-ahead's parse workers are up (they start in the background)."""
    import time

    deadline = time.monotonic() + 30
    while not ahead.pool.up():
        assert time.monotonic() < deadline, "the parse worker did not start"
        time.sleep(0.01)


def _wait_until_broken(pool: ProcessPoolExecutor) -> None:
    """Wait until the executor has noticed that its workers died (a job sent now fails).

    Until it has, a job is still accepted and fails only later: the look-ahead
    would then start its new pool one page late, and the last page would not come
    from a worker.
    """
    try:
        pool.submit(os.getpid).result(timeout=60)
    except BrokenProcessPool:
        return
    pytest.fail("The pool still ran a job after its workers were killed.")


def _append(mailbox: Mailbox, prefix: str, count: int) -> None:
    """Append ``count`` messages to INBOX (Message-IDs ``<prefix>-<i>@x``)."""
    with mailbox.client() as client:
        for i in range(count):
            client.append("INBOX", make_message(f"{prefix}-{i}@x", subject=f"{prefix} {i}"))


def _first_page(store: Store, settings: Settings, account: int, conn: ImapConnection) -> LookAhead:
    """First contact and the first import page on a kept connection; its look-ahead."""
    sync_account(store, account, settings=settings, connection=conn)
    assert import_page(store, account, settings=settings, connection=conn)
    return next(a for a in conn.attached.values() if isinstance(a, LookAhead))


def test_a_worker_fetches_the_next_page_on_a_connection_of_its_own(
    store: Store,
    settings: Settings,
    mailbox: Mailbox,
    account: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With parse workers up, pages arrive fetched and parsed; what the store holds is the same."""
    from mailroom.providers.imap.login import account_connection

    taken = _record_prefetched_pages(monkeypatch)
    _append(mailbox, "w", 200)
    with account_connection(store, account, settings=settings) as conn:
        ahead = _first_page(store, settings, account, conn)
        _wait_for_workers(ahead)
        while import_page(store, account, settings=settings, connection=conn):
            pass
    assert any(taken)  # at least one page came from the worker, fetched and parsed
    assert len(message_ids(store, account)) == 200
    assert_mirrors(store, account, mailbox)


def test_a_look_ahead_whose_worker_died_starts_a_new_one(
    store: Store,
    settings: Settings,
    mailbox: Mailbox,
    account: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A killed parse worker is replaced: later pages come fetched ahead again; nothing is lost."""
    import signal

    from mailroom.providers.imap.login import account_connection

    monkeypatch.setattr("mailroom.providers.imap.importer.KEPT_PAGE_LIMIT", 200)
    taken = _record_prefetched_pages(monkeypatch)
    _append(mailbox, "d", 800)
    with account_connection(store, account, settings=settings) as conn:
        ahead = _first_page(store, settings, account, conn)  # 751-800
        _wait_for_workers(ahead)
        assert import_page(store, account, settings=settings, connection=conn)  # 651-750
        assert import_page(store, account, settings=settings, connection=conn)  # 451-650
        assert taken[-1], "the page should have come from the worker"
        pool = ahead.pool._pool
        assert pool is not None
        for pid in list(pool._processes):  # the worker dies (killed, out of memory)
            os.kill(pid, signal.SIGKILL)
        _wait_until_broken(pool)
        while import_page(store, account, settings=settings, connection=conn):  # 200s, 50
            _wait_for_workers(ahead)
        assert ahead.restarts == 1
        assert taken[-1], "after the restart, pages should come from the new worker again"
    assert len(message_ids(store, account)) == 800
    assert_mirrors(store, account, mailbox)


def test_kept_connection_pages_grow_but_hold_a_bounded_amount_of_mail(
    store: Store,
    settings: Settings,
    mailbox: Mailbox,
    account: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pages double while small; with messages too large for the byte budget they stay at 50."""
    from mailroom.providers.imap.login import account_connection

    with mailbox.client() as client:
        for i in range(1_050):
            size = 4_000 if i < 900 else 20  # the oldest 900 are large, the newest 150 small
            client.append("INBOX", make_message(f"b-{i}@x", body="x" * size + "\n"))
    monkeypatch.setattr("mailroom.providers.imap.importer.PAGE_BYTES", 150_000)
    sizes: list[int] = []
    original = LookAhead.take

    def take(self: LookAhead, folder_id: int, uidvalidity: int, uids: list[int]) -> object:
        sizes.append(len(uids))
        return original(self, folder_id, uidvalidity, uids)

    monkeypatch.setattr(LookAhead, "take", take)
    with account_connection(store, account, settings=settings) as conn:
        sync_account(store, account, settings=settings, connection=conn)
        while import_page(store, account, settings=settings, connection=conn):
            pass
    # 50 and 100 small ones grow the pages; the next two (large mail) were sized while
    # only small mail had been seen; then 150,000 bytes of 4 KB messages allow 50 a page.
    assert sizes[:4] == [50, 100, 200, 400]
    assert set(sizes[4:]) == {50}
    assert len(message_ids(store, account)) == 1_050
    assert_mirrors(store, account, mailbox)
