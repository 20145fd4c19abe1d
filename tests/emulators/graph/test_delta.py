"""The emulator's per-folder message delta: rounds, pages, removals and scripted imperfections."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.emulators.graph.samples import raw_message, received_at
from tests.emulators.graph.server import GraphEmulator

DELTA = "/me/mailFolders/inbox/messages/delta"


def _fill(emulator: GraphEmulator, count: int, folder: str = "inbox") -> list[str]:
    return [
        emulator.add_message(raw_message(n), folder, received=received_at(n)).id
        for n in range(1, count + 1)
    ]


def _round(
    graph: httpx.Client, link: str = DELTA, size: int = 2, **headers: str
) -> tuple[list[dict[str, Any]], str, int]:
    """Follow a round to its deltaLink: (items, deltaLink, pages)."""
    items: list[dict[str, Any]] = []
    pages = 0
    current: str | None = link
    while True:
        assert current is not None
        response = graph.get(current, headers={"Prefer": f"odata.maxpagesize={size}", **headers})
        assert response.status_code == 200, response.text
        body = response.json()
        pages += 1
        items.extend(body["value"])
        if "@odata.deltaLink" in body:
            assert "@odata.nextLink" not in body
            return items, body["@odata.deltaLink"], pages
        current = body["@odata.nextLink"]


def test_first_round_pages_the_folder_newest_first(
    graph: httpx.Client, graph_emulator: GraphEmulator
) -> None:
    """Without a token a round lists every message, maxpagesize per page, newest first."""
    ids = _fill(graph_emulator, 5)
    first = graph.get(DELTA, headers={"Prefer": "odata.maxpagesize=2"})
    assert first.headers["Preference-Applied"] == "odata.maxpagesize=2"
    assert len(first.json()["value"]) == 2 and "@odata.nextLink" in first.json()
    items, delta_link, pages = _round(graph)
    assert [m["id"] for m in items] == list(reversed(ids))
    assert pages == 3 and "$deltatoken=" in delta_link
    assert (
        items[0]["subject"] == "Message 5" and items[0]["@odata.type"] == "#microsoft.graph.message"
    )


def test_select_limits_the_properties_and_id_always_comes(
    graph: httpx.Client, graph_emulator: GraphEmulator
) -> None:
    """$select on the first call is kept in the tokens; id is returned regardless."""
    _fill(graph_emulator, 3)
    items, _, _ = _round(graph, f"{DELTA}?$select=subject,isRead")
    assert all(
        set(m) - {"@odata.type", "@odata.etag"} == {"id", "subject", "isRead"} for m in items
    )
    assert graph.get(f"{DELTA}?$select=nonsense").status_code == 400


def test_a_delta_link_returns_changes_and_removals_with_their_reasons(
    graph: httpx.Client, graph_emulator: GraphEmulator
) -> None:
    """After a round, the deltaLink gives updates, arrivals and @removed changed / deleted."""
    ids = _fill(graph_emulator, 4)
    _, delta_link, _ = _round(graph)
    nothing, delta_link, _ = _round(graph, delta_link)
    assert nothing == []
    graph_emulator.mark_read(ids[0])
    graph_emulator.move_message(ids[1], "archive")
    graph_emulator.delete_message(ids[2])
    new = graph_emulator.add_message(raw_message(9)).id
    items, _, _ = _round(graph, delta_link, size=10)
    by_id = {m["id"]: m for m in items}
    assert by_id[ids[0]]["isRead"] is True
    assert by_id[ids[1]]["@removed"] == {"reason": "changed"}
    assert by_id[ids[2]]["@removed"] == {"reason": "deleted"}
    assert new in by_id and ids[3] not in by_id


def test_a_change_made_while_paging_comes_in_the_next_round(
    graph: httpx.Client, graph_emulator: GraphEmulator
) -> None:
    """A round is a snapshot: an arrival during paging is not in it but in the round after."""
    _fill(graph_emulator, 4)
    first = graph.get(DELTA, headers={"Prefer": "odata.maxpagesize=2"}).json()
    late = graph_emulator.add_message(raw_message(50), received=received_at(50)).id
    rest, delta_link, _ = _round(graph, first["@odata.nextLink"])
    assert late not in [m["id"] for m in first["value"] + rest]
    after, _, _ = _round(graph, delta_link)
    assert [m["id"] for m in after] == [late]


def test_the_same_next_link_twice_gives_the_same_page(
    graph: httpx.Client, graph_emulator: GraphEmulator
) -> None:
    """A nextLink names a place in the round, so a retried request repeats its page."""
    _fill(graph_emulator, 5)
    link = graph.get(DELTA, headers={"Prefer": "odata.maxpagesize=2"}).json()["@odata.nextLink"]
    once = graph.get(link, headers={"Prefer": "odata.maxpagesize=2"}).json()
    twice = graph.get(link, headers={"Prefer": "odata.maxpagesize=2"}).json()
    assert [m["id"] for m in once["value"]] == [m["id"] for m in twice["value"]]


def test_scripted_empty_pages_still_carry_a_next_link(
    graph: httpx.Client, graph_emulator: GraphEmulator
) -> None:
    """Empty pages with a nextLink come as scripted, and the round still ends complete."""
    ids = _fill(graph_emulator, 3)
    graph_emulator.delta().empty_pages(2)
    first = graph.get(DELTA, headers={"Prefer": "odata.maxpagesize=2"}).json()
    assert first["value"] == [] and "@odata.nextLink" in first
    items, _, pages = _round(graph)
    assert sorted(m["id"] for m in items) == sorted(ids)
    assert pages == 3  # one scripted empty page left, then two real ones


def test_scripted_duplicates_repeat_items_across_pages(
    graph: httpx.Client, graph_emulator: GraphEmulator
) -> None:
    """duplicate_pages makes a page start two items back: some ids come twice."""
    ids = _fill(graph_emulator, 6)
    graph_emulator.delta().duplicate_pages(1)
    items, _, _ = _round(graph, size=3)
    seen = [m["id"] for m in items]
    assert sorted(set(seen)) == sorted(ids) and len(seen) == len(ids) + 2


def test_a_replayed_round_repeats_the_changes_of_the_round_before(
    graph: httpx.Client, graph_emulator: GraphEmulator
) -> None:
    """replay_next_round: following a deltaLink also gives the previous round's changes."""
    ids = _fill(graph_emulator, 2)
    _, link, _ = _round(graph)
    graph_emulator.mark_read(ids[0])
    changes, link, _ = _round(graph, link)
    assert [m["id"] for m in changes] == [ids[0]]
    graph_emulator.flag(ids[1])
    graph_emulator.delta().replay_next_round(graph_emulator.mailbox().folder("inbox").id)
    replayed, _, _ = _round(graph, link)
    assert sorted(m["id"] for m in replayed) == sorted(ids)


@pytest.mark.parametrize(
    ("form", "status", "code"),
    [("410", 410, "SyncStateNotFound"), ("400", 400, "syncStateNotFound")],
)
def test_expired_tokens_answer_sync_state_not_found(
    graph: httpx.Client, graph_emulator: GraphEmulator, form: str, status: int, code: str
) -> None:
    """Expired delta (and skip) tokens answer 410 SyncStateNotFound or 400 syncStateNotFound."""
    _fill(graph_emulator, 3)
    next_link = graph.get(DELTA, headers={"Prefer": "odata.maxpagesize=2"}).json()[
        "@odata.nextLink"
    ]
    _, delta_link, _ = _round(graph)
    assert graph_emulator.expire_delta_tokens("inbox", form) >= 2
    for link in (delta_link, next_link):
        response = graph.get(link)
        assert response.status_code == status
        assert response.json()["error"]["code"] == code
    if form == "410":
        assert response.headers["Location"].endswith("/messages/delta?$deltatoken=")
    assert graph.get(DELTA).status_code == 200  # a fresh round is always possible


def test_immutable_ids_in_delta_survive_a_move(
    graph: httpx.Client, graph_emulator: GraphEmulator
) -> None:
    """With Prefer IdType=ImmutableId a moved message has the same id in both folders' deltas."""
    message = graph_emulator.add_message(raw_message(1))
    prefer = 'IdType="ImmutableId"'
    items, inbox_link, _ = _round(graph, Prefer=f"odata.maxpagesize=5, {prefer}")
    assert [m["id"] for m in items] == [message.immutable_id]
    _, archive_link, _ = _round(graph, "/me/mailFolders/archive/messages/delta")
    graph_emulator.move_message(message.id, "archive")
    gone, _, _ = _round(graph, inbox_link, Prefer=f"odata.maxpagesize=5, {prefer}")
    came, _, _ = _round(graph, archive_link, Prefer=f"odata.maxpagesize=5, {prefer}")
    assert gone == [{"id": message.immutable_id, "@removed": {"reason": "changed"}}]
    assert [m["id"] for m in came] == [message.immutable_id]
