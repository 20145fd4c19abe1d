"""mailroom's Gmail REST client against the emulator, over real HTTP on 127.0.0.1."""

from __future__ import annotations

import email
from datetime import UTC, datetime, timedelta

import pytest

from mailroom.errors import ConfigError
from mailroom.providers.base import AuthError, InvalidCursorError, RateLimitError, TransientError
from mailroom.providers.gmail.api import QUOTA_COSTS, GmailApi, decode_raw
from mailroom.providers.gmail.errors import (
    GmailNotFoundError,
    GmailRequestError,
    QuotaExceededError,
)
from tests.emulators.gmail.emulator import GmailEmulator
from tests.emulators.gmail.seed import epoch_ms, make_message, seed_mailbox
from tests.providers.gmail.conftest import LOOPBACK, EmulatorTokens


def test_profile_reports_the_mailbox(gmail_emulator: GmailEmulator, gmail_api: GmailApi) -> None:
    """profile() returns the address, the totals and the current historyId."""
    seed_mailbox(gmail_emulator, 4)
    profile = gmail_api.profile()
    assert profile["emailAddress"] == gmail_emulator.address
    assert profile["messagesTotal"] == 4
    assert profile["historyId"] == str(gmail_emulator.history_id)


def test_iter_messages_follows_every_page_newest_first(
    gmail_emulator: GmailEmulator, gmail_api: GmailApi
) -> None:
    """iter_messages pages through the whole listing, newest first, nothing doubled."""
    ids = seed_mailbox(gmail_emulator, 12)
    listed = [ref["id"] for ref in gmail_api.iter_messages(page_size=5)]
    assert listed == list(reversed(ids))
    assert len(gmail_emulator.calls("messages.list")) == 3


def test_list_messages_filters_and_empty_page(
    gmail_emulator: GmailEmulator, gmail_api: GmailApi
) -> None:
    """Label filters and spam/trash inclusion pass through; an empty page has no ids."""
    ids = seed_mailbox(gmail_emulator, 6)
    gmail_emulator.trash(ids[0])
    assert ids[0] not in {r["id"] for r in gmail_api.iter_messages()}
    assert ids[0] in {r["id"] for r in gmail_api.iter_messages(include_spam_trash=True)}
    page = gmail_api.list_messages(label_ids=["STARRED"])
    assert page.messages == [] and page.next_page_token is None
    assert page.result_size_estimate == 0


def test_get_message_formats(gmail_emulator: GmailEmulator, gmail_api: GmailApi) -> None:
    """raw decodes to the stored bytes; metadata carries only the asked headers."""
    raw = make_message("Hello", "Body text", attachment=("a.bin", b"\x00\x01\x02"))
    message_id = gmail_emulator.add_message(raw)
    assert gmail_api.get_raw(message_id) == raw
    meta = gmail_api.get_message(message_id, "metadata", ["Subject"])
    assert [h["name"] for h in meta["payload"]["headers"]] == ["Subject"]
    full = gmail_api.get_message(message_id, "full")
    attachment = full["payload"]["parts"][1]
    assert attachment["filename"] == "a.bin"
    data = gmail_api.get_attachment(message_id, attachment["body"]["attachmentId"])
    assert data == b"\x00\x01\x02"


def test_get_missing_message_is_not_found(
    gmail_emulator: GmailEmulator, gmail_api: GmailApi
) -> None:
    """A 404 for one message is GmailNotFoundError with a plain sentence."""
    with pytest.raises(GmailNotFoundError, match="could not find"):
        gmail_api.get_message(gmail_emulator.add_unfetchable())


def test_labels_crud(gmail_emulator: GmailEmulator, gmail_api: GmailApi) -> None:
    """Labels are created, renamed and deleted; a taken name is a GmailRequestError."""
    created = gmail_api.create_label("Receipts")
    assert created["type"] == "user"
    renamed = gmail_api.patch_label(created["id"], name="Receipts/2026")
    assert renamed["name"] == "Receipts/2026"
    assert gmail_emulator.label_names()[created["id"]] == "Receipts/2026"
    assert {"INBOX", "CATEGORY_SOCIAL", created["id"]} <= {x["id"] for x in gmail_api.labels()}
    with pytest.raises(GmailRequestError):
        gmail_api.create_label("receipts/2026")
    gmail_api.delete_label(created["id"])
    assert created["id"] not in gmail_emulator.label_names()


def test_modify_batch_modify_trash_untrash(
    gmail_emulator: GmailEmulator, gmail_api: GmailApi
) -> None:
    """Label changes land in the mailbox, batchModify in one request per 1,000 ids."""
    ids = seed_mailbox(gmail_emulator, 3)
    answer = gmail_api.modify(ids[0], add=["STARRED"], remove=["INBOX"])
    assert "STARRED" in answer["labelIds"] and "INBOX" not in answer["labelIds"]
    gmail_api.batch_modify(ids, add=["IMPORTANT"])
    assert all("IMPORTANT" in gmail_emulator.label_ids(i) for i in ids)
    assert len(gmail_emulator.calls("messages.batchModify")) == 1
    gmail_api.trash(ids[1])
    assert "TRASH" in gmail_emulator.label_ids(ids[1])
    gmail_api.untrash(ids[1])
    assert "TRASH" not in gmail_emulator.label_ids(ids[1])
    with pytest.raises(GmailRequestError, match="did not accept"):
        gmail_api.modify(ids[0], add=["SENT"])


def test_send_joins_the_thread_it_names(gmail_emulator: GmailEmulator, gmail_api: GmailApi) -> None:
    """send() with threadId keeps a proper reply in its thread; the message is SENT."""
    first = gmail_emulator.add_message(make_message("Plans", message_id="<p1@example.org>"))
    thread_id = gmail_emulator.message(first).thread_id
    reply = make_message(
        "Re: Plans",
        sender="owner@example.com",
        to="alice@example.org",
        in_reply_to="<p1@example.org>",
    )
    sent = gmail_api.send(reply, thread_id=thread_id)
    assert sent["threadId"] == thread_id
    assert gmail_emulator.label_ids(sent["id"]) == {"SENT"}
    assert gmail_emulator.message(sent["id"]).raw == reply


def test_history_pages_and_shapes(gmail_emulator: GmailEmulator, gmail_api: GmailApi) -> None:
    """History after a cursor comes in ascending pages with the documented change keys."""
    ids = seed_mailbox(gmail_emulator, 2)
    start = gmail_api.profile()["historyId"]
    gmail_emulator.change_labels(ids[0], add=["STARRED"])
    gmail_emulator.change_labels(ids[1], remove=["INBOX"])
    gmail_emulator.delete(ids[0])
    pages = list(gmail_api.iter_history(start, page_size=2))
    records = [record for page in pages for record in page.records]
    assert len(pages) == 2
    assert [int(r["id"]) for r in records] == sorted(int(r["id"]) for r in records)
    assert records[0]["labelsAdded"][0]["labelIds"] == ["STARRED"]
    assert records[1]["labelsRemoved"][0]["message"]["id"] == ids[1]
    assert records[2]["messagesDeleted"][0]["message"]["id"] == ids[0]
    assert pages[-1].history_id == str(gmail_emulator.history_id)


def test_expired_history_is_an_invalid_cursor(
    gmail_emulator: GmailEmulator, gmail_api: GmailApi
) -> None:
    """A startHistoryId older than Gmail keeps (404) raises InvalidCursorError."""
    seed_mailbox(gmail_emulator, 2)
    start = gmail_api.profile()["historyId"]
    gmail_emulator.add_message(make_message("Later"))
    gmail_emulator.expire_history()
    with pytest.raises(InvalidCursorError, match="read again"):
        gmail_api.history(start)


def test_batch_get_reports_found_missing_and_rate_limited(
    gmail_emulator: GmailEmulator, gmail_api: GmailApi
) -> None:
    """One batch: found messages decode, a 404 id is missing, over-quota parts fail alone."""
    ids = seed_mailbox(gmail_emulator, 6)
    gone = gmail_emulator.add_unfetchable()
    gmail_emulator.set_quota_limit(5 * 5)  # room for five messages.get
    result = gmail_api.get_messages([*ids, gone], "raw")
    assert sorted(result.messages) == sorted(ids[:5])
    assert decode_raw(result.messages[ids[0]]) == gmail_emulator.message(ids[0]).raw
    assert sorted(result.rate_limited) == sorted([ids[5], gone])  # the quota checks first
    assert result.missing == []
    for error in result.failed.values():
        assert isinstance(error, QuotaExceededError)
        assert error.stated_limit == 25
    assert len(gmail_emulator.requests) == 1 + 7  # one HTTP batch, seven calls inside


def test_batch_get_splits_into_batches(gmail_emulator: GmailEmulator, gmail_api: GmailApi) -> None:
    """More ids than the batch size take several batches; each id is answered once."""
    ids = seed_mailbox(gmail_emulator, 7)
    gone = gmail_emulator.add_unfetchable()
    result = gmail_api.get_messages([*ids, gone, ids[0]], "minimal", batch_size=3)
    assert sorted(result.messages) == sorted(ids) and result.missing == [gone]
    batches = [r for r in gmail_emulator.requests if r.path == "/batch/gmail/v1"]
    assert len(batches) == 3


def test_charge_hook_gets_the_units_before_each_request(
    gmail_emulator: GmailEmulator, gmail_tokens: EmulatorTokens
) -> None:
    """charge() is called with each request's units before it is sent; a raise stops it."""
    ids = seed_mailbox(gmail_emulator, 4)
    charged: list[int] = []
    with GmailApi(
        gmail_tokens, base_url=gmail_emulator.url, allowed_hosts=LOOPBACK, charge=charged.append
    ) as api:
        api.profile()
        api.get_messages(ids, "raw")
        api.batch_modify(ids, add=["STARRED"])
    assert charged == [
        QUOTA_COSTS["getProfile"],
        4 * QUOTA_COSTS["messages.get"],
        QUOTA_COSTS["messages.batchModify"],
    ]

    def refuse(units: int) -> None:
        raise RateLimitError("slow down", retry_after=3.0)

    gmail_emulator.clear_log()
    with (
        GmailApi(
            gmail_tokens, base_url=gmail_emulator.url, allowed_hosts=LOOPBACK, charge=refuse
        ) as api,
        pytest.raises(RateLimitError),
    ):
        api.profile()
    assert gmail_emulator.requests == []


def test_expired_access_token_is_refreshed_once(
    gmail_emulator: GmailEmulator, gmail_api: GmailApi, gmail_tokens: EmulatorTokens
) -> None:
    """A 401 refreshes the token at /token and the request goes through."""
    gmail_emulator.expire_tokens()
    assert gmail_api.profile()["emailAddress"] == gmail_emulator.address
    assert gmail_tokens.refreshes == 1
    assert [r.status for r in gmail_emulator.requests] == [401, 200]


def test_refused_refresh_is_an_auth_error(
    gmail_emulator: GmailEmulator, gmail_api: GmailApi
) -> None:
    """Expired token and revoked refresh token: AuthError, the account needs its owner."""
    gmail_emulator.expire_tokens()
    gmail_emulator.revoke_refresh_tokens()
    with pytest.raises(AuthError):
        gmail_api.profile()


def test_quota_rejection_is_a_rate_limit_with_the_stated_limit(
    gmail_emulator: GmailEmulator, gmail_api: GmailApi
) -> None:
    """403 userRateLimitExceeded is a QuotaExceededError naming the limit; nothing charged."""
    gmail_emulator.set_quota_limit(6)
    gmail_api.list_messages()
    with pytest.raises(QuotaExceededError) as caught:
        gmail_api.list_messages()
    assert caught.value.stated_limit == 6
    assert "slow down" in str(caught.value)
    assert [r.units for r in gmail_emulator.requests] == [5, 0]


def test_server_errors_are_transient(gmail_emulator: GmailEmulator, gmail_api: GmailApi) -> None:
    """An injected 500 is a TransientError; the next call succeeds."""
    gmail_emulator.inject_faults(1, 500)
    with pytest.raises(TransientError, match="server error"):
        gmail_api.labels()
    assert gmail_api.labels()


def test_unreachable_server_is_transient(gmail_tokens: EmulatorTokens) -> None:
    """Nothing listening: a TransientError, not a traceback."""
    unreachable = GmailApi(gmail_tokens, base_url="http://127.0.0.1:9", allowed_hosts=LOOPBACK)
    with unreachable as api, pytest.raises(TransientError, match="could not be reached"):
        api.profile()


def test_loopback_is_refused_unless_allow_listed(
    gmail_emulator: GmailEmulator, gmail_tokens: EmulatorTokens
) -> None:
    """The SSRF guard runs on every connection: 127.0.0.1 is refused when not allow-listed."""
    guarded = GmailApi(gmail_tokens, base_url=gmail_emulator.url)
    with guarded as api, pytest.raises(AuthError, match="cannot be used"):
        api.profile()
    assert gmail_emulator.requests == []


def test_history_types_and_label_filter(gmail_emulator: GmailEmulator, gmail_api: GmailApi) -> None:
    """historyTypes and labelId restrict the records to the asked changes."""
    when = datetime(2026, 3, 1, tzinfo=UTC)
    first = gmail_emulator.add_message(make_message("One"), internal_date=epoch_ms(when))
    start = gmail_api.profile()["historyId"]
    gmail_emulator.add_message(
        make_message("Two"), internal_date=epoch_ms(when + timedelta(hours=1))
    )
    gmail_emulator.change_labels(first, add=["STARRED"])
    page = gmail_api.history(start, history_types=["labelAdded"], label_id="STARRED")
    assert [list(r) for r in page.records] == [["id", "messages", "labelsAdded"]]
    raw = email.message_from_bytes(gmail_api.get_raw(first))
    assert raw["Subject"] == "One"


def test_sending_limit_gives_retry_after(
    gmail_emulator: GmailEmulator, gmail_api: GmailApi
) -> None:
    """Gmail's "Retry after <time>" sending limit is a RateLimitError waiting until then."""
    gmail_emulator.block_sending(datetime.now(UTC) + timedelta(seconds=120))
    with pytest.raises(QuotaExceededError) as caught:
        gmail_api.send(make_message("Hi", to="bob@example.org"))
    assert caught.value.retry_after is not None
    assert 100 < caught.value.retry_after <= 120


def test_plain_http_only_to_loopback(gmail_tokens: EmulatorTokens) -> None:
    """Tokens are never sent in clear text to a real host: http is for loopback only."""
    with pytest.raises(ConfigError, match="must use https"):
        GmailApi(gmail_tokens, base_url="http://gmail.googleapis.com")
    GmailApi(gmail_tokens, base_url="https://gmail.googleapis.com").close()


def test_query_and_thread(gmail_emulator: GmailEmulator, gmail_api: GmailApi) -> None:
    """q reaches Gmail as written; get_thread returns the thread's messages oldest first."""
    ids = seed_mailbox(gmail_emulator, 6)
    unread = {r["id"] for r in gmail_api.iter_messages(query="in:inbox is:unread")}
    assert unread == {i for i in ids if "UNREAD" in gmail_emulator.label_ids(i)}
    assert gmail_emulator.calls("messages.list")[-1].query["q"] == ["in:inbox is:unread"]
    thread_id = gmail_emulator.message(ids[1]).thread_id
    thread = gmail_api.get_thread(thread_id, "minimal")
    assert [m["id"] for m in thread["messages"]] == ids[0:3]
