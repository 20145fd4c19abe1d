"""The Graph importer against the emulator: order, pages of 50, idempotence, imperfect pages.

Every test runs on SQLite and PostgreSQL (the ``store`` fixture) and drives the
provider through the registry, as the jobs do.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from mailroom.config import Settings
from mailroom.providers import registry
from mailroom.providers.graph.folders import graph_folders
from mailroom.providers.graph.importer import GraphImporter
from mailroom.store.engine import Store
from mailroom.store.models import Account, Label, Message, MessageLabel
from tests.emulators.graph.server import GraphEmulator
from tests.providers.test_graph_contract import (
    PROVIDER,
    graph_account,
    import_all,
    raw,
    sync,
)

__all__ = ["graph_account"]


def stored_keys(store: Store, account_id: int) -> list[str]:
    """The Message-ID keys stored in the account, sorted (a key stored twice shows twice)."""
    with store.session() as session:
        headers = session.scalars(
            select(Message.message_id_header).where(Message.account_id == account_id)
        ).all()
    return sorted(str(h).removesuffix("@x") for h in headers)


def delta_folders(graph: GraphEmulator) -> list[str]:
    """The folder ids whose delta was asked for, in the order they were first asked for."""
    order: list[str] = []
    for request in graph.graph_requests():
        if request.path.endswith("/messages/delta"):
            folder = request.path.split("/mailFolders/")[1].split("/")[0]
            if folder not in order:
                order.append(folder)
    return order


def test_folders_are_imported_in_rank_order_fifty_per_page(
    store: Store, settings: Settings, graph_emulator: GraphEmulator, graph_account: int
) -> None:
    """Inbox, Sent, Drafts, user folders, Archive, Junk, Deleted Items; pages of at most 50."""
    mailbox = graph_emulator.mailbox()
    projects = mailbox.create_folder("Projects").id
    start = datetime(2026, 1, 1, tzinfo=UTC)
    places = ["deleteditems", "junkemail", "archive", projects, "drafts", "sentitems"]
    for number, place in enumerate(places):
        graph_emulator.add_message(raw(f"{place}-{number}"), place)
    for number in range(55):
        graph_emulator.add_message(
            raw(f"in{number}"), "inbox", received=start + timedelta(minutes=number)
        )
    pages = import_all(store, settings, graph_account)
    assert len(stored_keys(store, graph_account)) == 61
    order = delta_folders(graph_emulator)
    wanted = ["inbox", "sentitems", "drafts", projects, "archive", "junkemail", "deleteditems"]
    ids = [mailbox.folder(name).id for name in wanted]
    assert [f for f in order if f in ids] == ids
    assert pages >= 8  # the 55 inbox messages took two pages, every other folder one
    assert all(
        "odata.maxpagesize=50" in r.prefer
        for r in graph_emulator.graph_requests()
        if r.path.endswith("/messages/delta")
    )
    with store.session() as session:
        finished = session.scalar(
            select(Account.import_finished_at).where(Account.id == graph_account)
        )
    assert finished is not None
    importer = registry.importer_for(store, PROVIDER, settings)
    assert importer is not None and not importer.state(graph_account).importing


def test_import_is_idempotent_across_duplicated_and_empty_pages(
    store: Store, settings: Settings, graph_emulator: GraphEmulator, graph_account: int
) -> None:
    """Repeated items across pages and empty pages with a nextLink store each message once."""
    for number in range(120):
        graph_emulator.add_message(raw(f"d{number}"), "inbox")
    graph_emulator.delta().duplicate_pages(2)
    graph_emulator.delta().empty_pages(2)
    import_all(store, settings, graph_account)
    first = stored_keys(store, graph_account)
    assert first == sorted(f"d{n}" for n in range(120))
    import_all(store, settings, graph_account)
    sync(store, settings, graph_account)
    assert stored_keys(store, graph_account) == first


def test_conversation_ids_and_categories_are_carried(
    store: Store, settings: Settings, graph_emulator: GraphEmulator, graph_account: int
) -> None:
    """conversationId becomes the provider thread id; a category becomes a label."""
    graph_emulator.add_message(
        raw("c1"), "inbox", conversation_id="CONV-1", categories=["Blue category"]
    )
    import_all(store, settings, graph_account)
    with store.session() as session:
        message = session.scalars(select(Message).where(Message.account_id == graph_account)).one()
        names = set(
            session.scalars(
                select(Label.name)
                .join(MessageLabel, MessageLabel.label_id == Label.id)
                .where(MessageLabel.message_id == message.id)
            )
        )
    assert message.provider_thread_id == "CONV-1"
    assert {"Inbox", "Blue category"} <= names


def test_a_removal_seen_while_importing_waits_for_every_folder(
    store: Store, settings: Settings, graph_emulator: GraphEmulator, graph_account: int
) -> None:
    """A delete seen by a sync mid-import is judged only once every folder has answered."""
    doomed = graph_emulator.add_message(raw("doomed"), "inbox")
    graph_emulator.add_message(raw("later"), "deleteditems")
    importer = registry.importer_for(store, PROVIDER, settings)
    assert importer is not None
    assert importer.import_page(graph_account)  # the Inbox; Deleted Items etc. still to come
    assert stored_keys(store, graph_account) == ["doomed"]
    graph_emulator.delete_message(doomed.immutable_id, permanent=True)
    sync(store, settings, graph_account)  # the Inbox delta reports the removal: kept
    assert stored_keys(store, graph_account) == ["doomed"]
    import_all(store, settings, graph_account)
    assert stored_keys(store, graph_account) == ["doomed", "later"]
    sync(store, settings, graph_account)  # every folder answers: judged now
    assert stored_keys(store, graph_account) == ["later"]


def test_a_named_folder_is_imported_side_by_side_and_its_mime_uses_four_slots(
    store: Store, settings: Settings, graph_emulator: GraphEmulator, graph_account: int
) -> None:
    """A page asked for by folder takes that folder's page (not the Inbox's), and the MIME of
    its new messages is fetched four at a time, never five."""
    for number in range(12):
        graph_emulator.add_message(raw(f"in{number}"), "inbox")
        graph_emulator.add_message(raw(f"ar{number}"), "archive")
    importer = GraphImporter(store, settings)
    importer.import_page(graph_account)  # discovers the folders and takes the Inbox's page
    with store.session() as session:
        archive = next(f.id for f in graph_folders(session, graph_account) if f.path == "Archive")
    graph_emulator.set_latency(0.02)
    graph_emulator.requests.clear()
    importer.import_page(graph_account, folder_id=archive)
    assert sorted(stored_keys(store, graph_account)) == sorted(
        [f"in{n}" for n in range(12)] + [f"ar{n}" for n in range(12)]
    )
    assert graph_emulator.peak_in_flight() == 4
    assert not any(r.status == 429 for r in graph_emulator.graph_requests())
