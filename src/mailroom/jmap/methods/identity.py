"""Identity/get, /changes and /set (RFC 8621 §6) over :mod:`mailroom.jmap.identities`.

Ids are ``I<identities row id>``. ``name``, ``replyTo``, ``bcc``,
``textSignature`` and ``htmlSignature`` can be changed; ``htmlSignature``
is stored as given (a client shows it in its own composer; mailroom never
renders it). ``email`` is immutable. A created identity must use an address
the user's accounts own (else ``forbiddenFrom``), and may share it with other
identities; an account's default identity has ``mayDelete: false`` and
destroying it is ``forbidden``. Every
create, update and destroy records an ``Identity`` change, whose sequence is
the state.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from mailroom.jmap import ids
from mailroom.jmap.changes import parse_state
from mailroom.jmap.dispatcher import Context
from mailroom.jmap.errors import set_error
from mailroom.jmap.identities import (
    TYPE,
    identities_of,
    owned_addresses,
    sync_identities,
)
from mailroom.jmap.methods.common import (
    changes_response,
    get_response,
    max_changes,
    requested_ids,
    requested_properties,
)
from mailroom.jmap.methods.object_state import check_if_in_state, floor_of, state_of
from mailroom.jmap.methods.set_arguments import set_arguments
from mailroom.store import changelog
from mailroom.store.models import Identity

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
_COLUMNS = {
    "name": "name",
    "replyTo": "reply_to",
    "bcc": "bcc",
    "textSignature": "text_signature",
    "htmlSignature": "html_signature",
}
_DEFAULTS: dict[str, Any] = {
    "name": "",
    "replyTo": None,
    "bcc": None,
    "textSignature": "",
    "htmlSignature": "",
}


def _as_object(identity: Identity) -> dict[str, Any]:
    return {
        "id": ids.identity_id(identity.id),
        "name": identity.name,
        "email": identity.email,
        "replyTo": identity.reply_to,
        "bcc": identity.bcc,
        "textSignature": identity.text_signature,
        "htmlSignature": identity.html_signature,
        "mayDelete": not identity.is_default,
    }


def identity_get(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Identity/get."""
    user_id = context.check_account(args)
    properties = requested_properties(args, PROPERTIES, PROPERTIES)
    wanted = requested_ids(context, args)
    sync_identities(session, user_id, context.principal.name)
    state = state_of(session, user_id, TYPE)
    numbers = None if wanted is None else [n for n in map(ids.parse_identity, wanted) if n]
    rows = {ids.identity_id(r.id): r for r in identities_of(session, user_id, numbers)}
    order = list(rows) if wanted is None else [v for v in wanted if v in rows]
    found = [_as_object(rows[v]) for v in order]
    missing = [v for v in wanted or [] if v not in rows]
    return get_response(context, state, [{k: o[k] for k in properties} for o in found], missing)


def identity_changes(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Identity/changes from the change log."""
    user_id = context.check_account(args)
    limit = max_changes(args)
    sync_identities(session, user_id, context.principal.name)
    current = state_of(session, user_id, TYPE)
    since = parse_state(args.get("sinceState"), floor_of(session, user_id, TYPE), current)
    folded = changelog.changes_since(session, user_id, TYPE, since, limit)
    return changes_response(context, since, folded, ids.identity_id)


def _is_addresses(value: object) -> bool:
    """Whether ``value`` is an EmailAddress[] (``{"name": String|null, "email": String}``)."""
    return isinstance(value, list) and all(
        isinstance(a, dict)
        and set(a) <= {"name", "email"}
        and isinstance(a.get("email"), str)
        and (a.get("name") is None or isinstance(a.get("name"), str))
        for a in value
    )


def _invalid(values: dict[str, Any], current: dict[str, Any] | None) -> list[str]:
    """The properties of a create (``current`` None) or update with values they cannot take."""
    bad = []
    for name, value in values.items():
        if name in ("name", "textSignature", "htmlSignature"):
            ok = isinstance(value, str)
        elif name in ("replyTo", "bcc"):
            ok = value is None or _is_addresses(value)
        elif name == "email":
            ok = isinstance(value, str) and (current is None or value == current["email"])
        elif name in ("id", "mayDelete"):
            ok = current is not None and value == current[name]
        else:
            ok = False
        if not ok:
            bad.append(name)
    return bad


_WHY = (
    "name, textSignature and htmlSignature are strings; replyTo and bcc are EmailAddress "
    "lists or null; email is set once, on create; id and mayDelete are the server's."
)


class _IdentitySet:
    """One Identity/set call: creates, updates and destroys against the user's rows."""

    def __init__(self, context: Context, session: Session, user_id: int) -> None:
        self.context = context
        self.session = session
        self.user_id = user_id
        self.accounts = sync_identities(session, user_id, context.principal.name)
        self.rows = {ids.identity_id(r.id): r for r in identities_of(session, user_id, None)}

    def create(self, values: dict[str, Any]) -> dict[str, Any]:
        """A new identity's server-set and defaulted properties, or raise a SetError dict."""
        bad = _invalid(values, None) + ([] if "email" in values else ["email"])
        if bad:
            raise _Refused(set_error("invalidProperties", _WHY, sorted(set(bad))))
        email = values["email"]
        account = next(
            (
                a
                for a in self.accounts.values()
                if email.lower() in (o.lower() for o in owned_addresses(a))
            ),
            None,
        )
        if account is None:
            raise _Refused(
                set_error("forbiddenFrom", f"None of your accounts owns the address {email!r}.")
            )
        merged = {**_DEFAULTS, **values}
        row = Identity(
            user_id=self.user_id,
            account_id=account.id,
            email=email,
            **{column: merged[name] for name, column in _COLUMNS.items()},
        )
        self.session.add(row)
        self.session.flush()
        changelog.record(self.session, self.user_id, TYPE, [row.id], "created")
        self.rows[ids.identity_id(row.id)] = row
        full = _as_object(row)
        return {k: v for k, v in full.items() if k not in values or k in ("id", "mayDelete")}

    def update(self, value: str, patch: dict[str, Any]) -> None:
        """Apply a patch to the identity ``value``, or raise a SetError dict."""
        row = self.rows.get(value)
        if row is None:
            raise _Refused(set_error("notFound", f"There is no identity {value}."))
        bad = _invalid(patch, _as_object(row))
        if bad:
            raise _Refused(set_error("invalidProperties", _WHY, bad))
        for name, column in _COLUMNS.items():
            if name in patch:
                setattr(row, column, patch[name])
        self.session.flush()
        changelog.record(self.session, self.user_id, TYPE, [row.id], "updated")

    def destroy(self, value: str) -> None:
        """Delete the identity ``value``, or raise a SetError dict."""
        row = self.rows.get(value)
        if row is None:
            raise _Refused(set_error("notFound", f"There is no identity {value}."))
        if row.is_default:
            raise _Refused(
                set_error("forbidden", "This is the account's own address; it cannot be deleted.")
            )
        self.session.delete(row)
        self.session.flush()
        changelog.record(self.session, self.user_id, TYPE, [row.id], "destroyed")
        del self.rows[value]


class _Refused(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error["description"])
        self.error = error


def identity_set(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Identity/set: create (owned addresses only), update, destroy."""
    user_id = context.check_account(args)
    calls = _IdentitySet(context, session, user_id)
    old_state = state_of(session, user_id, TYPE)
    check_if_in_state(args.get("ifInState"), old_state, TYPE)
    asked = set_arguments(context, args)
    created: dict[str, Any] = {}
    updated: dict[str, Any] = {}
    destroyed: list[str] = []
    failed: dict[str, dict[str, Any]] = {"create": {}, "update": {}, "destroy": {}}
    for key, values in asked.create.items():
        try:
            created[key] = calls.create(values)
            context.created_ids[key] = created[key]["id"]
        except _Refused as refused:
            failed["create"][key] = refused.error
    for value, patch in asked.update.items():
        target = context.created_ids.get(value[1:], value) if value.startswith("#") else value
        try:
            calls.update(target, patch)
            updated[value] = None
        except _Refused as refused:
            failed["update"][value] = refused.error
    for value in asked.destroy:
        target = context.created_ids.get(value[1:], value) if value.startswith("#") else value
        try:
            calls.destroy(target)
            destroyed.append(value)
        except _Refused as refused:
            failed["destroy"][value] = refused.error
    return {
        "accountId": context.account_id,
        "oldState": str(old_state),
        "newState": str(state_of(session, user_id, TYPE)),
        "created": created or None,
        "updated": updated or None,
        "destroyed": destroyed or None,
        "notCreated": failed["create"] or None,
        "notUpdated": failed["update"] or None,
        "notDestroyed": failed["destroy"] or None,
    }
