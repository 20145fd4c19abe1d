"""The emulator's throttling: scripted 429/503 with Retry-After, the 4-in-flight limit, the log."""

from __future__ import annotations

import threading

import httpx
import pytest

from tests.emulators.graph.fixture import wait_for
from tests.emulators.graph.server import GraphEmulator


@pytest.mark.parametrize(("status", "retry_after"), [(429, "2.128"), (503, "3")])
def test_scripted_throttling_answers_with_retry_after(
    graph: httpx.Client, graph_emulator: GraphEmulator, status: int, retry_after: str
) -> None:
    """throttle_next refuses the next request with the status and Retry-After, then serves."""
    graph_emulator.throttle_next(1, status=status, retry_after=retry_after)
    refused = graph.get("/me/mailFolders")
    assert refused.status_code == status
    assert refused.headers["Retry-After"] == retry_after
    if status == 429:
        error = refused.json()["error"]
        assert error["code"] == "TooManyRequests"
        assert error["innerError"]["status"] == "429"
    assert graph.get("/me/mailFolders").status_code == 200


def test_a_fifth_request_in_flight_is_mailbox_concurrency(graph_emulator: GraphEmulator) -> None:
    """With four requests of a mailbox held in flight, a fifth is 429 ApplicationThrottled."""
    token = graph_emulator.issue_tokens()["access_token"]
    headers = {"Authorization": f"Bearer {token}"}
    url = f"{graph_emulator.graph_url}/me/mailFolders"
    statuses: list[int] = []
    graph_emulator.hold()

    def call() -> None:
        with httpx.Client(headers=headers, timeout=30) as client:
            statuses.append(client.get(url).status_code)

    held = [threading.Thread(target=call) for _ in range(4)]
    for thread in held:
        thread.start()
    wait_for(lambda: graph_emulator.in_flight() == 4)
    with httpx.Client(headers=headers) as client:
        fifth = client.get(url)
    assert fifth.status_code == 429
    assert fifth.json()["error"]["code"] == "ApplicationThrottled"
    assert "MailboxConcurrency" in fifth.json()["error"]["message"]
    assert float(fifth.headers["Retry-After"]) > 0
    graph_emulator.release()
    for thread in held:
        thread.join()
    assert statuses == [200] * 4
    assert graph_emulator.peak_in_flight() == 5


def test_another_mailbox_has_its_own_limit(graph_emulator: GraphEmulator) -> None:
    """The limit is per mailbox: another mailbox's request is served while four are held."""
    graph_emulator.add_mailbox("other@example.com")
    mine = {"Authorization": f"Bearer {graph_emulator.issue_tokens()['access_token']}"}
    theirs_token = graph_emulator.issue_tokens("other@example.com")["access_token"]
    url = f"{graph_emulator.graph_url}/me/mailFolders/inbox"
    graph_emulator.hold()
    threads = [
        threading.Thread(target=httpx.get, args=(url,), kwargs={"headers": mine}) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    wait_for(lambda: graph_emulator.in_flight() == 4)
    release = threading.Timer(0.5, graph_emulator.release)
    release.start()
    theirs = httpx.get(url, headers={"Authorization": f"Bearer {theirs_token}"}, timeout=30)
    assert theirs.status_code == 200
    assert graph_emulator.peak_in_flight("other@example.com") == 1
    release.join()
    for thread in threads:
        thread.join()


def test_every_request_is_logged(graph: httpx.Client, graph_emulator: GraphEmulator) -> None:
    """The request log has method, path, query, status, mailbox and the Prefer header."""
    graph.get("/me/mailFolders", params={"$top": "2"}, headers={"Prefer": "odata.maxpagesize=3"})
    graph.get("/me/mailFolders/nosuch")
    logged = graph_emulator.graph_requests()
    assert [(r.method, r.path, r.status) for r in logged] == [
        ("GET", "/me/mailFolders", 200),
        ("GET", "/me/mailFolders/nosuch", 404),
    ]
    assert logged[0].query == {"$top": "2"} and logged[0].prefer == "odata.maxpagesize=3"
    assert logged[0].mailbox == "user@example.com"


def test_latency_keeps_requests_in_flight(graph_emulator: GraphEmulator) -> None:
    """set_latency holds each request in flight (counted) before it is answered."""
    token = graph_emulator.issue_tokens()["access_token"]
    graph_emulator.set_latency(1.0)
    answered: list[int] = []
    thread = threading.Thread(
        target=lambda: answered.append(
            httpx.get(
                f"{graph_emulator.graph_url}/me/mailFolders/inbox",
                headers={"Authorization": f"Bearer {token}"},
                timeout=30,
            ).status_code
        )
    )
    thread.start()
    wait_for(lambda: graph_emulator.in_flight() == 1)
    assert answered == []
    thread.join()
    assert answered == [200] and graph_emulator.in_flight() == 0


def test_bad_paging_options_are_400(graph: httpx.Client) -> None:
    """A $top that is not a number is refused with 400, not a server error."""
    assert graph.get("/me/mailFolders", params={"$top": "many"}).status_code == 400
