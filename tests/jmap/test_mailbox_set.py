"""Mailbox/set over real HTTP (RFC 8621 §2.5): create, rename, move, destroy, every SetError."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from mailroom.config import Settings
from mailroom.labels.propagation import propagate_pending
from mailroom.providers import registry
from mailroom.providers.imap import add_imap_account
from mailroom.store.engine import Store
from mailroom.store.models import Label, Message, PendingChange
from tests.factories import make_message
from tests.imap.conftest import dovecot, new_mailbox, settings
from tests.imap.views import Mailbox, sync_all
from tests.jmap.conftest import MAIL, Jmap, Person, email_id
from tests.support.dovecot import DovecotServer

__all__ = ["dovecot", "settings"]  # the IMAP fixtures, used by the Dovecot test


def create(client: Jmap, **objects: dict[str, Any]) -> dict[str, Any]:
    """Mailbox/set with these creates; the response arguments."""
    result: dict[str, Any] = client.call("Mailbox/set", {"create": objects})
    return result


def made(client: Jmap, name: str, parent: str | None = None) -> str:
    """The id of a new mailbox."""
    result = create(client, new={"name": name, "parentId": parent})
    assert result["created"], result
    mailbox_id: str = result["created"]["new"]["id"]
    return mailbox_id


def mailbox(client: Jmap, mailbox_id: str) -> dict[str, Any]:
    """One Mailbox object from Mailbox/get."""
    result = client.call("Mailbox/get", {"ids": [mailbox_id]})
    assert result["list"], result
    found: dict[str, Any] = result["list"][0]
    return found


def paths(store: Store, person: Person) -> dict[str, str]:
    """Label name → path of the user's labels without a role."""
    with store.session() as session:
        return dict(
            session.execute(
                select(Label.name, Label.path).where(
                    Label.user_id == person.user_id, Label.role.is_(None)
                )
            ).all()
        )


def put(client: Jmap, message_id: int, *mailbox_ids: str) -> None:
    """Give an email exactly these mailboxes."""
    patch = {"mailboxIds": {m: True for m in mailbox_ids}}
    result = client.call("Email/set", {"update": {email_id(message_id): patch}})
    assert email_id(message_id) in (result["updated"] or {}), result


def test_the_session_allows_top_level_mailboxes(client: Jmap) -> None:
    """The account capability says top-level mailboxes may be created."""
    account = client.session["accounts"][client.account]["accountCapabilities"][MAIL]
    assert account["mayCreateTopLevelMailbox"] is True


def test_create_with_a_child_referencing_its_parent_by_creation_id(
    client: Jmap, store: Store, alice: Person
) -> None:
    """A child names its parent created in the same call by #id, even listed before it."""
    result = create(
        client,
        child={"name": "Invoices", "parentId": "#work", "sortOrder": 5, "isSubscribed": False},
        work={"name": "Work"},
    )
    work, child = result["created"]["work"], result["created"]["child"]
    assert work["parentId"] is None and work["sortOrder"] == 0 and work["isSubscribed"] is True
    assert work["totalEmails"] == 0 and work["myRights"]["mayDelete"] is True
    assert "name" not in work and "sortOrder" not in child
    got = mailbox(client, child["id"])
    assert got["name"] == "Invoices" and got["parentId"] == work["id"]
    assert (got["sortOrder"], got["isSubscribed"], got["role"]) == (5, False, None)
    assert got["myRights"]["mayRename"] and got["myRights"]["mayCreateChild"]
    assert paths(store, alice) == {"Work": "Work", "Invoices": "Work/Invoices"}


def test_creation_ids_reach_later_calls_of_the_request(client: Jmap) -> None:
    """A mailbox created in one call is found by #id in Mailbox/get of the next call."""
    responses = client.calls(
        ["Mailbox/set", {"accountId": client.account, "create": {"n": {"name": "Later"}}}, "a"],
        ["Mailbox/get", {"accountId": client.account, "ids": ["#n"]}, "b"],
    )
    assert responses[1][1]["list"][0]["name"] == "Later"


def test_names_are_trimmed_and_normalized(client: Jmap) -> None:
    """A name with outer spaces or decomposed accents is stored trimmed in NFC, and says so."""
    result = create(client, n={"name": "  Cafe\u0301 "})
    assert result["created"]["n"]["name"] == "Caf\u00e9"
    renamed = client.call(
        "Mailbox/set", {"update": {result["created"]["n"]["id"]: {"name": " Bar"}}}
    )
    assert renamed["updated"] == {result["created"]["n"]["id"]: {"name": "Bar"}}


def test_creation_ids_in_update_and_destroy_of_the_same_call(client: Jmap) -> None:
    """An update may move a mailbox under #new; a destroy of #new answers with its real id."""
    old = made(client, "Moving")
    result = client.call(
        "Mailbox/set",
        {"create": {"new": {"name": "Shelf"}}, "update": {old: {"parentId": "#new"}}},
    )
    shelf = result["created"]["new"]["id"]
    assert result["updated"] == {old: None} and mailbox(client, old)["parentId"] == shelf
    temp = client.call(
        "Mailbox/set", {"create": {"t": {"name": "Temp"}}, "update": {"#t": {"sortOrder": 4}}}
    )
    temp_id = temp["created"]["t"]["id"]
    assert temp["updated"] == {temp_id: None}
    first, second = client.calls(
        ["Mailbox/set", {"accountId": client.account, "create": {"x": {"name": "X"}}}, "a"],
        ["Mailbox/set", {"accountId": client.account, "destroy": ["#x", "#nothing"]}, "b"],
    )
    gone = second[1]
    assert gone["destroyed"] == [first[1]["created"]["x"]["id"]]
    assert gone["notDestroyed"]["#nothing"]["type"] == "notFound"


def test_names_are_unique_among_siblings_only(client: Jmap) -> None:
    """A second "Projects" beside the first is invalidProperties; under another parent, fine."""
    first = made(client, "Projects")
    again = create(client, dup={"name": "Projects"})["notCreated"]["dup"]
    assert again["type"] == "invalidProperties" and again["properties"] == ["name"]
    assert made(client, "Projects", first)


def test_invalid_creates_name_the_property(client: Jmap) -> None:
    """Each wrong property is invalidProperties naming exactly that property."""
    cases: dict[str, tuple[dict[str, Any], str]] = {
        "noname": ({"parentId": None}, "name"),
        "empty": ({"name": " "}, "name"),
        "slash": ({"name": "a/b"}, "name"),
        "control": ({"name": "a\u0007b"}, "name"),
        "long": ({"name": "x" * 501}, "name"),
        "system": ({"name": "junk"}, "name"),
        "role": ({"name": "R", "role": "archive"}, "role"),
        "counts": ({"name": "C", "totalEmails": 0}, "totalEmails"),
        "id": ({"name": "I", "id": "L1"}, "id"),
        "unknown": ({"name": "U", "colour": "red"}, "colour"),
        "order": ({"name": "O", "sortOrder": -1}, "sortOrder"),
        "huge": ({"name": "H", "sortOrder": 2**31}, "sortOrder"),
        "subscribed": ({"name": "S", "isSubscribed": "yes"}, "isSubscribed"),
        "parent": ({"name": "P", "parentId": "L999999"}, "parentId"),
        "ref": ({"name": "Q", "parentId": "#nowhere"}, "parentId"),
    }
    result = create(client, **{key: values for key, (values, _prop) in cases.items()})
    assert result["created"] is None
    for key, (_values, prop) in cases.items():
        error = result["notCreated"][key]
        assert (error["type"], error["properties"]) == ("invalidProperties", [prop]), key


def test_a_system_mailbox_has_no_children_and_keeps_its_name(client: Jmap, alice: Person) -> None:
    """Under Inbox, renaming, moving or destroying Inbox: forbidden; its rights say so."""
    inbox = f"L{alice.inbox}"
    rights = mailbox(client, inbox)["myRights"]
    assert not (rights["mayRename"] or rights["mayDelete"] or rights["mayCreateChild"])
    child = create(client, c={"name": "Sub", "parentId": inbox})["notCreated"]["c"]
    assert child["type"] == "forbidden"
    renamed = client.call("Mailbox/set", {"update": {inbox: {"name": "Post"}}})
    assert renamed["notUpdated"][inbox]["type"] == "forbidden"
    gone = client.call("Mailbox/set", {"destroy": [inbox]})
    assert gone["notDestroyed"][inbox]["type"] == "forbidden"
    order = client.call("Mailbox/set", {"update": {inbox: {"sortOrder": 3}}})
    assert order["updated"] == {inbox: None} and mailbox(client, inbox)["sortOrder"] == 3


def test_rename_and_move_rewrite_every_descendant_path(
    client: Jmap, store: Store, alice: Person
) -> None:
    """Renaming a parent and moving a subtree keep labels.path the full parent chain."""
    work = made(client, "Work")
    invoices = made(client, "Invoices", work)
    made(client, "2024", invoices)
    home = made(client, "Home")
    result = client.call("Mailbox/set", {"update": {work: {"name": "Job"}}})
    assert result["updated"] == {work: None}
    assert paths(store, alice)["2024"] == "Job/Invoices/2024"
    moved = client.call("Mailbox/set", {"update": {invoices: {"parentId": home}}})
    assert moved["updated"] == {invoices: None}
    assert mailbox(client, invoices)["parentId"] == home
    assert paths(store, alice) == {
        "Job": "Job",
        "Home": "Home",
        "Invoices": "Home/Invoices",
        "2024": "Home/Invoices/2024",
    }
    top = client.call("Mailbox/set", {"update": {invoices: {"parentId": None}}})
    assert top["updated"] == {invoices: None}
    assert paths(store, alice)["2024"] == "Invoices/2024"


def test_moving_under_a_descendant_is_a_cycle(client: Jmap) -> None:
    """A mailbox under itself or its own grandchild is invalidProperties on parentId."""
    top = made(client, "Top")
    middle = made(client, "Middle", top)
    low = made(client, "Low", middle)
    result = client.call(
        "Mailbox/set", {"update": {top: {"parentId": low}, middle: {"parentId": middle}}}
    )
    for value in (top, middle):
        error = result["notUpdated"][value]
        assert (error["type"], error["properties"]) == ("invalidProperties", ["parentId"])
    assert mailbox(client, top)["parentId"] is None


def test_a_rename_onto_a_sibling_name_is_refused(client: Jmap) -> None:
    """Renaming to the name of a sibling is invalidProperties and changes nothing."""
    made(client, "Alpha")
    beta = made(client, "Beta")
    result = client.call("Mailbox/set", {"update": {beta: {"name": "Alpha"}}})
    assert result["notUpdated"][beta]["properties"] == ["name"]
    assert mailbox(client, beta)["name"] == "Beta"


def test_updates_of_server_set_properties_and_roles(client: Jmap) -> None:
    """Server-set properties and role may be sent unchanged; changed they are refused."""
    box = made(client, "Box")
    same = mailbox(client, box)
    same.pop("id")
    assert client.call("Mailbox/set", {"update": {box: same}})["updated"] == {box: None}
    result = client.call(
        "Mailbox/set",
        {
            "update": {
                box: {"totalEmails": 7},
                "L999999": {"name": "Nope"},
            }
        },
    )
    assert result["notUpdated"][box]["properties"] == ["totalEmails"]
    assert result["notUpdated"]["L999999"]["type"] == "notFound"
    role = client.call("Mailbox/set", {"update": {box: {"role": "archive"}}})
    assert role["notUpdated"][box]["properties"] == ["role"]
    deep = client.call("Mailbox/set", {"update": {box: {"myRights/mayDelete": False}}})
    assert deep["notUpdated"][box]["properties"] == ["myRights"]


def test_destroy_refuses_a_parent_and_a_mailbox_with_email(client: Jmap, alice: Person) -> None:
    """mailboxHasChild while a child is left; mailboxHasEmail while an email is in it."""
    parent = made(client, "Parent")
    made(client, "Child", parent)
    full = made(client, "Full")
    put(client, alice.messages["other"], full)
    result = client.call("Mailbox/set", {"destroy": [parent, full, "L999999"]})
    assert result["notDestroyed"][parent]["type"] == "mailboxHasChild"
    assert result["notDestroyed"][full]["type"] == "mailboxHasEmail"
    assert result["notDestroyed"]["L999999"]["type"] == "notFound"
    assert result["destroyed"] is None


def test_a_parent_and_its_child_destroyed_together(client: Jmap) -> None:
    """Destroying a parent and its child in one call destroys both (the child first)."""
    parent = made(client, "Old")
    child = made(client, "Older", parent)
    result = client.call("Mailbox/set", {"destroy": [parent, child]})
    assert result["destroyed"] == [parent, child]
    assert client.call("Mailbox/get", {"ids": [parent, child]})["notFound"] == [parent, child]


def test_on_destroy_remove_emails(client: Jmap, store: Store, alice: Person) -> None:
    """Emails only in the mailbox are destroyed; emails also elsewhere just leave it."""
    box = made(client, "Doomed")
    only, shared = alice.messages["other"], alice.messages["report"]
    put(client, only, box)
    put(client, shared, box, f"L{alice.inbox}")
    state = client.state("Email")
    result = client.call("Mailbox/set", {"destroy": [box], "onDestroyRemoveEmails": True})
    assert result["destroyed"] == [box]
    got = client.call("Email/get", {"ids": [email_id(only), email_id(shared)]})
    assert got["notFound"] == [email_id(only)]
    assert got["list"][0]["mailboxIds"] == {f"L{alice.inbox}": True}
    changes = client.call("Email/changes", {"sinceState": state})
    assert email_id(only) in changes["destroyed"]
    with store.session() as session:
        assert session.get(Message, only) is None


def test_update_of_a_mailbox_destroyed_in_the_same_call(client: Jmap) -> None:
    """An update of an id that is also destroyed is willDestroy."""
    box = made(client, "Brief")
    result = client.call("Mailbox/set", {"update": {box: {"name": "X"}}, "destroy": [box]})
    assert result["notUpdated"][box]["type"] == "willDestroy"
    assert result["destroyed"] == [box]


def test_if_in_state_and_changes(client: Jmap) -> None:
    """ifInState guards the call; Mailbox/changes reports created, updated, destroyed."""
    state = client.state("Mailbox")
    wrong = client.call("Mailbox/set", {"ifInState": "0", "create": {"a": {"name": "A"}}})
    assert wrong["error"]["type"] == "stateMismatch"
    made_now = client.call("Mailbox/set", {"ifInState": state, "create": {"a": {"name": "A"}}})
    assert made_now["oldState"] == state and made_now["newState"] != state
    kept = made(client, "Kept")
    gone = made(client, "Gone")
    middle = client.state("Mailbox")
    client.call(
        "Mailbox/set",
        {"update": {kept: {"isSubscribed": False}}, "destroy": [gone]},
    )
    changes = client.call("Mailbox/changes", {"sinceState": middle})
    assert kept in changes["updated"] and changes["destroyed"] == [gone]
    since_start = client.call("Mailbox/changes", {"sinceState": state})
    assert made_now["created"]["a"]["id"] in since_start["created"]
    assert (
        kept in since_start["created"]
        and gone not in since_start["created"] + since_start["destroyed"]
    )


def test_updated_properties_name_the_counts_when_only_they_moved(
    client: Jmap, alice: Person
) -> None:
    """Reading an email moves only counts (updatedProperties lists them); a rename: null."""
    state = client.state("Mailbox")
    seen = {email_id(alice.messages["other"]): {"keywords/$seen": True}}
    client.call("Email/set", {"update": seen})
    counts = client.call("Mailbox/changes", {"sinceState": state})
    assert f"L{alice.inbox}" in counts["updated"]
    assert counts["updatedProperties"] == [
        "totalEmails",
        "unreadEmails",
        "totalThreads",
        "unreadThreads",
    ]
    box = made(client, "Renamed")
    middle = client.state("Mailbox")
    client.call("Mailbox/set", {"update": {box: {"name": "Named"}}})
    renamed = client.call("Mailbox/changes", {"sinceState": middle})
    assert renamed["updated"] == [box] and renamed["updatedProperties"] is None


def test_changes_go_to_the_provider_as_pending_folder_changes(
    client: Jmap, store: Store, alice: Person
) -> None:
    """A create queues a pending folder change for the user's account, without a message."""
    made(client, "Carried")
    with store.session() as session:
        rows = session.execute(
            select(PendingChange.operation, PendingChange.message_id, PendingChange.account_id)
        ).all()
    assert ("create_folder", None, alice.account_id) in rows


def test_bad_arguments(client: Jmap) -> None:
    """A create that is not an object, or a destroy that is not a list, is invalidArguments."""
    assert client.call("Mailbox/set", {"create": "x"})["error"]["type"] == "invalidArguments"
    assert client.call("Mailbox/set", {"destroy": "L1"})["error"]["type"] == "invalidArguments"
    flag = client.call("Mailbox/set", {"onDestroyRemoveEmails": "yes"})
    assert flag["error"]["type"] == "invalidArguments"
    odd = client.call("Mailbox/set", {"update": {"L1": "name"}})
    assert odd["error"]["type"] == "invalidArguments"  # a patch must be an object


class ImapAccount:
    """An IMAP account of Alice's on Dovecot, synced once, and how to look at it."""

    def __init__(self, store: Store, settings: Settings, imap: Mailbox, alice: Person) -> None:
        self.store, self.settings, self.imap = store, settings, imap
        self.account = add_imap_account(
            store,
            settings,
            name="imap",
            host=imap.server.host,
            port=imap.server.port,
            tls="none",
            login=imap.user,
            password=imap.password,
            owner=alice.name,
        )
        sync_all(store, self.account, settings)

    def carry(self) -> None:
        """Propagate the account's pending changes; nothing may fail."""
        propagator = registry.propagator_for(self.store, "imap", self.settings)
        assert propagator is not None
        run = propagate_pending(self.store, self.account, propagator)
        assert run.failed == 0 and run.retried == 0

    def folders(self) -> set[str]:
        """The folder names Dovecot lists."""
        with self.imap.client() as other:
            return {name for _flags, _delimiter, name in other.list_folders()}


def test_an_email_moved_into_a_new_mailbox_lands_in_its_dovecot_folder(
    client: Jmap, store: Store, alice: Person, settings: Settings, dovecot: DovecotServer
) -> None:
    """Create a mailbox and move an email there in one request: both reach Dovecot in order."""
    imap = ImapAccount(store, settings, new_mailbox(dovecot), alice)
    imap.imap.append("INBOX", make_message("mover@x", subject="Mover"))
    sync_all(store, imap.account, settings)
    with store.session() as session:
        mover = session.scalars(
            select(Message.id).where(Message.message_id_header == "mover@x")
        ).one()
    responses = client.calls(
        ["Mailbox/set", {"accountId": client.account, "create": {"box": {"name": "Moved"}}}, "a"],
        [
            "Email/set",
            {
                "accountId": client.account,
                "update": {email_id(mover): {"mailboxIds": {"#box": True}}},
            },
            "b",
        ],
    )
    assert email_id(mover) in responses[1][1]["updated"], responses
    imap.carry()
    assert "Moved" in imap.folders()
    with imap.imap.client() as other:
        other.select_folder("Moved")
        assert len(other.search(["HEADER", "Message-ID", "<mover@x>"])) == 1
        other.select_folder("INBOX")
        assert other.search(["HEADER", "Message-ID", "<mover@x>"]) == []


def test_mailboxes_made_over_jmap_become_dovecot_folders(
    client: Jmap, store: Store, alice: Person, settings: Settings, dovecot: DovecotServer
) -> None:
    """Created, renamed and destroyed over JMAP, the folders appear, move and go on Dovecot.

    A non-ASCII name travels as modified UTF-7 and comes back the same.
    """
    imap = ImapAccount(store, settings, new_mailbox(dovecot), alice)
    folders, carry, account = imap.folders, imap.carry, imap.account

    dotted = create(client, d={"name": "v1.2"})["notCreated"]["d"]
    assert dotted["properties"] == ["name"]  # "." nests folders on this Dovecot
    result = create(client, top={"name": "Clients"}, sub={"name": "Açme", "parentId": "#top"})
    top, sub = result["created"]["top"]["id"], result["created"]["sub"]["id"]
    carry()
    assert {"Clients", "Clients.Açme"} <= folders()
    sync_all(store, account, settings)
    names = [m["name"] for m in client.call("Mailbox/get", {"ids": None})["list"]]
    assert names.count("Clients") == 1 and names.count("Açme") == 1

    client.call("Mailbox/set", {"update": {top: {"name": "Customers"}}})
    carry()
    assert "Customers.Açme" in folders() and "Clients" not in folders()
    sync_all(store, account, settings)
    assert mailbox(client, sub)["parentId"] == top

    gone = client.call("Mailbox/set", {"destroy": [top, sub]})
    assert gone["destroyed"] == [top, sub]
    carry()
    assert not {"Customers", "Customers.Açme"} & folders()
    sync_all(store, account, settings)
    names = [m["name"] for m in client.call("Mailbox/get", {"ids": None})["list"]]
    assert "Customers" not in names and "Açme" not in names
