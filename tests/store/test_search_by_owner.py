"""PostgreSQL's full-text entries carry their owner, and a search reads one owner's entries.

Without the owner in the index, a word rare for one owner but common in the
store made PostgreSQL fetch every owner's matches (bench/RESULTS.md, PostgreSQL
at volume); migration 0021 indexes ``(user_id, document)`` together.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from mailroom.reading import search_ids
from mailroom.store.engine import Store
from mailroom.store.reader import SessionReader
from mailroom.store.search import match_clause
from tests.factories import make_message
from tests.helpers import ingest, make_account


@pytest.fixture
def two_owners(store: Store) -> tuple[int, int]:
    if store.dialect != "postgresql":
        pytest.skip("the owner column and its index are PostgreSQL's (FTS5 has neither)")
    alice = make_account(store, owner="alice")
    bob = make_account(store, owner="bob", name="bobs")
    for n in range(30):
        ingest(store, bob, [(f"b{n}", make_message(f"b{n}@x", subject=f"walrus news {n}"))])
    ingest(store, alice, [("a", make_message("a@x", subject="one walrus for alice"))])
    return alice[0], bob[0]


def test_entries_carry_their_owner(store: Store, two_owners: tuple[int, int]) -> None:
    alice, bob = two_owners
    with store.session() as session:
        owners = dict(
            session.execute(
                text(
                    "SELECT m.user_id, count(*) FROM message_search s "
                    "JOIN messages m ON m.id = s.message_id WHERE s.user_id = m.user_id "
                    "GROUP BY m.user_id"
                )
            ).all()
        )
        total = session.execute(text("SELECT count(*) FROM message_search")).scalar_one()
    assert owners == {alice: 1, bob: 30} and total == 31


def test_a_search_reads_only_its_owner_entries(store: Store, two_owners: tuple[int, int]) -> None:
    alice, _bob = two_owners
    with store.session() as session:
        assert len(search_ids(SessionReader(session), alice, "walrus")) == 1
        clause = match_clause("postgresql", "walrus", owner=alice)
        assert clause is not None
        condition, params = clause
        session.execute(text("SET LOCAL enable_seqscan = off"))
        plan = "\n".join(
            row[0]
            for row in session.execute(
                text(f"EXPLAIN SELECT messages.id FROM messages WHERE {condition}"), params
            )
        )
    assert "ix_message_search_user_id_document" in plan, plan
    assert "user_id =" in plan.split("ix_message_search_user_id_document", 1)[1], plan
