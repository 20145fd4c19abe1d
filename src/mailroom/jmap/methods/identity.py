"""``Identity/get`` (RFC 8621 §6): one identity per mail account of the user.

The address is the account's ``email`` (or ``username``) setting when it
has one; local-file accounts have no address and show an empty one.
Identities cannot be changed over JMAP (no ``Identity/set``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.jmap import ids
from mailroom.jmap.dispatcher import Context
from mailroom.jmap.methods.common import requested_ids, requested_properties
from mailroom.store.models import Account

PROPERTIES = (
    "id",
    "name",
    "email",
    "replyTo",
    "bcc",
    "textSignature",
    "htmlSignature",
    "mayDelete",
)


def identity_get(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Identity/get."""
    context.check_account(args)
    properties = requested_properties(args, PROPERTIES, PROPERTIES)
    wanted = requested_ids(context, args)
    accounts = session.scalars(
        select(Account).where(Account.user_id == context.principal.user_id).order_by(Account.id)
    ).all()
    objects = {}
    for account in accounts:
        settings = account.settings or {}
        address = settings.get("email") or settings.get("username") or ""
        full = {
            "id": ids.identity_id(account.id),
            "name": str(settings.get("display_name") or context.principal.name),
            "email": str(address) if "@" in str(address) else "",
            "replyTo": None,
            "bcc": None,
            "textSignature": "",
            "htmlSignature": "",
            "mayDelete": False,
        }
        objects[full["id"]] = {name: full[name] for name in properties}
    if wanted is None:
        found, missing = list(objects.values()), []
    else:
        found = [objects[v] for v in wanted if v in objects]
        missing = [v for v in wanted if v not in objects]
    return {"accountId": context.account_id, "state": "0", "list": found, "notFound": missing}
