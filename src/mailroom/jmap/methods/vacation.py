"""VacationResponse/get and /set (RFC 8621 §8): the user's automatic reply, stored.

There is exactly one VacationResponse per account, with the id
``singleton``; it always exists (disabled and empty until set), so /set only
updates it: every create and destroy is refused with the ``singleton`` error.
The row lives in ``vacation_responses``; each update records a
``VacationResponse`` change, whose sequence is the state. Sending the reply
to incoming mail is the outbound work's, not this module's.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy.orm import Session

from mailroom.jmap.dispatcher import Context
from mailroom.jmap.errors import set_error
from mailroom.jmap.methods.common import (
    get_response,
    parse_utc_date,
    requested_ids,
    requested_properties,
    utc_date,
)
from mailroom.jmap.methods.object_state import check_if_in_state, state_of
from mailroom.jmap.methods.set_arguments import set_arguments, set_response
from mailroom.store import changelog
from mailroom.store.models import VacationResponse, utcnow

SINGLETON = "singleton"
TYPE = "VacationResponse"
PROPERTIES = ("id", "isEnabled", "fromDate", "toDate", "subject", "textBody", "htmlBody")
_DATES = {"fromDate": "from_date", "toDate": "to_date"}
_TEXTS = {"subject": "subject", "textBody": "text_body", "htmlBody": "html_body"}
# RFC 8620 §1.4: a UTCDate is a date-time whose offset is "Z".
_UTC_DATE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z")


def _as_object(row: VacationResponse | None) -> dict[str, Any]:
    if row is None:
        row = VacationResponse(is_enabled=False)
    return {
        "id": SINGLETON,
        "isEnabled": bool(row.is_enabled),
        "fromDate": utc_date(row.from_date),
        "toDate": utc_date(row.to_date),
        "subject": row.subject,
        "textBody": row.text_body,
        "htmlBody": row.html_body,
    }


def vacation_get(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """VacationResponse/get: the singleton, whatever ``ids`` names besides it is notFound."""
    user_id = context.check_account(args)
    properties = requested_properties(args, PROPERTIES, PROPERTIES)
    wanted = requested_ids(context, args)
    state = state_of(session, user_id, TYPE)
    full = _as_object(session.get(VacationResponse, user_id))
    found = [] if wanted is not None and SINGLETON not in wanted else [full]
    missing = [v for v in wanted or [] if v != SINGLETON]
    return get_response(context, state, [{k: o[k] for k in properties} for o in found], missing)


class _Invalid(Exception):
    """A patch sets properties to values they cannot have."""

    def __init__(self, properties: list[str], why: str) -> None:
        super().__init__(why)
        self.properties = properties
        self.why = why


def _apply(row: VacationResponse, patch: dict[str, Any]) -> None:
    """Check the whole patch first, then set it on ``row``."""
    bad: list[str] = []
    for name, value in patch.items():
        if name == "id":
            if value != SINGLETON:
                bad.append(name)
        elif name == "isEnabled":
            if not isinstance(value, bool):
                bad.append(name)
        elif name in _DATES:
            if value is not None and not (isinstance(value, str) and _UTC_DATE.fullmatch(value)):
                bad.append(name)
        elif name not in _TEXTS or (value is not None and not isinstance(value, str)):
            bad.append(name)
    if bad:
        raise _Invalid(
            bad,
            "isEnabled is a Boolean, fromDate/toDate are UTCDates (…Z) or null, subject, "
            "textBody and htmlBody are strings or null; id is singleton; nothing else exists.",
        )
    for name, value in patch.items():
        if name == "isEnabled":
            row.is_enabled = value
        elif name in _DATES:
            setattr(row, _DATES[name], None if value is None else parse_utc_date(value, name))
        elif name in _TEXTS:
            setattr(row, _TEXTS[name], value)
    row.updated_at = utcnow()


def vacation_set(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """VacationResponse/set: update of the singleton only."""
    user_id = context.check_account(args)
    old_state = state_of(session, user_id, TYPE)
    check_if_in_state(args.get("ifInState"), old_state, TYPE)
    asked = set_arguments(context, args)
    singleton = set_error(
        "singleton", "There is exactly one VacationResponse (id singleton); update it instead."
    )
    updated: dict[str, Any] = {}
    not_updated: dict[str, Any] = {}
    for value, patch in asked.update.items():
        if value != SINGLETON:
            not_updated[value] = set_error("notFound", "The only VacationResponse is singleton.")
            continue
        row = session.get(VacationResponse, user_id)
        if row is None:
            row = VacationResponse(user_id=user_id, is_enabled=False)
            session.add(row)
        try:
            _apply(row, patch)
        except _Invalid as invalid:
            not_updated[value] = set_error("invalidProperties", invalid.why, invalid.properties)
            continue
        session.flush()
        changelog.record(session, user_id, TYPE, [user_id], "updated")
        updated[value] = None
    return set_response(
        context,
        old_state,
        state_of(session, user_id, TYPE),
        updated=updated,
        not_created={key: singleton for key in asked.create},
        not_updated=not_updated,
        not_destroyed={value: singleton for value in asked.destroy},
    )
