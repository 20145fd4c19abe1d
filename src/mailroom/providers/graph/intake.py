"""Taking in one delta page of one folder: new mail stored, known mail attached, removals.

Used by the importer (a folder's first enumeration) and the syncer (following
its deltaLink) alike; SPEC §1–2 and seed 000_5011172e45d074e7:

* **New mail** (an id the account does not hold) is fetched as MIME (``$value``)
  and stored through :func:`mailroom.ingest.commit_batch`, with the folder's
  label, its categories as labels, ``conversationId`` as the provider thread id
  (stage 1 of threading) and the read state.
* **Categories** of known mail are mirrored too: a message reported as changed
  carries its full ``categories``, and its category labels follow them
  (:mod:`.categories`; pending local changes win).
* **Attaching to a folder is exclusive.** Graph keeps a message in one folder,
  and deltas of different folders arrive in any order, so the folder a message
  was last seen in is where it lives: seeing it in a folder removes its
  locations elsewhere (:mod:`mailroom.ingest.mirror`; pending local changes
  win) and mirrors its read and flag state.
* **Removals** (``@removed``, reason ``deleted`` or ``changed``) only say the
  message left this folder, perhaps for a folder whose delta has not been read
  yet. While any folder of the account is still importing they are kept on the
  account (:mod:`.removals`) and judged at the first sync in which every folder
  answered; otherwise the message's location in this folder goes at once. In
  both cases a message left with no location is deleted only by that sync's
  orphan sweep, never here.
* Repeats of an id within a page or across pages change nothing: the last
  report of a page wins and attaching is idempotent.

The MIME of a page's new messages is fetched :data:`FETCHERS` at a time: the
fetches are independent, and the client's mailbox limiter keeps every request
of the mailbox (of any thread) within Exchange's four in flight, so a page
uses the four slots instead of one.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.ingest.commit import commit_batch
from mailroom.ingest.mirror import (
    AccountScope,
    ChangeSet,
    Flags,
    Placed,
    add_locations,
    known_messages,
    remove_locations,
)
from mailroom.ingest.model import IncomingMessage, Location
from mailroom.providers.graph.api import GraphClient
from mailroom.providers.graph.categories import category_label, mirror_categories
from mailroom.providers.graph.folders import graph_id, set_state
from mailroom.providers.graph.limiter import MAILBOX_CONCURRENCY
from mailroom.providers.graph.models import DeltaPage, GraphMessage
from mailroom.providers.graph.removals import drop_removals, keep_removals
from mailroom.store.engine import Store
from mailroom.store.models import Folder, MessageLocation

__all__ = ["flags_of", "take_page"]

FLAGGED = "flagged"
FETCHERS = MAILBOX_CONCURRENCY  # MIME fetches of one page at once


def flags_of(message: GraphMessage) -> Flags | None:
    """The read and flag state a delta item reports (None when it reports neither)."""
    if message.is_read is None and message.flag_status is None:
        return None
    return Flags(seen=bool(message.is_read), starred=message.flag_status == FLAGGED)


def _received(message: GraphMessage) -> datetime | None:
    if not message.received:
        return None
    try:
        return datetime.fromisoformat(message.received)
    except ValueError:
        return None


def _latest(page: DeltaPage) -> dict[str, GraphMessage]:
    """One item per id (the last one of the page), minus ids the page also removes later."""
    latest: dict[str, GraphMessage] = {}
    for message in page.messages:
        latest[message.id] = message
    return latest


def _new_items(
    client: GraphClient, folder_id: int, messages: Sequence[GraphMessage]
) -> list[tuple[GraphMessage, bytes]]:
    """Each new message with its MIME, in the page's order (fetched concurrently)."""
    if len(messages) < 2:
        return [(message, client.mime(message.id)) for message in messages]
    with ThreadPoolExecutor(min(FETCHERS, len(messages)), "graph-mime") as pool:
        raws = list(pool.map(client.mime, [message.id for message in messages]))
    return list(zip(messages, raws, strict=True))


def _incoming(
    session: Session, account_id: int, folder_id: int, fetched: Sequence[tuple[GraphMessage, bytes]]
) -> list[IncomingMessage]:
    scope = AccountScope.load(session, account_id)
    label = session.scalar(select(Folder.label_id).where(Folder.id == folder_id))
    items: list[IncomingMessage] = []
    for message, raw in fetched:
        labels = [label] if label is not None else []
        for name in message.categories or ():
            if (category := category_label(session, scope, name)) is not None:
                labels.append(category)
        items.append(
            IncomingMessage(
                provider_id=message.id,
                raw=raw,
                label_ids=labels,
                locations=[Location(folder_id, provider_ref=message.id)],
                received_at=_received(message),
                provider_thread_id=message.conversation_id,
                provider_labels=list(message.categories or ()),
                seen=bool(message.is_read),
            )
        )
    return items


def attach(
    session: Session,
    scope: AccountScope,
    changes: ChangeSet,
    folder_id: int,
    placed: Sequence[tuple[int, str, Flags | None]],
) -> None:
    """Locate messages (message id, Graph id, flags) in this folder and nowhere else."""
    if not placed:
        return
    ids = [mid for mid, _gid, _flags in placed]
    elsewhere = session.execute(
        select(MessageLocation.folder_id, MessageLocation.message_id).where(
            MessageLocation.message_id.in_(ids), MessageLocation.folder_id != folder_id
        )
    ).all()
    by_folder: dict[int, set[int]] = {}
    for other, mid in elsewhere:
        by_folder.setdefault(other, set()).add(mid)
    for other, mids in sorted(by_folder.items()):
        remove_locations(session, scope, changes, other, message_ids=mids)
    # a known location in this folder may carry an older Graph id (moved without immutable ids)
    remove_locations(
        session,
        scope,
        changes,
        folder_id,
        message_ids=[
            mid
            for mid, gid in session.execute(
                select(MessageLocation.message_id, MessageLocation.provider_ref).where(
                    MessageLocation.folder_id == folder_id, MessageLocation.message_id.in_(ids)
                )
            )
            if gid not in {g for m, g, _f in placed if m == mid}
        ],
    )
    add_locations(
        session,
        scope,
        changes,
        folder_id,
        [Placed(mid, flags, provider_ref=gid) for mid, gid, flags in placed],
    )


def take_page(
    store: Store,
    client: GraphClient,
    account_id: int,
    user_id: int,
    folder_id: int,
    page: DeltaPage,
    *,
    keep: bool,
    state: dict[str, object],
) -> None:
    """Take in one page of a folder and store the folder's new ``state`` with it.

    ``keep``: some folder is still importing, so removals are kept for later.
    """
    latest = _latest(page)
    with store.session() as session:
        known = known_messages(session, account_id, latest)
    fresh = [m for gid, m in latest.items() if gid not in known]
    fetched = _new_items(client, folder_id, fresh)
    if fetched:
        commit_batch(
            store,
            account_id,
            user_id,
            lambda session: _incoming(session, account_id, folder_id, fetched),
        )
    with store.session() as session:
        scope = AccountScope.load(session, account_id)
        changes = ChangeSet()
        stored = known_messages(session, account_id, latest)
        placed = [
            (stored[gid], gid, flags_of(message))
            for gid, message in latest.items()
            if gid in stored
        ]
        attach(session, scope, changes, folder_id, placed)
        reported = {
            stored[gid]: message.categories
            for gid, message in latest.items()
            if gid in stored and message.categories is not None
        }
        mirror_categories(session, scope, changes, reported)
        drop_removals(session, account_id, folder_id, latest)
        gone = [r.id for r in page.removals if r.id not in latest]
        if keep:
            keep_removals(session, account_id, folder_id, gone)
        else:
            remove_gone(session, scope, changes, folder_id, gone)
        row = session.get(Folder, folder_id)
        if row is not None and graph_id(row):
            set_state(row, **state)
        changes.record(session, scope.user_id)


def remove_gone(
    session: Session,
    scope: AccountScope,
    changes: ChangeSet,
    folder_id: int,
    graph_ids: Sequence[str],
) -> None:
    """Forget the locations in this folder of the messages Graph says left it."""
    if not graph_ids:
        return
    mids = session.scalars(
        select(MessageLocation.message_id).where(
            MessageLocation.folder_id == folder_id,
            MessageLocation.provider_ref.in_(sorted(set(graph_ids))),
        )
    ).all()
    remove_locations(session, scope, changes, folder_id, message_ids=mids)
