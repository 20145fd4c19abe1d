"""The Gmail propagator: mailroom's label changes carried to Gmail, idempotently.

Message changes: what Gmail should hold is derived from the message's
*current* labels and flags, never from the operation names, so a replay
changes nothing:

* the Gmail label ids of its bound labels, ``STARRED`` when starred and
  ``UNREAD`` when not seen are *added*; every other label the account binds
  (and ``STARRED`` / ``UNREAD``) is *removed* — except ``SENT`` and ``DRAFT``,
  which Gmail does not let a client set, and the ``CATEGORY_*`` labels, which
  are Gmail's to decide;
* messages with the same add and remove sets go together in one
  ``messages.batchModify`` (up to 1,000 ids);
* the trash is a place of its own: a message in mailroom's Trash is moved
  there with ``messages.trash``, one taken out of it with ``messages.untrash``;
* a message deleted forever is ``messages.delete``-d (gone already: done); where
  the granted scope (``gmail.modify``) refuses that, it is trashed instead.

Folder changes (:data:`~mailroom.providers.base.FOLDER_OPERATIONS`) are label
changes at Gmail: a label created in mailroom becomes ``labels.create`` with its
path as the name (nested with ``/``), a rename or move ``labels.patch`` of it
and of every descendant whose name differs, a destroyed label ``labels.delete``.
The folder rows and bindings are recorded in the transaction that marks the
change done, so the next sync finds the same label, never a second one.

A quota rejection ends the run with the :class:`RateLimitError` that defers it.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from mailroom.config import Settings
from mailroom.labels.resolver import system_label
from mailroom.providers.base import (
    CREATE_FOLDER,
    DELETE_FOLDER,
    RENAME_FOLDER,
    AuthError,
    MessageChanges,
    Outcome,
)
from mailroom.providers.gmail.connection import GmailAccount, open_account
from mailroom.providers.gmail.errors import (
    GmailNotFoundError,
    GmailRequestError,
    QuotaExceededError,
)
from mailroom.providers.gmail.labels import (
    CATEGORY_PREFIX,
    STARRED,
    UNREAD,
    add_label_folder,
    gmail_label_of,
    load_label_map,
)
from mailroom.store.engine import Store
from mailroom.store.models import Folder, Label, LabelBinding, Message, MessageLabel

__all__ = ["GmailPropagator", "wanted_changes"]

Recorder = Callable[[Session], None]
TRASH = "TRASH"
FIXED = frozenset({"SENT", "DRAFT"})  # Gmail does not let a client add or remove these


def wanted_changes(
    session: Session, account_id: int, user_id: int, message_id: int
) -> tuple[frozenset[str], frozenset[str]]:
    """(labels to add, labels to remove) that make Gmail hold the message's current state."""
    labels = load_label_map(session, account_id, user_id)
    by_label = labels.by_label
    current = set(
        session.scalars(select(MessageLabel.label_id).where(MessageLabel.message_id == message_id))
    )
    seen = session.scalar(select(Message.seen_at).where(Message.id == message_id)) is not None
    settable = {
        gmail
        for gmail in labels.by_gmail
        if gmail not in FIXED and not gmail.startswith(CATEGORY_PREFIX)
    } | {STARRED, UNREAD}
    held = {by_label[label] for label in current if label in by_label}
    if labels.starred in current:
        held.add(STARRED)
    if not seen:
        held.add(UNREAD)
    add = frozenset(held & settable)
    return add, frozenset(settable - add)


class GmailPropagator:
    """Carries pending changes of Gmail accounts (see the module docstring)."""

    def __init__(self, store: Store, settings: Settings | None = None) -> None:
        self.store = store
        self.settings = settings

    def propagate(self, account_id: int, batch: Sequence[MessageChanges]) -> Iterator[Outcome]:
        """Carry the batch; yields the outcomes as they are settled."""
        with closing(open_account(self.store, self.settings, account_id)) as gmail:
            try:
                folders = [c for c in batch if c.folder_label is not None]
                messages = [c for c in batch if c.folder_label is None]
                for changes in folders:
                    yield self._folder(gmail, changes)
                yield from self._messages(gmail, messages)
            except QuotaExceededError as exc:
                raise gmail.deferral(exc) from None

    # -- messages ------------------------------------------------------------------

    def _messages(self, gmail: GmailAccount, batch: Sequence[MessageChanges]) -> Iterator[Outcome]:
        groups: dict[tuple[frozenset[str], frozenset[str]], list[MessageChanges]] = defaultdict(
            list
        )
        for changes in batch:
            if changes.deleted or changes.message_id is None:
                yield self._delete(gmail, changes)
                continue
            with self.store.session() as session:
                add, remove = wanted_changes(
                    session, gmail.account_id, gmail.user_id, changes.message_id
                )
                trash = system_label(session, gmail.user_id, "trash").id
            touches_trash = TRASH in add or any(
                trash in (e.payload.get("add", []) + e.payload.get("remove", []))
                for e in changes.entries
            )
            if touches_trash:
                try:
                    if TRASH in add:
                        gmail.api.trash(changes.provider_id)
                    else:
                        gmail.api.untrash(changes.provider_id)
                except GmailNotFoundError:
                    yield Outcome.retry(changes, "Gmail does not have the message (any more).")
                    continue
            groups[(add - {TRASH}, remove - {TRASH})].append(changes)
        for (add, remove), members in groups.items():
            ids = [m.provider_id for m in members]
            try:
                gmail.api.batch_modify(ids, sorted(add), sorted(remove))
            except (GmailNotFoundError, GmailRequestError) as exc:
                for changes in members:
                    yield Outcome.retry(changes, str(exc))
                continue
            for changes in members:
                yield Outcome.done(changes)

    def _delete(self, gmail: GmailAccount, changes: MessageChanges) -> Outcome:
        if changes.deleted:
            try:
                gmail.api.delete(changes.provider_id)
            except GmailNotFoundError:
                pass  # gone already: what the change wanted
            except AuthError:
                # gmail.modify does not allow deleting for ever: the trash is the nearest
                # (Gmail empties it after 30 days).
                with contextlib.suppress(GmailNotFoundError):
                    gmail.api.trash(changes.provider_id)
        return Outcome.done(changes)

    # -- folders (Gmail labels) ----------------------------------------------------

    def _folder(self, gmail: GmailAccount, changes: MessageChanges) -> Outcome:
        label_id = changes.folder_label
        assert label_id is not None
        operations = [e.operation for e in changes.entries]
        if DELETE_FOLDER in operations:
            folders = [
                int(e.payload["folder"])
                for e in changes.entries
                if e.operation == DELETE_FOLDER and e.payload.get("folder") is not None
            ]
            return Outcome.done(changes, record=self._delete_labels(gmail, folders))
        with self.store.session() as session:
            label = session.get(Label, label_id)
            path = label.path if label is not None else None
            below = _subtree_folders(session, gmail.account_id, label) if label else []
        if path is None:
            return Outcome.done(changes)  # destroyed since: its deletion says the rest
        if not below and (CREATE_FOLDER in operations or RENAME_FOLDER in operations):
            return Outcome.done(changes, record=self._create(gmail, label_id, path))
        return Outcome.done(changes, record=self._rename(gmail, below))

    def _create(self, gmail: GmailAccount, label_id: int, path: str) -> Recorder:
        try:
            gmail_id = str(gmail.api.create_label(path)["id"])
        except GmailRequestError:  # the name is taken: Gmail has the label already
            found = [x for x in gmail.api.labels() if x.get("name") == path]
            if not found:
                raise
            gmail_id = str(found[0]["id"])

        def record(session: Session) -> None:
            add_label_folder(session, gmail.account_id, gmail_id, path, label_id)

        return record

    def _rename(self, gmail: GmailAccount, below: list[tuple[int, str, str]]) -> Recorder:
        names = {str(x.get("id")): str(x.get("name")) for x in gmail.api.labels()}
        for _folder_id, gmail_id, path in below:
            if gmail_id in names and names[gmail_id] != path:
                gmail.api.patch_label(gmail_id, name=path)

        def record(session: Session) -> None:
            for folder_id, _gmail_id, path in below:
                folder = session.get(Folder, folder_id)
                if folder is not None:
                    folder.path = path
            session.flush()

        return record

    def _delete_labels(self, gmail: GmailAccount, folder_ids: list[int]) -> Recorder:
        with self.store.session() as session:
            targets = [
                (f.id, gmail_label_of(f))
                for f in (session.get(Folder, i) for i in folder_ids)
                if f is not None
            ]
        for _folder_id, gmail_id in targets:
            if gmail_id:
                with contextlib.suppress(GmailNotFoundError):  # gone already
                    gmail.api.delete_label(gmail_id)

        def record(session: Session) -> None:
            for folder_id, gmail_id in targets:
                session.execute(delete(Folder).where(Folder.id == folder_id))
                if gmail_id:
                    session.execute(
                        delete(LabelBinding).where(
                            LabelBinding.account_id == gmail.account_id,
                            LabelBinding.provider_ref == gmail_id,
                        )
                    )

        return record


def _subtree_folders(session: Session, account_id: int, label: Label) -> list[tuple[int, str, str]]:
    """(folder id, Gmail label id, the label's current path) of the label and its descendants."""
    found: list[tuple[int, str, str]] = []
    rows = session.execute(
        select(Folder, Label.path)
        .join(Label, Label.id == Folder.label_id)
        .where(
            Folder.account_id == account_id,
            (Label.id == label.id) | Label.path.startswith(label.path + "/", autoescape=True),
        )
    ).all()
    for folder, path in rows:
        gmail_id = gmail_label_of(folder)
        if gmail_id:
            found.append((folder.id, gmail_id, str(path)))
    return found
