"""PushSubscription/get and /set (RFC 8620 §7.2) and their delivery, to a real HTTP receiver.

The receiver is a small Starlette app under uvicorn on loopback; the JMAP
server's push policy allows http and 127.0.0.1 only in these tests.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mailroom.jmap.app import JmapConfig
from mailroom.jmap.push_policy import PushPolicy
from mailroom.jmap.webpush import UserAgentKeys, b64url_decode, encrypt
from mailroom.store.engine import Store
from tests.jmap.conftest import Jmap, Person, Server, email_id, run_server, serve

CORE = "urn:ietf:params:jmap:core"
MAIL = "urn:ietf:params:jmap:mail"


@dataclass
class Receiver:
    """What the receiving push endpoint got, and what it answers."""

    url: str
    received: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    status: int = 201

    def wait(self, count: int, timeout: float = 30) -> list[tuple[dict[str, str], bytes]]:
        """The first ``count`` deliveries, waiting for them."""
        deadline = time.monotonic() + timeout
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(self.received) >= count, self.received
        return self.received[:count]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A push endpoint on loopback that records every POST."""
    box = Receiver("")

    async def push(request: Request) -> Response:
        box.received.append((dict(request.headers), await request.body()))
        return Response(status_code=box.status)

    serving = serve(Starlette(routes=[Route("/push/{device}", push, methods=["POST"])]))
    box.url = f"{next(serving)}/push/phone"
    yield box
    next(serving, None)


@pytest.fixture
def push_server(store: Store) -> Iterator[Server]:
    """The JMAP server with a push policy that allows the loopback receiver."""
    policy = PushPolicy(allow_http=True, allowed_private_hosts=("127.0.0.1",), retry_base=0.05)
    yield from run_server(store, jmap=JmapConfig(poll_interval=0.05, push=policy))


@pytest.fixture
def pusher(push_server: Server, alice: Person) -> Iterator[Jmap]:
    """Alice's client of the push server."""
    with Jmap(push_server, alice) as jmap:
        yield jmap


def core(client: Jmap, name: str, args: dict[str, Any]) -> list[Any]:
    """One core method call without an accountId; the response [name, args, id]."""
    response: list[Any] = client.calls([name, args, "c"], using=[CORE, MAIL])[0]
    return response


def subscribe(client: Jmap, url: str, **more: Any) -> dict[str, Any]:
    """Create a subscription; its created entry."""
    _, result, _ = core(
        client,
        "PushSubscription/set",
        {"create": {"s": {"deviceClientId": "phone-1", "url": url, **more}}},
    )
    assert result.get("created"), result
    created: dict[str, Any] = result["created"]["s"]
    return created


def wait_until_none_left(client: Jmap, timeout: float = 15) -> list[Any]:
    """The user's subscriptions once there are none (or what is left after ``timeout``)."""
    deadline = time.monotonic() + timeout
    left: list[Any] = core(client, "PushSubscription/get", {})[1]["list"]
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = core(client, "PushSubscription/get", {})[1]["list"]
    return left


def test_verification_then_state_changes(pusher: Jmap, receiver: Receiver, alice: Person) -> None:
    """Create → PushVerification; a wrong code is refused; once verified, changes are pushed."""
    created = subscribe(pusher, receiver.url, types=["Email"])
    expires = datetime.fromisoformat(created["expires"].replace("Z", "+00:00"))
    assert expires <= datetime.now(UTC) + timedelta(days=7, minutes=1)
    ((headers, body),) = receiver.wait(1)
    verification = json.loads(body)
    assert verification["@type"] == "PushVerification"
    assert verification["pushSubscriptionId"] == created["id"]
    assert int(headers["ttl"]) > 0
    assert headers["content-type"].startswith("application/json")
    _, listed, _ = core(pusher, "PushSubscription/get", {"ids": None})
    assert listed["list"] == [
        {
            "id": created["id"],
            "deviceClientId": "phone-1",
            "verificationCode": None,
            "expires": created["expires"],
            "types": ["Email"],
        }
    ]
    assert "state" not in listed and "accountId" not in listed
    _, wrong, _ = core(
        pusher, "PushSubscription/set", {"update": {created["id"]: {"verificationCode": "no"}}}
    )
    assert wrong["notUpdated"][created["id"]]["properties"] == ["verificationCode"]
    time.sleep(0.3)
    assert len(receiver.received) == 1  # nothing pushed before verification
    code = verification["verificationCode"]
    _, ok, _ = core(
        pusher, "PushSubscription/set", {"update": {created["id"]: {"verificationCode": code}}}
    )
    assert ok["updated"] == {created["id"]: None}
    time.sleep(0.3)  # the delivery takes its baseline
    message = email_id(alice.messages["hello"])
    done = pusher.call("Email/set", {"update": {message: {"keywords/$seen": True}}})
    assert message in done["updated"]
    (_, (headers, body)) = receiver.wait(2)
    change = json.loads(body)
    assert change["@type"] == "StateChange"
    assert set(change["changed"][alice.jmap_account]) == {"Email"}
    assert change["changed"][alice.jmap_account]["Email"] == done["newState"]
    assert headers["topic"] and int(headers["ttl"]) > 0


def test_get_never_shows_url_or_keys_and_takes_no_account(pusher: Jmap, receiver: Receiver) -> None:
    """url/keys are forbidden in properties; accountId is not an argument; ids scope to the user."""
    created = subscribe(pusher, receiver.url)
    name, error, _ = core(pusher, "PushSubscription/get", {"properties": ["url"]})
    assert (name, error["type"]) == ("error", "forbidden")
    name, error, _ = core(pusher, "PushSubscription/get", {"accountId": pusher.account})
    assert (name, error["type"]) == ("error", "invalidArguments")
    _, some, _ = core(pusher, "PushSubscription/get", {"ids": [created["id"], "P999"]})
    assert [s["id"] for s in some["list"]] == [created["id"]] and some["notFound"] == ["P999"]


def test_update_only_mutable_properties_and_destroy(
    pusher: Jmap, receiver: Receiver, push_server: Server, bob: Person
) -> None:
    """url, keys and deviceClientId are immutable; types and expires change; destroy works."""
    created = subscribe(pusher, receiver.url)
    sid = created["id"]
    _, result, _ = core(
        pusher,
        "PushSubscription/set",
        {"update": {sid: {"url": "http://127.0.0.1:1/other", "deviceClientId": "x"}}},
    )
    assert sorted(result["notUpdated"][sid]["properties"]) == ["deviceClientId", "url"]
    later = (datetime.now(UTC) + timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    _, result, _ = core(
        pusher, "PushSubscription/set", {"update": {sid: {"types": ["Mailbox"], "expires": later}}}
    )
    assert result["updated"][sid]["expires"] < later  # shortened to the server's lifetime
    with Jmap(push_server, bob) as bobs:
        _, theirs, _ = core(bobs, "PushSubscription/set", {"destroy": [sid]})
        assert theirs["notDestroyed"][sid]["type"] == "notFound"
    _, gone, _ = core(pusher, "PushSubscription/set", {"destroy": [sid]})
    assert gone["destroyed"] == [sid]
    assert core(pusher, "PushSubscription/get", {})[1]["list"] == []


def test_refused_urls_and_bad_values(client: Jmap, pusher: Jmap, receiver: Receiver) -> None:
    """Default policy: http and loopback URLs are refused; bad keys, expires and types too."""
    _, result, _ = core(
        client,
        "PushSubscription/set",
        {
            "create": {
                "http": {"deviceClientId": "d", "url": receiver.url},
                "loopback": {"deviceClientId": "d", "url": "https://127.0.0.1/push"},
                "nothing": {"url": "https://push.example/"},
            }
        },
    )
    assert result["notCreated"]["http"]["properties"] == ["url"]
    assert result["notCreated"]["loopback"]["properties"] == ["url"]
    assert result["notCreated"]["nothing"]["properties"] == ["deviceClientId"]
    _, result, _ = core(
        pusher,
        "PushSubscription/set",
        {
            "create": {
                "keys": {"deviceClientId": "d", "url": receiver.url, "keys": {"p256dh": "x"}},
                "past": {
                    "deviceClientId": "d",
                    "url": receiver.url,
                    "expires": "2001-01-01T00:00:00Z",
                },
                "types": {"deviceClientId": "d", "url": receiver.url, "types": "Email"},
                "id": {"deviceClientId": "d", "url": receiver.url, "id": "P1"},
            }
        },
    )
    for key, prop in (("keys", "keys"), ("past", "expires"), ("types", "types"), ("id", "id")):
        assert result["notCreated"][key]["type"] == "invalidProperties"
        assert result["notCreated"][key]["properties"] == [prop]


def test_a_gone_url_deletes_the_subscription(pusher: Jmap, receiver: Receiver) -> None:
    """A push endpoint answering 410 is gone: the subscription is deleted."""
    receiver.status = 410
    subscribe(pusher, receiver.url)
    receiver.wait(1)
    assert wait_until_none_left(pusher) == []


def test_failed_deliveries_are_retried(pusher: Jmap, receiver: Receiver) -> None:
    """A 503 is retried with backoff until the endpoint takes it."""
    receiver.status = 503
    subscribe(pusher, receiver.url)
    receiver.wait(2)
    receiver.status = 201
    count = len(receiver.received)
    time.sleep(1.0)
    bodies = [json.loads(b)["@type"] for _, b in receiver.received]
    assert set(bodies) == {"PushVerification"}
    assert len(receiver.received) <= count + 2  # stops once taken


def _decrypt(body: bytes, private: ec.EllipticCurvePrivateKey, auth: bytes) -> bytes:
    """RFC 8291 §3.4 on the user agent's side (written from the RFC, not from the server)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    salt, key_length = body[:16], body[20]
    server_public = body[21 : 21 + key_length]
    ciphertext = body[21 + key_length :]
    ua_public = private.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
    peer = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), server_public)
    shared = private.exchange(ec.ECDH(), peer)
    info = b"WebPush: info\x00" + ua_public + server_public
    ikm = HKDF(hashes.SHA256(), 32, auth, info).derive(shared)
    cek = HKDF(hashes.SHA256(), 16, salt, b"Content-Encoding: aes128gcm\x00").derive(ikm)
    nonce = HKDF(hashes.SHA256(), 12, salt, b"Content-Encoding: nonce\x00").derive(ikm)
    padded = AESGCM(cek).decrypt(nonce, ciphertext, None)
    assert padded.endswith(b"\x02")
    return padded[:-1]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def test_keys_encrypt_the_verification(pusher: Jmap, receiver: Receiver) -> None:
    """With keys, the PushVerification arrives as aes128gcm that the user agent decrypts."""
    private = ec.generate_private_key(ec.SECP256R1())
    public = private.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
    auth = b"0123456789abcdef"
    created = subscribe(pusher, receiver.url, keys={"p256dh": _b64(public), "auth": _b64(auth)})
    ((headers, body),) = receiver.wait(1)
    assert headers["content-encoding"] == "aes128gcm"
    verification = json.loads(_decrypt(body, private, auth))
    assert verification["pushSubscriptionId"] == created["id"]


def test_encryption_matches_the_rfc_8291_example() -> None:
    """RFC 8291 §5: the example's keys and salt give exactly the example's message."""
    ua_public = (
        "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    )
    server = ec.derive_private_key(
        int.from_bytes(b64url_decode("yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"), "big"),
        ec.SECP256R1(),
    )
    body = encrypt(
        b64url_decode("V2hlbiBJIGdyb3cgdXAsIEkgd2FudCB0byBiZSBhIHdhdGVybWVsb24"),
        UserAgentKeys.parse(ua_public, "BTBZMqHH6r4Tts7J_aSIgg"),
        server_key=server,
        salt=b64url_decode("DGv6ra1nlYgDCS1FRnbzlw"),
    )
    assert _b64(body) == (
        "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIg"
        "Dll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVB"
        "St2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
    )


def test_an_expired_subscription_is_deleted(pusher: Jmap, receiver: Receiver) -> None:
    """At its expires the subscription is gone (the server must not POST after it)."""
    soon = (datetime.now(UTC) + timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    subscribe(pusher, receiver.url, expires=soon)
    assert len(core(pusher, "PushSubscription/get", {})[1]["list"]) == 1
    assert wait_until_none_left(pusher) == []


def test_retries_stop_when_the_subscription_is_destroyed(pusher: Jmap, receiver: Receiver) -> None:
    """A subscription destroyed while its POST waits for a retry gets no more POSTs."""
    receiver.status = 503
    created = subscribe(pusher, receiver.url)
    receiver.wait(1)
    core(pusher, "PushSubscription/set", {"destroy": [created["id"]]})
    count = len(receiver.received)
    time.sleep(2.0)  # the retries of a live one would come at 0.05, 0.15, 0.35, 0.75, 1.55 s
    assert len(receiver.received) <= count + 1  # at most the one already on its way
