"""history.list: ascending records with gaps, the four change kinds, filters, paging, 404."""

from __future__ import annotations

from typing import Any

import httpx

from tests.emulators.gmail.conftest import API
from tests.emulators.gmail.emulator import GmailEmulator
from tests.emulators.gmail.seed import make_message


def _history(http: httpx.Client, **params: Any) -> httpx.Response:
    return http.get(f"{API}/history", params=params)


def test_changes_come_in_ascending_order_with_gaps(
    gmail_emulator: GmailEmulator, http: httpx.Client
) -> None:
    """Each change is one record; ids ascend but are not contiguous; shapes as documented."""
    start = http.get(f"{API}/profile").json()["historyId"]
    added = gmail_emulator.add_message(make_message("a"), ["INBOX", "UNREAD"])
    gmail_emulator.change_labels(added, remove=["UNREAD"])
    gmail_emulator.trash(added)
    gmail_emulator.delete(added)
    answer = _history(http, startHistoryId=start).json()
    records = answer["history"]
    ids = [int(r["id"]) for r in records]
    assert ids == sorted(ids) and len(ids) == 4
    assert any(b - a > 1 for a, b in zip(ids, ids[1:], strict=False))
    assert [sorted(set(r) - {"id", "messages"}) for r in records] == [
        ["messagesAdded"],
        ["labelsRemoved"],
        ["labelsAdded"],
        ["messagesDeleted"],
    ]
    assert records[0]["messagesAdded"][0]["message"]["labelIds"] == ["INBOX", "UNREAD"]
    assert records[1]["labelsRemoved"][0]["labelIds"] == ["UNREAD"]
    assert records[2]["labelsAdded"][0]["labelIds"] == ["TRASH"]  # trash is a label change
    assert all(r["messages"][0]["id"] == added for r in records)
    assert answer["historyId"] == str(gmail_emulator.history_id)
    assert "nextPageToken" not in answer


def test_nothing_changed_leaves_out_history(http: httpx.Client) -> None:
    """Up to date: only historyId comes back."""
    current = http.get(f"{API}/profile").json()["historyId"]
    assert _history(http, startHistoryId=current).json() == {"historyId": current}


def test_history_types_and_label_id(gmail_emulator: GmailEmulator, http: httpx.Client) -> None:
    """historyTypes keeps only those kinds; labelId only the changes about that label."""
    start = http.get(f"{API}/profile").json()["historyId"]
    first = gmail_emulator.add_message(make_message("a"))
    gmail_emulator.change_labels(first, add=["STARRED"])
    gmail_emulator.change_labels(first, add=["IMPORTANT"])
    added = _history(http, startHistoryId=start, historyTypes="messageAdded").json()["history"]
    assert [list(r) for r in added] == [["id", "messages", "messagesAdded"]]
    starred = _history(http, startHistoryId=start, historyTypes="labelAdded", labelId="STARRED")
    assert [r["labelsAdded"][0]["labelIds"] for r in starred.json()["history"]] == [["STARRED"]]
    assert _history(http, startHistoryId=start, historyTypes="bogus").status_code == 400


def test_paging(gmail_emulator: GmailEmulator, http: httpx.Client) -> None:
    """maxResults pages the records; following nextPageToken yields each record once."""
    start = http.get(f"{API}/profile").json()["historyId"]
    for number in range(5):
        gmail_emulator.add_message(make_message(f"m{number}"))
    seen: list[str] = []
    token = None
    while True:
        params: dict[str, Any] = {"startHistoryId": start, "maxResults": 2}
        if token:
            params["pageToken"] = token
        page = _history(http, **params).json()
        seen += [r["id"] for r in page["history"]]
        token = page.get("nextPageToken")
        if token is None:
            break
    assert len(seen) == 5 == len(set(seen))


def test_expired_start_answers_404_with_googles_body(
    gmail_emulator: GmailEmulator, http: httpx.Client
) -> None:
    """A startHistoryId older than the kept history is 404 notFound; a newer one works."""
    start = http.get(f"{API}/profile").json()["historyId"]
    gmail_emulator.add_message(make_message("a"))
    gmail_emulator.expire_history()
    answer = _history(http, startHistoryId=start)
    assert answer.status_code == 404
    assert answer.json() == {
        "error": {
            "code": 404,
            "message": "Requested entity was not found.",
            "errors": [
                {
                    "message": "Requested entity was not found.",
                    "domain": "global",
                    "reason": "notFound",
                }
            ],
            "status": "NOT_FOUND",
        }
    }
    current = str(gmail_emulator.history_id)
    assert _history(http, startHistoryId=current).status_code == 200
    assert _history(http).status_code == 400  # startHistoryId is required
