"""Ingest with sealing on: nothing of a body or the raw bytes is in the tables in clear."""

from __future__ import annotations

import hashlib
from pathlib import Path

from sqlalchemy import select, text
from sqlalchemy.engine import make_url

from mailroom.crypto.mail_reading import bodies_of, raw_message
from mailroom.store.engine import Store
from mailroom.store.models import Blob, Message, MessageBody
from tests.crypto.sealed_mail.conftest import BODY_PHRASE, HEADER_VALUE, sealed_message
from tests.helpers import ingest, make_account, pg_dump_data, thread_of_provider


def _table_text(store: Store, table: str) -> bytes:
    """Every value of every row of ``table`` as bytes, however the driver returns it."""
    with store.engine.connect() as conn:
        rows = conn.execute(text(f"SELECT * FROM {table}")).all()
    return b"\n".join(
        value if isinstance(value, bytes) else str(value).encode()
        for row in rows
        for value in row
        if value is not None
    )


def test_bodies_and_raw_bytes_are_sealed_in_the_tables(sealed_store: Store) -> None:
    account = make_account(sealed_store)
    raw = sealed_message()
    result = ingest(sealed_store, account, [("1", raw)])
    (message_id,) = result.created_ids

    for table in ("message_bodies", "blobs"):
        stored = _table_text(sealed_store, table)
        assert stored, table
        assert BODY_PHRASE.encode() not in stored, table
        assert HEADER_VALUE.encode() not in stored, table
        assert b"X-Secret-Plan" not in stored, table
    with sealed_store.session() as session:
        body = session.get(MessageBody, message_id)
        assert body is not None and body.sealed
        blob = session.scalar(select(Blob))
        assert blob is not None
        assert blob.user_id == account[0]
        assert blob.size == len(raw)
        assert blob.sha256 != hashlib.sha256(raw).hexdigest()
        assert session.scalar(select(Message.raw_sha256)) == blob.sha256
        # ... and the seam opens both.
        opened = bodies_of(session, [message_id])[message_id]
        assert BODY_PHRASE in opened.text_body
        assert ["X-Secret-Plan", HEADER_VALUE] in [list(h) for h in opened.headers]
        assert raw_message(session, message_id) == raw


def test_the_same_bytes_twice_for_one_owner_are_one_blob(sealed_store: Store) -> None:
    account = make_account(sealed_store)
    raw = sealed_message()
    ingest(sealed_store, account, [("1", raw), ("2", raw)])
    with sealed_store.session() as session:
        assert session.scalar(text("SELECT count(*) FROM blobs")) == 1
        keys = set(session.scalars(select(Message.raw_sha256)))
        assert len(keys) == 1


def test_two_owners_never_share_a_sealed_blob(sealed_store: Store) -> None:
    raw = sealed_message()
    ingest(sealed_store, make_account(sealed_store, "alice"), [("1", raw)])
    ingest(sealed_store, make_account(sealed_store, "bob"), [("1", raw)])
    with sealed_store.session() as session:
        owners = session.execute(select(Blob.user_id)).scalars().all()
        assert sorted(owners) == sorted({*owners}) and len(owners) == 2


DEEP_PHRASE = "an aardvark negotiates the lighthouse lease"


def _file_bytes(store: Store) -> bytes:
    """The SQLite database file and its WAL, or a pg_dump of the two sealed tables."""
    url = make_url(store.engine.url)
    if store.dialect == "sqlite":
        with store.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        path = Path(url.database or "")
        wal = path.with_name(path.name + "-wal")
        return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    return pg_dump_data(store, "message_bodies", "blobs")


def test_the_files_hold_no_raw_header_and_the_dump_no_body(sealed_store: Store) -> None:
    """SQLite file + WAL: no raw header (the body's first words stay in the clear preview
    this round); a pg_dump of message_bodies and blobs: neither header nor body phrase."""
    deep = "filler words " * 40 + DEEP_PHRASE  # past the clear preview's 256 characters
    raws = [("1", sealed_message()), ("2", sealed_message("deep@example.org", deep))]
    ingest(sealed_store, make_account(sealed_store), raws)
    found = _file_bytes(sealed_store)
    assert found
    assert DEEP_PHRASE.encode() not in found
    assert HEADER_VALUE.encode() not in found
    assert b"X-Secret-Plan" not in found
    if sealed_store.dialect == "postgresql":
        assert BODY_PHRASE.encode() not in found


def test_no_subject_address_preview_or_message_id_reaches_any_file(sealed_store: Store) -> None:
    """Sealing on: the WAL as written, the checkpointed file, or a dump of every table.

    Subject, preview (the body's first words), sender and recipient names and addresses,
    Message-ID and the id a reply names are in none of them (threading still joins them).
    """
    from tests.factories import make_message

    secrets = [
        "Zeppelin hangar quarterly forecast",
        "Carol Quixotic",
        "carol.quixotic@hangar-alice.example",
        "Dorian Umbrella",
        "dorian.umbrella@recipient.example",
        "root-7f3e9a@hangar-alice.example",
        BODY_PHRASE,
    ]
    first = make_message(
        "root-7f3e9a@hangar-alice.example",
        subject="Zeppelin hangar quarterly forecast",
        sender="Carol Quixotic <carol.quixotic@hangar-alice.example>",
        to="Dorian Umbrella <dorian.umbrella@recipient.example>",
        body=f"{BODY_PHRASE}\n",
    )
    reply = make_message(
        "reply-1@recipient.example",
        subject="Re: Zeppelin hangar quarterly forecast",
        sender="Dorian Umbrella <dorian.umbrella@recipient.example>",
        to="Carol Quixotic <carol.quixotic@hangar-alice.example>",
        in_reply_to="root-7f3e9a@hangar-alice.example",
        minutes=5,
    )
    account = make_account(sealed_store)
    if sealed_store.dialect == "sqlite":
        path = Path(make_url(sealed_store.engine.url).database or "")
        wal = path.with_name(path.name + "-wal")
        with sealed_store.engine.connect() as conn:  # start from an empty WAL
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        ingest(sealed_store, account, [("1", first), ("2", reply)])
        written = wal.read_bytes() if wal.exists() else b""
        assert written  # the batch went through the WAL
        contents = written + _file_bytes(sealed_store)
    else:
        ingest(sealed_store, account, [("1", first), ("2", reply)])
        contents = pg_dump_data(sealed_store)
    for secret in secrets:
        assert secret.encode() not in contents, secret
    owner = account[0]
    assert thread_of_provider(sealed_store, owner, "1") == thread_of_provider(
        sealed_store, owner, "2"
    )
