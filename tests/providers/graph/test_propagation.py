"""The Graph propagator against the emulator: moves, read/flag, deletes, in $batch, idempotent.

Local actions go through :class:`mailroom.labels.operations.Operations` (what
the JMAP methods call) and are carried by the registered propagator through
:func:`mailroom.labels.propagation.propagate_pending`, on both stores.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import select, update

from mailroom.config import Settings
from mailroom.labels.operations import Operations
from mailroom.labels.propagation import PropagationRun, propagate_pending
from mailroom.providers import registry
from mailroom.store.engine import Store
from mailroom.store.models import Account, Message, PendingChange
from tests.emulators.graph.mailbox import Message as GraphMessage
from tests.emulators.graph.server import GraphEmulator
from tests.providers.test_graph_contract import PROVIDER, add_graph_account, fetch, raw

Action = Callable[[Operations, list[int]], object]


def propagate(store: Store, settings: Settings, account_id: int) -> PropagationRun:
    """Carry the due pending changes through the registered propagator."""
    propagator = registry.propagator_for(store, PROVIDER, settings)
    assert propagator is not None
    return propagate_pending(store, account_id, propagator)


def act(store: Store, account_id: int, action: Action) -> None:
    """Apply a local action to every message of the account."""
    with store.session() as session:
        user = session.scalars(select(Account.user_id).where(Account.id == account_id)).one()
        ids = list(session.scalars(select(Message.id).where(Message.account_id == account_id)))
        action(Operations(session, user), ids)


def replay(store: Store, account_id: int) -> None:
    """Make every pending change due again, as after a crash."""
    with store.session() as session:
        session.execute(
            update(PendingChange)
            .where(PendingChange.account_id == account_id)
            .values(state="pending", done_at=None, attempts=0)
        )


def at_graph(graph: GraphEmulator, message: GraphMessage) -> GraphMessage:
    """The emulator's current view of a message (found by its immutable id)."""
    return graph.mailbox().message(message.immutable_id)


@pytest.mark.parametrize("immutable", [True, False], ids=["immutable-ids", "rest-ids"])
def test_a_local_archive_moves_the_message_and_learns_its_id(
    store: Store, settings: Settings, graph_emulator: GraphEmulator, immutable: bool
) -> None:
    """Archived in mailroom: moved at Graph, located there with the id the answer gave."""
    account_id = add_graph_account(store, settings, graph_emulator, immutable_ids=immutable)
    message = graph_emulator.add_message(raw("a"), "inbox")
    fetch(store, settings, account_id)
    act(store, account_id, lambda ops, ids: ops.archive(ids))
    run = propagate(store, settings, account_id)
    assert run.failed == 0 and run.retried == 0 and run.done >= 1
    moved = at_graph(graph_emulator, message)
    assert moved.folder_id == graph_emulator.mailbox().folder("archive").id
    with store.session() as session:
        provider_id = session.scalars(
            select(Message.provider_id).where(Message.account_id == account_id)
        ).one()
    assert provider_id == (moved.immutable_id if immutable else moved.id)
    replay(store, account_id)
    again = propagate(store, settings, account_id)
    assert again.failed == 0 and again.retried == 0
    fetch(store, settings, account_id)
    with store.session() as session:
        count = len(
            session.scalars(select(Message.id).where(Message.account_id == account_id)).all()
        )
    assert count == 1
    assert at_graph(graph_emulator, message).folder_id == moved.folder_id


def test_read_and_star_go_in_one_batch_and_replaying_changes_nothing(
    store: Store, settings: Settings, graph_emulator: GraphEmulator
) -> None:
    """Marking three messages read and starred is one $batch; a replay leaves Graph as it was."""
    account_id = add_graph_account(store, settings, graph_emulator)
    messages = [graph_emulator.add_message(raw(f"s{n}"), "inbox") for n in range(3)]
    fetch(store, settings, account_id)
    act(store, account_id, lambda ops, ids: ops.star(ids))
    act(store, account_id, lambda ops, ids: ops.mark_read(ids))
    before = len(graph_emulator.graph_requests(parts=False))
    run = propagate(store, settings, account_id)
    assert run.failed == 0 and run.done >= 3
    sent = graph_emulator.graph_requests(parts=False)[before:]
    assert [r.path for r in sent] == ["/$batch"]  # one request: the whole batch
    assert all(at_graph(graph_emulator, m).flag_status == "flagged" for m in messages)
    assert all(at_graph(graph_emulator, m).is_read for m in messages)
    replay(store, account_id)
    assert propagate(store, settings, account_id).failed == 0
    assert all(at_graph(graph_emulator, m).flag_status == "flagged" for m in messages)


def test_delete_forever_removes_the_message_and_a_replay_is_done(
    store: Store, settings: Settings, graph_emulator: GraphEmulator
) -> None:
    """A message deleted forever is gone from Graph; replaying the delete (404) is done."""
    account_id = add_graph_account(store, settings, graph_emulator)
    message = graph_emulator.add_message(raw("x"), "inbox")
    fetch(store, settings, account_id)
    act(store, account_id, lambda ops, ids: ops.delete_forever(ids))
    run = propagate(store, settings, account_id)
    assert run.failed == 0 and run.done >= 1
    assert message.immutable_id not in graph_emulator.mailbox().by_immutable
    replay(store, account_id)
    again = propagate(store, settings, account_id)
    assert again.failed == 0 and again.retried == 0
