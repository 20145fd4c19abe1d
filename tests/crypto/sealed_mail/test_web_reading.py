"""The web thread page over sealed mail: the clear text; a moved value a sentence, not a 500."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import select, update

from mailroom.crypto.message_fields import LookupKeys
from mailroom.store.engine import Store
from mailroom.store.models import Message, MessageBody
from mailroom.web.app import create_app
from tests.crypto.sealed_mail.conftest import BODY_PHRASE, sealed_message
from tests.helpers import ingest, make_account
from tests.jmap.conftest import serve
from tests.web.conftest import add_user, browser, sign_in


@pytest.fixture
def web(sealed_store: Store) -> Iterator[str]:
    """The web application over the sealing store."""
    yield from serve(create_app(sealed_store))


OTHER_PHRASE = "a second sealed message about otters"


def thread_id_of(store: Store, message_id: str) -> int:
    """The thread of the message with this Message-ID, stored as the owner's keyed hash."""
    with store.session() as session:
        owners = session.scalars(select(Message.user_id).distinct()).all()
        forms = [f for owner in owners for f in LookupKeys(session, owner).id_forms([message_id])]
        found = session.scalar(
            select(Message.thread_id).where(Message.message_id_header.in_(forms))
        )
    assert found is not None
    return int(found)


def _me_with_two_messages(store: Store) -> tuple[int, int]:
    account = make_account(store, "me")
    add_user(store, "me")
    result = ingest(
        store,
        account,
        [("1", sealed_message()), ("2", sealed_message("sealed-2@example.org", OTHER_PHRASE))],
    )
    first, second = result.created_ids
    return first, second


def test_the_thread_page_shows_a_sealed_body(sealed_store: Store, web: str) -> None:
    _me_with_two_messages(sealed_store)
    client = browser(web)
    assert sign_in(client, web, "me").status_code == 303
    page = client.get(f"/threads/{thread_id_of(sealed_store, 'sealed-1@example.org')}")
    assert page.status_code == 200
    assert BODY_PHRASE in page.text
    assert "mrf1." not in page.text
    client.close()


def test_a_body_copied_onto_another_message_is_a_sentence(sealed_store: Store, web: str) -> None:
    first, second = _me_with_two_messages(sealed_store)
    with sealed_store.session() as session:
        moved = session.scalar(select(MessageBody.text_body).where(MessageBody.message_id == first))
        session.execute(
            update(MessageBody).where(MessageBody.message_id == second).values(text_body=moved)
        )
    client = browser(web)
    assert sign_in(client, web, "me").status_code == 303
    page = client.get(f"/threads/{thread_id_of(sealed_store, 'sealed-2@example.org')}")
    assert page.status_code == 422
    assert "does not open" in page.text
    assert BODY_PHRASE not in page.text and "Traceback" not in page.text
    client.close()
