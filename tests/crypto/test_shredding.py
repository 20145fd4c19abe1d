"""Deleting an owner on both stores: key first, every table, nothing left in the files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import select, text
from sqlalchemy.engine import make_url

from mailroom.crypto import FieldCipher, KeyGone, MasterKeyWrapper, OwnerKeys
from mailroom.crypto.shredding import OWNED_TABLES, destroy_keys
from mailroom.reading import search_ids
from mailroom.store.engine import Store
from mailroom.store.models import AuditEntry, Base, MessageBody, OwnerKey
from tests.cli.test_tokens import run
from tests.factories import make_message
from tests.helpers import ingest, make_account, pg_dump_data, thread_of

# What only alice's mail holds: after her deletion none of it may be found in the files.
ALICE_SUBJECT = "Zeppelin hangar quarterly forecast"
ALICE_ADDRESS = "carol.quixotic@hangar-alice.example"
ALICE_PHRASE = "the purple hippopotamus dances at midnight"
BOB_SUBJECT = "Kangaroo migration notes"
BOB_PHRASE = "wombats prefer the northern burrow"
# The same message (a mailing list's) reaches both: its raw bytes are one blob, kept for bob.
SHARED = make_message("issue-7@lists.example", subject="Newsletter", body="list text\n")


def _linked_to_owner(table_name: str, seen: frozenset[str] = frozenset()) -> bool:
    """Whether a table has a foreign key (directly or through others) to users or accounts."""
    table = Base.metadata.tables[table_name]
    for key in table.foreign_keys:
        target = key.column.table.name
        if target in ("users", "accounts"):
            return True
        if (
            target not in seen
            and target != table_name
            and _linked_to_owner(target, seen | {table_name})
        ):
            return True
    return False


def test_every_table_linked_to_an_owner_is_deleted_with_them() -> None:
    """A table with a user or account link (direct or through a parent) must be in OWNED_TABLES."""
    covered = {name for name, _ in OWNED_TABLES}
    linked = {name for name in Base.metadata.tables if _linked_to_owner(name)} | {"users"}
    assert linked - covered == set(), "add these tables to crypto.shredding.OWNED_TABLES"
    assert covered - set(Base.metadata.tables) == set()


def _file_bytes(store: Store) -> bytes:
    database = Path(make_url(store.engine.url).database or "")
    wal = Path(f"{database}-wal")
    return database.read_bytes() + (wal.read_bytes() if wal.exists() else b"")


def test_a_deleted_owner_leaves_no_mail_in_the_files_and_the_other_keeps_theirs(
    store: Store, tmp_path: Path
) -> None:
    """After `user delete alice --yes` her subject, address, body are in no file; bob reads on."""
    alice = make_account(store, owner="alice", name="a")
    bob = make_account(store, owner="bob", name="b")
    ingest(
        store,
        alice,
        [
            (
                f"a{n}",
                make_message(
                    f"a{n}@hangar-alice.example",
                    subject=ALICE_SUBJECT,
                    sender=f"Carol Quixotic <{ALICE_ADDRESS}>",
                    to="alice@example.org",
                    body=f"{ALICE_PHRASE} ({n})\n" + "filler line\n" * 40,
                    minutes=n,
                ),
            )
            for n in range(20)
        ]
        + [("a-list", SHARED)],
    )
    ingest(
        store,
        bob,
        [
            ("b1", make_message("b1@bob.example", subject=BOB_SUBJECT, body=BOB_PHRASE)),
            (
                "b2",
                make_message(
                    "b2@bob.example",
                    subject="Re: " + BOB_SUBJECT,
                    in_reply_to="b1@bob.example",
                    minutes=5,
                ),
            ),
            ("b-list", SHARED),
        ],
    )
    wrapper = MasterKeyWrapper(os.urandom(32))
    with store.session() as session:
        FieldCipher(OwnerKeys(session, wrapper)).encrypt(alice[0], "t", "c", 1, "x")
        FieldCipher(OwnerKeys(session, wrapper)).encrypt(bob[0], "t", "c", 1, "x")

    refused = run(store, tmp_path, "user", "delete", "alice")
    assert refused.exit_code != 0 and "add --yes to confirm" in refused.output
    deleted = run(store, tmp_path, "user", "delete", "alice", "--yes")
    assert deleted.exit_code == 0, deleted.output
    assert "data key destroyed, 21 messages" in deleted.output
    assert "20 raw messages" in deleted.output  # the shared one stays: bob's message names it
    again = run(store, tmp_path, "user", "delete", "alice", "--yes")
    assert "There is no user called 'alice'" in again.output

    contents = _file_bytes(store) if store.dialect == "sqlite" else pg_dump_data(store)
    # Single words too: the full-text index keeps a deleted document's terms in its older
    # segments until they are merged, secure_delete or not.
    for gone in (ALICE_SUBJECT, ALICE_ADDRESS, ALICE_PHRASE, "hippopotamus", "zeppelin"):
        assert gone.encode() not in contents, gone
    assert BOB_PHRASE.encode() in contents  # the files are readable: absence means deleted

    with store.session() as session:
        assert session.scalars(select(OwnerKey.user_id)).all() == [bob[0]]
        (entry,) = session.scalars(select(AuditEntry).where(AuditEntry.action == "user.delete"))
        assert entry.user_name == "alice" and "21 messages" in entry.detail
        found = search_ids(session, bob[0], "wombats")
        assert len(found) == 1
        body = session.get(MessageBody, found[0])
        assert body is not None and BOB_PHRASE in body.text_body
        assert search_ids(session, bob[0], "hippopotamus") == []
        remaining = session.execute(text("SELECT count(*) FROM messages")).scalar()
        shared = session.execute(
            text("SELECT count(*) FROM blobs JOIN messages ON raw_sha256 = sha256")
        ).scalar()
    assert remaining == 3 and shared == 3
    assert thread_of(store, "b1@bob.example") == thread_of(store, "b2@bob.example") is not None


@pytest.mark.parametrize("table", ["messages", "users"])
def test_the_deletion_order_names_children_first(table: str) -> None:
    """users is deleted last and messages after every table naming a message."""
    order = [name for name, _ in OWNED_TABLES]
    children = {
        t.name
        for t in Base.metadata.sorted_tables
        for key in t.foreign_keys
        if key.column.table.name == table and t.name != table
    }
    assert all(order.index(child) < order.index(table) for child in children)


def test_a_deletion_stopped_after_the_key_went_reads_nothing_and_finishes_on_rerun(
    store: Store, tmp_path: Path
) -> None:
    """Once destroy_keys committed, sealed values are unreadable; `user delete` then finishes."""
    alice = make_account(store, owner="alice", name="a")
    ingest(store, alice, [("a1", make_message("a1@x", subject=ALICE_SUBJECT))])
    wrapper = MasterKeyWrapper(os.urandom(32))
    with store.session() as session:
        sealed = FieldCipher(OwnerKeys(session, wrapper)).encrypt(alice[0], "t", "c", 1, "x")
    assert destroy_keys(store, alice[0]) == 1  # the first step; a kill could come right after
    with store.session() as session, pytest.raises(KeyGone):
        FieldCipher(OwnerKeys(session, wrapper)).decrypt(alice[0], "t", "c", 1, sealed)
    finished = run(store, tmp_path, "user", "delete", "alice", "--yes")
    assert finished.exit_code == 0 and "1 messages" in finished.output
    with store.session() as session:
        assert session.execute(text("SELECT count(*) FROM messages")).scalar() == 0
