"""The multipart batch endpoint: format, Content-ID pairing, limits, inner 429s."""

from __future__ import annotations

import email
import email.policy
import json
from email.message import Message

import httpx

from tests.emulators.gmail.conftest import API
from tests.emulators.gmail.emulator import GmailEmulator
from tests.emulators.gmail.seed import seed_mailbox


def _batch(targets: list[str], content_ids: list[str] | None = None) -> bytes:
    lines: list[str] = []
    for index, target in enumerate(targets):
        lines += ["--BOUNDARY", "Content-Type: application/http"]
        if content_ids is not None:
            lines.append(f"Content-ID: <{content_ids[index]}>")
        lines += ["", f"GET {target}", "", ""]
    lines.append("--BOUNDARY--")
    return "\r\n".join(lines).encode()


def _post(http: httpx.Client, body: bytes, path: str = "/batch/gmail/v1") -> httpx.Response:
    return http.post(
        path, content=body, headers={"Content-Type": "multipart/mixed; boundary=BOUNDARY"}
    )


def _parts(answer: httpx.Response) -> list[tuple[str, int, dict[str, object]]]:
    """(Content-ID, inner status, inner JSON) of every answer part."""
    head = f"Content-Type: {answer.headers['content-type']}\r\n\r\n".encode()
    container = email.message_from_bytes(head + answer.content, policy=email.policy.compat32)
    parts: list[tuple[str, int, dict[str, object]]] = []
    for part in container.get_payload():
        assert isinstance(part, Message) and part.get_content_type() == "application/http"
        inner = part.get_payload(decode=True)
        assert isinstance(inner, bytes)
        status_line, _, rest = inner.partition(b"\r\n")
        body = rest.partition(b"\r\n\r\n")[2]
        parts.append((str(part["Content-ID"]), int(status_line.split()[1]), json.loads(body)))
    return parts


def test_answers_pair_with_content_ids(gmail_emulator: GmailEmulator, http: httpx.Client) -> None:
    """Each part answers with Content-ID <response-X> and its own status line."""
    ids = seed_mailbox(gmail_emulator, 2)
    targets = [f"{API}/messages/{i}?format=minimal" for i in [*ids, "ffffffffffffffff"]]
    answer = _post(http, _batch(targets, ["item-1", "item-2", "item-3"]))
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("multipart/mixed; boundary=")
    parts = _parts(answer)
    assert [(cid, status) for cid, status, _ in parts] == [
        ("<response-item-1>", 200),
        ("<response-item-2>", 200),
        ("<response-item-3>", 404),
    ]
    assert [body.get("id") for _, _, body in parts[:2]] == ids


def test_python_client_content_ids_and_the_short_path(
    gmail_emulator: GmailEmulator, http: httpx.Client
) -> None:
    """``<uuid + N>`` comes back as ``<response-uuid + N>``; /batch works too; no id: item-N."""
    ids = seed_mailbox(gmail_emulator, 2)
    targets = [f"{API}/messages/{i}?format=minimal" for i in ids]
    answer = _post(http, _batch(targets, ["abc + 1", "abc + 2"]), path="/batch")
    assert [cid for cid, _, _ in _parts(answer)] == ["<response-abc + 1>", "<response-abc + 2>"]
    plain = _post(http, _batch(targets))
    assert [cid for cid, _, _ in _parts(plain)] == ["<response-item-1>", "<response-item-2>"]


def test_more_than_100_parts_is_refused(http: httpx.Client) -> None:
    """A batch holds at most 100 calls."""
    answer = _post(http, _batch([f"{API}/profile"] * 101))
    assert answer.status_code == 400
    assert _post(http, _batch([f"{API}/profile"] * 100)).status_code == 200


def test_each_part_is_charged_and_over_quota_parts_get_429(
    gmail_emulator: GmailEmulator, http: httpx.Client
) -> None:
    """A batch of n calls costs n calls; parts past the limit answer 429 rateLimitExceeded."""
    ids = seed_mailbox(gmail_emulator, 4)
    gmail_emulator.set_quota_limit(10)
    parts = _parts(_post(http, _batch([f"{API}/messages/{i}" for i in ids])))
    assert [status for _, status, _ in parts] == [200, 200, 429, 429]
    error = parts[2][2]["error"]
    assert isinstance(error, dict)
    assert error["code"] == 429 and error["errors"][0]["reason"] == "rateLimitExceeded"
    assert gmail_emulator.units_charged() == 10
    assert [r.in_batch for r in gmail_emulator.requests] == [False, True, True, True, True]


def test_an_expired_token_fails_the_whole_batch(
    gmail_emulator: GmailEmulator, http: httpx.Client
) -> None:
    """The batch request itself needs a live token: 401 before any part runs."""
    gmail_emulator.expire_tokens()
    assert _post(http, _batch([f"{API}/profile"])).status_code == 401


def test_injected_faults_can_hit_only_batch_parts(
    gmail_emulator: GmailEmulator, http: httpx.Client
) -> None:
    """inject_faults(in_batch=True) fails the next parts, not direct calls."""
    gmail_emulator.inject_faults(1, 500, in_batch=True)
    assert http.get(f"{API}/profile").status_code == 200
    parts = _parts(_post(http, _batch([f"{API}/profile", f"{API}/profile"])))
    assert [status for _, status, _ in parts] == [500, 200]
