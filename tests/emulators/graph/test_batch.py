"""The emulator's JSON $batch: per-part statuses, dependsOn, the limit of 20, inner 429s."""

from __future__ import annotations

import base64

import httpx

from tests.emulators.graph.samples import raw_message
from tests.emulators.graph.server import GraphEmulator


def test_a_batch_answers_every_part_with_its_own_status(
    graph: httpx.Client, graph_emulator: GraphEmulator
) -> None:
    """Parts succeed and fail on their own inside one 200; MIME parts come back base64."""
    raw = raw_message(1)
    message = graph_emulator.add_message(raw)
    response = graph.post(
        "/$batch",
        json={
            "requests": [
                {"id": "1", "method": "GET", "url": "/me/mailFolders/inbox"},
                {
                    "id": "2",
                    "method": "PATCH",
                    "url": f"/me/messages/{message.id}",
                    "body": {"isRead": True},
                    "headers": {"Content-Type": "application/json"},
                },
                {"id": "3", "method": "GET", "url": "/me/messages/AAMkMissing"},
                {"id": "4", "method": "GET", "url": f"/me/messages/{message.id}/$value"},
            ]
        },
    )
    assert response.status_code == 200
    parts = {p["id"]: p for p in response.json()["responses"]}
    assert parts["1"]["status"] == 200 and parts["1"]["body"]["displayName"] == "Inbox"
    assert parts["2"]["status"] == 200 and parts["2"]["body"]["isRead"] is True
    assert parts["3"]["status"] == 404
    assert parts["3"]["body"]["error"]["code"] == "ErrorItemNotFound"
    assert base64.b64decode(parts["4"]["body"]) == raw
    assert graph_emulator.mailbox().message(message.id).is_read is True


def test_depends_on_fails_the_dependents_of_a_failed_part(graph: httpx.Client) -> None:
    """A part depending on a failed one answers 424; one depending on a success runs."""
    response = graph.post(
        "/$batch",
        json={
            "requests": [
                {
                    "id": "a",
                    "method": "POST",
                    "url": "/me/mailFolders",
                    "body": {"displayName": "Projects"},
                },
                {"id": "b", "method": "GET", "url": "/me/mailFolders/inbox", "dependsOn": ["a"]},
                {"id": "c", "method": "GET", "url": "/me/messages/AAMkMissing"},
                {"id": "d", "method": "GET", "url": "/me/mailFolders/inbox", "dependsOn": ["c"]},
            ]
        },
    )
    statuses = {p["id"]: p["status"] for p in response.json()["responses"]}
    assert statuses == {"a": 201, "b": 200, "c": 404, "d": 424}


def test_more_than_twenty_parts_or_a_forward_dependency_is_refused(graph: httpx.Client) -> None:
    """21 parts, or a dependsOn naming no earlier part, is a 400 for the whole batch."""
    parts = [{"id": str(n), "method": "GET", "url": "/me/mailFolders/inbox"} for n in range(21)]
    assert graph.post("/$batch", json={"requests": parts}).status_code == 400
    assert graph.post("/$batch", json={"requests": parts[:20]}).status_code == 200
    forward = [
        {"id": "1", "method": "GET", "url": "/me/mailFolders/inbox", "dependsOn": ["2"]},
        {"id": "2", "method": "GET", "url": "/me/mailFolders/inbox"},
    ]
    assert graph.post("/$batch", json={"requests": forward}).status_code == 400


def test_throttling_applies_to_parts_inside_a_200_batch(
    graph: httpx.Client, graph_emulator: GraphEmulator
) -> None:
    """Scripted throttling refuses batch parts: a 200 batch holds inner 429s with Retry-After."""
    graph_emulator.throttle_next(2, retry_after="0.5")
    parts = [{"id": str(n), "method": "GET", "url": "/me/mailFolders/inbox"} for n in range(3)]
    response = graph.post("/$batch", json={"requests": parts})
    assert response.status_code == 200
    answers = response.json()["responses"]
    assert [p["status"] for p in answers] == [429, 429, 200]
    assert answers[0]["headers"]["Retry-After"] == "0.5"
    logged = [r for r in graph_emulator.graph_requests() if r.batch_part]
    assert [r.status for r in logged] == [429, 429, 200]
