"""Sending through Graph ``sendMail``: the registered transport, the Sent copy, a reply's thread."""

from __future__ import annotations

from sqlalchemy import select

from mailroom.config import Settings
from mailroom.outbound.transports import transport_for
from mailroom.providers import registry
from mailroom.store.engine import Store
from mailroom.store.models import Account, Folder, Message, MessageLocation
from tests.emulators.graph.samples import raw_message
from tests.emulators.graph.server import GraphEmulator
from tests.providers.test_graph_contract import PROVIDER, fetch, graph_account

__all__ = ["graph_account"]


def test_a_reply_sent_through_graph_is_filed_in_sent_and_threaded(
    store: Store, settings: Settings, graph_emulator: GraphEmulator, graph_account: int
) -> None:
    """sendMail carries the MIME; Graph's Sent copy arrives once, in the original's thread."""
    assert registry.files_sent_mail(PROVIDER)
    graph_emulator.add_message(raw_message(1), "inbox")
    fetch(store, settings, graph_account)
    reply = raw_message(
        2,
        subject="Re: Message 1",
        sender="user@example.com",
        to="ann@example.org",
        reply_to="<1@example.org>",
    )
    with store.session() as session:
        account = session.get(Account, graph_account)
        assert account is not None
        transport = transport_for(session, account, settings)
    try:
        result = transport.send("user@example.com", ["ann@example.org"], reply, message_id="2")
    finally:
        transport.close()
    assert list(result.accepted) == ["ann@example.org"]
    sent = graph_emulator.mailbox().folder("sentitems").id
    with graph_emulator.mailbox().lock:
        filed = [m for m in graph_emulator.mailbox().messages.values() if m.folder_id == sent]
    assert len(filed) == 1 and b"In-Reply-To: <1@example.org>" in filed[0].raw
    fetch(store, settings, graph_account)
    with store.session() as session:
        rows = session.execute(
            select(Message.message_id_header, Message.thread_id, Folder.special_use)
            .join(MessageLocation, MessageLocation.message_id == Message.id)
            .join(Folder, Folder.id == MessageLocation.folder_id)
            .where(Message.account_id == graph_account)
        ).all()
    by_header = {header: (thread, place) for header, thread, place in rows}
    assert by_header["2@example.org"][1] == "sentitems"
    assert by_header["2@example.org"][0] == by_header["1@example.org"][0]
