"""The update half of ``Email/set`` (RFC 8620 §5.3, RFC 8621 §4.6): PatchObjects on Emails.

Only ``keywords`` and ``mailboxIds`` change after creation; every other Email
property is immutable and may appear in a patch only with the value it already
has. A patch is checked whole before anything is written:

* not an object, an empty path, a path through a value that is not an object
  (``keywords/a/b``) or a path below a property that is also replaced
  (``keywords`` and ``keywords/$seen``) → ``invalidPatch``;
* an unknown property, an immutable one given another value, a keyword that is
  not valid (:func:`mailroom.labels.keywords.parse_keyword`), a value other than
  ``true`` (whole maps) or ``true``/``null`` (patch paths), an empty or unknown
  ``mailboxIds`` → ``invalidProperties`` naming them.

Then the operations service writes it: ``$seen`` is read state, ``$flagged``
the Starred label (the keyword wins when a patch names both), the other
keywords :meth:`~mailroom.labels.operations.Operations.set_keywords`, and the
mailboxes :meth:`~mailroom.labels.operations.Operations.set_labels`, which
leaves them exactly as the client set them and names the action (trash,
archive, move, ...) the provider carries out. ``updated`` holds only what ended
other than asked (``keywords`` when ``$flagged`` followed the Starred mailbox,
``mailboxIds`` the other way round), else null.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.jmap import ids
from mailroom.jmap.errors import MethodError, Refused, set_error
from mailroom.jmap.mapping import JMAP_ROLE
from mailroom.jmap.methods.email_reader import PROPERTIES, EmailReader
from mailroom.jmap.scope import owned_by
from mailroom.labels.keywords import FLAGGED, SEEN, parse_keyword, stored_keywords
from mailroom.labels.operations import Operations
from mailroom.store.models import Label, Message

__all__ = ["EmailUpdater", "PatchError"]

MUTABLE = ("keywords", "mailboxIds")


class PatchError(Refused):
    """An update that cannot be applied; ``error`` is its SetError."""


@dataclass
class EmailState:
    """What a client can change on an Email: its keywords and its mailbox ids."""

    keywords: set[str]
    mailboxes: set[str]


@dataclass
class _Parsed:
    """A PatchObject read against the current state, before any check of meaning."""

    state: EmailState
    immutable: dict[str, Any] = field(default_factory=dict)  # property -> value given
    invalid: list[str] = field(default_factory=list)  # properties to name in the error


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _resolve(mailbox: str, created: Mapping[str, str]) -> str:
    """A mailbox id, with a ``#creationId`` replaced by the id it created (if any)."""
    return created.get(mailbox[1:], mailbox) if mailbox.startswith("#") else mailbox


def _invalid_patch(description: str) -> PatchError:
    return PatchError(set_error("invalidPatch", description))


def _known_property(name: str) -> bool:
    return name in PROPERTIES or name.startswith("header:")


def _whole_map(value: object, name: str, parsed: _Parsed) -> set[str] | None:
    """The keys of a whole ``keywords``/``mailboxIds`` value, or None (and noted) if invalid."""
    if not isinstance(value, dict) or not all(v is True for v in value.values()):
        parsed.invalid.append(name)
        return None
    if name == "mailboxIds":
        return {str(key) for key in value}
    keywords = {parse_keyword(key) for key in value}
    if None in keywords:
        parsed.invalid.append(name)
        return None
    return {k for k in keywords if k is not None}


def _read_patch(patch: object, before: EmailState, created: Mapping[str, str]) -> _Parsed:
    """Apply a PatchObject to a copy of ``before``; raises invalidPatch, notes the rest.

    Mailbox ids may be ``#creationId`` references to mailboxes created earlier in
    the request (``created``: creation id → id).
    """
    if not isinstance(patch, dict):
        raise _invalid_patch("An update must be a PatchObject (a JSON object).")
    parsed = _Parsed(EmailState(set(before.keywords), set(before.mailboxes)))
    whole = {path for path in patch if "/" not in path}
    for path, value in patch.items():
        head, slash, rest = path.partition("/")
        head = _unescape(head)
        if not head:
            raise _invalid_patch(f"{path!r} is not a path to a property.")
        if slash and head in whole:
            raise _invalid_patch(f"{path} patches {head}, which the same patch replaces.")
        if head not in MUTABLE:
            # a change inside an immutable value can never keep it equal
            if not _known_property(head) or slash:
                parsed.invalid.append(head)
            else:
                parsed.immutable[head] = value
            continue
        if not slash:
            keys = _whole_map(value, head, parsed)
            if keys is not None and head == "keywords":
                parsed.state.keywords = keys
            elif keys is not None:
                parsed.state.mailboxes = {_resolve(key, created) for key in keys}
            continue
        if "/" in rest or not rest:
            raise _invalid_patch(f"{path} does not point at one {head} entry.")
        item = _unescape(rest)
        if head == "keywords":
            keyword = parse_keyword(item)
            if keyword is None or value not in (True, None):
                parsed.invalid.append(path)
                continue
            target, item = parsed.state.keywords, keyword
        else:
            if value not in (True, None):
                parsed.invalid.append(path)
                continue
            target, item = parsed.state.mailboxes, _resolve(item, created)
        if value is True:
            target.add(item)
        else:
            target.discard(item)
    return parsed


class EmailUpdater:
    """Applies Email/set updates (and destroys) of one user through the operations service."""

    def __init__(
        self, session: Session, user_id: int, created_ids: Mapping[str, str] | None = None
    ) -> None:
        self.session = session
        self.user_id = user_id
        self.created_ids = created_ids or {}
        self.ops = Operations(session, user_id)
        # Create missing system labels now, outside the per-email savepoints.
        self.roles = {role: self.ops.role(role) for role in JMAP_ROLE}
        self.own_labels = set(session.scalars(select(Label.id).where(Label.user_id == user_id)))
        self.reader = EmailReader(session, user_id)

    def current(self, message_ids: list[int]) -> dict[int, EmailState]:
        """The keywords and mailbox ids of the user's messages among these."""
        rows = self.session.execute(
            select(Message.id, Message.seen_at).where(
                Message.id.in_(message_ids), owned_by(Message.user_id, self.user_id)
            )
        ).all()
        found = [row.id for row in rows]
        labels = self.reader.labels(found)
        stored = stored_keywords(self.session, found)
        return {
            row.id: EmailState(
                set(
                    self.reader.keywords(
                        row.seen_at is not None, labels.get(row.id, set()), stored.get(row.id, ())
                    )
                ),
                {ids.mailbox_id(lid) for lid in labels.get(row.id, set())},
            )
            for row in rows
        }

    def update(self, message_id: int, before: EmailState, patch: object) -> dict[str, Any] | None:
        """Apply one patch; the properties that ended other than asked, or None."""
        parsed = _read_patch(patch, before, self.created_ids)
        self._check_immutable(message_id, parsed)
        after = parsed.state
        asked = EmailState(set(after.keywords), set(after.mailboxes))
        self._follow_flagged(before, after)
        now = self._label_ids(after, parsed)
        if parsed.invalid:
            names = sorted(set(parsed.invalid))
            raise PatchError(
                set_error(
                    "invalidProperties",
                    f"Invalid or immutable properties: {', '.join(names)}. Only keywords "
                    "(valid keywords mapped to true) and mailboxIds (existing mailboxes, at "
                    "least one) can be changed.",
                    names,
                )
            )
        was = {lid for lid in (ids.parse_mailbox(m) for m in before.mailboxes) if lid is not None}
        if self.roles["snoozed"] in now - was:
            raise PatchError(
                set_error(
                    "invalidProperties",
                    "Snoozing needs a wake time, which JMAP cannot give; snooze from mailroom.",
                    ["mailboxIds"],
                )
            )
        if (SEEN in after.keywords) != (SEEN in before.keywords):
            self.ops.mark_read([message_id], SEEN in after.keywords)
        stored_before = before.keywords - {SEEN, FLAGGED}
        stored_after = after.keywords - {SEEN, FLAGGED}
        self.ops.set_keywords(
            [message_id], stored_after - stored_before, stored_before - stored_after
        )
        # Which action the new mailboxes mean (trash, archive, restore...) is the service's call.
        self.ops.set_labels([message_id], was, now)
        ended = self.current([message_id])[message_id]
        differs: dict[str, Any] = {}
        if ended.keywords != asked.keywords:
            differs["keywords"] = {k: True for k in sorted(ended.keywords)}
        if ended.mailboxes != asked.mailboxes:
            differs["mailboxIds"] = {m: True for m in sorted(ended.mailboxes)}
        return differs or None

    def _check_immutable(self, message_id: int, parsed: _Parsed) -> None:
        """Note every immutable property the patch gives a value other than the current one."""
        if not parsed.immutable:
            return
        names = list(parsed.immutable)
        try:
            current = self.reader.read([message_id], names).get(message_id, {})
        except MethodError:  # a property the reader refuses (a bad header form) is not settable
            parsed.invalid.extend(names)
            return
        parsed.invalid.extend(
            name for name, value in parsed.immutable.items() if current.get(name) != value
        )

    def _follow_flagged(self, before: EmailState, after: EmailState) -> None:
        """Keep ``$flagged`` and the Starred mailbox one thing; the keyword wins a conflict."""
        starred = ids.mailbox_id(self.roles["starred"])
        if (FLAGGED in after.keywords) != (FLAGGED in before.keywords):
            (after.mailboxes.add if FLAGGED in after.keywords else after.mailboxes.discard)(starred)
        elif (starred in after.mailboxes) != (starred in before.mailboxes):
            (after.keywords.add if starred in after.mailboxes else after.keywords.discard)(FLAGGED)

    def _label_ids(self, after: EmailState, parsed: _Parsed) -> set[int]:
        """The label ids of the new mailboxes; notes an empty or unknown set as invalid."""
        label_ids = {ids.parse_mailbox(m) for m in after.mailboxes}
        if not after.mailboxes or None in label_ids or not label_ids <= self.own_labels:
            parsed.invalid.append("mailboxIds")
        return {lid for lid in label_ids if lid is not None}
