"""PushSubscription/get and /set (RFC 8620 §7.2), stored in ``push_subscriptions``.

Subscriptions belong to the user, not to an account: neither method takes an
``accountId``, /get has no ``state`` and /set no ``ifInState``. ``url`` and
``keys`` are never returned (asking for them is ``forbidden``). A create
needs ``deviceClientId`` and ``url`` (checked against the
:class:`~mailroom.jmap.push_policy.PushPolicy`: https, SSRF guard); ``keys``
must be a P-256 ``p256dh`` and a 16-byte ``auth`` (RFC 8291), and then every
payload is encrypted. ``expires`` is shortened to the policy's lifetime and
returned in ``created``. The delivery service (``jmap.push_delivery``) sends
the PushVerification; the client proves it received it by setting
``verificationCode``, and only then does the subscription get StateChanges.
An update may change ``verificationCode``, ``expires`` and ``types`` only.
"""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from mailroom.jmap.dispatcher import Context, Handler, Method
from mailroom.jmap.errors import MethodError, Refused, set_error
from mailroom.jmap.methods.common import (
    CORE,
    parse_utc_date,
    requested_ids,
    requested_properties,
    utc_date,
)
from mailroom.jmap.methods.set_arguments import set_arguments
from mailroom.jmap.push_policy import PushPolicy, UnusableUrl
from mailroom.jmap.webpush import BadKeys, UserAgentKeys
from mailroom.store.models import PushSubscription

PROPERTIES = ("id", "deviceClientId", "verificationCode", "expires", "types", "url", "keys")
PRIVATE = ("url", "keys")
PUBLIC = tuple(p for p in PROPERTIES if p not in PRIVATE)
MAX_DEVICE_CLIENT_ID = 255
# What a create may give (a null verificationCode too: RFC 8620 §7.2 says it starts null).
_SETTABLE = frozenset({"deviceClientId", "url", "keys", "expires", "types"})
_UTC_DATE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z")


def subscription_id(row_id: int) -> str:
    """The JMAP id of a push subscription."""
    return f"P{row_id}"


def parse_subscription(value: str) -> int | None:
    """The row id a PushSubscription id names, or None."""
    digits = value[1:]
    return int(digits) if value.startswith("P") and digits.isdigit() and len(digits) < 19 else None


def _as_object(row: PushSubscription) -> dict[str, Any]:
    return {
        "id": subscription_id(row.id),
        "deviceClientId": row.device_client_id,
        "verificationCode": row.verification_code if row.verified else None,
        "expires": utc_date(row.expires_at),
        "types": row.types,
    }


def _invalid(properties: list[str], why: str) -> Refused:
    return Refused(set_error("invalidProperties", why, properties))


def _types(value: object) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise _invalid(["types"], "types must be a list of type names or null.")
    return list(dict.fromkeys(value))


class PushSubscriptions:
    """The two methods, bound to the operator's :class:`PushPolicy`."""

    def __init__(self, policy: PushPolicy) -> None:
        self.policy = policy

    def get(self, context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
        """PushSubscription/get: the user's subscriptions without url and keys."""
        if any(p in PRIVATE for p in args.get("properties") or [] if isinstance(p, str)):
            raise MethodError("forbidden", "url and keys are never returned (RFC 8620 §7.2.1).")
        properties = requested_properties(args, PUBLIC, PUBLIC)
        wanted = requested_ids(context, args)
        query = select(PushSubscription).where(
            PushSubscription.user_id == context.principal.user_id
        )
        if wanted is not None:
            numbers = [n for n in map(parse_subscription, wanted) if n is not None]
            query = query.where(PushSubscription.id.in_(numbers))
        rows = {
            subscription_id(r.id): r for r in session.scalars(query.order_by(PushSubscription.id))
        }
        order = list(rows) if wanted is None else [v for v in wanted if v in rows]
        found = [{k: _as_object(rows[v])[k] for k in properties} for v in order]
        return {"list": found, "notFound": [v for v in wanted or [] if v not in rows]}

    def _expires(self, value: object) -> datetime:
        latest = datetime.now(UTC) + self.policy.max_lifetime
        if value is None:
            return latest
        if not isinstance(value, str) or not _UTC_DATE.fullmatch(value):
            raise _invalid(["expires"], "expires must be a UTCDate (…Z) or null.")
        when = parse_utc_date(value, "expires")
        if when <= datetime.now(UTC):
            raise _invalid(["expires"], "expires is in the past.")
        return min(when, latest).replace(microsecond=0)

    def _create(self, session: Session, user_id: int, values: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(
            name
            for name, value in values.items()
            if name not in _SETTABLE and not (name == "verificationCode" and value is None)
        )
        if unknown:
            raise _invalid(unknown, "These properties cannot be set on create.")
        device, url = values.get("deviceClientId"), values.get("url")
        missing = [
            n for n, v in (("deviceClientId", device), ("url", url)) if not isinstance(v, str)
        ]
        if missing or not device or len(device) > MAX_DEVICE_CLIENT_ID:
            raise _invalid(
                missing or ["deviceClientId"],
                f"deviceClientId (1 to {MAX_DEVICE_CLIENT_ID} characters) and url are strings.",
            )
        assert isinstance(url, str)
        try:
            self.policy.vet(url)
        except UnusableUrl as unusable:
            raise _invalid(["url"], str(unusable)) from None
        keys = values.get("keys")
        if keys is not None:
            if not isinstance(keys, dict) or set(keys) != {"p256dh", "auth"}:
                raise _invalid(["keys"], "keys must be {p256dh, auth} or null.")
            try:
                UserAgentKeys.parse(keys["p256dh"], keys["auth"])
            except BadKeys as bad:
                raise _invalid(["keys"], str(bad)) from None
        count = session.scalar(select(func.count()).where(PushSubscription.user_id == user_id))
        if int(count or 0) >= self.policy.max_per_user:
            raise Refused(
                set_error(
                    "overQuota",
                    f"At most {self.policy.max_per_user} push subscriptions per user; "
                    "destroy one first.",
                )
            )
        row = PushSubscription(
            user_id=user_id,
            device_client_id=device,
            url=url,
            keys=keys,
            verification_code=secrets.token_urlsafe(24),
            verified=False,
            expires_at=self._expires(values.get("expires")),
            types=_types(values.get("types")),
        )
        session.add(row)
        session.flush()
        return {"id": subscription_id(row.id), "expires": utc_date(row.expires_at)}

    def _update(self, row: PushSubscription, patch: dict[str, Any]) -> dict[str, Any] | None:
        current = _as_object(row)
        fixed = [
            n
            for n in patch
            if n not in ("verificationCode", "expires", "types")
            and not (n in current and patch[n] == current[n])
        ]
        if fixed:
            raise _invalid(sorted(fixed), "Only verificationCode, expires and types can change.")
        if "verificationCode" in patch:
            code = patch["verificationCode"]
            if not isinstance(code, str) or not secrets.compare_digest(
                code.encode(), row.verification_code.encode()
            ):
                raise _invalid(["verificationCode"], "This is not the code the server sent.")
        expires = self._expires(patch["expires"]) if "expires" in patch else row.expires_at
        types = _types(patch["types"]) if "types" in patch else row.types
        if "verificationCode" in patch:
            row.verified = True
        row.expires_at, row.types = expires, types
        if "expires" in patch and utc_date(expires) != patch["expires"]:
            return {"expires": utc_date(expires)}
        return None

    def set(self, context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
        """PushSubscription/set."""
        user_id = context.principal.user_id
        asked = set_arguments(context, args)
        result: dict[str, dict[str, Any]] = {
            "created": {},
            "updated": {},
            "notCreated": {},
            "notUpdated": {},
            "notDestroyed": {},
        }
        destroyed: list[str] = []

        def mine(value: str) -> PushSubscription | None:
            if value.startswith("#"):
                value = context.created_ids.get(value[1:], value)
            number = parse_subscription(value)
            row = session.get(PushSubscription, number) if number is not None else None
            return row if row is not None and row.user_id == user_id else None

        for key, values in asked.create.items():
            try:
                with session.begin_nested():
                    result["created"][key] = self._create(session, user_id, values)
                context.created_ids[key] = result["created"][key]["id"]
            except Refused as refused:
                result["notCreated"][key] = refused.error
        for value, patch in asked.update.items():
            row = mine(value)
            try:
                if row is None:
                    raise Refused(set_error("notFound", f"There is no push subscription {value}."))
                result["updated"][value] = self._update(row, patch)
            except Refused as refused:
                result["notUpdated"][value] = refused.error
        for value in asked.destroy:
            row = mine(value)
            if row is None:
                result["notDestroyed"][value] = set_error(
                    "notFound", f"There is no push subscription {value}."
                )
                continue
            session.delete(row)
            destroyed.append(value)
        session.flush()
        return {
            **{name: entries or None for name, entries in result.items()},
            "destroyed": destroyed or None,
        }


GET_ARGUMENTS = frozenset({"ids", "properties"})
SET_ARGUMENTS = frozenset({"create", "update", "destroy"})


def methods(policy: PushPolicy) -> dict[str, Method]:
    """The PushSubscription entries of the method table, under ``policy``."""
    bound = PushSubscriptions(policy)
    handlers: dict[str, tuple[Handler, frozenset[str]]] = {
        "PushSubscription/get": (bound.get, GET_ARGUMENTS),
        "PushSubscription/set": (bound.set, SET_ARGUMENTS),
    }
    return {
        name: Method(CORE, handler, arguments) for name, (handler, arguments) in handlers.items()
    }


METHODS: dict[str, Method] = methods(PushPolicy())
