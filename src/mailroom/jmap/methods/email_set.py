"""``Email/set`` (RFC 8621 §4.6): keywords and mailboxIds updates, destroy.

``Email/set`` changes only ``keywords`` and ``mailboxIds`` and does it
through the operations service (``labels.operations``): the database, the
change log and the pending changes move in one transaction per call.
``$seen`` is read state, ``$flagged`` the Starred label (also visible as
the mailbox with role ``flagged``); a mailbox change goes to
``Operations.set_labels`` with the old and new mailboxes, which names the
action (trash, spam, restore, archive, ...) that providers carry out.
``destroy`` is delete forever. ``create`` is refused (``forbidden``) until
drafts and imports exist.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.jmap import ids
from mailroom.jmap.changes import current_states
from mailroom.jmap.dispatcher import Context
from mailroom.jmap.errors import MethodError, invalid_arguments, set_error
from mailroom.jmap.mapping import JMAP_ROLE, SETTABLE_KEYWORDS
from mailroom.jmap.methods.email_reader import EmailReader
from mailroom.jmap.scope import owned_by
from mailroom.labels.operations import Operations
from mailroom.store.models import Label, Message


class _PatchError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("description", ""))
        self.error = error


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _true_map(value: object, name: str) -> set[str]:
    if not isinstance(value, dict) or not all(v is True for v in value.values()):
        raise _PatchError(set_error("invalidProperties", f"{name} must map ids to true.", [name]))
    return {str(k) for k in value}


def _apply_patch(
    patch: object, keywords: set[str], mailboxes: set[str]
) -> tuple[set[str], set[str]]:
    """The keywords and mailbox ids an Email has after a PatchObject."""
    if not isinstance(patch, dict):
        raise _PatchError(set_error("invalidPatch", "An update must be a PatchObject."))
    new_keywords, new_mailboxes = set(keywords), set(mailboxes)
    whole = {key for key in patch if key in ("keywords", "mailboxIds")}
    for path, value in patch.items():
        head, _, rest = path.partition("/")
        if head not in ("keywords", "mailboxIds"):
            raise _PatchError(
                set_error(
                    "invalidProperties",
                    f"{head} cannot be changed; only keywords and mailboxIds can.",
                    [head],
                )
            )
        if not rest:
            if head == "keywords":
                new_keywords = {k.lower() for k in _true_map(value, head)}
            else:
                new_mailboxes = _true_map(value, head)
            continue
        if head in whole:
            raise _PatchError(
                set_error("invalidPatch", f"{path} patches {head}, which is also replaced.")
            )
        if "/" in rest or value not in (True, None):
            raise _PatchError(set_error("invalidPatch", f"{path} must be set to true or null."))
        item = _unescape(rest)
        target = new_keywords if head == "keywords" else new_mailboxes
        item = item.lower() if head == "keywords" else item
        if value is True:
            target.add(item)
        else:
            target.discard(item)
    return new_keywords, new_mailboxes


class EmailUpdater:
    """Applies Email/set updates and destroys through the operations service."""

    def __init__(self, session: Session, user_id: int) -> None:
        self.session = session
        self.user_id = user_id
        self.ops = Operations(session, user_id)
        # Create missing system labels now, outside the per-email savepoints.
        self.roles = {role: self.ops.role(role) for role in JMAP_ROLE}
        self.own_labels = set(session.scalars(select(Label.id).where(Label.user_id == user_id)))
        self.reader = EmailReader(session, user_id)

    def current(self, message_ids: list[int]) -> dict[int, tuple[set[str], set[str]]]:
        """(keywords, mailbox ids) of the user's messages among these."""
        rows = self.session.execute(
            select(Message.id, Message.seen_at).where(
                Message.id.in_(message_ids), owned_by(Message.user_id, self.user_id)
            )
        ).all()
        labels = self.reader.labels([row.id for row in rows])
        return {
            row.id: (
                set(self.reader.keywords(row.seen_at is not None, labels.get(row.id, set()))),
                {ids.mailbox_id(lid) for lid in labels.get(row.id, set())},
            )
            for row in rows
        }

    def update(
        self, message_id: int, before: tuple[set[str], set[str]], patch: object
    ) -> dict[str, Any] | None:
        """Apply one patch; the properties that ended other than asked, or None."""
        keywords, mailboxes = _apply_patch(patch, before[0], before[1])
        starred = ids.mailbox_id(self.roles["starred"])
        if ("$flagged" in keywords) != ("$flagged" in before[0]):
            # the keyword wins over the Starred mailbox when a patch names both
            (mailboxes.add if "$flagged" in keywords else mailboxes.discard)(starred)
        elif (starred in mailboxes) != (starred in before[1]):
            (keywords.add if starred in mailboxes else keywords.discard)("$flagged")
        changed_keywords = keywords ^ before[0]
        refused = sorted(changed_keywords - SETTABLE_KEYWORDS)
        if refused:
            raise _PatchError(
                set_error(
                    "invalidProperties",
                    f"The keyword {refused[0]} cannot be set; mailroom keeps only "
                    "$seen and $flagged.",
                    ["keywords"],
                )
            )
        label_ids = {ids.parse_mailbox(m) for m in mailboxes}
        if not mailboxes or None in label_ids or not label_ids <= self.own_labels:
            raise _PatchError(
                set_error(
                    "invalidProperties",
                    "mailboxIds must name at least one existing mailbox of this account.",
                    ["mailboxIds"],
                )
            )
        now = {lid for lid in label_ids if lid is not None}
        was = {lid for lid in (ids.parse_mailbox(m) for m in before[1]) if lid is not None}
        if self.roles["snoozed"] in now - was:
            raise _PatchError(
                set_error(
                    "invalidProperties",
                    "Snoozing needs a wake time, which JMAP cannot give; snooze from mailroom.",
                    ["mailboxIds"],
                )
            )
        if "$seen" in changed_keywords:
            self.ops.mark_read([message_id], "$seen" in keywords)
        # Which action the new mailboxes mean (trash, archive, restore...) is the service's call.
        self.ops.set_labels([message_id], was, now)
        after = self.current([message_id])[message_id]
        differs: dict[str, Any] = {}
        if after[0] != keywords:
            differs["keywords"] = {k: True for k in sorted(after[0])}
        if after[1] != mailboxes:
            differs["mailboxIds"] = {m: True for m in sorted(after[1])}
        return differs or None


def email_set(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Email/set: keywords and mailboxIds updates, destroy = delete forever."""
    user_id = context.check_account(args)
    old_state = current_states(session, user_id).email
    if_in_state = args.get("ifInState")
    if if_in_state is not None and if_in_state != str(old_state):
        raise MethodError("stateMismatch", "The Email state is not ifInState.")
    create = args.get("create") or {}
    update = args.get("update") or {}
    destroy = args.get("destroy") or []
    if not isinstance(create, dict) or not isinstance(update, dict):
        raise invalid_arguments("create and update must be objects.")
    if not isinstance(destroy, list) or not all(isinstance(v, str) for v in destroy):
        raise invalid_arguments("destroy must be a list of ids.")
    if len(create) + len(update) + len(destroy) > context.limits.max_objects_in_set:
        raise MethodError(
            "requestTooLarge",
            f"At most maxObjectsInSet ({context.limits.max_objects_in_set}) objects per call.",
        )
    not_created = {
        key: set_error(
            "forbidden",
            "mailroom cannot create emails yet (drafts and imports come with sending).",
        )
        for key in create
    }
    updater = EmailUpdater(session, user_id)
    updated: dict[str, Any] = {}
    not_updated: dict[str, Any] = {}
    parsed = {value: ids.parse_email(value) for value in update}
    known = updater.current([m for m in parsed.values() if m is not None])
    for value, patch in update.items():
        message_id = parsed[value]
        if message_id is None or message_id not in known:
            not_updated[value] = set_error("notFound", f"There is no email {value}.")
            continue
        try:
            with session.begin_nested():
                updated[value] = updater.update(message_id, known[message_id], patch)
        except _PatchError as exc:
            not_updated[value] = exc.error
    destroyed: list[str] = []
    not_destroyed: dict[str, Any] = {}
    doomed = {value: ids.parse_email(value) for value in dict.fromkeys(destroy)}
    owned = set(
        session.scalars(
            select(Message.id).where(
                Message.id.in_([m for m in doomed.values() if m is not None]),
                owned_by(Message.user_id, user_id),
            )
        )
    )
    for value, message_id in doomed.items():
        if message_id in owned:
            destroyed.append(value)
        else:
            not_destroyed[value] = set_error("notFound", f"There is no email {value}.")
    if owned:
        updater.ops.delete_forever(sorted(owned))
    session.flush()
    new_state = current_states(session, user_id).email
    return {
        "accountId": context.account_id,
        "oldState": str(old_state),
        "newState": str(new_state),
        "created": None,
        "updated": updated or None,
        "destroyed": destroyed or None,
        "notCreated": not_created or None,
        "notUpdated": not_updated or None,
        "notDestroyed": not_destroyed or None,
    }
