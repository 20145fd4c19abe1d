"""The emulator's mail folders: listing, hidden ones, well-known names, paging, changes."""

from __future__ import annotations

import httpx

from tests.emulators.graph.server import GraphEmulator


def test_top_level_lists_the_visible_folders_without_well_known_name(graph: httpx.Client) -> None:
    """/me/mailFolders lists the visible top-level folders in v1.0's shape (no wellKnownName)."""
    body = graph.get("/me/mailFolders", params={"$top": "50"}).json()
    names = [f["displayName"] for f in body["value"]]
    assert names[:3] == ["Inbox", "Drafts", "Sent Items"]
    assert "Sync Issues" not in names and "Top of Information Store" not in names
    assert all("wellKnownName" not in f for f in body["value"])
    assert {
        "id",
        "parentFolderId",
        "childFolderCount",
        "unreadItemCount",
        "totalItemCount",
        "isHidden",
    } <= set(body["value"][0])


def test_include_hidden_folders_adds_the_hidden_ones(graph: httpx.Client) -> None:
    """includeHiddenFolders=true also lists the hidden folders."""
    body = graph.get("/me/mailFolders", params={"$top": "50", "includeHiddenFolders": "true"})
    hidden = [f for f in body.json()["value"] if f["isHidden"]]
    assert [f["displayName"] for f in hidden] == ["Sync Issues"]


def test_well_known_names_work_as_ids_in_any_case(graph: httpx.Client) -> None:
    """inbox, SentItems, deleteditems ... name the same folder as its id."""
    listed = {f["displayName"]: f["id"] for f in graph.get("/me/mailFolders").json()["value"]}
    assert graph.get("/me/mailFolders/inbox").json()["id"] == listed["Inbox"]
    assert graph.get("/me/mailFolders/SentItems").json()["id"] == listed["Sent Items"]
    assert graph.get("/me/mailFolders/junkemail").json()["id"] == listed["Junk Email"]
    assert graph.get("/me/mailFolders/nosuchfolder").status_code == 404


def test_top_pages_with_next_links_until_every_folder_is_seen(graph: httpx.Client) -> None:
    """$top=3 pages the folders with @odata.nextLink; the pages add up to the full list."""
    everything = [
        f["id"] for f in graph.get("/me/mailFolders", params={"$top": "50"}).json()["value"]
    ]
    seen: list[str] = []
    link: str | None = "/me/mailFolders?$top=3"
    pages = 0
    while link:
        body = graph.get(link).json()
        assert len(body["value"]) <= 3
        seen.extend(f["id"] for f in body["value"])
        link = body.get("@odata.nextLink")
        pages += 1
    assert seen == everything and pages == 3


def test_child_folders_create_rename_and_delete(graph: httpx.Client) -> None:
    """Folders are created at the top and under others, renamed with PATCH, deleted."""
    work = graph.post("/me/mailFolders", json={"displayName": "Work"})
    assert work.status_code == 201
    work_id = work.json()["id"]
    child = graph.post(f"/me/mailFolders/{work_id}/childFolders", json={"displayName": "Bills"})
    assert child.status_code == 201 and child.json()["parentFolderId"] == work_id
    assert graph.get(f"/me/mailFolders/{work_id}").json()["childFolderCount"] == 1
    kids = graph.get(f"/me/mailFolders/{work_id}/childFolders").json()["value"]
    assert [k["displayName"] for k in kids] == ["Bills"]
    renamed = graph.patch(f"/me/mailFolders/{child.json()['id']}", json={"displayName": "Invoices"})
    assert renamed.status_code == 200 and renamed.json()["displayName"] == "Invoices"
    assert graph.delete(f"/me/mailFolders/{work_id}").status_code == 204
    assert graph.get(f"/me/mailFolders/{work_id}").status_code == 404
    assert graph.get(f"/me/mailFolders/{child.json()['id']}").status_code == 404


def test_duplicate_names_and_distinguished_folders_are_refused(graph: httpx.Client) -> None:
    """A second folder of one name under one parent is 409; well-known ones cannot go."""
    assert graph.post("/me/mailFolders", json={"displayName": "Work"}).status_code == 201
    again = graph.post("/me/mailFolders", json={"displayName": "work"})
    assert again.status_code == 409 and again.json()["error"]["code"] == "ErrorFolderExists"
    assert graph.delete("/me/mailFolders/inbox").status_code == 403
    assert graph.patch("/me/mailFolders/inbox", json={"displayName": "X"}).status_code == 403


def test_folder_delta_lists_the_tree_then_its_changes(
    graph: httpx.Client, graph_emulator: GraphEmulator
) -> None:
    """/me/mailFolders/delta gives every folder, then creations, renames and deletions."""
    everything: list[dict[str, object]] = []
    link: str | None = "/me/mailFolders/delta"
    delta_link = ""
    while link:
        body = graph.get(link, headers={"Prefer": "odata.maxpagesize=3"}).json()
        everything.extend(body["value"])
        link = body.get("@odata.nextLink")
        delta_link = body.get("@odata.deltaLink", delta_link)
    names = {f["displayName"] for f in everything}
    assert {"Inbox", "Archive", "Sync Issues"} <= names
    assert "Top of Information Store" not in names
    mailbox = graph_emulator.mailbox()
    work = mailbox.create_folder("Work")
    old = mailbox.create_folder("Old")
    mailbox.rename_folder(work.id, "Job")
    mailbox.delete_folder(old.id)
    changes = graph.get(delta_link).json()
    assert "@odata.deltaLink" in changes
    by_id = {f["id"]: f for f in changes["value"]}
    assert by_id[work.id]["displayName"] == "Job"
    assert by_id[old.id] == {"id": old.id, "@removed": {"reason": "deleted"}}


def test_a_folder_move_changes_its_parent_and_its_subfolders_follow(
    graph: httpx.Client, graph_emulator: GraphEmulator
) -> None:
    """POST mailFolders/{id}/move answers 201 with the folder under its new parent, same id."""
    mailbox = graph_emulator.mailbox()
    work, home = mailbox.create_folder("Work"), mailbox.create_folder("Home")
    leaf = mailbox.create_folder("Leaf", work.id)
    below = mailbox.create_folder("Below", leaf.id)
    delta_link = _delta_link(graph)
    moved = graph.post(f"/me/mailFolders/{leaf.id}/move", json={"destinationId": home.id})
    assert moved.status_code == 201
    assert moved.json()["id"] == leaf.id and moved.json()["parentFolderId"] == home.id
    assert graph.get(f"/me/mailFolders/{work.id}").json()["childFolderCount"] == 0
    kids = graph.get(f"/me/mailFolders/{leaf.id}/childFolders").json()["value"]
    assert [k["id"] for k in kids] == [below.id]
    changed = {f["id"] for f in graph.get(delta_link).json()["value"]}
    assert changed == {leaf.id, work.id, home.id}
    top = graph.post(f"/me/mailFolders/{leaf.id}/move", json={"destinationId": "msgfolderroot"})
    assert top.json()["parentFolderId"] == mailbox.root.id


def test_a_folder_move_refuses_well_known_cycles_and_name_clashes(
    graph: httpx.Client, graph_emulator: GraphEmulator
) -> None:
    """Well-known folders cannot move, nor a folder under itself, nor onto a taken name."""
    mailbox = graph_emulator.mailbox()
    work, home = mailbox.create_folder("Work"), mailbox.create_folder("Home")
    leaf = mailbox.create_folder("Leaf", work.id)
    mailbox.create_folder("Leaf", home.id)

    def move(ref: str, destination: str) -> httpx.Response:
        return graph.post(f"/me/mailFolders/{ref}/move", json={"destinationId": destination})

    assert move("inbox", home.id).status_code == 403
    assert move(work.id, leaf.id).json()["error"]["code"] == "ErrorMoveCopyFailed"
    assert move(leaf.id, home.id).status_code == 409
    assert move(leaf.id, "nosuchfolder").status_code == 404
    assert mailbox.folder(leaf.id).parent_id == work.id


def _delta_link(graph: httpx.Client) -> str:
    link: str | None = "/me/mailFolders/delta"
    delta_link = ""
    while link:
        body = graph.get(link).json()
        link = body.get("@odata.nextLink")
        delta_link = body.get("@odata.deltaLink", delta_link)
    return delta_link
