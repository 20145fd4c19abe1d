"""The plain-SQL readers (`mailroom show`, `explain`) over sealed mail."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from mailroom.categories.explaining import explain
from mailroom.errors import SealedWithoutKeys
from mailroom.reading import message_detail
from mailroom.store.engine import Store
from mailroom.store.reader import SqliteReader
from tests.crypto.sealed_mail.conftest import BODY_PHRASE, sealed_message
from tests.helpers import ingest, make_account


def test_message_detail_and_explain_open_sealed_mail_in_a_session(sealed_store: Store) -> None:
    account = make_account(sealed_store)
    (message,) = ingest(sealed_store, account, [("1", sealed_message())]).created_ids
    with sealed_store.session() as session:
        detail = message_detail(session, account[0], message)
        assert BODY_PHRASE in detail["text"] and "mrf1." not in str(detail)
        assert explain(session, account[0], message).lines()


def test_the_bare_file_reader_says_it_needs_the_keys(sealed_store: Store) -> None:
    if sealed_store.dialect != "sqlite":
        pytest.skip("the standard-library reader reads SQLite files only")
    account = make_account(sealed_store)
    (message,) = ingest(sealed_store, account, [("1", sealed_message())]).created_ids
    reader = SqliteReader(Path(make_url(sealed_store.engine.url).database or ""))
    with pytest.raises(SealedWithoutKeys, match="sealed"):
        message_detail(reader, account[0], message)
    reader.connection.close()
