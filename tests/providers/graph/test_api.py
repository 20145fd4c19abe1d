"""mailroom's Graph client against the Graph emulator over real HTTP."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from mailroom.providers.base import AuthError, InvalidCursorError, ProviderError, RateLimitError
from mailroom.providers.graph import (
    BatchRequest,
    FolderExistsError,
    GraphClient,
    MailboxLimiter,
    NotFoundError,
)
from mailroom.providers.graph.api import update_body
from tests.emulators.graph.fixture import wait_for
from tests.emulators.graph.samples import raw_message, received_at
from tests.emulators.graph.server import GraphEmulator
from tests.providers.graph.tokens import EmulatorTokens

MakeClient = Callable[..., GraphClient]


def _fill(emulator: GraphEmulator, count: int, folder: str = "inbox") -> list[str]:
    return [
        emulator.add_message(raw_message(n), folder, received=received_at(n)).immutable_id
        for n in range(1, count + 1)
    ]


# -- folders ------------------------------------------------------------------------


def test_folder_tree_follows_paging_and_child_folders(
    make_client: MakeClient, graph_emulator: GraphEmulator
) -> None:
    """The tree comes whole, parents first, with paths, across pages of 3 and childFolders."""
    mailbox = graph_emulator.mailbox()
    work = mailbox.create_folder("Work")
    bills = mailbox.create_folder("Bills", work.id)
    mailbox.create_folder("2026", bills.id)
    mailbox.create_folder("Hidden stuff", hidden=True)
    client = make_client()
    tree = client.folders(page_size=3)
    paths = [f.path for f in tree]
    assert ("Inbox",) in paths and ("Work", "Bills", "2026") in paths
    assert (
        paths.index(("Work",))
        < paths.index(("Work", "Bills"))
        < paths.index(("Work", "Bills", "2026"))
    )
    assert ("Sync Issues",) not in paths and ("Hidden stuff",) not in paths
    assert len(paths) == len(set(paths)) == 10
    top_pages = [r for r in graph_emulator.graph_requests() if r.path == "/me/mailFolders"]
    assert len(top_pages) == 3  # 8 visible top-level folders, 3 per page
    hidden = [f.path for f in client.folders(include_hidden=True) if f.hidden]
    assert sorted(hidden) == [("Hidden stuff",), ("Sync Issues",)]


def test_well_known_folders_in_one_batch(
    make_client: MakeClient, graph_emulator: GraphEmulator
) -> None:
    """Well-known names resolve to folder ids in one $batch; an unknown name is left out."""
    found = make_client().well_known_folders(["inbox", "sentitems", "archive", "nosuch"])
    mailbox = graph_emulator.mailbox()
    assert found == {n: mailbox.folder(n).id for n in ("inbox", "sentitems", "archive")}
    assert [r.path for r in graph_emulator.graph_requests(parts=False)] == ["/$batch"]


def test_folder_create_rename_delete(
    make_client: MakeClient, graph_emulator: GraphEmulator
) -> None:
    """Folders are created (nested), renamed and deleted; a taken name is FolderExistsError."""
    client = make_client()
    work = client.create_folder("Work")
    child = client.create_folder("Bills", work.id)
    assert child.parent_id == work.id
    assert client.rename_folder(child.id, "Invoices").name == "Invoices"
    with pytest.raises(FolderExistsError):
        client.create_folder("work")
    client.delete_folder(work.id)
    with pytest.raises(NotFoundError) as caught:
        client.folder(work.id)
    assert str(caught.value) == "The message or folder is no longer in the Microsoft mailbox."


# -- delta --------------------------------------------------------------------------


def test_delta_pages_to_the_delta_link(
    make_client: MakeClient, graph_emulator: GraphEmulator
) -> None:
    """A first round yields every message across pages of the asked size, then a deltaLink."""
    ids = _fill(graph_emulator, 7)
    inbox = graph_emulator.mailbox().folder("inbox").id
    pages = list(make_client().delta(inbox, page_size=3))
    assert [len(p.messages) for p in pages] == [3, 3, 1]
    assert [p.last for p in pages] == [False, False, True]
    assert pages[-1].delta_link and all(p.next_link for p in pages[:-1])
    seen = [m.id for p in pages for m in p.messages]
    assert seen == list(reversed(ids))  # newest first, immutable ids by default
    first = pages[0].messages[0]
    assert first.subject == "Message 7" and first.folder_id == inbox and first.is_read is False
    delta_calls = [r for r in graph_emulator.graph_requests() if r.path.endswith("/delta")]
    assert all("odata.maxpagesize=3" in r.prefer for r in delta_calls)
    assert delta_calls[0].query["$select"].startswith("id,")


def test_delta_reports_changes_removals_empty_pages_and_duplicates(
    make_client: MakeClient, graph_emulator: GraphEmulator
) -> None:
    """After a round the deltaLink yields updates and removals; empty pages and repeats pass."""
    ids = _fill(graph_emulator, 6)
    inbox = graph_emulator.mailbox().folder("inbox").id
    client = make_client()
    graph_emulator.delta().empty_pages(1)
    graph_emulator.delta().duplicate_pages(1)
    pages = list(client.delta(inbox, page_size=2))
    assert pages[0].messages == () and pages[0].next_link  # the scripted empty page
    seen = [m.id for p in pages for m in p.messages]
    assert set(seen) == set(ids) and len(seen) == len(ids) + 2
    graph_emulator.mark_read(ids[0])
    graph_emulator.move_message(ids[1], "archive")
    graph_emulator.delete_message(ids[2])
    changes = list(client.delta(inbox, pages[-1].delta_link, page_size=10))
    assert len(changes) == 1 and changes[0].last
    assert [(m.id, m.is_read) for m in changes[0].messages] == [(ids[0], True)]
    assert {(r.id, r.reason) for r in changes[0].removals} == {
        (ids[1], "changed"),
        (ids[2], "deleted"),
    }


@pytest.mark.parametrize("form", ["410", "400"])
def test_expired_delta_link_is_invalid_cursor(
    make_client: MakeClient, graph_emulator: GraphEmulator, form: str
) -> None:
    """An expired deltaLink (410 SyncStateNotFound, 400 syncStateNotFound): InvalidCursorError."""
    _fill(graph_emulator, 2)
    inbox = graph_emulator.mailbox().folder("inbox").id
    client = make_client()
    link = list(client.delta(inbox))[-1].delta_link
    graph_emulator.expire_delta_tokens("inbox", form)
    with pytest.raises(InvalidCursorError) as caught:
        list(client.delta(inbox, link))
    assert "read again" in str(caught.value) and "\n" not in str(caught.value)
    assert len(list(client.delta(inbox))[-1].delta_link or "") > 0  # a fresh round works


# -- throttling and concurrency ------------------------------------------------------


@pytest.mark.parametrize(("status", "retry_after"), [(429, "0.25"), (503, "1.5")])
def test_retry_after_is_waited_then_the_call_repeats(
    make_client: MakeClient, graph_emulator: GraphEmulator, status: int, retry_after: str
) -> None:
    """A 429 or 503 with a (fractional) Retry-After is waited out and the call succeeds."""
    sleeps: list[float] = []
    client = make_client(sleep=sleeps.append)
    graph_emulator.throttle_next(1, status=status, retry_after=retry_after)
    assert client.folder("inbox").name == "Inbox"
    assert sleeps == [float(retry_after)]
    assert [r.status for r in graph_emulator.graph_requests()] == [status, 200]


def test_a_long_retry_after_is_rate_limit_error_with_the_wait(
    make_client: MakeClient, graph_emulator: GraphEmulator
) -> None:
    """A Retry-After above max_wait is not slept: RateLimitError carries it for the job."""
    sleeps: list[float] = []
    client = make_client(sleep=sleeps.append, max_wait=5.0)
    graph_emulator.throttle_next(1, retry_after="30.5")
    with pytest.raises(RateLimitError) as caught:
        client.folder("inbox")
    assert caught.value.retry_after == 30.5 and sleeps == []
    graph_emulator.throttle_next(4, retry_after="0.1")
    with pytest.raises(RateLimitError):
        client.folder("inbox")  # still throttled after every attempt
    assert sleeps == [0.1, 0.1, 0.1]


def test_never_more_than_four_in_flight_from_eight_threads(
    make_client: MakeClient, graph_emulator: GraphEmulator
) -> None:
    """Eight threads sharing a mailbox's limiter never put more than four requests in flight."""
    limiter = MailboxLimiter()
    clients = [make_client(limiter=limiter) for _ in range(2)]
    errors: list[BaseException] = []

    def work(client: GraphClient) -> None:
        try:
            for _ in range(3):
                client.folder("inbox")
        except BaseException as exc:  # reported below
            errors.append(exc)

    graph_emulator.hold()
    threads = [threading.Thread(target=work, args=(clients[n % 2],)) for n in range(8)]
    for thread in threads:
        thread.start()
    wait_for(lambda: graph_emulator.in_flight() == 4)
    graph_emulator.release()
    for thread in threads:
        thread.join()
    assert errors == []
    assert graph_emulator.peak_in_flight() == 4
    logged = graph_emulator.graph_requests()
    assert len(logged) == 24 and all(r.status == 200 for r in logged)


# -- messages ------------------------------------------------------------------------


def test_move_returns_the_new_id_or_keeps_the_immutable_one(
    make_client: MakeClient, graph_emulator: GraphEmulator
) -> None:
    """Without immutable ids a move returns a new id (the old one is gone); with them, the same."""
    message = graph_emulator.add_message(raw_message(1))
    old_id = message.id
    rest = make_client(immutable_ids=False)
    new_id = rest.move(old_id, "archive")
    assert new_id != old_id and new_id == graph_emulator.mailbox().message(new_id).id
    with pytest.raises(NotFoundError):
        rest.mime(old_id)
    immutable = make_client()
    same = message.immutable_id
    assert immutable.move(same, "junkemail") == same
    assert immutable.message(same).folder_id == graph_emulator.mailbox().folder("junkemail").id


def test_mime_update_delete_and_send(
    make_client: MakeClient, graph_emulator: GraphEmulator
) -> None:
    """MIME comes as sent; PATCH sets read, flag, categories; sendMail sends MIME as given."""
    raw = raw_message(1)
    message = graph_emulator.add_message(raw)
    client = make_client()
    assert client.mime(message.immutable_id) == raw
    shown = client.update(
        message.immutable_id, is_read=True, flag_status="flagged", categories=["Red"]
    )
    assert (shown.is_read, shown.flag_status, shown.categories) == (True, "flagged", ("Red",))
    stored = graph_emulator.mailbox().message(message.immutable_id)
    assert (stored.is_read, stored.flag_status, stored.categories) == (True, "flagged", ["Red"])
    client.delete(message.immutable_id)
    assert stored.folder_id == graph_emulator.mailbox().folder("deleteditems").id
    outgoing = raw_message(2, sender="user@example.com", to="bob@example.net")
    client.send_mime(outgoing)
    assert graph_emulator.mailbox().sent == [outgoing]


# -- $batch --------------------------------------------------------------------------


def test_batch_chunks_by_twenty_and_answers_each_part(
    make_client: MakeClient, graph_emulator: GraphEmulator
) -> None:
    """45 requests go as batches of 20, 20 and 5; results come in order, failures per part."""
    ids = _fill(graph_emulator, 44)
    requests = [
        BatchRequest(str(n), "PATCH", f"/me/messages/{ident}", update_body(is_read=True))
        for n, ident in enumerate(ids)
    ]
    requests.append(BatchRequest("missing", "PATCH", "/me/messages/AAMkGone", {"isRead": True}))
    results = make_client().batch(requests)
    assert [r.id for r in results] == [r.id for r in requests]
    assert all(r.ok for r in results[:44])
    assert results[44].status == 404 and isinstance(results[44].error, NotFoundError)
    outer = graph_emulator.graph_requests(parts=False)
    assert [r.path for r in outer] == ["/$batch"] * 3
    parts = [r for r in graph_emulator.graph_requests() if r.batch_part]
    assert len(parts) == 45
    assert all(m.is_read for m in graph_emulator.mailbox().messages.values())


def test_batch_retries_throttled_parts_and_their_dependents(
    make_client: MakeClient, graph_emulator: GraphEmulator
) -> None:
    """Inner 429s are sent again after Retry-After, with the parts that depended on them."""
    message = graph_emulator.add_message(raw_message(1))
    sleeps: list[float] = []
    client = make_client(sleep=sleeps.append)
    graph_emulator.throttle_next(1, retry_after="0.2")
    results = client.batch(
        [
            BatchRequest(
                "move",
                "POST",
                f"/me/messages/{message.immutable_id}/move",
                {"destinationId": "archive"},
            ),
            BatchRequest(
                "read",
                "PATCH",
                f"/me/messages/{message.immutable_id}",
                {"isRead": True},
                depends_on=("move",),
            ),
        ]
    )
    assert [(r.id, r.status) for r in results] == [("move", 201), ("read", 200)]
    assert sleeps == [0.2]
    stored = graph_emulator.mailbox().message(message.immutable_id)
    assert stored.is_read and stored.folder_id == graph_emulator.mailbox().folder("archive").id
    with pytest.raises(ValueError, match="outside its batch"):
        client.batch(
            [BatchRequest(str(n), "GET", "/me/mailFolders/inbox") for n in range(20)]
            + [BatchRequest("late", "GET", "/me/mailFolders/inbox", depends_on=("0",))]
        )


# -- tokens and the guard ------------------------------------------------------------


def test_a_401_refreshes_the_token_once_and_repeats(
    make_client: MakeClient, graph_emulator: GraphEmulator, tokens: EmulatorTokens
) -> None:
    """An expired access token is refreshed through the TokenSource and the call repeated."""
    client = make_client()
    client.folder("inbox")
    graph_emulator.expire_access_tokens()
    assert client.folder("inbox").name == "Inbox"
    assert tokens.refreshes == 1
    assert [r.status for r in graph_emulator.graph_requests()] == [200, 401, 200]


def test_a_refused_refresh_is_auth_error(
    make_client: MakeClient, graph_emulator: GraphEmulator
) -> None:
    """When the refresh token is refused too, the call fails with AuthError, one sentence."""
    client = make_client()
    graph_emulator.expire_access_tokens()
    graph_emulator.revoke_refresh_tokens()
    with pytest.raises(AuthError) as caught:
        client.folder("inbox")
    assert "sign in again" in str(caught.value)


def test_a_token_that_stays_refused_is_auth_error(
    make_client: MakeClient, graph_emulator: GraphEmulator
) -> None:
    """A source that hands back a token Graph still refuses ends in AuthError, not a loop."""
    client = make_client(lambda stale=None: "EwBnot-a-token")
    with pytest.raises(AuthError):
        client.folder("inbox")
    assert [r.status for r in graph_emulator.graph_requests()] == [401, 401]


def test_loopback_is_refused_unless_allow_listed(
    make_client: MakeClient, graph_emulator: GraphEmulator
) -> None:
    """The SSRF guard refuses 127.0.0.1 without the operator's allow-list; nothing is sent."""
    client = make_client(allowed_private_hosts=())
    with pytest.raises(AuthError) as caught:
        client.folder("inbox")
    assert "cannot be used from here" in str(caught.value)
    assert graph_emulator.requests == []


def test_a_retried_part_leaves_out_a_dependency_that_already_succeeded(
    make_client: MakeClient, graph_emulator: GraphEmulator
) -> None:
    """When only the dependent part is throttled, it is sent again on its own and succeeds."""
    message = graph_emulator.add_message(raw_message(1))
    sleeps: list[float] = []
    client = make_client(sleep=sleeps.append)
    graph_emulator.throttle_next(1, retry_after="0.3", after=1)
    ident = message.immutable_id
    results = client.batch(
        [
            BatchRequest(
                "flag", "PATCH", f"/me/messages/{ident}", update_body(flag_status="flagged")
            ),
            BatchRequest(
                "read", "PATCH", f"/me/messages/{ident}", {"isRead": True}, depends_on=("flag",)
            ),
        ]
    )
    assert [(r.id, r.status) for r in results] == [("flag", 200), ("read", 200)]
    assert sleeps == [0.3]
    assert [r.status for r in graph_emulator.graph_requests(parts=False)] == [200, 200]
    assert graph_emulator.mailbox().message(ident).is_read


def test_a_link_to_another_server_is_not_followed(
    make_client: MakeClient, graph_emulator: GraphEmulator
) -> None:
    """A stored link naming another host is refused before anything is sent (no token leaks)."""
    client = make_client()
    inbox = graph_emulator.mailbox().folder("inbox").id
    elsewhere = "http://203.0.113.7/v1.0/me/mailFolders/x/messages/delta?$deltatoken=abc"
    with pytest.raises(ProviderError) as caught:
        list(client.delta(inbox, elsewhere))
    assert "another server" in str(caught.value)
    assert graph_emulator.requests == []
