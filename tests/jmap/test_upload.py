"""Blob upload (RFC 8620 §6.1) over real HTTP: limits, ownership, download, pruning."""

from __future__ import annotations

import base64
import json
import socket
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from mailroom.config import Settings
from mailroom.jmap.app import JmapConfig
from mailroom.jmap.dispatcher import Limits
from mailroom.jmap.uploads import prune_uploads
from mailroom.jobs.queues import make_queues
from mailroom.jobs.tasks import Jobs
from mailroom.store.engine import Store
from mailroom.store.models.base import utcnow
from tests.jmap.conftest import PASSWORD, Jmap, Person, Server, download, run_server, upload

SMALL = 1000


@pytest.fixture
def small_server(store: Store) -> Iterator[Server]:
    """A server whose uploads are at most SMALL octets and one at a time per user."""
    limits = Limits(max_size_upload=SMALL, max_concurrent_upload=1)
    yield from run_server(store, jmap=JmapConfig(poll_interval=0.05, limits=limits))


def raw_request(server: Server, person: Person, head: str) -> socket.socket:
    """A socket on which an upload request's head (request line and headers) was sent."""
    address = urlsplit(server.base)
    connection = socket.create_connection((address.hostname or "", address.port or 80), 10)
    credentials = base64.b64encode(f"{person.name}:{PASSWORD}".encode()).decode()
    connection.sendall(
        (
            f"POST /jmap/upload/{person.jmap_account} HTTP/1.1\r\n"
            f"Host: {address.netloc}\r\nAuthorization: Basic {credentials}\r\n"
            f"Content-Type: application/octet-stream\r\n{head}\r\n"
        ).encode()
    )
    return connection


def status_of(connection: socket.socket) -> tuple[int, bytes]:
    """The status code and the body of the response on ``connection``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(4096)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":")[1])
            for line in head.lower().split(b"\r\n")
            if line.startswith(b"content-length:")
        ),
        0,
    )
    while len(body) < length:
        chunk = connection.recv(4096)
        if not chunk:
            break
        body += chunk
    return int(head.split(b" ", 2)[1]), body


def test_session_advertises_the_upload_limits(client: Jmap) -> None:
    """The core capability names maxSizeUpload (50 MB) and maxConcurrentUpload, and an uploadUrl."""
    core = client.session["capabilities"]["urn:ietf:params:jmap:core"]
    assert core["maxSizeUpload"] == 50_000_000
    assert core["maxConcurrentUpload"] >= 1
    assert "{accountId}" in client.session["uploadUrl"]


def test_upload_answers_201_and_the_blob_downloads(client: Jmap) -> None:
    """An upload is 201 with accountId, blobId, type and size; the blob downloads byte for byte."""
    data = b"\x00binary \xff data\r\n" * 100
    response = upload(client, data, "application/x-test; charset=binary")
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["accountId"] == client.account
    assert body["type"] == "application/x-test; charset=binary"
    assert body["size"] == len(data)
    fetched = download(client, body["blobId"])
    assert fetched.status_code == 200
    assert fetched.content == data
    assert fetched.headers["content-length"] == str(len(data))


def test_upload_without_a_content_type_is_octet_stream(client: Jmap) -> None:
    """An upload without Content-Type has the type application/octet-stream."""
    response = upload(client, b"abc", None)
    assert response.status_code == 201
    assert response.json()["type"] == "application/octet-stream"


def test_same_bytes_give_the_same_blob_id(client: Jmap) -> None:
    """Uploading identical bytes twice returns the same blobId (RFC 8620 allows it)."""
    first = upload(client, b"same bytes").json()["blobId"]
    second = upload(client, b"same bytes").json()["blobId"]
    assert first == second
    assert upload(client, b"other bytes").json()["blobId"] != first


def test_another_users_upload_is_not_found(server: Server, alice: Person, bob: Person) -> None:
    """A blob Alice uploaded is 404 for Bob until he uploads the same bytes himself."""
    with Jmap(server, alice) as mine, Jmap(server, bob) as theirs:
        blob_id = upload(mine, b"alice's secret").json()["blobId"]
        assert download(theirs, blob_id).status_code == 404
        copied = theirs.call("Blob/copy", {"fromAccountId": theirs.account, "blobIds": [blob_id]})
        assert copied["notCopied"][blob_id]["type"] == "notFound"
        assert upload(theirs, b"alice's secret").json()["blobId"] == blob_id
        assert download(theirs, blob_id).status_code == 200


def test_upload_to_another_account_is_404(server: Server, alice: Person, bob: Person) -> None:
    """Uploading into someone else's account is refused with 404, nothing stored."""
    with Jmap(server, alice) as mine:
        url = mine.session["uploadUrl"].replace("{accountId}", bob.jmap_account)
        response = mine.http.post(url, content=b"x")
        assert response.status_code == 404


def test_upload_needs_authentication(client: Jmap) -> None:
    """An upload without credentials is 401."""
    url = client.session["uploadUrl"].replace("{accountId}", client.account)
    assert httpx.post(url, content=b"x").status_code == 401


def test_oversize_upload_is_413_by_its_length(small_server: Server, alice: Person) -> None:
    """A Content-Length over maxSizeUpload is 413 with the limit problem before any byte is sent."""
    connection = raw_request(small_server, alice, f"Content-Length: {100 * SMALL}\r\n")
    with connection:
        status, data = status_of(connection)
    assert status == 413
    problem = json.loads(data)
    assert problem["type"] == "urn:ietf:params:jmap:error:limit"
    assert problem["limit"] == "maxSizeUpload"


def test_oversize_upload_is_refused_while_streaming(small_server: Server, alice: Person) -> None:
    """A chunked upload is 413 (maxSizeUpload) once it passes the limit, before the body ends."""
    connection = raw_request(small_server, alice, "Transfer-Encoding: chunked\r\n")
    with connection:
        for _ in range(3):  # 1,500 octets of a body that never ends
            connection.sendall(b"1f4\r\n" + b"x" * 500 + b"\r\n")
        status, data = status_of(connection)
    assert status == 413
    assert json.loads(data)["limit"] == "maxSizeUpload"
    with Jmap(small_server, alice) as client:
        assert upload(client, b"y" * SMALL).status_code == 201


def test_concurrent_uploads_of_one_user_are_limited(small_server: Server, alice: Person) -> None:
    """With maxConcurrentUpload 1, a second upload while one is in progress is 429 (limit)."""
    connection = raw_request(small_server, alice, "Content-Length: 10\r\n")
    with connection, Jmap(small_server, alice) as client:
        connection.sendall(b"12345")  # the first upload is under way
        time.sleep(0.5)  # time to authenticate it and take its slot
        second = upload(client, b"second")
        assert second.status_code == 429
        assert second.json()["limit"] == "maxConcurrentUpload"
        connection.sendall(b"67890")
        status, _ = status_of(connection)
        assert status == 201
        assert upload(client, b"third").status_code == 201


def test_prune_deletes_expired_uploads_only(store: Store, client: Jmap) -> None:
    """prune_uploads deletes uploads past their lifetime; fresh ones and message bytes stay."""
    blob_id = upload(client, b"short-lived").json()["blobId"]
    assert prune_uploads(store) == 0
    assert download(client, blob_id).status_code == 200
    raw_id = client.call("Email/get", {"ids": None, "properties": ["blobId"]})["list"][0]["blobId"]
    assert prune_uploads(store, utcnow() + timedelta(hours=25)) == 1
    assert download(client, blob_id).status_code == 404
    assert download(client, raw_id).status_code == 200


def test_the_jobs_prune_task_deletes_expired_uploads(
    store: Store, client: Jmap, tmp_path: Path
) -> None:
    """The hourly jobs task prunes uploads whose lifetime is over at the jobs' clock."""
    blob_id = upload(client, b"left behind").json()["blobId"]
    settings = Settings(data_dir=tmp_path)
    later = Jobs(store, make_queues(settings), settings, now=lambda: utcnow() + timedelta(days=2))
    assert later.run_prune_uploads() == 1
    assert download(client, blob_id).status_code == 404
