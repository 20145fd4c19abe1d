"""The IMAP fetcher's skipped ledger of a sealing owner: reason and headers sealed, read clear.

A message given up on is recorded with the failure's text, which quotes whatever
the server or the exception said; for an owner whose mail is sealed it is sealed
like the Gmail ledger's headers (``providers.sealed_ledger``). Real Dovecot, both stores.
"""

from __future__ import annotations

import os

import pytest
from sqlalchemy import text

from mailroom.config import Settings
from mailroom.crypto import MasterKeyWrapper
from mailroom.crypto.sealing import MailSealing
from mailroom.providers.base import TransientError
from mailroom.providers.gmail.skipped import list_skipped
from mailroom.providers.imap import import_page, sync_account
from mailroom.store.engine import Store
from tests.factories import make_message
from tests.imap.views import Mailbox, message_ids


@pytest.fixture
def sealed(store: Store) -> Store:
    """The test store (both kinds) sealing new mail under a fresh master key."""
    store.sealing = MailSealing(MasterKeyWrapper(os.urandom(32)), seal_new_mail=True)
    return store


def test_a_message_given_up_on_is_recorded_sealed(
    sealed: Store, settings: Settings, mailbox: Mailbox, account: int
) -> None:
    """Five attempts, then a ledger row whose reason and headers are sealed and open again."""
    mailbox.append("INBOX", make_message("before@x"))
    bad = mailbox.server.deliver(mailbox.user, make_message("broken@x"), flags="S")
    bad.chmod(0)  # Dovecot (running as nobody) cannot read it and drops the connection
    try:
        sync_account(sealed, account, settings=settings)
        for _call in range(20):
            try:
                if not import_page(sealed, account, settings=settings):
                    break
            except TransientError:
                continue
        else:
            raise AssertionError("the import does not get past the broken message")
    finally:
        bad.chmod(0o600)
    assert len(message_ids(sealed, account)) == 1
    with sealed.session() as session:
        (raw,) = session.execute(
            text("SELECT headers, reason FROM skipped_messages WHERE account_id = :a"),
            {"a": account},
        ).all()
        (record,) = list_skipped(session, [account])
    headers, reason = (str(value) for value in raw)
    assert headers.lstrip('"').startswith("mrf1.") and reason.startswith("mrf1.")
    assert "attempts" not in reason
    assert "after 5 attempts" in record.reason
    assert record.headers == {} and record.label_ids == ["INBOX"]
