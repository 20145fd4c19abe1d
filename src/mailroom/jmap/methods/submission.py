"""``EmailSubmission/get`` and ``/set`` (RFC 8621 §7): sending is not there yet.

Until the outbound lanes exist, every submission is refused per object
with ``forbidden`` and a sentence saying so, and there are no submissions
to get. The capability is still advertised so that clients find
``Identity/get``, which lives under it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from mailroom.jmap.dispatcher import Context
from mailroom.jmap.errors import set_error
from mailroom.jmap.methods.common import requested_ids
from mailroom.jmap.methods.object_state import check_if_in_state
from mailroom.jmap.methods.set_arguments import set_arguments, set_response

NOT_YET = "mailroom cannot send mail yet; sending arrives with the outbound work."


def submission_get(context: Context, _session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """EmailSubmission/get: there are none."""
    context.check_account(args)
    wanted = requested_ids(context, args) or []
    return {"accountId": context.account_id, "state": "0", "list": [], "notFound": wanted}


def submission_set(context: Context, _session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """EmailSubmission/set: every object refused with ``forbidden``."""
    context.check_account(args)
    check_if_in_state(args.get("ifInState"), 0, "EmailSubmission")
    asked = set_arguments(context, args, values_are_objects=False)
    create, update, destroy = asked.create, asked.update, asked.destroy
    missing = set_error("notFound", "There is no such submission.")
    return set_response(
        context,
        "0",
        "0",
        not_created={key: set_error("forbidden", NOT_YET) for key in create},
        not_updated={key: missing for key in update},
        not_destroyed={key: missing for key in destroy},
    )
