"""``Mailbox/set`` (RFC 8621 §2.5, RFC 8620 §5.3): user labels made, changed and destroyed.

Every create, update and destroy goes through
:class:`~mailroom.labels.lifecycle.LabelLifecycle` in a savepoint of its
own, so one refused object leaves the others: the label, its change-log rows
and the pending folder changes for the providers commit together.

* ``create``: ``name`` (required), ``parentId`` (an id or a ``#creationId``
  of this request, also of a create later in the same map), ``sortOrder``,
  ``isSubscribed``; ``role`` only as null (mailroom's system mailboxes are
  fixed). Server-set properties (``id``, counts, ``myRights``) are
  ``invalidProperties``.
* ``update``: the same properties; a server-set property or ``role`` is
  accepted only with its current value. Moving under a descendant is
  ``invalidProperties`` (no cycles); renaming or moving a system mailbox is
  ``forbidden``; an id also being destroyed is ``willDestroy``.
* ``destroy``: ``mailboxHasChild`` while a child is left (children destroyed
  in the same call go first), ``mailboxHasEmail`` unless
  ``onDestroyRemoveEmails``, ``forbidden`` for a system mailbox.

Label rules (names unique among siblings, characters, system names) are the
lifecycle's; each refusal names its property.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from mailroom.jmap import ids
from mailroom.jmap.changes import current_states
from mailroom.jmap.dispatcher import Context
from mailroom.jmap.errors import Refused, set_error
from mailroom.jmap.methods.common import boolean, is_int
from mailroom.jmap.methods.mailbox import (
    PROPERTIES,
    SERVER_SET,
    mailbox_counts,
    mailbox_object,
)
from mailroom.jmap.methods.object_state import check_if_in_state
from mailroom.jmap.methods.set_arguments import set_arguments, set_response
from mailroom.labels.lifecycle import KEEP, LabelLifecycle, LabelRefused
from mailroom.store.models import Label

T = TypeVar("T")
# RFC 8621 §2: 0 <= sortOrder < 2^31 (labels.sort_order is a 32-bit column too).
MAX_SORT_ORDER = 2**31 - 1
SETTABLE = frozenset({"name", "parentId", "role", "sortOrder", "isSubscribed"})
SET_ERROR_TYPES = {
    "invalid": "invalidProperties",
    "forbidden": "forbidden",
    "not_found": "notFound",
    "has_children": "mailboxHasChild",
    "has_messages": "mailboxHasEmail",
}


def _invalid(description: str, prop: str) -> Refused:
    return Refused(set_error("invalidProperties", description, [prop]))


def _from_lifecycle(exc: LabelRefused) -> dict[str, Any]:
    type_ = SET_ERROR_TYPES[exc.reason]
    properties = [exc.field] if type_ == "invalidProperties" and exc.field else None
    return set_error(type_, exc.message, properties)


class MailboxWriter:
    """One Mailbox/set call: resolves ids and creation ids, applies each object."""

    def __init__(self, context: Context, session: Session, user_id: int) -> None:
        self.context = context
        self.session = session
        self.lifecycle = LabelLifecycle(session, user_id)
        self.created: dict[str, str] = {}  # creation id -> mailbox id, for this call

    # -- ids -------------------------------------------------------------------

    def reference(self, value: str) -> str | None:
        """A mailbox id, a ``#creationId`` resolved, or None for an unknown creation id."""
        if not value.startswith("#"):
            return value
        key = value[1:]
        return self.created.get(key) or self.context.created_ids.get(key)

    def label_id(self, value: str) -> int | None:
        """The label id an id (or a creation id reference) names, or None."""
        resolved = self.reference(value)
        return ids.parse_mailbox(resolved) if resolved is not None else None

    def parent(self, value: object) -> int | None:
        """The ``parentId`` property as a label id (None: the top level)."""
        if value is None:
            return None
        if not isinstance(value, str):
            raise _invalid("parentId must be a mailbox id or null.", "parentId")
        label_id = self.label_id(value)
        if label_id is None:
            raise _invalid(f"There is no mailbox {value}.", "parentId")
        return label_id

    # -- objects -----------------------------------------------------------------

    def create(self, values: object) -> tuple[Label, dict[str, Any]]:
        """Create one mailbox; the label and the properties the client did not give."""
        if not isinstance(values, dict):
            raise Refused(set_error("invalidProperties", "A mailbox must be an object."))
        _known(values)
        for prop in sorted(SERVER_SET & set(values)):
            raise _invalid(f"{prop} is set by the server.", prop)
        if "name" not in values:
            raise _invalid("A mailbox needs a name.", "name")
        if values.get("role") is not None:
            raise _invalid(
                "mailroom's system mailboxes are fixed; a new mailbox has no role.", "role"
            )
        parent = self.parent(values.get("parentId"))
        sort_order = _sort_order(values.get("sortOrder", 0))
        subscribed = _subscribed(values.get("isSubscribed", True))
        label = self.lifecycle.create(
            values["name"], parent, sort_order=sort_order, is_subscribed=subscribed
        )
        created = mailbox_object(label, None, list(PROPERTIES))
        shown = {key: value for key, value in created.items() if key not in values}
        if label.name != values["name"]:
            shown["name"] = label.name  # normalized (NFC)
        return label, shown

    def update(self, label_id: int, patch: object) -> dict[str, Any] | None:
        """Apply one PatchObject; the properties the server set otherwise than asked, or None."""
        if not isinstance(patch, dict):  # set_arguments refuses it first; kept for callers
            raise Refused(set_error("invalidPatch", "An update must be a PatchObject."))
        _known(patch)
        label = self.lifecycle.label(label_id)
        current = mailbox_object(label, None, list(PROPERTIES))
        if SERVER_SET & set(patch):
            counts = mailbox_counts(self.session, label.user_id).get(label.id)
            current = mailbox_object(label, counts, list(PROPERTIES))
            for prop in sorted(SERVER_SET & set(patch)):
                if patch[prop] != current[prop]:
                    raise _invalid(f"{prop} is set by the server.", prop)
        if "role" in patch and patch["role"] != current["role"]:
            if label.role is not None:
                raise Refused(set_error("forbidden", "A system mailbox keeps its role."))
            raise _invalid("mailroom gives roles only to its system mailboxes.", "role")
        changes: dict[str, Any] = {}
        if "name" in patch:
            changes["name"] = patch["name"]
        if "parentId" in patch:
            changes["parent_id"] = self.parent(patch["parentId"])
        if "sortOrder" in patch:
            changes["sort_order"] = _sort_order(patch["sortOrder"])
        if "isSubscribed" in patch:
            changes["is_subscribed"] = _subscribed(patch["isSubscribed"])
        label = self.lifecycle.update(
            label.id,
            name=changes.get("name", KEEP),
            parent_id=changes.get("parent_id", KEEP),
            sort_order=changes.get("sort_order", KEEP),
            is_subscribed=changes.get("is_subscribed", KEEP),
        )
        if "name" in patch and label.name != patch["name"]:
            return {"name": label.name}
        return None


def _attempt(session: Session, change: Callable[[], T]) -> tuple[T | None, dict[str, Any]]:
    """Run one object's change in a savepoint: its result, or None and the SetError."""
    try:
        with session.begin_nested():
            return change(), {}
    except Refused as exc:
        return None, exc.error
    except LabelRefused as exc:
        return None, _from_lifecycle(exc)
    except IntegrityError:  # a concurrent writer took the name first
        return None, set_error(
            "invalidProperties", "A mailbox of that name was just made there.", ["name"]
        )


def _wrapped(
    update: Callable[[int, object], dict[str, Any] | None], label_id: int, patch: object
) -> tuple[dict[str, Any] | None]:
    """An update's result in a tuple, so that None (nothing to report) is a success."""
    return (update(label_id, patch),)


def _known(values: dict[str, Any]) -> None:
    for prop in sorted(values):
        head = prop.partition("/")[0]
        if head != prop:  # a pointer into a property: none of them is an object to patch
            raise _invalid(f"{head} cannot be patched in parts.", head)
        if prop not in SETTABLE and prop not in SERVER_SET:
            raise _invalid(f"Mailboxes have no property {prop!r}.", prop)


def _sort_order(value: object) -> int:
    if not is_int(value, minimum=0):
        raise _invalid("sortOrder must be an unsigned integer.", "sortOrder")
    assert isinstance(value, int)
    if value > MAX_SORT_ORDER:
        raise _invalid(f"sortOrder is at most {MAX_SORT_ORDER}.", "sortOrder")
    return value


def _subscribed(value: object) -> bool:
    if not isinstance(value, bool):
        raise _invalid("isSubscribed must be true or false.", "isSubscribed")
    return value


def _creation_order(create: dict[str, Any]) -> list[str]:
    """Creation ids so that a parent created in the same call comes before its children."""
    order: list[str] = []
    placed: set[str] = set()

    def place(key: str, path: tuple[str, ...]) -> None:
        if key in placed or key in path:
            return
        values = create[key]
        parent = values.get("parentId") if isinstance(values, dict) else None
        if isinstance(parent, str) and parent.startswith("#") and parent[1:] in create:
            place(parent[1:], (*path, key))
        placed.add(key)
        order.append(key)

    for key in create:
        place(key, ())
    return order


def mailbox_set(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Mailbox/set (module docstring)."""
    user_id = context.check_account(args)
    old_state = current_states(session, user_id).mailbox
    check_if_in_state(args.get("ifInState"), old_state, "Mailbox")
    asked = set_arguments(context, args)
    create, update, destroy = asked.create, asked.update, asked.destroy
    remove_emails = boolean(args, "onDestroyRemoveEmails")
    writer = MailboxWriter(context, session, user_id)

    created: dict[str, Any] = {}
    not_created: dict[str, Any] = {}
    for key in _creation_order(create):
        made, error = _attempt(session, partial(writer.create, create[key]))
        if made is None:
            not_created[key] = error
            continue
        label, shown = made
        writer.created[key] = context.created_ids[key] = ids.mailbox_id(label.id)
        created[key] = shown

    doomed = {value: writer.label_id(value) for value in destroy}
    updated: dict[str, Any] = {}
    not_updated: dict[str, Any] = {}
    for value, patch in update.items():
        label_id = writer.label_id(value)
        if label_id is None:
            not_updated[value] = set_error("notFound", f"There is no mailbox {value}.")
            continue
        if label_id in doomed.values():
            not_updated[value] = set_error("willDestroy", "The mailbox is destroyed in this call.")
            continue
        done, error = _attempt(session, partial(_wrapped, writer.update, label_id, patch))
        if done is None:
            not_updated[value] = error
        else:
            updated[ids.mailbox_id(label_id)] = done[0]  # a #creationId answers as its id

    destroyed: list[str] = []
    not_destroyed: dict[str, Any] = {}
    paths = _paths(session, user_id, doomed)
    for value in sorted(doomed, key=lambda v: -paths.get(doomed[v] or 0, 0)):
        label_id = doomed[value]
        if label_id is None or label_id not in paths:
            not_destroyed[value] = set_error("notFound", f"There is no mailbox {value}.")
            continue
        gone, error = _attempt(
            session, partial(writer.lifecycle.destroy, label_id, remove_messages=remove_emails)
        )
        if gone is None:
            not_destroyed[value] = error
        else:
            destroyed.append(value)
    gone_ids = [ids.mailbox_id(doomed[v] or 0) for v in destroy if v in destroyed]
    session.flush()
    new_state = current_states(session, user_id).mailbox
    return set_response(
        context,
        old_state,
        new_state,
        created=created,
        updated=updated,
        destroyed=gone_ids,
        not_created=not_created,
        not_updated=not_updated,
        not_destroyed=not_destroyed,
    )


def _paths(session: Session, user_id: int, doomed: dict[str, int | None]) -> dict[int, int]:
    """Depth (path parts) of each of the user's labels to destroy: deepest go first."""
    wanted = {label_id for label_id in doomed.values() if label_id is not None}
    if not wanted:
        return {}
    labels = session.execute(
        select(Label.id, Label.path).where(Label.id.in_(wanted), Label.user_id == user_id)
    )
    return {label_id: path.count("/") + 1 for label_id, path in labels}
