"""The emulator's message routes: MIME, move (REST vs immutable ids), PATCH, delete, sendMail."""

from __future__ import annotations

import base64

import httpx

from tests.emulators.graph.samples import raw_message
from tests.emulators.graph.server import GraphEmulator

IMMUTABLE = {"Prefer": 'IdType="ImmutableId"'}


def test_value_is_the_raw_mime(graph: httpx.Client, graph_emulator: GraphEmulator) -> None:
    """GET /me/messages/{id}/$value returns the bytes that were delivered."""
    raw = raw_message(1)
    message = graph_emulator.add_message(raw)
    response = graph.get(f"/me/messages/{message.id}/$value")
    assert response.status_code == 200 and response.content == raw
    assert graph.get("/me/messages/AAMkNoSuchId/$value").status_code == 404


def test_properties_come_from_the_mime(graph: httpx.Client, graph_emulator: GraphEmulator) -> None:
    """Subject, addresses, internetMessageId and a reply's conversation come from the MIME."""
    first = graph_emulator.add_message(raw_message(1, subject="Lunch?"))
    reply = graph_emulator.add_message(raw_message(2, reply_to="<1@example.org>"))
    other = graph_emulator.add_message(raw_message(3))
    shown = graph.get(f"/me/messages/{first.id}").json()
    assert shown["subject"] == "Lunch?"
    assert shown["from"] == {"emailAddress": {"name": "Ann Sender", "address": "ann@example.org"}}
    assert shown["internetMessageId"] == "<1@example.org>"
    conversation = graph.get(f"/me/messages/{reply.id}").json()["conversationId"]
    assert conversation == shown["conversationId"]
    assert graph.get(f"/me/messages/{other.id}").json()["conversationId"] != conversation
    given = graph_emulator.add_message(raw_message(4), conversation_id="AAQkGiven")
    assert (
        graph.get(f"/me/messages/{given.id}?$select=conversationId").json()["conversationId"]
        == "AAQkGiven"
    )


def test_move_gives_a_new_id_and_the_old_one_is_gone(
    graph: httpx.Client, graph_emulator: GraphEmulator
) -> None:
    """A move answers 201 with the message in its new folder under a new REST id."""
    message = graph_emulator.add_message(raw_message(1))
    old = message.id
    response = graph.post(f"/me/messages/{old}/move", json={"destinationId": "archive"})
    assert response.status_code == 201
    moved = response.json()
    assert moved["id"] != old
    assert moved["parentFolderId"] == graph.get("/me/mailFolders/archive").json()["id"]
    assert graph.get(f"/me/messages/{old}").status_code == 404
    assert graph.get(f"/me/messages/{moved['id']}").status_code == 200


def test_move_with_immutable_ids_keeps_the_id(
    graph: httpx.Client, graph_emulator: GraphEmulator
) -> None:
    """With Prefer IdType=ImmutableId the moved message keeps the id it had."""
    message = graph_emulator.add_message(raw_message(1))
    before = graph.get(f"/me/messages/{message.id}", headers=IMMUTABLE).json()["id"]
    moved = graph.post(
        f"/me/messages/{before}/move", json={"destinationId": "junkemail"}, headers=IMMUTABLE
    ).json()
    assert moved["id"] == before
    assert graph.get(f"/me/messages/{before}", headers=IMMUTABLE).status_code == 200


def test_patch_changes_read_flag_and_categories(
    graph: httpx.Client, graph_emulator: GraphEmulator
) -> None:
    """PATCH isRead, flag and categories; other properties and bad values are 400."""
    message = graph_emulator.add_message(raw_message(1))
    response = graph.patch(
        f"/me/messages/{message.id}",
        json={"isRead": True, "flag": {"flagStatus": "flagged"}, "categories": ["Blue"]},
    )
    assert response.status_code == 200
    shown = graph.get(f"/me/messages/{message.id}").json()
    assert shown["isRead"] is True and shown["flag"] == {"flagStatus": "flagged"}
    assert shown["categories"] == ["Blue"]
    bad = graph.patch(f"/me/messages/{message.id}", json={"flag": {"flagStatus": "maybe"}})
    assert bad.status_code == 400
    assert graph.patch(f"/me/messages/{message.id}", json={"isRead": "yes"}).status_code == 400


def test_delete_goes_to_deleted_items_then_away(
    graph: httpx.Client, graph_emulator: GraphEmulator
) -> None:
    """DELETE moves a message to Deleted Items; a DELETE there removes it for good."""
    graph_emulator.add_message(raw_message(1))
    first = graph.get("/me/mailFolders/inbox/messages").json()["value"][0]["id"]
    assert graph.delete(f"/me/messages/{first}").status_code == 204
    trashed = graph.get("/me/mailFolders/deleteditems/messages").json()["value"]
    assert len(trashed) == 1
    assert graph.delete(f"/me/messages/{trashed[0]['id']}").status_code == 204
    assert graph.get("/me/mailFolders/deleteditems/messages").json()["value"] == []


def test_send_mail_json_and_mime(graph: httpx.Client, graph_emulator: GraphEmulator) -> None:
    """sendMail takes a JSON message or base64 MIME (text/plain): 202, saved to Sent Items."""
    message = {
        "subject": "Hello",
        "body": {"contentType": "Text", "content": "Hi there"},
        "toRecipients": [{"emailAddress": {"address": "bob@example.net"}}],
    }
    response = graph.post("/me/sendMail", json={"message": message, "saveToSentItems": False})
    assert response.status_code == 202
    mime = raw_message(7, sender="user@example.com", to="bob@example.net")
    response = graph.post(
        "/me/sendMail",
        content=base64.b64encode(mime),
        headers={"Content-Type": "text/plain"},
    )
    assert response.status_code == 202
    sent = graph_emulator.mailbox().sent
    assert len(sent) == 2 and b"Subject: Hello" in sent[0] and sent[1] == mime
    saved = graph.get("/me/mailFolders/sentitems/messages").json()["value"]
    assert [m["subject"] for m in saved] == ["Message 7"]
    bad = graph.post("/me/sendMail", content=b"%%%", headers={"Content-Type": "text/plain"})
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "ErrorMimeContentInvalidBase64String"


def test_scripted_changes_show_in_the_message(
    graph: httpx.Client, graph_emulator: GraphEmulator
) -> None:
    """categorize, flag and mark_read change what Graph shows, as another client would."""
    message = graph_emulator.add_message(raw_message(1))
    graph_emulator.categorize(message.id, ["Green", "Work"])
    graph_emulator.flag(message.id, "complete")
    graph_emulator.mark_read(message.id)
    shown = graph.get(f"/me/messages/{message.id}?$select=categories,flag,isRead").json()
    assert shown["categories"] == ["Green", "Work"]
    assert shown["flag"] == {"flagStatus": "complete"} and shown["isRead"] is True
