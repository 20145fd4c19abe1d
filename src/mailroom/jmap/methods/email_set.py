"""``Email/set`` (RFC 8621 §4.6): the method — state check, updates, destroys, the response.

Updates are :mod:`~mailroom.jmap.methods.email_update`'s (keywords and
mailboxIds, through the operations service: database, change log and pending
changes in one transaction per call; each email in its own savepoint, so one
refused patch leaves the others). ``destroy`` is delete forever. ``create`` is
:mod:`~mailroom.jmap.methods.email_create`'s (drafts built from the Email
object, stored through the ingest pipeline); it is the first step of the
method, so created ids could be updated or destroyed later in the same call.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.jmap import ids
from mailroom.jmap.changes import current_states
from mailroom.jmap.dispatcher import Context
from mailroom.jmap.errors import set_error
from mailroom.jmap.methods.email_create import create_emails
from mailroom.jmap.methods.email_update import EmailUpdater, PatchError
from mailroom.jmap.methods.object_state import check_if_in_state
from mailroom.jmap.methods.set_arguments import set_arguments, set_response
from mailroom.jmap.scope import owned_by
from mailroom.store.models import Message


def _email_ids(context: Context, values: Iterable[str]) -> dict[str, int | None]:
    """Message ids of Email ids, ``#creationId`` references included (RFC 8620 §5.3)."""
    return {
        value: ids.parse_email(
            context.created_ids.get(value[1:], "") if value.startswith("#") else value
        )
        for value in values
    }


def _update(
    updater: EmailUpdater, session: Session, parsed: dict[str, int | None], update: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(updated, notUpdated) of the ``update`` argument, one savepoint per email."""
    updated: dict[str, Any] = {}
    not_updated: dict[str, Any] = {}
    known = updater.current([m for m in parsed.values() if m is not None])
    for value, patch in update.items():
        message_id = parsed[value]
        if message_id is None or message_id not in known:
            not_updated[value] = set_error("notFound", f"There is no email {value}.")
            continue
        try:
            with session.begin_nested():
                updated[ids.email_id(message_id)] = updater.update(
                    message_id, known[message_id], patch
                )
        except PatchError as exc:
            not_updated[value] = exc.error
    return updated, not_updated


def _destroy(
    updater: EmailUpdater, session: Session, user_id: int, doomed: dict[str, int | None]
) -> tuple[list[str], dict[str, Any]]:
    """(destroyed, notDestroyed) of the ``destroy`` argument."""
    destroyed: list[str] = []
    not_destroyed: dict[str, Any] = {}
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
            if ids.email_id(message_id) not in destroyed:  # also named by a creation id
                destroyed.append(ids.email_id(message_id))
        else:
            not_destroyed[value] = set_error("notFound", f"There is no email {value}.")
    if owned:
        updater.ops.delete_forever(sorted(owned))
    return destroyed, not_destroyed


def email_set(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Email/set: create, keywords and mailboxIds updates, destroy (module docstring)."""
    user_id = context.check_account(args)
    old_state = current_states(session, user_id).email
    check_if_in_state(args.get("ifInState"), old_state, "Email")
    asked = set_arguments(context, args, values_are_objects=False)
    create, update, destroy = asked.create, asked.update, asked.destroy
    created, not_created = create_emails(context, session, create)
    updater = EmailUpdater(session, user_id, context.created_ids)
    updated, not_updated = _update(updater, session, _email_ids(context, update), update)
    doomed = _email_ids(context, dict.fromkeys(destroy))
    destroyed, not_destroyed = _destroy(updater, session, user_id, doomed)
    session.flush()
    new_state = current_states(session, user_id).email
    return set_response(
        context,
        old_state,
        new_state,
        created=created,
        updated=updated,
        destroyed=destroyed,
        not_created=not_created,
        not_updated=not_updated,
        not_destroyed=not_destroyed,
    )
