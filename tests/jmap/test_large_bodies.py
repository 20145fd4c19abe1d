"""A message with a large body over real HTTP: bounded body values, streamed downloads."""

from __future__ import annotations

import hashlib

import pytest

from mailroom.jmap.app import DOWNLOAD_CHUNK, JmapServer
from mailroom.jmap.bodies import DEFAULT_MAX_BODY_VALUE_BYTES
from mailroom.store.engine import Store
from tests.factories import make_message
from tests.helpers import ingest
from tests.jmap.conftest import Jmap, Person, email_id

SIZE = 3 * DEFAULT_MAX_BODY_VALUE_BYTES


@pytest.fixture
def large(store: Store, alice: Person) -> int:
    """Alice gets one message whose text body is three times the default cap."""
    line = "Ünïcode walrus line of a very long letter.\n"
    body = line * (SIZE // len(line.encode()) + 1)
    raw = make_message("large@x", subject="Large", body=body, minutes=30)
    result = ingest(store, (alice.user_id, alice.account_id, alice.inbox), [("large", raw)])
    (created,) = result.created_ids
    return int(created)


def test_body_values_have_a_default_cap(client: Jmap, large: int) -> None:
    """Without maxBodyValueBytes a large body value is truncated to the server's cap."""
    got = client.call("Email/get", {"ids": [email_id(large)], "fetchAllBodyValues": True})
    (value,) = got["list"][0]["bodyValues"].values()
    assert value["isTruncated"] is True
    size = len(value["value"].encode("utf-8"))
    assert DEFAULT_MAX_BODY_VALUE_BYTES - 4 < size <= DEFAULT_MAX_BODY_VALUE_BYTES
    small = client.call(
        "Email/get",
        {"ids": [email_id(large)], "fetchTextBodyValues": True, "maxBodyValueBytes": 1000},
    )
    (value,) = small["list"][0]["bodyValues"].values()
    assert value["isTruncated"] is True and len(value["value"].encode()) <= 1000
    whole = client.call(
        "Email/get",
        {"ids": [email_id(large)], "fetchTextBodyValues": True, "maxBodyValueBytes": 4 * SIZE},
    )
    (value,) = whole["list"][0]["bodyValues"].values()
    assert value["isTruncated"] is False and len(value["value"].encode()) >= SIZE


def test_large_downloads_stream_exact_bytes(
    client: Jmap, store: Store, large: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The raw blob streams from the database in chunks; it and the part arrive whole."""
    from sqlalchemy import select

    reads: list[int] = []
    original = JmapServer._chunk

    def counted(self: JmapServer, sha256: str, offset: int) -> bytes:
        data = original(self, sha256, offset)
        reads.append(len(data))
        return data

    monkeypatch.setattr(JmapServer, "_chunk", counted)

    from mailroom.store.models import Blob, Message

    with store.session() as session:
        raw = session.scalar(
            select(Blob.data)
            .join(Message, Message.raw_sha256 == Blob.sha256)
            .where(Message.id == large)
        )
    assert raw is not None and len(raw) > SIZE
    template = client.session["downloadUrl"]
    url = (
        template.replace("{accountId}", client.account)
        .replace("{blobId}", f"R{large}")
        .replace("{name}", "large.eml")
        .replace("{type}", "message/rfc822")
    )
    with client.http.stream("GET", url) as answer:
        assert answer.status_code == 200
        assert int(answer.headers["content-length"]) == len(raw)
        digest = hashlib.sha256()
        chunks = 0
        for chunk in answer.iter_raw():
            digest.update(chunk)
            chunks += 1
    assert digest.hexdigest() == hashlib.sha256(raw).hexdigest()
    assert chunks > 1
    # Never the whole message in one piece: one bounded database read per chunk.
    assert len(reads) >= len(raw) // DOWNLOAD_CHUNK and max(reads) <= DOWNLOAD_CHUNK

    got = client.call("Email/get", {"ids": [email_id(large)], "properties": ["textBody"]})
    part = got["list"][0]["textBody"][0]
    part_url = url.replace(f"R{large}", part["blobId"])
    answer = client.http.get(part_url)
    assert answer.status_code == 200
    assert int(answer.headers["content-length"]) == len(answer.content) == part["size"]
