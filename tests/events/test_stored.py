"""The stored events of some messages: one user's only, in message and position order."""

from __future__ import annotations

from mailroom.events.extract import extract_events
from mailroom.events.stored import events_of_messages
from mailroom.store.engine import Store
from tests.events.support import store_samples


def test_events_of_messages_are_the_owners_in_message_then_position_order(store: Store) -> None:
    """The airline mail's two flights come in order; another user's ids and none give nothing."""
    (user_id, _, _), ids = store_samples(store)
    _, others = store_samples(store, owner="pat")
    extract_events(store, [*ids.values(), *others.values()])
    asked = [ids["hotel"], ids["airline"], ids["plain"], others["concert"]]
    with store.session() as session:
        found = events_of_messages(session, user_id, asked)
        assert [(event.message_id, event.position) for event in found] == sorted(
            [(ids["airline"], 0), (ids["airline"], 1), (ids["hotel"], 0)]
        )
        assert events_of_messages(session, user_id, []) == []
