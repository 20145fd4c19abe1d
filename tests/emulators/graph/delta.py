"""Per-folder message delta: rounds of pages, skip tokens and delta tokens.

``/me/mailFolders/delta`` runs the same rounds over the folders (:data:`FOLDERS`):
every folder below the root, then creations and renames (the whole folder) and
deletions (``@removed`` reason ``deleted``).

A **round** starts with a request without a token (enumerate the folder: every
message in it, newest received first) or with a ``$deltatoken`` (the folder's
entries changed after the token's sequence number, oldest change first; removed
ones as ``{"id", "@removed": {"reason"}}``). The round is a snapshot taken at its
first page, so a change made while a client pages lands in the next round. Each
page answers ``@odata.nextLink`` (a ``$skiptoken`` naming the round and offset, so
asking for the same link twice gives the same page) until the last, which carries
``@odata.deltaLink`` (one delta token per round, reusable).

Scripted imperfections, all documented behaviour of the real service:

* ``empty_pages(n)``: the next n pages are empty and still carry a nextLink;
* ``duplicate_pages(n)``: the next n pages start two items back (duplicates
  across pages);
* ``replay_next_round(folder)``: the next round from a delta token of that folder
  also repeats the round before it (a replay);
* ``expire(folder, form)``: every token of the folder (or all) is refused from now
  on, ``"410"`` as ``410 Gone SyncStateNotFound`` with a ``Location`` naming an
  empty ``$deltatoken``, ``"400"`` as ``400 syncStateNotFound``.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass
from typing import Any

from tests.emulators.graph.errors import GraphError, bad_request
from tests.emulators.graph.mailbox import Mailbox, check_select, show

FOLDERS = "@folders"  # the "folder id" of /me/mailFolders/delta's rounds
FOLDER_TYPE = "#microsoft.graph.mailFolder"
DEFAULT_PAGE_SIZE = 10
MAX_PAGE_SIZE = 1000
EXPIRY_FORMS = ("410", "400")


@dataclass
class SyncState:
    """What a delta token stands for."""

    folder_id: str
    seq: int
    previous_seq: int | None
    select: tuple[str, ...]
    expired: str | None = None


@dataclass
class Round:
    """One round's snapshot: the items to page through and the token that ends it."""

    folder_id: str
    items: list[dict[str, Any]]
    select: tuple[str, ...]
    delta_token: str
    page_size: int
    expired: str | None = None


class DeltaTracker:
    """The delta tokens and rounds of one mailbox, and the scripted imperfections."""

    def __init__(self, mailbox: Mailbox) -> None:
        self.mailbox = mailbox
        self.lock = threading.Lock()
        self.states: dict[str, SyncState] = {}
        self.rounds: dict[str, Round] = {}
        self.generation = 0
        self._empty = 0
        self._duplicate = 0
        self._replay: set[str] = set()

    # -- scripting -----------------------------------------------------------

    def empty_pages(self, count: int) -> None:
        """The next ``count`` pages are empty but still carry a nextLink."""
        with self.lock:
            self._empty += count

    def duplicate_pages(self, count: int) -> None:
        """The next ``count`` pages after a first page repeat the previous page's last two."""
        with self.lock:
            self._duplicate += count

    def replay_next_round(self, folder_id: str) -> None:
        """The next round from a delta token of this folder repeats the round before it too."""
        with self.lock:
            self._replay.add(folder_id)

    def expire(self, folder_id: str | None = None, form: str = "410") -> int:
        """Refuse every existing token of the folder (all folders if None); returns how many."""
        if form not in EXPIRY_FORMS:
            raise ValueError(f"form must be one of {EXPIRY_FORMS}")
        count = 0
        with self.lock:
            for state in self.states.values():
                if folder_id is None or state.folder_id == folder_id:
                    state.expired = form
                    count += 1
            for round_ in self.rounds.values():
                if folder_id is None or round_.folder_id == folder_id:
                    round_.expired = form
                    count += 1
        return count

    # -- serving -------------------------------------------------------------

    def page(
        self,
        folder_id: str,
        query: dict[str, str],
        page_size: int | None,
        immutable: bool,
        link_base: str,
    ) -> dict[str, Any]:
        """The response body of one delta request for the folder."""
        skip = query.get("$skiptoken")
        token = query.get("$deltatoken")
        with self.lock:
            if skip is not None:
                round_id, offset = self._parse_skip(skip, folder_id, link_base)
                round_ = self.rounds[round_id]
            else:
                round_id, round_ = self._start(folder_id, token, query, page_size, link_base)
                offset = 0
            size = min(page_size or round_.page_size, MAX_PAGE_SIZE)
            if self._empty > 0:
                self._empty -= 1
                return self._body(link_base, folder_id, [], f"{round_id}.{offset}", round_)
            start = offset
            if self._duplicate > 0 and offset > 0:
                self._duplicate -= 1
                start = max(0, offset - 2)
            chunk = round_.items[start : start + size]
            shown = [self._show(item, round_.select, immutable) for item in chunk]
            after = start + len(chunk)
            more = f"{round_id}.{after}" if after < len(round_.items) else None
            return self._body(link_base, folder_id, shown, more, round_)

    def _body(
        self,
        link_base: str,
        folder_id: str,
        value: list[dict[str, Any]],
        skip: str | None,
        round_: Round,
    ) -> dict[str, Any]:
        path = _path(link_base, folder_id)
        kind = "mailFolder" if folder_id == FOLDERS else "message"
        body: dict[str, Any] = {"@odata.context": f"{link_base}/$metadata#Collection({kind})"}
        if skip is not None:
            body["@odata.nextLink"] = f"{path}?$skiptoken={skip}"
        else:
            body["@odata.deltaLink"] = f"{path}?$deltatoken={round_.delta_token}"
        body["value"] = value
        return body

    @staticmethod
    def _show(item: dict[str, Any], select: tuple[str, ...], immutable: bool) -> dict[str, Any]:
        if "@removed" in item:
            return {
                "id": item["@immutable"] if immutable else item["id"],
                "@removed": {"reason": item["@removed"]},
            }
        if item.get("@odata.type") == FOLDER_TYPE:
            return dict(item)
        return show(item, select, immutable)

    def _parse_skip(self, skip: str, folder_id: str, link_base: str) -> tuple[str, int]:
        round_id, _, digits = skip.rpartition(".")
        round_ = self.rounds.get(round_id)
        if round_ is None or not digits.isdigit() or round_.folder_id != folder_id:
            raise bad_request("The skip token is not valid.", "ErrorInvalidUrlQuery")
        if round_.expired:
            raise self._expired(round_.expired, folder_id, link_base)
        return round_id, int(digits)

    def _start(
        self,
        folder_id: str,
        token: str | None,
        query: dict[str, str],
        page_size: int | None,
        link_base: str,
    ) -> tuple[str, Round]:
        mailbox = self.mailbox
        with mailbox.lock:
            if token is not None:
                state = self.states.get(token)
                if state is None or state.folder_id != folder_id:
                    raise self._expired("410", folder_id, link_base)
                if state.expired:
                    raise self._expired(state.expired, folder_id, link_base)
                since = state.seq
                if folder_id in self._replay and state.previous_seq is not None:
                    self._replay.discard(folder_id)
                    since = state.previous_seq
                items = self._changes(folder_id, since)
                select = state.select
                previous: int | None = state.seq
            else:
                select = _select(query)
                if query.get("$orderby", "receivedDateTime desc") != "receivedDateTime desc":
                    raise bad_request("Only $orderby=receivedDateTime desc is supported.")
                items = self._enumeration(folder_id)
                previous = None
            delta_token = secrets.token_urlsafe(24)
            self.states[delta_token] = SyncState(folder_id, mailbox.seq, previous, select)
        round_id = secrets.token_urlsafe(12)
        round_ = Round(folder_id, items, select, delta_token, page_size or DEFAULT_PAGE_SIZE)
        self.rounds[round_id] = round_
        return round_id, round_

    def _enumeration(self, folder_id: str) -> list[dict[str, Any]]:
        mailbox = self.mailbox
        if folder_id == FOLDERS:
            listed = [f for f in mailbox.folders.values() if f.parent_id is not None]
            return [{"@odata.type": FOLDER_TYPE, **mailbox.render_folder(f)} for f in listed]
        inside = [m for m in mailbox.messages.values() if m.folder_id == folder_id]
        inside.sort(key=lambda m: (m.props["receivedDateTime"], m.created), reverse=True)
        return [mailbox.snapshot(m) for m in inside]

    def _changes(self, folder_id: str, since: int) -> list[dict[str, Any]]:
        mailbox = self.mailbox
        book = mailbox.folder_changes if folder_id == FOLDERS else mailbox.entries[folder_id]
        changed = sorted((e for e in book.values() if e.seq > since), key=lambda e: e.seq)
        items: list[dict[str, Any]] = []
        for entry in changed:
            if entry.removed is not None:
                removed = {"id": entry.rest_id, "@immutable": entry.immutable_id}
                items.append(removed | {"@removed": entry.removed})
            elif folder_id == FOLDERS:
                folder = mailbox.folders[entry.rest_id]
                items.append({"@odata.type": FOLDER_TYPE, **mailbox.render_folder(folder)})
            else:
                items.append(mailbox.snapshot(mailbox.messages[entry.rest_id]))
        return items

    def _expired(self, form: str, folder_id: str, link_base: str) -> GraphError:
        self.generation += 1
        if form == "400":
            return GraphError(
                400, "syncStateNotFound", "The sync state is not found or has expired."
            )
        return GraphError(
            410,
            "SyncStateNotFound",
            f"The sync state generation is not found; generation={self.generation};"
            f"[highest={self.generation + 3}].",
            headers={"Location": f"{_path(link_base, folder_id)}?$deltatoken="},
        )


def _path(link_base: str, folder_id: str) -> str:
    if folder_id == FOLDERS:
        return f"{link_base}/me/mailFolders/delta"
    return f"{link_base}/me/mailFolders/{folder_id}/messages/delta"


def _select(query: dict[str, str]) -> tuple[str, ...]:
    raw = query.get("$select", "")
    select = tuple(part.strip() for part in raw.split(",") if part.strip())
    check_select(select)
    return select
