"""messages.list / get / modify / send, drafts and threads, as the Gmail API documents them."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import httpx

from tests.emulators.gmail.conftest import API
from tests.emulators.gmail.emulator import GmailEmulator
from tests.emulators.gmail.seed import START, epoch_ms, make_message, seed_mailbox


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode()


def test_list_is_newest_first_and_pages(gmail_emulator: GmailEmulator, http: httpx.Client) -> None:
    """Pages of maxResults, newest first, every id once, items only {id, threadId}."""
    ids = seed_mailbox(gmail_emulator, 7)
    seen: list[str] = []
    token = None
    while True:
        params = {"maxResults": 3, **({"pageToken": token} if token else {})}
        page = http.get(f"{API}/messages", params=params).json()
        assert page["resultSizeEstimate"] == 7
        assert all(set(item) == {"id", "threadId"} for item in page["messages"])
        seen += [item["id"] for item in page["messages"]]
        token = page.get("nextPageToken")
        if not token:
            break
    assert seen == list(reversed(ids))


def test_max_results_default_and_cap(gmail_emulator: GmailEmulator, http: httpx.Client) -> None:
    """maxResults defaults to 100 and is capped at 500."""
    for number in range(501):
        gmail_emulator.add_message(b"Subject: x\r\n\r\nx\r\n", internal_date=1_000_000 + number)
    assert len(http.get(f"{API}/messages").json()["messages"]) == 100
    assert len(http.get(f"{API}/messages", params={"maxResults": 900}).json()["messages"]) == 500


def test_empty_list_has_no_messages_key(http: httpx.Client) -> None:
    """Nothing matching: the whole answer is {"resultSizeEstimate": 0}."""
    assert http.get(f"{API}/messages").json() == {"resultSizeEstimate": 0}


def test_spam_and_trash_need_include_spam_trash(
    gmail_emulator: GmailEmulator, http: httpx.Client
) -> None:
    """SPAM and TRASH are left out unless includeSpamTrash, labelIds or in: asks for them."""
    kept = gmail_emulator.add_message(make_message("kept"))
    spam = gmail_emulator.add_message(make_message("spam"), ["SPAM"])
    binned = gmail_emulator.add_message(make_message("binned"), ["INBOX"])
    gmail_emulator.trash(binned)

    def listed(**params: object) -> set[str]:
        page = http.get(f"{API}/messages", params=params).json()
        return {item["id"] for item in page.get("messages", [])}

    assert listed() == {kept}
    assert listed(includeSpamTrash="true") == {kept, spam, binned}
    assert listed(labelIds="SPAM") == {spam}
    assert listed(q="in:trash") == {binned}


def test_query_subset(gmail_emulator: GmailEmulator, http: httpx.Client) -> None:
    """in:, label:, is:, category:, after:/before:, negation and words combine with AND."""
    receipts = gmail_emulator.create_label("Receipts 2026")
    day = timedelta(days=1)
    old = gmail_emulator.add_message(
        make_message("Old invoice"), ["INBOX", receipts], internal_date=epoch_ms(START)
    )
    new = gmail_emulator.add_message(
        make_message("New note"),
        ["INBOX", "UNREAD", "CATEGORY_SOCIAL"],
        internal_date=epoch_ms(START + 3 * day),
    )
    archived = gmail_emulator.add_message(
        make_message("Archived"), [], internal_date=epoch_ms(START + 5 * day)
    )

    def found(q: str) -> set[str]:
        page = http.get(f"{API}/messages", params={"q": q}).json()
        return {item["id"] for item in page.get("messages", [])}

    assert found("in:inbox") == {old, new}
    assert found("-in:inbox") == {archived}
    assert found("label:receipts-2026") == {old}
    assert found("is:unread") == {new}
    assert found("category:social") == {new}
    assert found("after:2026/01/06") == {new, archived}
    after = int((START + 2 * day).timestamp())
    before = int((START + 4 * day).timestamp())
    assert found(f"after:{after} before:{before}") == {new}
    assert found("invoice in:inbox") == {old}
    assert http.get(f"{API}/messages", params={"q": "has:nothing"}).status_code == 400


def test_get_formats(gmail_emulator: GmailEmulator, http: httpx.Client) -> None:
    """minimal has no payload; metadata only headers; full the part tree; raw the bytes."""
    raw = make_message("Parts", "Plain body", html="<p>Hi</p>", attachment=("f.bin", b"\x01\x02"))
    message_id = gmail_emulator.add_message(raw, internal_date=epoch_ms(START))

    def get(**params: object) -> dict[str, object]:
        answer = http.get(f"{API}/messages/{message_id}", params=params)
        assert answer.status_code == 200
        result: dict[str, object] = answer.json()
        return result

    minimal = get(format="minimal")
    assert "payload" not in minimal and "raw" not in minimal
    assert minimal["internalDate"] == str(epoch_ms(START))
    assert isinstance(minimal["historyId"], str) and minimal["snippet"] == "Plain body"
    metadata = get(format="metadata", metadataHeaders=["subject", "From"])
    assert metadata["payload"]["headers"] == [
        {"name": "From", "value": "alice@example.org"},
        {"name": "Subject", "value": "Parts"},
    ]
    full = get()  # the default format is full
    payload = full["payload"]
    assert payload["mimeType"] == "multipart/mixed" and payload["partId"] == ""
    parts = payload["parts"]
    assert [p["partId"] for p in parts] == ["0", "1"]
    assert [p["partId"] for p in parts[0]["parts"]] == ["0.0", "0.1"]
    text = base64.urlsafe_b64decode(parts[0]["parts"][0]["body"]["data"])
    assert text.strip() == b"Plain body"
    attachment = parts[1]["body"]
    assert "data" not in attachment and attachment["size"] == 2
    fetched = http.get(f"{API}/messages/{message_id}/attachments/{attachment['attachmentId']}")
    assert base64.urlsafe_b64decode(fetched.json()["data"]) == b"\x01\x02"
    assert base64.urlsafe_b64decode(get(format="raw")["raw"]) == raw


def test_chats_list_and_unfetchable_ids_answer_404(
    gmail_emulator: GmailEmulator, http: httpx.Client
) -> None:
    """A chat is listed (in:chats) and labelled CHAT; an unfetchable id lists but 404s."""
    chat = gmail_emulator.add_chat("hello")
    gone = gmail_emulator.add_unfetchable()
    listed = {
        m["id"] for m in http.get(f"{API}/messages", params={"q": "in:chats"}).json()["messages"]
    }
    assert listed == {chat}
    assert http.get(f"{API}/messages/{chat}").json()["labelIds"] == ["CHAT"]
    assert gone in {m["id"] for m in http.get(f"{API}/messages").json()["messages"]}
    answer = http.get(f"{API}/messages/{gone}")
    assert answer.status_code == 404
    assert answer.json()["error"]["errors"][0]["reason"] == "notFound"
    assert http.get(f"{API}/messages/ffffffffffffffff").status_code == 404


def test_modify_rules(gmail_emulator: GmailEmulator, http: httpx.Client) -> None:
    """modify returns the labels; SENT/DRAFT and unknown labels are refused; 100 ids at most."""
    message_id = gmail_emulator.add_message(make_message("m"))
    answer = http.post(
        f"{API}/messages/{message_id}/modify",
        json={"addLabelIds": ["STARRED"], "removeLabelIds": ["UNREAD"]},
    ).json()
    assert answer["labelIds"] == ["INBOX", "STARRED"]
    for label in ("SENT", "DRAFT", "Label_404"):
        refused = http.post(f"{API}/messages/{message_id}/modify", json={"addLabelIds": [label]})
        assert refused.status_code == 400
    many = http.post(f"{API}/messages/{message_id}/modify", json={"addLabelIds": ["X"] * 101})
    assert many.status_code == 400


def test_batch_modify_trash_untrash_delete(
    gmail_emulator: GmailEmulator, http: httpx.Client
) -> None:
    """batchModify answers 204 (1,000 ids at most); trash/untrash toggle TRASH; delete is gone."""
    ids = seed_mailbox(gmail_emulator, 3)
    done = http.post(f"{API}/messages/batchModify", json={"ids": ids, "addLabelIds": ["STARRED"]})
    assert done.status_code == 204 and done.content == b""
    assert all("STARRED" in gmail_emulator.label_ids(i) for i in ids)
    too_many = http.post(f"{API}/messages/batchModify", json={"ids": ["x"] * 1001})
    assert too_many.status_code == 400
    assert "TRASH" in http.post(f"{API}/messages/{ids[0]}/trash").json()["labelIds"]
    assert "TRASH" not in http.post(f"{API}/messages/{ids[0]}/untrash").json()["labelIds"]
    assert http.delete(f"{API}/messages/{ids[1]}").status_code == 204
    assert http.get(f"{API}/messages/{ids[1]}").status_code == 404
    assert http.post(f"{API}/messages/batchDelete", json={"ids": [ids[2]]}).status_code == 204
    assert http.get(f"{API}/profile").json()["messagesTotal"] == 1


def test_send_threads_only_when_all_three_hold(
    gmail_emulator: GmailEmulator, http: httpx.Client
) -> None:
    """A sent reply joins the named thread only with matching References and Subject."""
    first = gmail_emulator.add_message(make_message("Trip", message_id="<t1@example.org>"))
    thread = gmail_emulator.message(first).thread_id
    reply = make_message("Re: Trip", to="alice@example.org", in_reply_to="<t1@example.org>")
    other = make_message("Other", to="alice@example.org", in_reply_to="<t1@example.org>")

    def send(raw: bytes, thread_id: str | None) -> dict[str, str]:
        body = {"raw": _b64(raw), **({"threadId": thread_id} if thread_id else {})}
        answer = http.post(f"{API}/messages/send", json=body)
        assert answer.status_code == 200
        result: dict[str, str] = answer.json()
        return result

    joined = send(reply, thread)
    assert joined["threadId"] == thread and joined["labelIds"] == ["SENT"]
    assert send(reply, None)["threadId"] != thread  # no threadId named
    assert send(other, thread)["threadId"] != thread  # subject differs
    nobody = http.post(f"{API}/messages/send", json={"raw": _b64(b"Subject: x\r\n\r\nx")})
    assert nobody.status_code == 400


def test_delivered_reply_joins_by_references_and_subject(gmail_emulator: GmailEmulator) -> None:
    """Delivered mail is threaded like Gmail: a reference plus the same subject."""
    first = gmail_emulator.add_message(make_message("Lunch", message_id="<l1@example.org>"))
    reply = gmail_emulator.add_message(make_message("RE: Lunch", in_reply_to="<l1@example.org>"))
    stray = gmail_emulator.add_message(make_message("Dinner", in_reply_to="<l1@example.org>"))
    assert gmail_emulator.message(reply).thread_id == gmail_emulator.message(first).thread_id
    assert gmail_emulator.message(stray).thread_id == stray


def test_threads_get(gmail_emulator: GmailEmulator, http: httpx.Client) -> None:
    """threads.get lists the thread's messages oldest first in the asked format."""
    when = datetime(2026, 2, 1, tzinfo=UTC)
    first = gmail_emulator.add_message(
        make_message("Q", message_id="<q1@example.org>"), internal_date=epoch_ms(when)
    )
    second = gmail_emulator.add_message(
        make_message("Re: Q", in_reply_to="<q1@example.org>"),
        internal_date=epoch_ms(when + timedelta(minutes=5)),
    )
    thread = gmail_emulator.message(first).thread_id
    answer = http.get(f"{API}/threads/{thread}", params={"format": "minimal"}).json()
    assert [m["id"] for m in answer["messages"]] == [first, second]
    assert http.get(f"{API}/threads/nothing").status_code == 404


def test_drafts_create_list_get_send_delete(
    gmail_emulator: GmailEmulator, http: httpx.Client
) -> None:
    """A draft is a DRAFT message; sending it makes it SENT and the draft disappears."""
    raw = make_message("Draft", to="bob@example.org")
    created = http.post(f"{API}/drafts", json={"message": {"raw": _b64(raw)}}).json()
    assert created["id"].startswith("r") and created["message"]["labelIds"] == ["DRAFT"]
    listed = http.get(f"{API}/drafts").json()
    assert [d["id"] for d in listed["drafts"]] == [created["id"]]
    got = http.get(f"{API}/drafts/{created['id']}", params={"format": "raw"}).json()
    assert base64.urlsafe_b64decode(got["message"]["raw"]) == raw
    sent = http.post(f"{API}/drafts/send", json={"id": created["id"]}).json()
    assert sent["labelIds"] == ["SENT"] and sent["id"] == created["message"]["id"]
    assert http.get(f"{API}/drafts").json() == {"resultSizeEstimate": 0}
    second = http.post(f"{API}/drafts", json={"message": {"raw": _b64(raw)}}).json()
    assert http.delete(f"{API}/drafts/{second['id']}").status_code == 204
    assert http.get(f"{API}/messages/{second['message']['id']}").status_code == 404


def test_other_users_are_refused(http: httpx.Client) -> None:
    """Only ``me`` and the mailbox's own address are served (403 for anyone else)."""
    assert http.get("/gmail/v1/users/owner@example.com/profile").status_code == 200
    assert http.get("/gmail/v1/users/someone@example.com/profile").status_code == 403


def test_folded_headers_still_thread() -> None:
    """A folded References header and a repeated Subject are read as Gmail reads them."""
    with GmailEmulator() as gmail:
        first = gmail.add_message(make_message("Long", message_id="<f1@example.org>"))
        folded = (
            b"Subject: Re: Long\r\nSubject: something else\r\nReferences: <zz@example.org>\r\n"
            b"\t<f1@example.org>\r\n\r\nbody\r\n"
        )
        reply = gmail.add_message(folded)
        assert gmail.message(reply).thread_id == gmail.message(first).thread_id
