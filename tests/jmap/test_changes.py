"""Foo/changes: every change — through JMAP or from the sync side — reaches a second client.

States from ``/get`` and ``newState`` from ``/changes`` must agree, so a
client that follows changes lands exactly where a fresh ``/get`` would.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import delete, select

from mailroom.jmap.changes import prune_changes
from mailroom.labels.resolver import ensure_system_labels, resolve_path
from mailroom.owners import get_or_create_user
from mailroom.store.engine import Store
from mailroom.store.models import Change, Label, User
from tests.factories import make_message
from tests.helpers import ingest
from tests.jmap.conftest import Jmap, Person, email_id

TYPES = ("Email", "Thread", "Mailbox")


def follow(client: Jmap, type_: str, since: str, max_changes: int | None = None) -> dict[str, Any]:
    """Follow /changes to the end; the union of what changed and the final state."""
    created: set[str] = set()
    updated: set[str] = set()
    destroyed: set[str] = set()
    state = since
    while True:
        args: dict[str, Any] = {"sinceState": state}
        if max_changes:
            args["maxChanges"] = max_changes
        page = client.call(f"{type_}/changes", args)
        assert "error" not in page, page
        assert page["oldState"] == state
        created |= set(page["created"])
        updated |= set(page["updated"])
        destroyed |= set(page["destroyed"])
        if max_changes:
            assert (
                len(page["created"]) + len(page["updated"]) + len(page["destroyed"]) <= max_changes
            )
        state = page["newState"]
        if not page["hasMoreChanges"]:
            break
    return {"created": created, "updated": updated, "destroyed": destroyed, "state": state}


def states(client: Jmap) -> dict[str, str]:
    """The /get states of the three types."""
    return {type_: client.state(type_) for type_ in TYPES}


def assert_caught_up(client: Jmap, followed: dict[str, dict[str, Any]]) -> None:
    """Each followed newState equals the state a fresh /get reports."""
    now = states(client)
    for type_, result in followed.items():
        assert result["state"] == now[type_], type_


def test_jmap_changes_reach_a_second_client(client: Jmap, second: Jmap, alice: Person) -> None:
    """Keywords, a move to Trash and a destroy by one client show in the other's /changes."""
    before = states(second)
    hello, reply = email_id(alice.messages["hello"]), email_id(alice.messages["reply"])
    other = email_id(alice.messages["other"])
    mailboxes = {m["role"]: m["id"] for m in client.call("Mailbox/get", {"ids": None})["list"]}
    other_thread = _thread(client, alice, "other")
    hello_thread = _thread(client, alice, "hello")
    result = client.call(
        "Email/set",
        {
            "update": {
                hello: {"keywords/$seen": True, "keywords/$flagged": True},
                reply: {
                    f"mailboxIds/{mailboxes['inbox']}": None,
                    f"mailboxIds/{mailboxes['trash']}": True,
                },
            },
            "destroy": [other],
        },
    )
    assert set(result["updated"]) == {hello, reply} and result["destroyed"] == [other]
    followed = {t: follow(second, t, before[t]) for t in TYPES}
    assert followed["Email"]["updated"] == {hello, reply}
    assert followed["Email"]["destroyed"] == {other}
    assert followed["Thread"]["destroyed"] == {other_thread}
    assert hello_thread in followed["Thread"]["updated"]
    assert {mailboxes["inbox"], mailboxes["trash"], mailboxes["flagged"]} <= followed["Mailbox"][
        "updated"
    ]
    assert_caught_up(second, followed)
    got = second.call(
        "Email/get", {"ids": [hello, reply], "properties": ["keywords", "mailboxIds"]}
    )
    by_id = {e["id"]: e for e in got["list"]}
    assert by_id[hello]["keywords"] == {"$seen": True, "$flagged": True}
    assert mailboxes["flagged"] in by_id[hello]["mailboxIds"]
    assert by_id[reply]["mailboxIds"] == {mailboxes["trash"]: True}
    inbox = second.call("Mailbox/get", {"ids": [mailboxes["inbox"]]})["list"][0]
    assert (inbox["totalEmails"], inbox["unreadEmails"]) == (2, 1)


def _thread(client: Jmap, person: Person, key: str) -> str:
    got = client.call(
        "Email/get", {"ids": [email_id(person.messages[key])], "properties": ["threadId"]}
    )
    return str(got["list"][0]["threadId"] if got["list"] else "")


def test_new_mail_and_thread_merges_reach_clients(
    store: Store, client: Jmap, alice: Person
) -> None:
    """Sync-side changes — new mail, a message joining two threads — appear in every /changes."""
    before = states(client)
    hello_thread = _thread(client, alice, "hello")
    other_thread = _thread(client, alice, "other")
    account = (alice.user_id, alice.account_id, alice.inbox)
    fresh = ingest(
        store, account, [("new", make_message("new@x", subject="Brand new", minutes=30))]
    )
    (new_id,) = fresh.created_ids
    followed = {t: follow(client, t, before[t]) for t in TYPES}
    assert followed["Email"]["created"] == {email_id(new_id)}
    new_thread = _thread(client, alice, "hello")
    assert followed["Thread"]["updated"] | followed["Thread"]["created"]
    assert f"L{alice.inbox}" in followed["Mailbox"]["updated"]
    assert_caught_up(client, followed)
    assert new_thread == hello_thread

    middle = states(client)
    bridge = make_message(
        "bridge@x", subject="Re: both", references=["hello@x", "other@x"], minutes=40
    )
    (bridge_id,) = ingest(store, account, [("bridge", bridge)]).created_ids
    followed = {t: follow(client, t, middle[t]) for t in TYPES}
    survivor, dissolved = sorted([hello_thread, other_thread], key=lambda t: int(t[1:]))
    assert dissolved in followed["Thread"]["destroyed"]
    assert survivor in followed["Thread"]["updated"]
    assert email_id(alice.messages["other"]) in followed["Email"]["updated"]
    assert email_id(bridge_id) in followed["Email"]["created"]
    assert_caught_up(client, followed)
    threads = client.call("Thread/get", {"ids": [survivor, dissolved]})
    assert threads["notFound"] == [dissolved]
    assert email_id(alice.messages["other"]) in threads["list"][0]["emailIds"]


def test_a_new_label_is_a_created_mailbox(store: Store, client: Jmap, alice: Person) -> None:
    """A label made by any code path (here the resolver) is a Mailbox created, with its parent."""
    before = client.state("Mailbox")
    with store.session() as session:
        label = resolve_path(session, alice.user_id, ["Work", "Invoices"])
        child, parent = label.id, label.parent_id
    followed = follow(client, "Mailbox", before)
    assert followed["created"] == {f"L{child}", f"L{parent}"}
    got = client.call("Mailbox/get", {"ids": [f"L{child}"]})["list"][0]
    assert got["parentId"] == f"L{parent}" and got["name"] == "Invoices" and got["role"] is None
    assert followed["state"] == client.state("Mailbox")


def test_max_changes_pages_to_the_same_end(client: Jmap, alice: Person) -> None:
    """Paging with maxChanges=1 reaches the same ids and state as one big /changes."""
    before = states(client)
    ids = [email_id(m) for m in alice.messages.values()]
    for target in ids:
        client.call("Email/set", {"update": {target: {"keywords/$seen": True}}})
    for type_ in TYPES:
        whole = follow(client, type_, before[type_])
        paged = follow(client, type_, before[type_], max_changes=1)
        assert paged == whole, type_
    assert follow(client, "Email", before["Email"])["updated"] == set(ids)


def test_pruned_states_cannot_be_diffed_but_states_never_go_back(
    store: Store, client: Jmap, alice: Person
) -> None:
    """After pruning, old states get cannotCalculateChanges; current states stay and still work."""
    old = states(client)
    client.call(
        "Email/set", {"update": {email_id(alice.messages["hello"]): {"keywords/$seen": True}}}
    )
    current = states(client)
    deleted = prune_changes(store, datetime.now(UTC) + timedelta(minutes=1))
    assert deleted > 0
    with store.session() as session:
        left = session.scalars(select(Change.seq).where(Change.user_id == alice.user_id)).all()
    assert len(left) == 1  # the newest row of the log is kept (SQLite would reuse its seq)
    assert states(client) == current
    stale = client.call("Email/changes", {"sinceState": old["Email"]})["error"]
    assert stale["type"] == "cannotCalculateChanges"
    for type_ in TYPES:
        error = client.call(f"{type_}/changes", {"sinceState": "0"})["error"]
        assert error["type"] == "cannotCalculateChanges"
        fine = client.call(f"{type_}/changes", {"sinceState": current[type_]})
        assert fine["newState"] == current[type_] and not fine["updated"]
    query = client.call("Email/queryChanges", {"sinceQueryState": "1"})
    assert query["error"]["type"] == "cannotCalculateChanges"
    assert prune_changes(store, datetime.now(UTC) + timedelta(minutes=1)) == 0
    client.call(
        "Email/set", {"update": {email_id(alice.messages["hello"]): {"keywords/$seen": None}}}
    )
    assert follow(client, "Email", current["Email"])["updated"] == {
        email_id(alice.messages["hello"])
    }


def test_future_and_foreign_states_are_not_calculable(client: Jmap) -> None:
    """A state newer than the server's cannot be diffed."""
    future = str(int(client.state("Email")) + 1000)
    assert client.call("Email/changes", {"sinceState": future})["error"]["type"] == (
        "cannotCalculateChanges"
    )


def test_destroying_the_last_email_destroys_its_thread(client: Jmap, alice: Person) -> None:
    """Deleting a thread's only message reports the thread destroyed and /get no longer finds it."""
    before = client.state("Thread")
    thread = _thread(client, alice, "other")
    client.call("Email/set", {"destroy": [email_id(alice.messages["other"])]})
    followed = follow(client, "Thread", before)
    assert thread in followed["destroyed"]
    assert client.call("Thread/get", {"ids": [thread]})["notFound"] == [thread]


def test_deleting_labels_logs_destroyed_mailboxes(
    store: Store, client: Jmap, alice: Person
) -> None:
    """A deleted label is a Mailbox destroyed; a deleted user (labels, no mail) logs nothing."""
    with store.session() as session:
        label_id = resolve_path(session, alice.user_id, ["Old stuff"]).id
    before = client.state("Mailbox")
    with store.session() as session:
        session.execute(delete(Label).where(Label.id == label_id))
    assert follow(client, "Mailbox", before)["destroyed"] == {f"L{label_id}"}
    with store.session() as session:
        lonely = get_or_create_user(session, "lonely")
        ensure_system_labels(session, lonely.id)
        lonely_id = lonely.id
    with store.session() as session:
        session.execute(delete(User).where(User.id == lonely_id))
    with store.session() as session:
        assert session.scalar(select(Change.seq).where(Change.user_id == lonely_id)) is None


def _pages(client: Jmap, type_: str, since: str, max_changes: int) -> list[dict[str, Any]]:
    """Every page of /changes from ``since`` with this maxChanges."""
    pages: list[dict[str, Any]] = []
    state = since
    while True:
        page = client.call(f"{type_}/changes", {"sinceState": state, "maxChanges": max_changes})
        assert "error" not in page, page
        pages.append(page)
        state = page["newState"]
        if not page["hasMoreChanges"]:
            return pages


def test_new_mail_in_a_new_thread_is_created_not_updated(
    store: Store, client: Jmap, alice: Person
) -> None:
    """A new email and its new thread are in `created` only, even after later updates."""
    before = states(client)
    account = (alice.user_id, alice.account_id, alice.inbox)
    (new_id,) = ingest(
        store, account, [("solo", make_message("solo@x", subject="Alone here", minutes=50))]
    ).created_ids
    new_email = email_id(new_id)
    client.call("Email/set", {"update": {new_email: {"keywords/$seen": True}}})
    thread = client.call("Email/get", {"ids": [new_email], "properties": ["threadId"]})["list"][0][
        "threadId"
    ]
    email = follow(client, "Email", before["Email"])
    assert email["created"] == {new_email} and email["updated"] == set()
    threads = follow(client, "Thread", before["Thread"])
    assert threads["created"] == {thread} and thread not in threads["updated"]
    middle = client.state("Thread")
    client.call("Email/set", {"update": {new_email: {"keywords/$flagged": True}}})
    later = follow(client, "Thread", middle)
    assert later["updated"] == {thread} and later["created"] == set()


def test_created_then_destroyed_is_never_reported_created(
    store: Store, client: Jmap, alice: Person
) -> None:
    """An email (and its thread) made and deleted since the state is neither created nor updated."""
    before = states(client)
    account = (alice.user_id, alice.account_id, alice.inbox)
    (new_id,) = ingest(
        store, account, [("gone", make_message("gone@x", subject="Short life", minutes=60))]
    ).created_ids
    thread = client.call("Email/get", {"ids": [email_id(new_id)], "properties": ["threadId"]})[
        "list"
    ][0]["threadId"]
    assert client.call("Email/set", {"destroy": [email_id(new_id)]})["destroyed"] == [
        email_id(new_id)
    ]
    for type_, gone in (("Email", email_id(new_id)), ("Thread", thread)):
        whole = follow(client, type_, before[type_])
        assert gone not in whole["created"] | whole["updated"] | whole["destroyed"], type_
        # Pages are windows of their own: seen created in one, it is destroyed in a later one.
        pages = _pages(client, type_, before[type_], 1)
        kinds = [k for p in pages for k in ("created", "updated", "destroyed") if gone in p[k]]
        assert kinds in ([], ["destroyed"], ["created", "destroyed"]), (type_, kinds)
    assert_caught_up(client, {t: follow(client, t, before[t]) for t in TYPES})


def test_paging_keeps_created_apart_from_updated(store: Store, client: Jmap, alice: Person) -> None:
    """With maxChanges each page obeys the rules and the pages add up to one big answer."""
    before = states(client)
    account = (alice.user_id, alice.account_id, alice.inbox)
    raws = [(f"p{i}", make_message(f"p{i}@x", subject=f"Page {i}", minutes=70 + i)) for i in (1, 2)]
    created = {email_id(m) for m in ingest(store, account, raws).created_ids}
    for target in sorted(created):
        client.call("Email/set", {"update": {target: {"keywords/$seen": True}}})
    hello = email_id(alice.messages["hello"])
    client.call("Email/set", {"update": {hello: {"keywords/$seen": True}}})
    whole = follow(client, "Email", before["Email"])
    assert whole["created"] == created and whole["updated"] == {hello}
    for max_changes in (1, 2, 3):
        pages = _pages(client, "Email", before["Email"], max_changes)
        seen_created: set[str] = set()
        for page in pages:
            ids = page["created"] + page["updated"] + page["destroyed"]
            assert len(ids) == len(set(ids)) <= max_changes
            assert not set(page["created"]) & seen_created
            seen_created |= set(page["created"])
            assert int(page["newState"]) > int(page["oldState"])
        assert seen_created == created
        assert [p["hasMoreChanges"] for p in pages][-1] is False
        assert all(p["hasMoreChanges"] for p in pages[:-1])
        assert pages[-1]["newState"] == whole["state"] == client.state("Email")
    for type_ in TYPES:
        assert follow(client, type_, before[type_], 1)["state"] == client.state(type_)


def test_a_new_mailbox_with_mail_filed_into_it_is_only_created(
    store: Store, client: Jmap, alice: Person
) -> None:
    """A label made and then given an email since the state is `created`, not also `updated`."""
    before = client.state("Mailbox")
    with store.session() as session:
        label_id = resolve_path(session, alice.user_id, ["Fresh"]).id
    hello = email_id(alice.messages["hello"])
    done = client.call("Email/set", {"update": {hello: {f"mailboxIds/L{label_id}": True}}})
    assert set(done["updated"]) == {hello}, done
    followed = follow(client, "Mailbox", before)
    assert f"L{label_id}" in followed["created"]
    assert f"L{label_id}" not in followed["updated"] | followed["destroyed"]
    assert f"L{alice.inbox}" in followed["updated"]
    for page in _pages(client, "Mailbox", before, 3):
        assert f"L{label_id}" not in page["updated"]


def test_a_thread_made_and_merged_away_since_the_state_is_left_out(
    store: Store, client: Jmap, alice: Person
) -> None:
    """A thread made and dissolved by a merge in the window is in no list; the survivor is."""
    before = states(client)
    hello_thread = _thread(client, alice, "hello")
    account = (alice.user_id, alice.account_id, alice.inbox)
    lonely = make_message("lonely@x", subject="On its own", minutes=80)
    (lonely_id,) = ingest(store, account, [("lonely", lonely)]).created_ids
    short_lived = client.call(
        "Email/get", {"ids": [email_id(lonely_id)], "properties": ["threadId"]}
    )["list"][0]["threadId"]
    assert short_lived != hello_thread
    bridge = make_message(
        "bridge2@x", subject="Re: both", references=["hello@x", "lonely@x"], minutes=90
    )
    (bridge_id,) = ingest(store, account, [("bridge2", bridge)]).created_ids
    threads = follow(client, "Thread", before["Thread"])
    assert short_lived not in threads["created"] | threads["updated"] | threads["destroyed"]
    assert hello_thread in threads["updated"]
    emails = follow(client, "Email", before["Email"])
    assert emails["created"] == {email_id(lonely_id), email_id(bridge_id)}
    middle_of_it = follow(client, "Thread", before["Thread"], max_changes=1)
    assert middle_of_it["state"] == client.state("Thread")
