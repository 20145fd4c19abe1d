"""JMAP fixtures: a real server on loopback (http or https), users with mail, a raw client.

The server is the whole web application (``create_app``) under uvicorn in a
thread, over the ``store`` fixture, so every test here runs on SQLite and
on PostgreSQL. Push streams poll every 0.05 s to keep the tests quick.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from starlette.applications import Starlette

from mailroom.jmap.app import JmapConfig
from mailroom.jmap.auth import create_token, set_password
from mailroom.store.engine import Store
from mailroom.web.app import create_app
from tests.factories import BASE_TIME, make_message
from tests.helpers import ingest, make_account

CORE = "urn:ietf:params:jmap:core"
MAIL = "urn:ietf:params:jmap:mail"
USING = [CORE, MAIL]
PASSWORD = "correct horse battery staple"


@dataclass
class Server:
    """A running JMAP server and how to reach it."""

    base: str
    config: JmapConfig
    verify: str | bool = True


@dataclass
class Person:
    """A user with mail: ids of what the seed created."""

    name: str
    user_id: int
    account_id: int
    inbox: int
    messages: dict[str, int] = field(default_factory=dict)
    token: str = ""

    @property
    def jmap_account(self) -> str:
        """The user's JMAP account id."""
        return f"u{self.user_id}"


# Seconds a test server may take to start, and to stop (twice: gracefully, then forced).
START_WAIT = STOP_WAIT = 30


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class _TestServer(uvicorn.Server):
    """uvicorn that, once shut down, drops the connections still open.

    A TLS client that neither reads nor closes never answers the server's
    close_notify, so uvicorn's close never finishes: without the abort its
    socket outlives the event loop and warns in a later test.
    """

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await super().shutdown(sockets)
        for connection in list(self.server_state.connections):
            connection.transport.abort()
        await asyncio.sleep(0)  # their connection_lost runs before the loop closes


def serve(
    app: Starlette, certfile: Path | None = None, keyfile: Path | None = None
) -> Iterator[str]:
    """Serve ``app`` under uvicorn on a free loopback port until the generator is closed.

    Yields the base URL (https when a certificate is given); the JMAP and the web
    fixtures both run their servers through this one. The listening socket is
    bound here (no other process can take the port in between). Closing returns
    only once the server thread has ended — its lifespan shut down, its requests
    and push loops finished — so the store can be disposed after it; a server that
    does not start or stop fails the test.
    """
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port: int = listener.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_level="warning",
        ssl_certfile=str(certfile) if certfile else None,
        ssl_keyfile=str(keyfile) if keyfile else None,
        timeout_graceful_shutdown=2,
    )
    runner = _TestServer(config)
    thread = threading.Thread(target=runner.run, args=([listener],), daemon=True)
    try:
        thread.start()
        deadline = time.monotonic() + START_WAIT
        while not runner.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        if not runner.started:
            pytest.fail(f"The test server on port {port} did not start.", pytrace=False)
        yield f"{'https' if certfile else 'http'}://127.0.0.1:{port}"
    finally:
        runner.should_exit = True
        thread.join(timeout=STOP_WAIT)
        if thread.is_alive():  # graceful shutdown hangs: stop waiting for connections
            runner.force_exit = True
            thread.join(timeout=STOP_WAIT)
        listener.close()
    if thread.is_alive():
        pytest.fail(f"The test server on port {port} did not stop.", pytrace=False)


def run_server(
    store: Store,
    *,
    certfile: Path | None = None,
    keyfile: Path | None = None,
    jmap: JmapConfig | None = None,
) -> Iterator[Server]:
    """Serve the app until the generator is closed; push streams end before shutdown."""
    jmap = jmap or JmapConfig(poll_interval=0.05)
    serving = serve(create_app(store, jmap=jmap), certfile, keyfile)
    base = next(serving)
    yield Server(base, jmap, str(certfile) if certfile else True)
    jmap.stopping.set()
    time.sleep(0.1)
    next(serving, None)


@pytest.fixture
def server(store: Store) -> Iterator[Server]:
    """The web application with JMAP over http on a free loopback port."""
    yield from run_server(store)


def self_signed(directory: Path, *, with_ip: bool = True) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (unless not ``with_ip``) and localhost, and
    its key (PEM files)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mailroom test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))] * with_ip
                + [x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture
def tls_server(store: Store, tmp_path: Path) -> Iterator[Server]:
    """The same server over https with a self-signed certificate made for this test."""
    cert, key = self_signed(tmp_path)
    yield from run_server(store, certfile=cert, keyfile=key)


def with_attachment() -> bytes:
    """A message with a text body, an HTML alternative and a PDF attachment."""
    message = EmailMessage()
    message["Message-ID"] = "<report@x>"
    message["From"] = "Carol Reports <carol@reports.example>"
    message["To"] = "Alice <alice@example.org>"
    message["Cc"] = "Dave <dave@example.org>"
    message["Subject"] = "Quarterly report"
    message["Date"] = "Fri, 01 Mar 2024 12:00:00 +0000"
    message.set_content("The numbers are attached.\n")
    message.add_alternative("<p>The <b>numbers</b> are attached.</p>", subtype="html")
    message.add_attachment(
        b"%PDF-1.4 fake", maintype="application", subtype="pdf", filename="report.pdf"
    )
    return message.as_bytes()


def seed(store: Store, name: str, *, prefix: str = "") -> Person:
    """A user with a password, an API token and four messages in three threads.

    ``hello`` and ``reply`` form one thread; ``other`` and ``report`` (with an
    attachment) are alone. Keys of ``messages`` are those names.
    """
    user_id, account_id, inbox = make_account(store, owner=name)
    with store.session() as session:
        set_password(session, name, PASSWORD)
        token = create_token(session, name, "tests")
    raws = [
        ("hello", make_message(f"{prefix}hello@x", subject="Hello walrus", minutes=0)),
        (
            "reply",
            make_message(
                f"{prefix}reply@x",
                subject="Re: Hello walrus",
                sender="Bob <bob@example.net>",
                to="Alice <alice@example.org>",
                in_reply_to=f"{prefix}hello@x",
                references=[f"{prefix}hello@x"],
                body="The walrus is well.\n",
                minutes=5,
            ),
        ),
        ("other", make_message(f"{prefix}other@x", subject="Lunch plans", minutes=10)),
    ]
    if not prefix:
        raws.append(("report", with_attachment()))
    else:
        raws.append(("report", make_message(f"{prefix}report@x", subject="Report", minutes=20)))
    result = ingest(store, (user_id, account_id, inbox), [(f"{prefix}{k}", raw) for k, raw in raws])
    from sqlalchemy import select

    from mailroom.store.models import Message

    with store.session() as session:
        rows = dict(
            (provider, mid)
            for provider, mid in session.execute(
                select(Message.provider_id, Message.id).where(Message.id.in_(result.created_ids))
            )
        )
    person = Person(name, user_id, account_id, inbox, token=token)
    person.messages = {key: rows[f"{prefix}{key}"] for key, _ in raws}
    return person


@pytest.fixture
def alice(store: Store) -> Person:
    """Alice and her mail."""
    return seed(store, "alice")


@pytest.fixture
def bob(store: Store, alice: Person) -> Person:
    """Bob and his mail (created after Alice's)."""
    return seed(store, "bob", prefix="bob-")


class Jmap:
    """A raw JMAP client over httpx: just requests and JSON."""

    def __init__(self, server: Server, person: Person, *, bearer: bool = False) -> None:
        self.server = server
        self.person = person
        auth: httpx.Auth = (
            _Bearer(person.token) if bearer else httpx.BasicAuth(person.name, PASSWORD)
        )
        verify: ssl.SSLContext | bool = (
            ssl.create_default_context(cafile=server.verify)
            if isinstance(server.verify, str)
            else server.verify
        )
        self.http = httpx.Client(auth=auth, verify=verify, timeout=30)
        self.session = self.http.get(f"{server.base}/.well-known/jmap").json()
        self.account = person.jmap_account

    def post(self, document: Any) -> httpx.Response:
        """POST a request document to the API URL."""
        return self.http.post(self.session["apiUrl"], json=document)

    def calls(self, *calls: list[Any], using: list[str] | None = None) -> list[list[Any]]:
        """Run method calls; the method responses."""
        response = self.post({"using": using or USING, "methodCalls": list(calls)})
        assert response.status_code == 200, response.text
        responses: list[list[Any]] = response.json()["methodResponses"]
        return responses

    def call(self, name: str, args: dict[str, Any], using: list[str] | None = None) -> Any:
        """One method call with this account; its response arguments (or the error)."""
        (response,) = self.calls([name, {"accountId": self.account, **args}, "c"], using=using)
        return response[1] if response[0] == name else {"error": response[1]}

    def state(self, type_: str) -> str:
        """The current state of a type, from its /get."""
        result = self.call(f"{type_}/get", {"ids": []})
        state: str = result["state"]
        return state

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()

    def __enter__(self) -> Jmap:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class _Bearer(httpx.Auth):
    def __init__(self, token: str) -> None:
        self.token = token

    def auth_flow(self, request: httpx.Request) -> Iterator[httpx.Request]:
        request.headers["Authorization"] = f"Bearer {self.token}"
        yield request


@pytest.fixture
def client(server: Server, alice: Person) -> Iterator[Jmap]:
    """Alice's raw JMAP client (Basic auth)."""
    jmap = Jmap(server, alice)
    yield jmap
    jmap.close()


@pytest.fixture
def second(server: Server, alice: Person) -> Iterator[Jmap]:
    """A second client of Alice's (bearer token), watching the first one's changes."""
    jmap = Jmap(server, alice, bearer=True)
    yield jmap
    jmap.close()


def email_id(message_id: int) -> str:
    """The JMAP id of a message."""
    return f"M{message_id}"


def upload(client: Jmap, data: bytes, media_type: str | None = "text/plain") -> httpx.Response:
    """POST ``data`` to the uploadUrl of the client's account."""
    url = client.session["uploadUrl"].replace("{accountId}", client.account)
    headers = {"Content-Type": media_type} if media_type else {}
    return client.http.post(url, content=data, headers=headers)


def uploaded(client: Jmap, data: bytes, media_type: str = "message/rfc822") -> str:
    """Upload ``data`` (a message unless said otherwise), which must succeed; its blobId."""
    response = upload(client, data, media_type)
    assert response.status_code == 201, response.text
    blob_id: str = response.json()["blobId"]
    return blob_id


def download(client: Jmap, blob_id: str) -> httpx.Response:
    """GET a blob through the downloadUrl."""
    url = (
        client.session["downloadUrl"]
        .replace("{accountId}", client.account)
        .replace("{blobId}", blob_id)
        .replace("{name}", "file")
        .replace("{type}", "")
    )
    return client.http.get(url)


def problem(answer: httpx.Response, type_suffix: str) -> dict[str, Any]:
    """The RFC 7807 problem document of a refused request (400, JMAP error type)."""
    assert answer.status_code == 400, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = answer.json()
    assert body["type"] == f"urn:ietf:params:jmap:error:{type_suffix}", body
    assert body["status"] == 400 and body["detail"], body
    return body


def email_query(client: Jmap, **args: Any) -> dict[str, Any]:
    """Email/query with these arguments; fails the test on a method error."""
    result: dict[str, Any] = client.call("Email/query", args)
    assert "error" not in result, result
    return result


def apply_query_changes(cached: list[str], delta: dict[str, Any]) -> list[str]:
    """What a client holds after applying a /queryChanges response to its cached ids."""
    removed = set(delta["removed"])
    rebuilt = [i for i in cached if i not in removed]
    for item in sorted(delta["added"], key=lambda a: a["index"]):
        rebuilt.insert(item["index"], item["id"])
    return rebuilt


__all__ = [
    "BASE_TIME",
    "Jmap",
    "Person",
    "Server",
    "apply_query_changes",
    "download",
    "email_id",
    "email_query",
    "problem",
    "run_server",
    "seed",
    "upload",
    "uploaded",
]
