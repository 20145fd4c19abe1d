"""labels.list/get/create/patch/delete and the system labels."""

from __future__ import annotations

import httpx

from tests.emulators.gmail.conftest import API
from tests.emulators.gmail.emulator import GmailEmulator
from tests.emulators.gmail.mailbox import CATEGORY_LABELS
from tests.emulators.gmail.seed import make_message


def test_system_labels_are_listed_with_ids_equal_to_names(http: httpx.Client) -> None:
    """Every system label is there, type system, id = name; list items carry no counts."""
    labels = http.get(f"{API}/labels").json()["labels"]
    system = {label["id"]: label for label in labels if label["type"] == "system"}
    wanted = {"INBOX", "SENT", "DRAFT", "SPAM", "TRASH", "UNREAD", "STARRED", "IMPORTANT"}
    assert wanted | set(CATEGORY_LABELS) <= set(system)
    assert all(label["name"] == label_id for label_id, label in system.items())
    assert all("messagesTotal" not in label for label in labels)


def test_create_get_patch_delete(gmail_emulator: GmailEmulator, http: httpx.Client) -> None:
    """A user label is created, counted, renamed and deleted (leaving its messages)."""
    created = http.post(
        f"{API}/labels", json={"name": "Work", "labelListVisibility": "labelShow"}
    ).json()
    assert created["id"].startswith("Label_") and created["type"] == "user"
    message = gmail_emulator.add_message(make_message("m"), ["INBOX", "UNREAD", created["id"]])
    got = http.get(f"{API}/labels/{created['id']}").json()
    assert (got["messagesTotal"], got["messagesUnread"], got["threadsTotal"]) == (1, 1, 1)
    patched = http.patch(f"{API}/labels/{created['id']}", json={"name": "Work/Projects"})
    assert patched.json()["name"] == "Work/Projects"
    assert http.delete(f"{API}/labels/{created['id']}").status_code == 204
    assert http.get(f"{API}/labels/{created['id']}").status_code == 404
    assert gmail_emulator.label_ids(message) == {"INBOX", "UNREAD"}


def test_name_conflicts_and_system_labels_are_refused(http: httpx.Client) -> None:
    """Names are unique case-insensitively (409); system labels cannot change (400)."""
    assert http.post(f"{API}/labels", json={"name": "Receipts"}).status_code == 200
    conflict = http.post(f"{API}/labels", json={"name": "receipts"})
    assert conflict.status_code == 409
    assert http.post(f"{API}/labels", json={"name": "inbox"}).status_code == 409
    assert http.post(f"{API}/labels", json={"name": " "}).status_code == 400
    assert http.patch(f"{API}/labels/INBOX", json={"name": "In"}).status_code == 400
    assert http.delete(f"{API}/labels/INBOX").status_code == 400


def test_deleting_a_label_is_in_the_history(
    gmail_emulator: GmailEmulator, http: httpx.Client
) -> None:
    """Deleting a label removes it from its messages as labelRemoved changes."""
    label = gmail_emulator.create_label("Old")
    message = gmail_emulator.add_message(make_message("m"), ["INBOX", label])
    start = http.get(f"{API}/profile").json()["historyId"]
    gmail_emulator.delete_label(label)
    records = http.get(f"{API}/history", params={"startHistoryId": start}).json()["history"]
    assert records[0]["labelsRemoved"][0]["labelIds"] == [label]
    assert records[0]["messages"][0]["id"] == message


def test_categorize_moves_between_tabs(gmail_emulator: GmailEmulator) -> None:
    """categorize leaves exactly one CATEGORY_* label on the message."""
    message = gmail_emulator.add_message(make_message("m"), ["INBOX", "CATEGORY_PROMOTIONS"])
    gmail_emulator.categorize(message, "CATEGORY_SOCIAL")
    assert gmail_emulator.label_ids(message) == {"INBOX", "CATEGORY_SOCIAL"}
