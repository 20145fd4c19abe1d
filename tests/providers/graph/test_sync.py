"""The Graph syncer against the emulator: moves, deletes, read/flag, expired links, limits.

Both stores (the ``store`` fixture); the provider is driven through the registry.
"""

from __future__ import annotations

import threading

from sqlalchemy import select

from mailroom.config import Settings
from mailroom.labels.resolver import system_label
from mailroom.store.engine import Store
from mailroom.store.models import Account, Folder, Message, MessageLabel, MessageLocation
from tests.emulators.graph.server import GraphEmulator
from tests.providers.test_graph_contract import fetch, graph_account, raw, sync

__all__ = ["graph_account"]


def where(store: Store, account_id: int) -> dict[str, tuple[int, set[str]]]:
    """Message key → (message id, the folder paths it is located in)."""
    found: dict[str, tuple[int, set[str]]] = {}
    with store.session() as session:
        messages = session.execute(
            select(Message.id, Message.message_id_header).where(Message.account_id == account_id)
        ).all()
        for message_id, header in messages:
            key = str(header).removesuffix("@x")
            assert key not in found, f"{key} is stored twice"
            paths = set(
                session.scalars(
                    select(Folder.path)
                    .join(MessageLocation, MessageLocation.folder_id == Folder.id)
                    .where(MessageLocation.message_id == message_id)
                )
            )
            found[key] = (message_id, paths)
    return found


def state_of(store: Store, account_id: int, key: str) -> tuple[bool, bool]:
    """(seen, starred) of a stored message."""
    with store.session() as session:
        message = session.scalars(
            select(Message).where(
                Message.account_id == account_id, Message.message_id_header == f"{key}@x"
            )
        ).one()
        user = session.scalars(select(Account.user_id).where(Account.id == account_id)).one()
        starred = system_label(session, user, "starred").id
        flagged = session.scalar(
            select(MessageLabel.message_id).where(
                MessageLabel.message_id == message.id, MessageLabel.label_id == starred
            )
        )
        return message.seen_at is not None, flagged is not None


def test_a_move_elsewhere_keeps_the_message_and_moves_its_location(
    store: Store, settings: Settings, graph_emulator: GraphEmulator, graph_account: int
) -> None:
    """A move in another client: same message id, one location, in the new folder."""
    moving = graph_emulator.add_message(raw("moving"), "inbox")
    graph_emulator.add_message(raw("staying"), "inbox")
    fetch(store, settings, graph_account)
    before = where(store, graph_account)
    graph_emulator.move_message(moving.immutable_id, "archive")
    fetch(store, settings, graph_account)
    after = where(store, graph_account)
    assert after["moving"] == (before["moving"][0], {"Archive"})
    assert after["staying"] == before["staying"]


def test_moves_back_and_forth_between_syncs_end_in_the_last_folder(
    store: Store, settings: Settings, graph_emulator: GraphEmulator, graph_account: int
) -> None:
    """Inbox → Archive → Inbox before a sync: the message is in the Inbox, once."""
    message = graph_emulator.add_message(raw("ping"), "inbox")
    fetch(store, settings, graph_account)
    graph_emulator.move_message(message.immutable_id, "archive")
    graph_emulator.move_message(message.immutable_id, "inbox")
    fetch(store, settings, graph_account)
    assert where(store, graph_account)["ping"][1] == {"Inbox"}


def test_a_delete_elsewhere_deletes_the_message(
    store: Store, settings: Settings, graph_emulator: GraphEmulator, graph_account: int
) -> None:
    """A message deleted for good at Graph is gone from the store after the next sync."""
    doomed = graph_emulator.add_message(raw("doomed"), "inbox")
    graph_emulator.add_message(raw("kept"), "inbox")
    fetch(store, settings, graph_account)
    graph_emulator.delete_message(doomed.immutable_id, permanent=True)
    fetch(store, settings, graph_account)
    assert sorted(where(store, graph_account)) == ["kept"]


def test_read_and_flag_changes_are_mirrored(
    store: Store, settings: Settings, graph_emulator: GraphEmulator, graph_account: int
) -> None:
    """isRead and the flag set in another client become seen and starred, and back."""
    message = graph_emulator.add_message(raw("f"), "inbox")
    fetch(store, settings, graph_account)
    assert state_of(store, graph_account, "f") == (False, False)
    graph_emulator.mark_read(message.immutable_id)
    graph_emulator.flag(message.immutable_id)
    fetch(store, settings, graph_account)
    assert state_of(store, graph_account, "f") == (True, True)
    graph_emulator.mark_read(message.immutable_id, False)
    graph_emulator.flag(message.immutable_id, "notFlagged")
    fetch(store, settings, graph_account)
    assert state_of(store, graph_account, "f") == (False, False)


def test_an_expired_delta_link_returns_the_folder_to_import(
    store: Store, settings: Settings, graph_emulator: GraphEmulator, graph_account: int
) -> None:
    """Both expiry forms: the folder is enumerated again, nothing doubled, new mail found."""
    for form in ("410", "400"):
        graph_emulator.add_message(raw(f"before{form}"), "inbox")
        fetch(store, settings, graph_account)
        ids = {k: v[0] for k, v in where(store, graph_account).items()}
        graph_emulator.expire_delta_tokens("inbox", form)
        graph_emulator.add_message(raw(f"after{form}"), "inbox")
        fetch(store, settings, graph_account)
        now = {k: v[0] for k, v in where(store, graph_account).items()}
        assert {k: now[k] for k in ids} == ids
        assert f"after{form}" in now


def test_a_replayed_round_changes_nothing(
    store: Store, settings: Settings, graph_emulator: GraphEmulator, graph_account: int
) -> None:
    """A delta round that repeats the one before stores nothing twice."""
    graph_emulator.add_message(raw("r1"), "inbox")
    fetch(store, settings, graph_account)
    graph_emulator.add_message(raw("r2"), "inbox")
    fetch(store, settings, graph_account)
    before = where(store, graph_account)
    graph_emulator.delta().replay_next_round(graph_emulator.mailbox().folder("inbox").id)
    fetch(store, settings, graph_account)
    assert where(store, graph_account) == before


def test_retry_after_is_honoured(
    store: Store, settings: Settings, graph_emulator: GraphEmulator, graph_account: int
) -> None:
    """A 429 and a 503 with (fractional) Retry-After are waited out; the sync succeeds."""
    graph_emulator.add_message(raw("t"), "inbox")
    fetch(store, settings, graph_account)
    graph_emulator.add_message(raw("u"), "inbox")
    graph_emulator.throttle_next(1, 429, "0.2")
    graph_emulator.throttle_next(1, 503, "0.1")
    sync(store, settings, graph_account)
    statuses = [r.status for r in graph_emulator.graph_requests()]
    assert 429 in statuses and 503 in statuses
    assert sorted(where(store, graph_account)) == ["t", "u"]


def test_never_more_than_four_requests_in_flight(
    store: Store, settings: Settings, graph_emulator: GraphEmulator, graph_account: int
) -> None:
    """Six workers syncing the same mailbox at once keep to the mailbox's four slots."""
    for number in range(8):
        graph_emulator.add_message(raw(f"c{number}"), "inbox")
    fetch(store, settings, graph_account)
    graph_emulator.set_latency(0.05)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            sync(store, settings, graph_account)
        except BaseException as exc:  # reported in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert 1 < graph_emulator.peak_in_flight() <= 4
    assert 429 not in {r.status for r in graph_emulator.graph_requests()}
