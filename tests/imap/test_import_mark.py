"""``Account.import_finished_at`` stays in step with the IMAP import state, so `mailroom
accounts` (which reads only the account row, see ``providers/facts.py``) says what the
provider would say, at every step of a real import against Dovecot."""

from __future__ import annotations

import json

from click.testing import CliRunner

from mailroom.cli.main import cli
from mailroom.config import Settings
from mailroom.providers.imap import import_page, import_state, sync_account
from mailroom.store.engine import Store
from tests.factories import make_message
from tests.imap.views import Mailbox


def listed(store: Store, account_id: int) -> dict[str, object]:
    """The account's `mailroom accounts --format jsonl` row, checked against the provider."""
    url = store.engine.url.render_as_string(hide_password=False)
    where = ["--data-dir", str(store.data_dir)] if store.data_dir else []
    result = CliRunner().invoke(
        cli, [*where, "--database-url", url, "accounts", "--format", "jsonl"]
    )
    assert result.exit_code == 0, result.output
    with store.session() as session:
        importing = import_state(session, account_id).importing
    (row,) = [json.loads(line) for line in result.output.splitlines()]
    assert row["importing"] is importing
    return row


def test_the_listing_follows_a_real_import_step_by_step(
    store: Store, settings: Settings, mailbox: Mailbox, account: int
) -> None:
    """Not started, counted, page by page, done; a new folder with mail reopens the import."""
    for i in range(60):
        mailbox.append("INBOX", make_message(f"mark-{i}@x"))
    with mailbox.client() as client:
        client.create_folder("Empty")
    assert listed(store, account)["progress"] == "not started"
    sync_account(store, account, settings=settings)  # first contact: counted, nothing fetched
    assert listed(store, account)["progress"] == "0/60 (0%)"
    assert import_page(store, account, settings=settings)
    assert listed(store, account)["progress"] == "50/60 (83%)"
    assert not import_page(store, account, settings=settings)
    assert listed(store, account)["progress"] == "done"

    with mailbox.client() as client:
        client.create_folder("Later")
    mailbox.append("Later", make_message("later-1@x"))
    mailbox.append("Later", make_message("later-2@x"))
    sync_account(store, account, settings=settings)
    assert listed(store, account)["progress"] == "60/62 (97%)"
    assert not import_page(store, account, settings=settings)
    assert listed(store, account)["progress"] == "done"


def test_an_empty_mailbox_is_done_after_its_first_sync(
    store: Store, settings: Settings, account: int
) -> None:
    """No history at all: done after one sync, though no import page ever ran."""
    assert listed(store, account)["progress"] == "not started"
    sync_account(store, account, settings=settings)
    row = listed(store, account)
    assert (row["importing"], row["progress"]) == (False, "done")
