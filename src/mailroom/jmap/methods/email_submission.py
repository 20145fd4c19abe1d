"""EmailSubmission/get, /changes and /set (RFC 8621 §7) over the outgoing lanes.

A submission is a ``submissions`` row (:mod:`mailroom.jmap.submission_objects`
maps it); the state is the ``EmailSubmission`` change log, which
``queue_message`` and the lanes write as a submission moves along.

``/set``:

* ``create`` — :mod:`mailroom.jmap.submission_create` checks and queues it.
* ``update`` — only ``undoStatus: "canceled"``, while the submission is
  ``pending`` (``cancel_submission``); a lane that took it already makes it
  ``cannotUnsend``. Other properties may be given with their current value.
* ``destroy`` — forgets a submission that is ``sent`` or ``canceled`` (RFC
  8621: it never affects delivery; the row stays for the operator,
  :func:`~mailroom.jmap.submission_objects.forget`). One still pending, being
  sent or failed (in the operator's failed list) is ``forbidden``: cancel it
  first, or wait.
* ``onSuccessUpdateEmail`` / ``onSuccessDestroyEmail`` — for each submission
  (its id, or ``#creationId`` for one created here) whose create, update or
  destroy succeeded, the patch or destroy of its email, made by one implicit
  ``Email/set`` in the same transaction, whose response follows this one with
  the same call id.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from mailroom.jmap import ids
from mailroom.jmap.changes import parse_state
from mailroom.jmap.dispatcher import Context, Handler, Method
from mailroom.jmap.errors import MethodError, Refused, invalid_arguments, set_error
from mailroom.jmap.methods.arguments import CHANGES, GET, QUERY, QUERY_CHANGES, SET
from mailroom.jmap.methods.common import (
    SUBMISSION,
    changes_response,
    get_response,
    max_changes,
    requested_ids,
    requested_properties,
)
from mailroom.jmap.methods.email_set import email_set
from mailroom.jmap.methods.email_submission_query import submission_query, submission_query_changes
from mailroom.jmap.methods.object_state import check_if_in_state, floor_of, state_of
from mailroom.jmap.methods.set_arguments import set_arguments, set_response
from mailroom.jmap.submission_create import SubmissionCall, SubmissionCreator
from mailroom.jmap.submission_objects import (
    PROPERTIES,
    forget,
    submission_object,
    submission_rows,
    undo_status,
)
from mailroom.jmap.submission_policy import SubmissionPolicy
from mailroom.outbound.queueing import CHANGE_TYPE, cancel_submission, record_submission_change
from mailroom.store import changelog
from mailroom.store.models import Submission

__all__ = ["METHODS", "SubmissionMethods", "methods"]

FORGETTABLE = ("sent", "canceled")


def _submission_get(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """EmailSubmission/get."""
    user_id = context.check_account(args)
    properties = requested_properties(args, PROPERTIES, PROPERTIES)
    wanted = requested_ids(context, args)
    state = state_of(session, user_id, CHANGE_TYPE)
    numbers = None if wanted is None else [n for n in map(ids.parse_submission, wanted) if n]
    found = {
        ids.submission_id(row.id): submission_object(row, thread, bounces)
        for row, thread, bounces in submission_rows(session, user_id, numbers)
    }
    order = list(found) if wanted is None else [v for v in wanted if v in found]
    chosen = [{k: found[v][k] for k in properties} for v in order]
    return get_response(context, state, chosen, [v for v in wanted or [] if v not in found])


def _submission_changes(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """EmailSubmission/changes from the change log."""
    user_id = context.check_account(args)
    limit = max_changes(args)
    current = state_of(session, user_id, CHANGE_TYPE)
    since = parse_state(args.get("sinceState"), floor_of(session, user_id, CHANGE_TYPE), current)
    folded = changelog.changes_since(session, user_id, CHANGE_TYPE, since, limit)
    return changes_response(context, since, folded, ids.submission_id)


def _on_success(args: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The onSuccessUpdateEmail and onSuccessDestroyEmail arguments, checked."""
    update = args.get("onSuccessUpdateEmail") or {}
    destroy = args.get("onSuccessDestroyEmail") or []
    if not isinstance(update, dict) or not all(isinstance(v, dict) for v in update.values()):
        raise invalid_arguments("onSuccessUpdateEmail must map submission ids to Email patches.")
    if not isinstance(destroy, list) or not all(isinstance(v, str) for v in destroy):
        raise invalid_arguments("onSuccessDestroyEmail must be a list of submission ids.")
    return dict(update), list(destroy)


class _SubmissionSet(SubmissionCall):
    """One EmailSubmission/set call: its creates, updates, destroys and their emails."""

    def __init__(
        self, context: Context, session: Session, user_id: int, policy: SubmissionPolicy
    ) -> None:
        super().__init__(context, session, user_id, policy)
        # Each submission that succeeded, by the name the client used for it -> its email.
        self.emails: dict[str, int | None] = {}

    def _row(self, value: str) -> Submission:
        target = self.context.created_ids.get(value[1:], value) if value.startswith("#") else value
        number = ids.parse_submission(target)
        found = submission_rows(self.session, self.user_id, [number]) if number else []
        if not found:
            raise Refused(set_error("notFound", f"There is no submission {value}."))
        return found[0][0]

    def create(self, creations: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        creator = SubmissionCreator(self.context, self.session, self.user_id, self.policy)
        created: dict[str, Any] = {}
        refused: dict[str, Any] = {}
        for key, values in creations.items():
            try:
                with self.session.begin_nested():
                    created[key] = creator.create(values)
            except Refused as refusal:
                refused[key] = refusal.error
                continue
            self.context.created_ids[key] = created[key]["id"]
            self.emails[f"#{key}"] = self._row(created[key]["id"]).email_id
        return created, refused

    def _update_one(self, value: str, patch: object) -> None:
        row = self._row(value)
        if not isinstance(patch, dict):
            raise Refused(set_error("invalidPatch", "A patch is an object."))
        now = submission_object(*submission_rows(self.session, self.user_id, [row.id])[0])
        wrong = sorted(
            name
            for name, given in patch.items()
            if name != "undoStatus" and (name not in now or given != now[name])
        )
        if wrong:
            raise Refused(set_error("invalidProperties", "Only undoStatus can be changed.", wrong))
        wanted = patch.get("undoStatus", now["undoStatus"])
        if wanted == now["undoStatus"]:
            return
        if wanted != "canceled":
            raise Refused(
                set_error(
                    "invalidProperties", 'undoStatus can only become "canceled".', ["undoStatus"]
                )
            )
        if not cancel_submission(self.session, row, now=self.policy.clock()):
            raise Refused(
                set_error("cannotUnsend", "It is being sent or was sent; it cannot be canceled.")
            )

    def update(self, patches: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        updated: dict[str, Any] = {}
        refused: dict[str, Any] = {}
        for value, patch in patches.items():
            try:
                with self.session.begin_nested():
                    self._update_one(value, patch)
            except Refused as refusal:
                refused[value] = refusal.error
                continue
            updated[value] = None
            self.emails[value] = self._row(value).email_id
        return updated, refused

    def destroy(self, doomed: list[str]) -> tuple[list[str], dict[str, Any]]:
        destroyed: list[str] = []
        refused: dict[str, Any] = {}
        for value in doomed:
            try:
                row = self._row(value)
                if row.state not in FORGETTABLE:
                    raise Refused(
                        set_error(
                            "forbidden",
                            f"A submission that is {undo_status(row.state)} ({row.state}) is "
                            "kept until it is sent or canceled.",
                        )
                    )
            except Refused as refusal:
                refused[value] = refusal.error
                continue
            self.emails[value] = row.email_id
            forget(row)
            record_submission_change(self.session, self.user_id, [row.id], "destroyed")
            self.session.flush()
            destroyed.append(value)
        return destroyed, refused

    def follow_up(self, update: dict[str, dict[str, Any]], destroy: list[str]) -> None:
        """The implicit Email/set of onSuccessUpdateEmail/onSuccessDestroyEmail, if any."""
        patches = {
            ids.email_id(email): patch
            for name, patch in update.items()
            if (email := self.emails.get(name)) is not None
        }
        doomed = [
            ids.email_id(email) for name in destroy if (email := self.emails.get(name)) is not None
        ]
        if not patches and not doomed:
            return
        args = {"accountId": self.context.account_id, "update": patches, "destroy": doomed}
        try:
            answer = ("Email/set", email_set(self.context, self.session, args))
        except MethodError as error:
            answer = ("error", error.arguments())
        self.context.follow_ups.append(answer)


class SubmissionMethods:
    """The EmailSubmission methods under one :class:`SubmissionPolicy`."""

    def __init__(self, policy: SubmissionPolicy) -> None:
        self.policy = policy

    def set(self, context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
        """EmailSubmission/set (module docstring)."""
        user_id = context.check_account(args)
        old_state = state_of(session, user_id, CHANGE_TYPE)
        check_if_in_state(args.get("ifInState"), old_state, CHANGE_TYPE)
        asked = set_arguments(context, args, values_are_objects=False)
        update_emails, destroy_emails = _on_success(args)
        calls = _SubmissionSet(context, session, user_id, self.policy)
        created, not_created = calls.create(asked.create)
        updated, not_updated = calls.update(asked.update)
        destroyed, not_destroyed = calls.destroy(asked.destroy)
        session.flush()
        response = set_response(
            context,
            old_state,
            state_of(session, user_id, CHANGE_TYPE),
            created=created,
            updated=updated,
            destroyed=destroyed,
            not_created=not_created,
            not_updated=not_updated,
            not_destroyed=not_destroyed,
        )
        calls.follow_up(update_emails, destroy_emails)
        return response


ON_SUCCESS = frozenset({"onSuccessUpdateEmail", "onSuccessDestroyEmail"})


def methods(policy: SubmissionPolicy) -> dict[str, Method]:
    """The EmailSubmission entries of the method table, under ``policy``."""
    bound = SubmissionMethods(policy)
    handlers: dict[str, tuple[Handler, frozenset[str]]] = {
        "EmailSubmission/get": (_submission_get, GET),
        "EmailSubmission/changes": (_submission_changes, CHANGES),
        "EmailSubmission/query": (submission_query, QUERY),
        "EmailSubmission/queryChanges": (submission_query_changes, QUERY_CHANGES),
        "EmailSubmission/set": (bound.set, SET | ON_SUCCESS),
    }
    return {
        name: Method(SUBMISSION, handler, arguments)
        for name, (handler, arguments) in handlers.items()
    }


METHODS: dict[str, Method] = methods(SubmissionPolicy())
