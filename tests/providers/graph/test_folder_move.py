"""A label moved under another label moves its Graph folder, on both stores.

The folder keeps its Graph id, so its subfolders and their mail go along; the
next fetch finds the same labels (no second one) and the mail where it was.
"""

from __future__ import annotations

from sqlalchemy import select

from mailroom.config import Settings
from mailroom.store.engine import Store
from mailroom.store.models import Label
from tests.emulators.graph.server import GraphEmulator
from tests.providers.test_graph_contract import GraphHarness, add_graph_account, raw


def test_a_moved_label_takes_its_folder_subfolders_and_mail_along(
    store: Store, settings: Settings, graph_emulator: GraphEmulator
) -> None:
    """Moving Work under Home moves its folder once (replay included); Tax and its mail follow."""
    harness = GraphHarness(
        store, settings, add_graph_account(store, settings, graph_emulator), graph_emulator
    )
    mailbox = graph_emulator.mailbox()
    work = mailbox.create_folder("Work")
    tax = mailbox.create_folder("Tax", work.id)
    home = mailbox.create_folder("Home")
    harness.messages["t"] = graph_emulator.add_message(raw("t"), tax.id)
    harness.fetch()
    (work_label,), (home_label,), (tax_label,) = (
        harness.labels(n) for n in ("Work", "Home", "Tax")
    )
    harness.change_label(lambda life: life.update(work_label, parent_id=home_label))
    run = harness.propagate()
    assert run.failed == 0 and run.retried == 0
    assert mailbox.folder(work.id).parent_id == home.id
    assert mailbox.folder(tax.id).parent_id == work.id
    moves = [r for r in graph_emulator.graph_requests() if r.path.endswith("/move")]
    assert len(moves) == 1
    harness.replay()
    assert harness.propagate().failed == 0
    assert [r for r in graph_emulator.graph_requests() if r.path.endswith("/move")] == moves
    assert "Home/Work/Tax" in harness.provider_folders()
    harness.fetch()
    assert harness.labels("Work") == [work_label] and harness.labels("Tax") == [tax_label]
    assert harness.folders_of("t") == {"Home/Work/Tax"}
    with store.session() as session:
        parent = session.scalar(select(Label.parent_id).where(Label.id == work_label))
    assert parent == home_label
