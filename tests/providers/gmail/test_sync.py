"""Gmail sync and backfill against the emulator over real HTTP, on both stores.

Each test scripts the emulated mailbox as Gmail (or its owner in Gmail's web
page) would, runs mailroom's sync/import through the registry, and compares
the store with the emulator — and, where the point is what was *not* done
(no body fetched, nothing fetched twice), with the emulator's request log.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from sqlalchemy import func, select, update

from mailroom.config import Settings
from mailroom.oauth.credentials import load_credentials
from mailroom.providers.base import RateLimitError
from mailroom.providers.gmail.backfill import FINISHED, BackfillState, load_backfill, save_backfill
from mailroom.providers.gmail.cursor import load_history_id
from mailroom.providers.gmail.skipped import CHAT, NOT_FOUND, list_skipped
from mailroom.secrets import SecretBox
from mailroom.store.engine import Store
from mailroom.store.models import (
    Account,
    Change,
    GmailBackfill,
    GmailQuotaLimit,
    Label,
    Message,
    MessageLabel,
    Thread,
)
from tests.emulators.gmail.emulator import GmailEmulator
from tests.emulators.gmail.seed import make_message, seed_mailbox
from tests.providers.test_gmail_contract import gmail_account, import_all, sync

__all__ = ["gmail_account"]


@dataclass(frozen=True)
class Stored:
    """One stored message as the tests look at it."""

    id: int
    labels: frozenset[str]  # label paths
    seen: bool
    category: str | None
    thread_id: int | None
    provider_thread_id: str | None


def stored(store: Store, account_id: int) -> dict[str, Stored]:
    """Gmail id → the stored message, for every message of the account."""
    with store.session() as session:
        rows = session.execute(
            select(
                Message.provider_id,
                Message.id,
                Message.seen_at,
                Message.category,
                Message.thread_id,
                Message.provider_thread_id,
            ).where(Message.account_id == account_id)
        ).all()
        paths: dict[int, set[str]] = {row.id: set() for row in rows}
        for message_id, path in session.execute(
            select(MessageLabel.message_id, Label.path)
            .join(Label, Label.id == MessageLabel.label_id)
            .where(MessageLabel.message_id.in_(list(paths)))
        ):
            paths[message_id].add(path)
    found = {
        str(row.provider_id): Stored(
            row.id,
            frozenset(paths[row.id]),
            row.seen_at is not None,
            row.category,
            row.thread_id,
            row.provider_thread_id,
        )
        for row in rows
    }
    assert len(found) == len(rows), "a Gmail message is stored twice"
    return found


def deliver(gmail: GmailEmulator, key: str, labels: list[str] | None = None) -> str:
    """A new message in the emulated mailbox; its Gmail id."""
    raw = make_message(f"About {key}", message_id=f"<{key}@example.org>")
    return gmail.add_message(raw, labels if labels is not None else ["INBOX", "UNREAD"])


def fetched_ids(gmail: GmailEmulator) -> list[str]:
    """The ids of the messages.get calls logged (batch parts included)."""
    return [entry.path.rsplit("/", 1)[-1] for entry in gmail.calls("messages.get")]


def first_contact(store: Store, settings: Settings, account_id: int) -> None:
    """What the scheduler does first: a sync (the snapshot), then the whole backfill."""
    sync(store, settings, account_id)
    import_all(store, settings, account_id)


def test_label_changes_are_mirrored_without_fetching_a_body(
    store: Store, settings: Settings, gmail_emulator: GmailEmulator, gmail_account: int
) -> None:
    """labelsAdded/Removed move labels, stars and read state; no message is fetched again."""
    work = gmail_emulator.create_label("Work")
    a, b = deliver(gmail_emulator, "a"), deliver(gmail_emulator, "b")
    first_contact(store, settings, gmail_account)
    assert stored(store, gmail_account)[a].labels == {"Inbox"}
    gmail_emulator.clear_log()
    gmail_emulator.change_labels(a, add=["STARRED"], remove=["UNREAD", "INBOX"])
    gmail_emulator.change_labels(b, add=[work])
    sync(store, settings, gmail_account)
    now = stored(store, gmail_account)
    assert now[a].labels == {"Starred", "Archive"} and now[a].seen
    assert now[b].labels == {"Inbox", "Work"} and not now[b].seen
    assert gmail_emulator.calls("history.list")
    assert fetched_ids(gmail_emulator) == []


def test_new_mail_and_deletions_arrive_through_the_history(
    store: Store, settings: Settings, gmail_emulator: GmailEmulator, gmail_account: int
) -> None:
    """messagesAdded are fetched (only they), messagesDeleted delete the stored message."""
    a, b = deliver(gmail_emulator, "a"), deliver(gmail_emulator, "b")
    first_contact(store, settings, gmail_account)
    gmail_emulator.clear_log()
    c = deliver(gmail_emulator, "c")
    gmail_emulator.delete(a)
    sync(store, settings, gmail_account)
    assert sorted(stored(store, gmail_account)) == sorted([b, c])
    assert fetched_ids(gmail_emulator) == [c]
    sync(store, settings, gmail_account)  # nothing new: nothing changes
    assert sorted(stored(store, gmail_account)) == sorted([b, c])


def test_the_snapshot_is_taken_before_the_first_fetch(
    store: Store, settings: Settings, gmail_emulator: GmailEmulator, gmail_account: int
) -> None:
    """Mail arriving while the backfill runs is the next sync's: none is missed."""
    deliver(gmail_emulator, "old")
    sync(store, settings, gmail_account)
    with store.session() as session:
        cursor = load_history_id(session, gmail_account)
    assert cursor is not None and int(cursor) <= gmail_emulator.history_id
    assert fetched_ids(gmail_emulator) == []  # the snapshot fetched nothing
    late = deliver(gmail_emulator, "late")  # after the snapshot, before the backfill
    import_all(store, settings, gmail_account)
    sync(store, settings, gmail_account)
    assert late in stored(store, gmail_account) and len(stored(store, gmail_account)) == 2


def test_expired_history_resets_the_cursor_and_resyncs(
    store: Store, settings: Settings, gmail_emulator: GmailEmulator, gmail_account: int
) -> None:
    """A 404 on history.list: new cursor, labels and deletions read again, backfill restarted."""
    a, b = deliver(gmail_emulator, "a"), deliver(gmail_emulator, "b")
    first_contact(store, settings, gmail_account)
    gmail_emulator.change_labels(a, add=["STARRED"], remove=["INBOX"])
    gmail_emulator.delete(b)
    c = deliver(gmail_emulator, "c")
    gmail_emulator.expire_history()
    sync(store, settings, gmail_account)  # no error: the account is not failed
    with store.session() as session:
        account = session.get(Account, gmail_account)
        assert account is not None and account.status == "active"
        assert account.import_finished_at is None  # importing again
        assert load_backfill(session, gmail_account).phase != FINISHED
    now = stored(store, gmail_account)
    assert sorted(now) == [a] and now[a].labels == {"Starred", "Archive"}
    import_all(store, settings, gmail_account)
    assert sorted(stored(store, gmail_account)) == sorted([a, c])
    d = deliver(gmail_emulator, "d")
    sync(store, settings, gmail_account)  # the new cursor works
    assert d in stored(store, gmail_account)


def test_an_expired_access_token_is_refreshed_and_stored(
    store: Store, settings: Settings, gmail_emulator: GmailEmulator, gmail_account: int
) -> None:
    """A 401 makes mailroom refresh at the token endpoint, seal the new token and go on."""
    first_contact(store, settings, gmail_account)
    box = SecretBox.from_settings(settings)

    def token() -> str:
        with store.session() as session:
            account = session.get(Account, gmail_account)
            assert account is not None
            return load_credentials(account, box).tokens.access_token

    before = token()
    gmail_emulator.expire_tokens()
    new = deliver(gmail_emulator, "new")
    sync(store, settings, gmail_account)
    assert new in stored(store, gmail_account)
    assert token() != before


def the_minute_passes(store: Store, account_id: int) -> None:
    """What the clock would do: the deferral and the pacer's block are over."""
    with store.session() as session:
        session.execute(
            update(GmailBackfill)
            .where(GmailBackfill.account_id == account_id)
            .values(not_before=None)
        )
        session.execute(
            update(GmailQuotaLimit)
            .where(GmailQuotaLimit.account_id == account_id)
            .values(blocked_until=None)
        )


def test_inner_batch_429s_defer_the_backfill_then_it_completes(
    store: Store, settings: Settings, gmail_emulator: GmailEmulator, gmail_account: int
) -> None:
    """Rate-limited parts of a 200 batch defer the page (no attempt); later all is stored once."""
    ids = [deliver(gmail_emulator, f"m{i}") for i in range(7)]
    sync(store, settings, gmail_account)
    gmail_emulator.inject_faults(2, 429, in_batch=True)
    with pytest.raises(RateLimitError) as info:
        import_all(store, settings, gmail_account)
    assert info.value.retry_after and info.value.retry_after > 0
    with store.session() as session:
        state = load_backfill(session, gmail_account)
    assert state.attempts == 0 and state.not_before is not None
    assert len(stored(store, gmail_account)) < 7
    the_minute_passes(store, gmail_account)
    import_all(store, settings, gmail_account)
    assert sorted(stored(store, gmail_account)) == sorted(ids)
    with store.session() as session:
        assert load_backfill(session, gmail_account).phase == FINISHED
        account = session.get(Account, gmail_account)
        assert account is not None and account.import_finished_at is not None


def test_a_label_renamed_in_gmail_moves_its_messages(
    store: Store, settings: Settings, gmail_emulator: GmailEmulator, gmail_account: int
) -> None:
    """Gmail renames a label (no history for it): the next sync relabels, the old name goes."""
    work = gmail_emulator.create_label("Work")
    a = deliver(gmail_emulator, "a", ["INBOX", work])
    first_contact(store, settings, gmail_account)
    assert stored(store, gmail_account)[a].labels == {"Inbox", "Work"}
    gmail_emulator.rename_label(work, "Projects/Work")
    sync(store, settings, gmail_account)
    assert stored(store, gmail_account)[a].labels == {"Inbox", "Projects/Work"}
    with store.session() as session:
        paths = set(session.scalars(select(Label.path)))
    assert "Work" not in paths and {"Projects", "Projects/Work"} <= paths


def test_a_recategorization_by_gmail_moves_the_tab(
    store: Store, settings: Settings, gmail_emulator: GmailEmulator, gmail_account: int
) -> None:
    """CATEGORY_* decides the tab; Gmail re-sorting moves the message and its thread."""
    a = deliver(gmail_emulator, "a", ["INBOX", "CATEGORY_PROMOTIONS"])
    first_contact(store, settings, gmail_account)
    before = stored(store, gmail_account)[a]
    assert before.category == "promotions"
    with store.session() as session:
        last = session.scalar(select(func.max(Change.seq))) or 0
    gmail_emulator.categorize(a, "CATEGORY_SOCIAL")
    sync(store, settings, gmail_account)
    after = stored(store, gmail_account)[a]
    assert after.category == "social" and after.thread_id == before.thread_id
    with store.session() as session:
        thread = session.get(Thread, after.thread_id)
        assert thread is not None and thread.category == "social"
        announced = set(
            session.scalars(
                select(Change.object_id).where(Change.seq > last, Change.type == "Thread")
            )
        )
    assert after.thread_id in announced


def test_chats_and_404s_go_to_the_skipped_ledger(
    store: Store, settings: Settings, gmail_emulator: GmailEmulator, gmail_account: int
) -> None:
    """Chats and ids answering 404 are recorded with the reason, and the backfill still ends."""
    mail = deliver(gmail_emulator, "mail")
    chat = gmail_emulator.add_chat("see you")
    gone = gmail_emulator.add_unfetchable(["INBOX"])
    first_contact(store, settings, gmail_account)
    assert sorted(stored(store, gmail_account)) == [mail]
    with store.session() as session:
        ledger = {r.provider_id: r for r in list_skipped(session, [gmail_account])}
        assert load_backfill(session, gmail_account).phase == FINISHED
    assert ledger[chat].kind == CHAT and "CHAT" in ledger[chat].label_ids
    assert ledger[chat].headers.get("from") == "friend@example.com"
    assert ledger[gone].kind == NOT_FOUND and ledger[gone].reason


def test_an_import_run_twice_fetches_and_doubles_nothing(
    store: Store, settings: Settings, gmail_emulator: GmailEmulator, gmail_account: int
) -> None:
    """A second backfill over the same mailbox stores nothing new and fetches no message."""
    ids = seed_mailbox(gmail_emulator, 12)
    gmail_emulator.add_chat()
    first_contact(store, settings, gmail_account)
    first = stored(store, gmail_account)
    assert sorted(first) == sorted(ids)
    gmail_emulator.clear_log()
    with store.session() as session:
        save_backfill(session, gmail_account, BackfillState())
    import_all(store, settings, gmail_account)
    assert stored(store, gmail_account) == first
    assert fetched_ids(gmail_emulator) == []


def test_gmail_thread_ids_are_the_first_stage_of_threading(
    store: Store, settings: Settings, gmail_emulator: GmailEmulator, gmail_account: int
) -> None:
    """Messages of one Gmail thread share a mailroom thread; other threads do not."""
    seed_mailbox(gmail_emulator, 6)  # two conversations of three messages
    first_contact(store, settings, gmail_account)
    by_gmail_thread: dict[str | None, set[int | None]] = {}
    for message in stored(store, gmail_account).values():
        by_gmail_thread.setdefault(message.provider_thread_id, set()).add(message.thread_id)
    assert len(by_gmail_thread) == 2 and None not in by_gmail_thread
    assert all(len(threads) == 1 for threads in by_gmail_thread.values())
    assert len({t for threads in by_gmail_thread.values() for t in threads}) == 2
