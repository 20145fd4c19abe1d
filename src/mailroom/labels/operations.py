"""The operations service: the one place that owns what each mail action means.

Every operation is a label change (or ``seen_at`` for read state) written to
the database first — the source of truth — with change-log rows and a
pending change per message in the same transaction. Once that transaction
commits, the propagation of the touched accounts is enqueued at once
(``labels.propagation.wake_after_commit``; never on rollback); the consumer
(``labels.propagation``) carries the changes to the provider, and local-only
accounts consume them as a no-op.

Meanings:

============== ==========================================================
star / unstar  add / remove the Starred label (an IMAP \\Flagged keyword)
read / unread  set / clear ``seen_at`` (mailroom's own, not the provider's)
archive        remove Inbox (and Snoozed)
move_to_inbox  add Inbox; remove Archive, Spam and Trash
trash          add Trash; remove Inbox and Snoozed
restore        remove Trash; add Inbox
spam / unspam  add Spam, remove Inbox / remove Spam, add Inbox
label/unlabel  add / remove a user label
snooze         remove Inbox, add Snoozed, store the wake time on the thread
wake           remove Snoozed, add Inbox, mark the newest message unread
delete_forever remove the message; its pending change keeps the provider id
               (and a sealed message's Message-ID, sealed: ``labels.sealed_deletes``)
============== ==========================================================

Invariant: every operation that adds or removes *some* labels leaves a
message at least one *location* label (Inbox, Archive, Spam, Trash, Sent,
Drafts, or a label bound to a provider folder of its account). Archive is the
fallback location: such an operation that would leave none adds it, and it is
dropped as soon as another location is present. Snoozed has no provider
folder, so a snoozed message lives in Archive. The one exception is
:meth:`Operations.set_labels`, where the caller states a message's *whole*
label set (JMAP ``mailboxIds``): that set is honoured exactly as given (the
caller guarantees it is not empty), with no Archive added or dropped.
Every operation is idempotent: repeating it changes nothing and logs nothing.

Keywords (:mod:`mailroom.labels.keywords`): ``$seen`` is read state,
``$flagged`` the Starred label, every other keyword a ``message_keywords`` row
set by :meth:`Operations.set_keywords`, whose pending change (operation
``keywords``, payload ``{"keywords": {name: true|false}}``) names the keywords
the provider should look at; the propagator sets them from the current rows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.orm import Session

from mailroom.crypto.mail_reading import header_message_ids
from mailroom.errors import NotFoundError
from mailroom.labels.keywords import FLAGGED, SEEN, stored_keywords
from mailroom.labels.propagation import wake_after_commit
from mailroom.labels.resolver import system_label
from mailroom.labels.sealed_deletes import seal_message_ids
from mailroom.store import changelog
from mailroom.store.models import (
    Folder,
    Label,
    Message,
    MessageKeyword,
    MessageLabel,
    PendingChange,
    Thread,
    utcnow,
)

LOCATION_ROLES = frozenset({"inbox", "archive", "spam", "trash", "sent", "drafts"})


class Operations:
    """Mail actions of one user, on messages or whole threads, inside the caller's session."""

    def __init__(
        self, session: Session, user_id: int, now: Callable[[], datetime] = utcnow
    ) -> None:
        self.session = session
        self.user_id = user_id
        self.now = now
        self._roles: dict[str, int] = {}

    # -- targets -------------------------------------------------------------

    def role(self, name: str) -> int:
        """The label id of a system role of this user."""
        if name not in self._roles:
            self._roles[name] = system_label(self.session, self.user_id, name).id
        return self._roles[name]

    def messages_of_threads(self, thread_ids: Iterable[int]) -> list[int]:
        """All message ids of the user's threads; NotFoundError for a foreign or unknown one."""
        wanted = set(thread_ids)
        owned = set(
            self.session.scalars(
                select(Thread.id).where(Thread.id.in_(wanted), Thread.user_id == self.user_id)
            )
        )
        if missing := wanted - owned:
            raise NotFoundError(f"There is no thread {min(missing)} for this user.")
        return list(
            self.session.scalars(
                select(Message.id).where(Message.thread_id.in_(owned)).order_by(Message.id)
            )
        )

    def _own(self, message_ids: Iterable[int]) -> list[int]:
        wanted = set(message_ids)
        owned = set(
            self.session.scalars(
                select(Message.id).where(Message.id.in_(wanted), Message.user_id == self.user_id)
            )
        )
        if missing := wanted - owned:
            raise NotFoundError(f"There is no message {min(missing)} for this user.")
        return sorted(owned)

    # -- operations ----------------------------------------------------------

    def star(self, message_ids: Iterable[int], starred: bool = True) -> list[int]:
        """Star or unstar; returns the ids that changed."""
        starred_id = self.role("starred")
        add, remove = ([starred_id], []) if starred else ([], [starred_id])
        return self.change_labels(message_ids, add, remove, "star" if starred else "unstar")

    def mark_read(self, message_ids: Iterable[int], read: bool = True) -> list[int]:
        """Set or clear ``seen_at``; returns the ids that changed."""
        ids = self._own(message_ids)
        condition = Message.seen_at.is_(None) if read else Message.seen_at.is_not(None)
        changed = list(
            self.session.scalars(select(Message.id).where(Message.id.in_(ids), condition))
        )
        if changed:
            self.session.execute(
                update(Message)
                .where(Message.id.in_(changed))
                .values(seen_at=self.now() if read else None)
            )
            self._after(changed, set(), "read" if read else "unread", {"seen": read})
        return changed

    def set_keywords(
        self, message_ids: Iterable[int], add: Iterable[str], remove: Iterable[str]
    ) -> list[int]:
        """Add and remove stored keywords (lower-case; never ``$seen``/``$flagged``).

        Returns the ids that changed; each gets an Email change and one pending
        change naming the keywords, so the provider follows.
        """
        ids = self._own(message_ids)
        adding = set(add) - {SEEN, FLAGGED}
        removing = set(remove) - adding - {SEEN, FLAGGED}
        if not ids or not (adding or removing):
            return []
        before = stored_keywords(self.session, ids)
        rows: list[dict[str, Any]] = [
            {"message_id": mid, "keyword": keyword}
            for mid in ids
            for keyword in sorted(adding - before.get(mid, set()))
        ]
        changed: set[int] = {int(row["message_id"]) for row in rows}
        if rows:
            self.session.execute(insert(MessageKeyword), rows)
        if removing:
            changed.update(
                self.session.scalars(
                    delete(MessageKeyword)
                    .where(
                        MessageKeyword.message_id.in_(ids),
                        MessageKeyword.keyword.in_(sorted(removing)),
                    )
                    .returning(MessageKeyword.message_id)
                )
            )
        if changed:
            named = {k: True for k in sorted(adding)} | {k: False for k in sorted(removing)}
            self._after(sorted(changed), set(), "keywords", {"keywords": named})
        return sorted(changed)

    def archive(self, message_ids: Iterable[int]) -> list[int]:
        """Remove Inbox (and Snoozed)."""
        return self.change_labels(
            message_ids, [], [self.role("inbox"), self.role("snoozed")], "archive"
        )

    def move_to_inbox(self, message_ids: Iterable[int]) -> list[int]:
        """Add Inbox; remove Archive, Spam and Trash."""
        remove = [self.role("archive"), self.role("spam"), self.role("trash")]
        return self.change_labels(message_ids, [self.role("inbox")], remove, "inbox")

    def trash(self, message_ids: Iterable[int]) -> list[int]:
        """Add Trash; remove Inbox and Snoozed."""
        remove = [self.role("inbox"), self.role("snoozed")]
        return self.change_labels(message_ids, [self.role("trash")], remove, "trash")

    def restore(self, message_ids: Iterable[int]) -> list[int]:
        """Remove Trash; add Inbox."""
        return self.change_labels(
            message_ids, [self.role("inbox")], [self.role("trash")], "restore"
        )

    def spam(self, message_ids: Iterable[int], is_spam: bool = True) -> list[int]:
        """Mark as spam (add Spam, remove Inbox) or not spam (the reverse)."""
        pair = [self.role("spam")], [self.role("inbox"), self.role("snoozed")]
        if not is_spam:
            pair = [self.role("inbox")], [self.role("spam")]
        return self.change_labels(message_ids, pair[0], pair[1], "spam" if is_spam else "unspam")

    def label(self, message_ids: Iterable[int], label_id: int, on: bool = True) -> list[int]:
        """Add or remove one of the user's labels."""
        owner = self.session.scalar(select(Label.user_id).where(Label.id == label_id))
        if owner != self.user_id:
            raise NotFoundError(f"There is no label {label_id} for this user.")
        add, remove = ([label_id], []) if on else ([], [label_id])
        return self.change_labels(message_ids, add, remove, "label" if on else "unlabel")

    def snooze(self, thread_ids: Iterable[int], until: datetime) -> list[int]:
        """Snooze whole threads until ``until``: out of the Inbox, into Snoozed."""
        threads = sorted(set(thread_ids))
        ids = self.messages_of_threads(threads)
        changed = self.change_labels(ids, [self.role("snoozed")], [self.role("inbox")], "snooze")
        self.set_wake_time(threads, until)
        return changed

    def set_wake_time(self, thread_ids: Iterable[int], until: datetime | None) -> None:
        """Set (None: clear) when snoozed threads wake, labels untouched (an undo of a snooze
        puts the labels back itself); NotFoundError for a thread not the user's."""
        threads = sorted(set(thread_ids))
        self.messages_of_threads(threads)
        self.session.execute(
            update(Thread).where(Thread.id.in_(threads)).values(snoozed_until=until)
        )
        changelog.record(self.session, self.user_id, "Thread", threads, "updated")

    def wake(self, thread_ids: Iterable[int]) -> list[int]:
        """Return snoozed threads to the Inbox and mark their newest message unread."""
        threads = sorted(set(thread_ids))
        ids = self.messages_of_threads(threads)
        changed = self.change_labels(ids, [self.role("inbox")], [self.role("snoozed")], "wake")
        self.session.execute(
            update(Thread).where(Thread.id.in_(threads)).values(snoozed_until=None)
        )
        for thread_id in threads:
            newest = self.session.scalar(
                select(Message.id)
                .where(Message.thread_id == thread_id)
                .order_by(Message.received_at.desc(), Message.id.desc())
                .limit(1)
            )
            if newest is not None:
                self.mark_read([newest], read=False)
        changelog.record(self.session, self.user_id, "Thread", threads, "updated")
        return changed

    def wake_due(self) -> list[int]:
        """Wake every snoozed thread of the user whose time has come; returns their ids."""
        due = list(
            self.session.scalars(
                select(Thread.id).where(
                    Thread.user_id == self.user_id,
                    Thread.snoozed_until.is_not(None),
                    Thread.snoozed_until <= self.now(),
                )
            )
        )
        if due:
            self.wake(due)
        return due

    def delete_forever(self, message_ids: Iterable[int]) -> list[int]:
        """Delete messages; the pending change keeps what the provider needs to delete them too."""
        ids = self._own(message_ids)
        if not ids:
            return []
        rows = self.session.execute(
            select(
                Message.id,
                Message.account_id,
                Message.provider_id,
                Message.thread_id,
                Message.sealed,
            ).where(Message.id.in_(ids))
        ).all()
        labels = self._labels_of(ids)
        payload = {"delete": True}
        changes = self._queue_changes(rows, "delete", payload, ids_back=True)
        sealed = [row.id for row in rows if row.sealed]
        if sealed:
            # Its provider id may be a keyed hash: the propagator searches by this instead.
            header_ids = header_message_ids(self.session, sealed, self.user_id)
            seal_message_ids(
                self.session,
                self.user_id,
                payload,
                {changes[m]: header_ids[m] for m in sealed if m in header_ids and m in changes},
            )
        threads = {row.thread_id for row in rows if row.thread_id is not None}
        self.session.execute(delete(Message).where(Message.id.in_(ids)))
        changelog.record(self.session, self.user_id, "Email", ids, "destroyed")
        self._record_threads(threads)
        touched = set().union(*labels.values()) if labels else set()
        changelog.record(self.session, self.user_id, "Mailbox", sorted(touched), "updated")
        return ids

    def set_labels(
        self, message_ids: Iterable[int], before: Iterable[int], after: Iterable[int]
    ) -> list[int]:
        """Give messages the label set ``after`` (they had ``before``) as the action it means.

        A client that edits a message's mailboxes (JMAP ``mailboxIds``) states only
        the new set, and the messages end with exactly that set (no Archive added
        or dropped: ``after`` must not be empty). The difference names the action,
        which the propagation to the provider and the change history go by:
        Starred coming or going is (un)starring; otherwise Trash added is trash,
        Spam added is spam, Inbox added is restore (from Trash), unspam (from Spam)
        or inbox, Inbox removed is archive, labels only added or only removed are
        label/unlabel, anything else a move. Returns the ids that changed.
        """
        ids = list(message_ids)
        was, now = set(before), set(after)
        add, remove = now - was, was - now
        changed: set[int] = set()
        starred = self.role("starred")
        if starred in add or starred in remove:
            star = ([starred], []) if starred in add else ([], [starred])
            name = "star" if starred in add else "unstar"
            changed.update(self.change_labels(ids, *star, name, keep_location=False))
        add.discard(starred)
        remove.discard(starred)
        if add or remove:
            name = self._action_of(add, remove)
            changed.update(
                self.change_labels(ids, sorted(add), sorted(remove), name, keep_location=False)
            )
        return sorted(changed)

    def _action_of(self, add: set[int], remove: set[int]) -> str:
        """The action a label difference is (see :meth:`set_labels`)."""
        inbox, trash, spam = self.role("inbox"), self.role("trash"), self.role("spam")
        if trash in add:
            return "trash"
        if spam in add:
            return "spam"
        if inbox in add:
            if trash in remove:
                return "restore"
            return "unspam" if spam in remove else "inbox"
        if inbox in remove:
            return "archive"
        if add and not remove:
            return "label"
        if remove and not add:
            return "unlabel"
        return "move"

    # -- the mechanism -------------------------------------------------------

    def change_labels(
        self,
        message_ids: Iterable[int],
        add: Sequence[int],
        remove: Sequence[int],
        operation: str,
        *,
        keep_location: bool = True,
    ) -> list[int]:
        """Add and remove labels on messages, keep a location, log and queue; idempotent.

        ``keep_location=False`` leaves the labels exactly as asked (see
        :meth:`set_labels`): the caller has stated the whole set.
        """
        ids = self._own(message_ids)
        if not ids:
            return []
        before = self._labels_of(ids)
        removing = set(remove) - set(add)
        if removing:
            self.session.execute(
                delete(MessageLabel).where(
                    MessageLabel.message_id.in_(ids), MessageLabel.label_id.in_(removing)
                )
            )
        rows = [
            {"message_id": mid, "label_id": lid}
            for mid in ids
            for lid in add
            if lid not in before.get(mid, set())
        ]
        if rows:
            self.session.execute(insert(MessageLabel), rows)
        if keep_location:
            self._keep_location(ids)
        after = self._labels_of(ids)
        changed = [mid for mid in ids if before.get(mid, set()) != after.get(mid, set())]
        touched_labels = {
            lid for mid in changed for lid in before.get(mid, set()) ^ after.get(mid, set())
        }
        if changed:
            self._after(
                changed,
                touched_labels,
                operation,
                {"add": sorted(add), "remove": sorted(removing)},
            )
        return changed

    def _labels_of(self, ids: Sequence[int]) -> dict[int, set[int]]:
        labels: dict[int, set[int]] = defaultdict(set)
        for mid, lid in self.session.execute(
            select(MessageLabel.message_id, MessageLabel.label_id).where(
                MessageLabel.message_id.in_(ids)
            )
        ):
            labels[mid].add(lid)
        return labels

    def _keep_location(self, ids: Sequence[int]) -> None:
        """Archive is the fallback location: given when no other is left, dropped beside one."""
        location_labels = {self.role(role) for role in LOCATION_ROLES}
        folder_labels = set(
            self.session.scalars(
                select(Folder.label_id)
                .join(Message, Message.account_id == Folder.account_id)
                .where(Message.id.in_(ids), Folder.label_id.is_not(None))
            )
        )
        archive = self.role("archive")
        others = (location_labels | folder_labels) - {archive}
        labels = self._labels_of(ids)
        homeless = [mid for mid in ids if not labels.get(mid, set()) & (others | {archive})]
        doubled = [
            mid
            for mid in ids
            if archive in labels.get(mid, set()) and labels.get(mid, set()) & others
        ]
        if homeless:
            self.session.execute(
                insert(MessageLabel), [{"message_id": m, "label_id": archive} for m in homeless]
            )
        if doubled:
            self.session.execute(
                delete(MessageLabel).where(
                    MessageLabel.message_id.in_(doubled), MessageLabel.label_id == archive
                )
            )

    def _after(
        self, changed: list[int], labels: set[int], operation: str, payload: dict[str, Any]
    ) -> None:
        rows = self.session.execute(
            select(Message.id, Message.account_id, Message.provider_id, Message.thread_id).where(
                Message.id.in_(changed)
            )
        ).all()
        changelog.record(self.session, self.user_id, "Email", changed, "updated")
        self._record_threads({row.thread_id for row in rows if row.thread_id is not None})
        changelog.record(self.session, self.user_id, "Mailbox", sorted(labels), "updated")
        self._queue_changes(rows, operation, payload)

    def _record_threads(self, thread_ids: set[int]) -> None:
        existing = self.session.scalars(select(Thread.id).where(Thread.id.in_(thread_ids)))
        changelog.record(self.session, self.user_id, "Thread", sorted(existing), "updated")

    def _queue_changes(
        self, rows: Sequence[Any], operation: str, payload: dict[str, Any], ids_back: bool = False
    ) -> dict[int, int]:
        """Insert a pending change per message; with ``ids_back``, message id → its change's id
        (RETURNING only then: bulk label changes of many messages need none)."""
        entries = [
            {
                "account_id": row.account_id,
                "message_id": row.id,
                "provider_id": row.provider_id,
                "operation": operation,
                "payload": payload,
                "state": "pending",
                "attempts": 0,
                "next_attempt_at": self.now(),
                "created_at": self.now(),
            }
            for row in rows
        ]
        if not entries:
            return {}
        wake_after_commit(self.session, {row.account_id for row in rows})
        if not ids_back:
            self.session.execute(insert(PendingChange), entries)
            return {}
        inserted = self.session.execute(
            insert(PendingChange).returning(PendingChange.id, PendingChange.message_id), entries
        )
        return {int(mid): int(change) for change, mid in inserted if mid is not None}
