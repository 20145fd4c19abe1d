"""Graph categories and mailroom labels, both ways, against the emulator on both stores.

Graph → mailroom: a category changed at Graph changes the stored message's
labels at the next sync. mailroom → Graph: a label without a folder, added or
taken off locally, is written back in the propagator's ``PATCH`` as the full
``categories`` array. Pending local changes win over an older Graph view.
"""

from __future__ import annotations

from sqlalchemy import select

from mailroom.config import Settings
from mailroom.labels.resolver import resolve_path
from mailroom.store.engine import Store
from mailroom.store.models import Account, Label, Message, MessageLabel
from tests.emulators.graph.server import GraphEmulator
from tests.providers.graph.test_propagation import act, at_graph, propagate, replay
from tests.providers.test_graph_contract import add_graph_account, fetch, raw


def labels_of(store: Store, account_id: int) -> set[str]:
    """The label paths the account's one message carries."""
    with store.session() as session:
        message_id = session.scalars(
            select(Message.id).where(Message.account_id == account_id)
        ).one()
        return set(
            session.scalars(
                select(Label.path)
                .join(MessageLabel, MessageLabel.label_id == Label.id)
                .where(MessageLabel.message_id == message_id)
            )
        )


def label_id(store: Store, account_id: int, path: str) -> int:
    """The id of the user label at ``path`` (created if missing)."""
    with store.session() as session:
        user = session.scalars(select(Account.user_id).where(Account.id == account_id)).one()
        return resolve_path(session, user, path.split("/")).id


def test_categories_changed_at_graph_change_the_labels(
    store: Store, settings: Settings, graph_emulator: GraphEmulator
) -> None:
    """A sync makes a known message's category labels Graph's new categories, folder kept."""
    account_id = add_graph_account(store, settings, graph_emulator)
    message = graph_emulator.add_message(raw("c"), "inbox", categories=["Red"])
    fetch(store, settings, account_id)
    assert labels_of(store, account_id) == {"Inbox", "Red"}
    graph_emulator.categorize(message.immutable_id, ["Blue", "Work/Tax", "Inbox"])
    fetch(store, settings, account_id)
    assert labels_of(store, account_id) == {"Inbox", "Blue", "Work/Tax"}
    graph_emulator.categorize(message.immutable_id, [])
    fetch(store, settings, account_id)
    assert labels_of(store, account_id) == {"Inbox"}


def test_local_labels_are_written_back_as_categories_idempotently(
    store: Store, settings: Settings, graph_emulator: GraphEmulator
) -> None:
    """Labels without a folder become Graph's full categories array; a replay changes nothing."""
    account_id = add_graph_account(store, settings, graph_emulator)
    folder = graph_emulator.mailbox().create_folder("Projects")
    message = graph_emulator.add_message(raw("w"), folder.id, categories=["Red"])
    fetch(store, settings, account_id)
    later, red = label_id(store, account_id, "Later"), label_id(store, account_id, "Red")
    act(store, account_id, lambda ops, ids: ops.label(ids, later))
    act(store, account_id, lambda ops, ids: ops.label(ids, red, on=False))
    run = propagate(store, settings, account_id)
    assert run.failed == 0 and run.retried == 0
    assert at_graph(graph_emulator, message).categories == ["Later"]  # not the folder's label
    replay(store, account_id)
    assert propagate(store, settings, account_id).failed == 0
    assert at_graph(graph_emulator, message).categories == ["Later"]
    fetch(store, settings, account_id)
    assert labels_of(store, account_id) == {"Projects", "Later"}


def test_a_pending_local_label_wins_over_graphs_older_categories(
    store: Store, settings: Settings, graph_emulator: GraphEmulator
) -> None:
    """A sync before the propagation keeps the local label; Graph then gets mailroom's set."""
    account_id = add_graph_account(store, settings, graph_emulator)
    message = graph_emulator.add_message(raw("p"), "inbox", categories=["Red"])
    fetch(store, settings, account_id)
    green = label_id(store, account_id, "Green")
    act(store, account_id, lambda ops, ids: ops.label(ids, green))
    graph_emulator.categorize(message.immutable_id, ["Blue"])
    fetch(store, settings, account_id)
    assert labels_of(store, account_id) == {"Inbox", "Red", "Green"}
    assert propagate(store, settings, account_id).failed == 0
    assert at_graph(graph_emulator, message).categories == ["Green", "Red"]
    fetch(store, settings, account_id)
    assert labels_of(store, account_id) == {"Inbox", "Red", "Green"}
